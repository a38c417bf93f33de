/**
 * The webhook adapter (adapters/webhook.ts) and the Notifier on it, against
 * a real HTTP server on 127.0.0.1: statuses, headers, a redirect not
 * followed, retries, and the bounds on a receiver that never answers.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { postWebhook } from '../../src/adapters/webhook.js';
import { Notifier, type NotifyFailure } from '../../src/engine/notify.js';

interface Hit {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
const hits: Hit[] = [];
/** Per path: the statuses to answer in turn (the last forever); "hang" never answers. */
const script = new Map<string, (number | 'hang')[]>();
const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (c: Buffer) => (body += c.toString()));
  req.on('end', () => {
    const path = (req.url ?? '').split('?')[0]!;
    hits.push({ path, headers: req.headers, body });
    const answers = script.get(path) ?? [200];
    const a = answers.length > 1 ? answers.shift()! : answers[0]!;
    if (a === 'hang') return;
    if (a >= 300 && a < 400) res.writeHead(a, { location: '/elsewhere' }).end();
    else res.writeHead(a).end('ignored body');
  });
});
let base = '';
before(async () => {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

describe('postWebhook on a real server', () => {
  it('POSTs the JSON body with the headers and returns the status', async () => {
    script.set('/ok', [204]);
    const status = await postWebhook(`${base}/ok?token=x`, { Authorization: 'Bearer t' }, '{"a":1}', { timeoutMs: 2000 });
    assert.equal(status, 204);
    const hit = hits.findLast((h) => h.path === '/ok')!;
    assert.deepEqual([hit.body, hit.headers.authorization, hit.headers['content-type']], ['{"a":1}', 'Bearer t', 'application/json']);
  });

  it('does not follow a redirect: the Authorization header goes nowhere the fleet file did not name', async () => {
    script.set('/moved', [302]);
    const before = hits.length;
    assert.equal(await postWebhook(`${base}/moved`, { Authorization: 'Bearer t' }, '{}', { timeoutMs: 2000 }), 302);
    assert.equal(hits.length, before + 1);
  });

  it('rejects with a TimeoutError when the receiver never answers', async () => {
    script.set('/hang', ['hang']);
    await assert.rejects(postWebhook(`${base}/hang`, {}, '{}', { timeoutMs: 200 }), (e: Error) => e.name === 'TimeoutError');
  });
});

describe('Notifier on postWebhook', () => {
  it('500 then 200: delivered on the second try', async () => {
    script.set('/flaky', [500, 200]);
    const failures: NotifyFailure[] = [];
    const n = new Notifier([{ url: `${base}/flaky`, timeoutSeconds: 2 }], postWebhook, (f) => failures.push(f), { minBackoffMs: 10 });
    n.send({ event: 'start', service: 's', version: '1', image: 'i:1', kind: 'deploy', outcome: 'started' });
    await n.flush(5000);
    assert.deepEqual(failures, []);
    assert.equal(hits.filter((h) => h.path === '/flaky').length, 2);
  });

  it('a receiver that never answers: three tries of timeoutSeconds, a warning naming the host, within the delivery budget', async () => {
    script.set('/never/secret-part', ['hang']);
    const failures: NotifyFailure[] = [];
    const n = new Notifier([{ url: `${base}/never/secret-part`, timeoutSeconds: 1 }], postWebhook, (f) => failures.push(f), { minBackoffMs: 10 });
    const t0 = Date.now();
    n.send({ event: 'failure', service: 's', version: '1', image: 'i:1', kind: 'deploy', outcome: 'failed' });
    await n.flush(10_000);
    const ms = Date.now() - t0;
    assert.ok(ms >= 3000 && ms < 5000, `took ${ms} ms`);
    assert.equal(failures.length, 1);
    assert.match(failures[0]!.webhook, /^webhook 1 \(127\.0\.0\.1:\d+\)$/);
    assert.equal(failures[0]!.reason, 'timed out after 1.0 s');
    assert.ok(!JSON.stringify(failures).includes('secret-part'));
  });
});
