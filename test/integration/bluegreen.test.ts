/**
 * Blue-green on a real Docker engine and nginx: the new set comes up out of
 * traffic, one reload switches, the old set waits out scaleDownDelaySeconds,
 * and `fleetroll undo` inside that window switches back with one reload.
 * With a preview upstream, testers (and the prePromotion hook) reach the new
 * set through nginx before the switch, while users stay on the old one.
 * What a user would see is asserted: requests that failed through nginx, the
 * version each answer came from, the containers that exist.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import http from 'node:http';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { execIn, getFile, putFile } from '../../src/adapters/docker.js';
import type { RequestRecord } from '../../src/experiment/metrics.js';
import { docker, failedOf, moreRequests, runCli, sampleDuring, startCliUntil, startLoad, useFleets, type TestFleet } from './fixture.js';

const fleet = useFleets();

/** The times (ms on the load's clock) of the first answer from `late` and the last from `early`: the mixed-version window as users saw it. */
function overlap(records: RequestRecord[], early: string, late: string): { firstLate: number; lastEarly: number } {
  const ok = records.filter((r) => r.status !== undefined && r.status < 400);
  const firstLate = Math.min(...ok.filter((r) => r.version === late).map((r) => r.t + r.latencyMs));
  const lastEarly = Math.max(...ok.filter((r) => r.version === early).map((r) => r.t + r.latencyMs));
  return { firstLate, lastEarly };
}

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
  const file = (o: Parameters<TestFleet['fleetFile']>[0]) => f.fleetFile({ replicas: 3, type: 'BlueGreen', scaleDownDelaySeconds: 2, ...o, blueGreen: { preview: { upstream: preview }, ...o.blueGreen } });
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

describe('blue-green, for real', () => {
  it('switches 4 instances with one reload under load: zero failed requests, the old set kept for the delay, then removed', async (t) => {
    const f = await fleet('it-bg');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 4, type: 'BlueGreen', scaleDownDelaySeconds: 3 })])).code, 0);
    assert.deepEqual((await f.versions()).sort(), Array(4).fill('1.0.0'));

    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 2 });
    await moreRequests(load, 5, 'requests before the rollout');
    const file = f.fleetFile({ replicas: 4, type: 'BlueGreen', scaleDownDelaySeconds: 3, image: 'fleetroll-example:1.1.0' });
    const { result, maxAlive, minUp } = await sampleDuring(f, runCli(['deploy', '-f', file, '--json']));
    await moreRequests(load, 5, 'requests after the rollout');
    const records = await load.stop();

    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} requests failed`);
    const out = JSON.parse(result.stdout) as { reloads: number; instances: { version: string }[]; health?: { failed5xx: number; dropped: number; mixedVersionWindowMs: number } };
    assert.equal(out.reloads, 1, 'one reload: the switch');
    // The same, as nginx's access log tells it (the deploy's own health numbers).
    assert.ok(out.health && 'mixedVersionWindowMs' in out.health, JSON.stringify(out.health));
    assert.deepEqual([out.health.failed5xx, out.health.dropped], [0, 0]);
    assert.ok(out.health.mixedVersionWindowMs < 2000, `access log: mixed-version window ${out.health.mixedVersionWindowMs} ms`);
    t.diagnostic(`access log: mixed-version window ${out.health.mixedVersionWindowMs} ms`);
    assert.deepEqual(out.instances.map((i) => i.version), Array(4).fill('1.1.0'));
    assert.equal(maxAlive, 8, 'the whole new set beside the old one');
    assert.ok(minUp >= 4, `${minUp} servers up at the lowest`);
    assert.match(result.stderr, /kept running 3 s \(scaleDownDelaySeconds\)/);
    // Users saw two versions only around the one reload.
    const { firstLate, lastEarly } = overlap(records, '1.0.0', '1.1.0');
    const windowMs = Math.max(0, lastEarly - firstLate);
    t.diagnostic(`requests: ${records.length}, failed: 0, mixed-version window ${Math.round(windowMs)} ms`);
    assert.ok(windowMs < 2000, `mixed-version window ${Math.round(windowMs)} ms: more than a reload`);
    assert.equal((await f.instances()).length, 4, 'the old set is removed after the delay');
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [4, 0], up.content);
  });

  it('undo during scaleDownDelaySeconds switches back with one reload: the old set serves again, the new set is removed, nothing failed', async (t) => {
    const f = await fleet('it-bgundo');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, type: 'BlueGreen' })])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 2 });
    const file = f.fleetFile({ replicas: 3, type: 'BlueGreen', scaleDownDelaySeconds: 60, image: 'fleetroll-example:1.1.0' });
    const running = await startCliUntil(['deploy', '-f', file], /switched: the old set/);
    await moreRequests(load, 10, 'requests served by the new set');
    const undo = await runCli(['undo', '-f', file]);
    const deployed = await running.exited;
    const undoneAt = load.elapsed();
    await moreRequests(load, 10, 'requests after the switch-back');
    const records = await load.stop();

    assert.equal(undo.code, 0, undo.stdout + undo.stderr);
    const ms = Number(/switched back: .* (\d+) ms after this request/.exec(undo.stdout)?.[1]);
    assert.ok(Number.isFinite(ms), undo.stdout);
    t.diagnostic(`undo: traffic back on the old set ${ms} ms after the request`);
    assert.equal(deployed.code, 1, deployed.stdout + deployed.stderr);
    assert.match(deployed.stderr, /rolled back \(undo\)/);
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} requests failed`);
    assert.ok(records.some((r) => r.version === '1.1.0'), 'the new set served before the undo');
    assert.deepEqual(records.filter((r) => r.t > undoneAt).map((r) => r.version).filter((v) => v !== '1.0.0'), [], 'only the old set answers after the switch-back');
    assert.deepEqual((await f.versions()).sort(), Array(3).fill('1.0.0'));
    assert.equal((await f.instances()).length, 3, 'the new set is gone');
    const history = JSON.parse((await runCli(['history', '-f', file, '--json'])).stdout) as { version: string; outcome: string }[];
    assert.equal(history.at(-1)?.version, '1.1.0');
    assert.equal(history.at(-1)?.outcome, 'rolled back');
  });

  it('a new set that never becomes ready fails at the deadline without taking traffic', async () => {
    const f = await fleet('it-bgbad');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, type: 'BlueGreen' })])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, type: 'BlueGreen', image: 'fleetroll-example:1.1.0', env: { BROKEN_NEVER_READY: '1' }, progressDeadlineSeconds: 6 })]);
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /made no progress for 6 s/);
    assert.deepEqual(failedOf(records), []);
    assert.deepEqual([...new Set(records.map((x) => x.version))], ['1.0.0'], 'the new set never took a request');
    const up = await f.upstream();
    assert.equal(up.up, 2);
    assert.equal(up.down, 0);
  });

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
    assert.match(r.stderr, /prePromotion/);
    t.diagnostic(r.stderr.split('\n').filter((l) => /^(error|hint)/.test(l)).join(' | '));
    t.diagnostic(`instances after: ${(await f.instances()).map((i) => `${i.labels['fleetroll.version'] ?? '?'} ${i.state}`).join(', ')}`);
    assert.equal(readFileSync(seen, 'utf8'), '1.1.0', 'the hook did see the new set');
    assert.deepEqual(failedOf(records), []);
    assert.deepEqual([...new Set(records.filter((x) => x.version !== undefined).map((x) => x.version))], ['1.0.0'], 'users only ever got the old version');
  });
});
