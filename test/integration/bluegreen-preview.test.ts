/**
 * Blue-green's preview on a real Docker engine and nginx: with
 * `preview: { upstream }`, testers (and the prePromotion hook) reach the new
 * set through nginx before the switch while users stay on the old one; a
 * failing prePromotion stops the rollout before the switch.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { execIn, getFile, putFile } from '../../src/adapters/docker.js';
import { docker, failedOf, moreRequests, runCli, startCliUntil, startLoad, useFleets, type TestFleet } from './fixture.js';

const fleet = useFleets();

/** The versions answering `url` (fresh connection each), over `n` requests. */
async function versionsAt(url: string, n: number): Promise<string[]> {
  const one = () =>
    new Promise<string>((resolve, reject) => {
      const req = http.get(url, { agent: false }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve(res.statusCode === 200 ? body.trim() : `status ${res.statusCode}`));
      });
      req.setTimeout(5000, () => req.destroy(new Error('no answer in 5 s')));
      req.on('error', reject);
    });
  const out: string[] = [];
  for (let i = 0; i < n; i++) out.push(await one());
  return [...new Set(out)].sort();
}

/**
 * A fleet whose nginx also proxies /preview/ to the preview upstream, as a
 * user would add to nginx.conf: after a first deploy (which writes the
 * preview block, empty), so nginx -t knows the upstream.
 */
async function withPreview(f: TestFleet): Promise<{ preview: string; file: (o: Parameters<TestFleet['fleetFile']>[0]) => string }> {
  const preview = `${f.names.upstream}_preview`;
  const file = (o: Parameters<TestFleet['fleetFile']>[0]) =>
    f.fleetFile({ replicas: 3, type: 'BlueGreen', scaleDownDelaySeconds: 2, ...o, blueGreen: { preview: { upstream: preview }, ...o.blueGreen } });
  const first = await runCli(['deploy', '-f', file({})]);
  assert.equal(first.code, 0, first.stderr);
  const conf = (await getFile(docker, f.names.nginx, '/etc/nginx/conf.d/default.conf')) ?? '';
  const withLocation = conf.replace(/(\n\s*location \/ \{)/, `\n    location /preview/ { proxy_pass http://${preview}/; }$1`);
  assert.notEqual(withLocation, conf);
  await putFile(docker, f.names.nginx, '/etc/nginx/conf.d/default.conf', withLocation);
  const reload = await execIn(docker, f.names.nginx, ['nginx', '-s', 'reload']);
  assert.equal(reload.exitCode, 0, reload.stderr);
  return { preview, file };
}

/** A prePromotion hook (an argument array) that asks the preview for its version, writes it to `out`, and passes only on `want`. */
const previewHook = (url: string, out: string, want: string) => [
  'node',
  '-e',
  `const [url, out, want] = process.argv.slice(1);
   require('http').get(url, (r) => { let b = ''; r.on('data', (c) => (b += c)); r.on('end', () => { require('fs').writeFileSync(out, b.trim()); process.exit(b.trim() === want ? 0 : 1); }); })
     .on('error', (e) => { console.error(e.message); process.exit(1); });`,
  `${url}/preview/api/version`,
  out,
  want,
];

describe('blue-green preview and prePromotion, for real', () => {
  it('preview: before the switch testers reach the new set on the preview upstream while users stay on the old; prePromotion tries it there; promote switches; nothing failed', async (t) => {
    const f = await fleet('it-bgprev');
    const { file } = await withPreview(f);
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const seen = join(f.dir, 'prepromotion-saw');
    const target = file({ image: 'fleetroll-example:1.1.0', blueGreen: { autoPromote: false }, hooks: { prePromotion: previewHook(f.url, seen, '1.1.0') } });
    const running = await startCliUntil(['deploy', '-f', target], /waiting for `fleetroll promote`/);

    const before = { users: await versionsAt(`${f.url}/api/version`, 20), testers: await versionsAt(`${f.url}/preview/api/version`, 20) };
    t.diagnostic(`before the switch: users on ${before.users.join(', ')}, /preview/ on ${before.testers.join(', ')}`);
    assert.deepEqual(before, { users: ['1.0.0'], testers: ['1.1.0'] });

    assert.equal((await runCli(['promote', '-f', target])).code, 0);
    const done = await running.exited;
    assert.equal(done.code, 0, done.stdout + done.stderr);
    assert.match(done.stdout, /prePromotion passed/);
    assert.equal(readFileSync(seen, 'utf8'), '1.1.0', 'the hook reached the new set through the preview upstream');
    await moreRequests(load, 5, 'requests after the switch');
    const records = await load.stop();
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} requests failed`);
    assert.deepEqual(await versionsAt(`${f.url}/api/version`, 10), ['1.1.0']);
    // Outside a rollout the preview upstream holds only the always-down placeholder.
    const up = await f.upstream();
    assert.match(up.content, new RegExp(`^upstream ${f.names.upstream}_preview \\{\\n {4}server 127\\.0\\.0\\.1:9 down;`, 'm'), up.content);
  });

  it('a failing prePromotion hook stops the rollout before the switch: users never saw the new version, nothing failed', async (t) => {
    const f = await fleet('it-bgprefail');
    const { file } = await withPreview(f);
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const seen = join(f.dir, 'prepromotion-saw');
    // The hook wants a version the preview does not have.
    const r = await runCli(['deploy', '-f', file({ image: 'fleetroll-example:1.1.0', hooks: { prePromotion: previewHook(f.url, seen, '9.9.9') } })]);
    await moreRequests(load, 5, 'requests after the failed rollout');
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /hooks\.prePromotion \(node -e [\s\S]*\) exited with 1: no switch: all traffic stays on the old set/);
    assert.match(r.stderr, /hint: the new set is left running out of traffic \(in the preview upstream, if any\)/);
    t.diagnostic(
      r.stderr
        .split('\n')
        .filter((l) => /^(error|hint)/.test(l))
        .join(' | '),
    );
    t.diagnostic(`instances after: ${(await f.instances()).map((i) => `${i.labels['fleetroll.version'] ?? '?'} ${i.state}`).join(', ')}`);
    assert.equal(readFileSync(seen, 'utf8'), '1.1.0', 'the hook did see the new set');
    assert.deepEqual(failedOf(records), []);
    assert.deepEqual([...new Set(records.filter((x) => x.version !== undefined).map((x) => x.version))], ['1.0.0'], 'users only ever got the old version');
  });
});
