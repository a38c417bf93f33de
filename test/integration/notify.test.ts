/**
 * Webhook notifications and hooks.onFailure on a real fleet: a receiver on
 * 127.0.0.1 (only loopback traffic) records what fleetroll POSTs to it.
 * What is asserted is what a user sees: exit codes, the bodies received, the
 * warnings, and that the secret parts of the URL and the token appear in
 * none of the CLI's output.
 */
import assert from 'node:assert/strict';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { freePort, runCli, useFleets } from './fixture.js';

const fleet = useFleets();

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: Record<string, unknown>;
  at: number;
}

/** A webhook receiver: answers each POST with the next of `answers` (the last one forever). */
async function receiver(answers: number[] = [200]): Promise<{ url: string; got: Received[]; server: Server }> {
  const got: Received[] = [];
  let n = 0;
  const server = createServer((req, res) => {
    let text = '';
    req.on('data', (c: Buffer) => (text += c.toString()));
    req.on('end', () => {
      const status = answers[Math.min(n++, answers.length - 1)]!;
      // Only what was answered 2xx counts as received; the rest are tries.
      if (status < 300) got.push({ path: req.url ?? '', headers: req.headers, body: JSON.parse(text) as Record<string, unknown>, at: Date.now() });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const a = server.address();
  assert.ok(a && typeof a === 'object');
  servers.push(server);
  return { url: `http://127.0.0.1:${a.port}`, got, server };
}
const servers: Server[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** The secret parts: a path and query like a Slack URL's, and a token from the environment. */
const PATH_SECRET = 'T0/B0/s3cr3tPathPart';
const QUERY_SECRET = 'q53cr3tQuery';
const TOKEN = 'tok-5ecret-9f8e7d';
const env = { HOOK_TOKEN: TOKEN, HOOK_PATH: PATH_SECRET };

function withNotify(file: string, webhooks: string[]): string {
  appendFileSync(file, `notify:\n  webhooks:\n${webhooks.map((w) => `    - ${w}\n`).join('')}`);
  return file;
}

function assertNoSecret(text: string): void {
  for (const s of [PATH_SECRET, 's3cr3tPathPart', QUERY_SECRET, TOKEN]) assert.ok(!text.includes(s), `a secret (${s}) appears in the output:\n${text}`);
}

describe('notify and hooks.onFailure, for real', () => {
  it('a deploy: start then success to a good receiver, a 500 retried, a dead webhook only warned about (exit 0), no secret in the output', async (t) => {
    const f = await fleet('it-notify');
    await f.at100(2);
    const good = await receiver([200]);
    const flaky = await receiver([500, 200]);
    const dead = await freePort();
    const file = withNotify(f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0' }), [
      `{ url: "${good.url}/hooks/\${HOOK_PATH}?token=${QUERY_SECRET}", headers: { Authorization: "Bearer \${HOOK_TOKEN}" } }`,
      `{ url: "${flaky.url}/flaky/\${HOOK_PATH}", events: [success] }`,
      `{ url: "http://127.0.0.1:${dead}/dead/\${HOOK_PATH}", timeoutSeconds: 2 }`,
    ]);
    const t0 = Date.now();
    const r = await runCli(['deploy', '-f', file, '--change-cause', 'notify test'], { env });
    const exitedAt = Date.now();
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assertNoSecret(r.stdout + r.stderr);

    assert.deepEqual(
      good.got.map((g) => g.body.event),
      ['start', 'success'],
    );
    const [start, success] = good.got.map((g) => g.body);
    assert.equal(good.got[0]!.path, `/hooks/${PATH_SECRET}?token=${QUERY_SECRET}`);
    assert.equal(good.got[0]!.headers.authorization, `Bearer ${TOKEN}`);
    assert.equal(good.got[0]!.headers['content-type'], 'application/json');
    const revision = Number(/revision (\d+) done/.exec(r.stdout)?.[1]);
    for (const b of [start!, success!]) {
      assert.deepEqual(
        [b.fleetroll, b.service, b.revision, b.version, b.image, b.kind, b.changeCause],
        [1, f.names.service, revision, '1.1.0', 'fleetroll-example:1.1.0', 'deploy', 'notify test'],
      );
      assert.match(String(b.revisionHash), /^[0-9a-f]{10}$/);
      assert.ok(!Number.isNaN(Date.parse(String(b.at))));
    }
    assert.deepEqual([start!.outcome, success!.outcome], ['started', 'complete']);
    assert.equal(typeof success!.durationSeconds, 'number');
    // The fleet's nginx names an access log: the deploy's health numbers travel with success.
    assert.equal(typeof (success!.health as { failed5xx?: unknown } | undefined)?.failed5xx, 'number', JSON.stringify(success));

    // The flaky receiver answered 500 first: the success event was tried again and arrived; start was not its event.
    assert.deepEqual(
      flaky.got.map((g) => g.body.event),
      ['success'],
    );
    // The dead webhook: a warning naming it by host only, for each event, and the deploy still succeeded.
    assert.match(r.stdout, new RegExp(`warning: webhook 3 \\(127\\.0\\.0\\.1:${dead}\\): start not delivered after 3 tries \\(ECONNREFUSED\\)`));
    assert.match(r.stdout, new RegExp(`warning: webhook 3 \\(127\\.0\\.0\\.1:${dead}\\): success not delivered after 3 tries`));
    const lag = exitedAt - good.got[1]!.at;
    t.diagnostic(
      `deploy ${((exitedAt - t0) / 1000).toFixed(1)} s; exit ${lag} ms after the success event reached the good receiver (the dead webhook's tries)`,
    );
    assert.ok(lag < 5_000, `a refused webhook delayed the exit ${lag} ms`);

    // validate shows the webhooks by host, never the URL or the token.
    const v = await runCli(['validate', '-f', file], { env });
    assert.equal(v.code, 0, v.stderr);
    assert.match(v.stdout, /notify: webhook 1 \(127\.0\.0\.1:\d+\): every event; timeout 5 s; headers Authorization \(values secret\)/);
    const vj = await runCli(['validate', '-f', file, '--json'], { env });
    assert.equal(vj.code, 0, vj.stderr);
    assertNoSecret(v.stdout + v.stderr + vj.stdout + vj.stderr);
    // Nor does the history.
    const h = await runCli(['history', '-f', file, '--json'], { env });
    assertNoSecret(h.stdout + h.stderr);
  });

  it('a failing deploy: failure with its error code, hooks.onFailure ran with the context; a receiver that never answers delays the exit a bounded time', async (t) => {
    const f = await fleet('it-notify-fail');
    await f.at100(2);
    const good = await receiver([200]);
    // Accepts the connection and never answers: the worst receiver.
    const hanging = createServer(() => {});
    await new Promise<void>((r) => hanging.listen(0, '127.0.0.1', r));
    servers.push(hanging);
    const hangPort = (hanging.address() as { port: number }).port;
    const out = join(f.dir, 'on-failure.json');
    const onFailure = [
      process.execPath,
      '-e',
      `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify(Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('FLEETROLL_')))))`,
    ];
    const file = withNotify(
      f.fleetFile({
        replicas: 2,
        maxSurge: 1,
        maxUnavailable: 0,
        image: 'fleetroll-example:1.1.0',
        env: { BROKEN_NEVER_READY: '1' },
        progressDeadlineSeconds: 5,
        hooks: { onFailure, timeoutSeconds: 20 },
      }),
      [
        `{ url: "${good.url}/h/\${HOOK_PATH}", events: [start, failure] }`,
        `{ url: "http://127.0.0.1:${hangPort}/hang/\${HOOK_PATH}", events: [failure], timeoutSeconds: 3 }`,
      ],
    );
    const r = await runCli(['deploy', '-f', file], { env });
    const exitedAt = Date.now();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /made no progress for 5 s \(progressDeadlineSeconds\)/);
    assertNoSecret(r.stdout + r.stderr);

    assert.deepEqual(
      good.got.map((g) => g.body.event),
      ['start', 'failure'],
    );
    const failure = good.got[1]!.body;
    assert.equal(failure.outcome, 'failed');
    assert.equal(failure.service, f.names.service);
    assert.equal(failure.version, '1.1.0');
    const error = failure.error as { code: string; message: string };
    assert.equal(error.code, 'E_ROLLOUT_FAILED');
    assert.match(error.message, /made no progress for 5 s/);

    // The hook ran before the deploy exited.
    assert.ok(existsSync(out), 'hooks.onFailure wrote its file');
    const ctx = JSON.parse(readFileSync(out, 'utf8')) as Record<string, string>;
    assert.equal(ctx.FLEETROLL_HOOK, 'onFailure');
    assert.equal(ctx.FLEETROLL_SERVICE, f.names.service);
    assert.equal(ctx.FLEETROLL_VERSION, '1.1.0');
    assert.equal(ctx.FLEETROLL_ERROR_CODE, 'E_ROLLOUT_FAILED');
    assert.equal(ctx.FLEETROLL_OUTCOME, 'failed');
    assert.match(ctx.FLEETROLL_ERROR_REASON ?? '', /made no progress for 5 s/);
    assert.equal(ctx.FLEETROLL_REVISION, failure.revisionHash);

    // The hanging receiver got three tries of 3 s (and the pauses between) before the exit: bounded.
    const lag = exitedAt - good.got[1]!.at;
    t.diagnostic(`a receiver that never answers (timeoutSeconds 3) delayed the exit ${lag} ms after the failure event went out`);
    assert.match(
      r.stdout,
      new RegExp(`warning: webhook 2 \\(127\\.0\\.0\\.1:${hangPort}\\): failure not delivered after 3 tries \\(timed out after [0-9.]+ s\\)`),
    );
    assert.ok(lag < 10_000 + 2_000, `exit delayed ${lag} ms, beyond the 10 s bound`);
  });

  it('an auto-rollback: start, rollback to the previous revision, failure "rolled back"; then undo: start and rollback "undo", success', async () => {
    const f = await fleet('it-notify-back');
    const first = await f.at100(1);
    const rx = await receiver([200]);
    const out = join(f.dir, 'on-failure-back.json');
    const onFailure = [
      process.execPath,
      '-e',
      `require('fs').writeFileSync(${JSON.stringify(out)}, JSON.stringify({ outcome: process.env.FLEETROLL_OUTCOME, code: process.env.FLEETROLL_ERROR_CODE }))`,
    ];
    const broken = withNotify(
      f.fleetFile({
        replicas: 1,
        maxSurge: 1,
        maxUnavailable: 0,
        image: 'fleetroll-example:1.1.0',
        env: { BROKEN_NEVER_READY: '1' },
        progressDeadlineSeconds: 4,
        onFailure: 'rollback',
        hooks: { onFailure },
      }),
      [`{ url: "${rx.url}/h/\${HOOK_PATH}" }`],
    );
    const r = await runCli(['deploy', '-f', broken], { env });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /rolled back \(onFailure: rollback\)/);
    assertNoSecret(r.stdout + r.stderr);
    assert.deepEqual(
      rx.got.map((g) => [g.body.event, g.body.outcome]),
      [
        ['start', 'started'],
        ['rollback', 'rolling back'],
        ['failure', 'rolled back'],
      ],
    );
    const back = rx.got[1]!.body;
    assert.deepEqual([back.revisionHash, back.revision, back.version], [first, 1, '1.0.0']);
    assert.deepEqual(JSON.parse(readFileSync(out, 'utf8')), { outcome: 'rolled back', code: 'E_ROLLOUT_FAILED' });

    rx.got.length = 0;
    const u = await runCli(['undo', '-f', broken], { env });
    assert.equal(u.code, 0, u.stdout + u.stderr);
    assert.deepEqual(
      rx.got.map((g) => [g.body.event, g.body.outcome, g.body.kind]),
      [
        ['start', 'started', 'undo'],
        ['rollback', 'undo', 'undo'],
        ['success', 'complete', 'undo'],
      ],
    );
    assert.equal(rx.got[2]!.body.revisionHash, first);
  });

  it('a failing onFailure hook is a warning; the exit code stays 1', async () => {
    const f = await fleet('it-notify-hookfail');
    await f.at100(1);
    const file = f.fleetFile({
      replicas: 1,
      maxSurge: 1,
      maxUnavailable: 0,
      image: 'fleetroll-example:1.1.0',
      env: { BROKEN_NEVER_READY: '1' },
      progressDeadlineSeconds: 3,
      hooks: { onFailure: [process.execPath, '-e', 'process.exit(7)'] },
    });
    const r = await runCli(['deploy', '-f', file]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /warning: hooks\.onFailure exited with 7; the rollout's outcome \(failed, exit 1\) stands/);
  });
});
