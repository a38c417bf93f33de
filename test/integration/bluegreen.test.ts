/**
 * Blue-green on a real Docker engine and nginx: the new set comes up out of
 * traffic, one reload switches, the old set waits out scaleDownDelaySeconds,
 * and `fleetroll undo` inside that window switches back with one reload
 * (the preview upstream and prePromotion: bluegreen-preview.test.ts).
 * What a user would see is asserted: requests that failed through nginx, the
 * version each answer came from, the containers that exist.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { RequestRecord } from '../../src/experiment/metrics.js';
import { docker, explainFailed, failedOf, moreRequests, runCli, sampleDuring, startCliUntil, startLoad, useFleets } from './fixture.js';

const fleet = useFleets();

/** The containers of undo's quick way to a waiting rollout (adapters/switchAsks.ts) left for `service`. */
async function switchBackContainers(service: string): Promise<string[]> {
  const all = await docker.listContainers({ all: true, filters: { name: [`fleetroll-switchback-`] } });
  return all.flatMap((c) => c.Names.map((n) => n.replace(/^\//, ''))).filter((n) => n.endsWith(`-${service}`));
}

/** The times (ms on the load's clock) of the first answer from `late` and the last from `early`: the mixed-version window as users saw it. */
async function waitForOffer(service: string): Promise<void> {
  for (let i = 0; i < 100 && !(await switchBackContainers(service)).includes(`fleetroll-switchback-${service}`); i++)
    await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual(await switchBackContainers(service), [`fleetroll-switchback-${service}`], 'a rollout waiting out its delay offers to switch back');
}

function overlap(records: RequestRecord[], early: string, late: string): { firstLate: number; lastEarly: number } {
  const ok = records.filter((r) => r.status !== undefined && r.status < 400);
  const firstLate = Math.min(...ok.filter((r) => r.version === late).map((r) => r.t + r.latencyMs));
  const lastEarly = Math.max(...ok.filter((r) => r.version === early).map((r) => r.t + r.latencyMs));
  return { firstLate, lastEarly };
}

describe('blue-green, for real', () => {
  it('switches 4 instances with one reload under load: zero failed requests, the old set kept for the delay, then removed', async (t) => {
    const f = await fleet('it-bg');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 4, type: 'BlueGreen', scaleDownDelaySeconds: 3 })])).code, 0);
    assert.deepEqual((await f.versions()).sort(), Array(4).fill('1.0.0'));

    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 2 });
    // The load's times are relative to its start: this is that start on the wall clock.
    const loadStart = Date.now() - load.elapsed();
    await moreRequests(load, 5, 'requests before the rollout');
    const file = f.fleetFile({ replicas: 4, type: 'BlueGreen', scaleDownDelaySeconds: 3, image: 'fleetroll-example:1.1.0' });
    const { result, maxAlive, minUp } = await sampleDuring(f, runCli(['deploy', '-f', file, '--json']));
    await moreRequests(load, 5, 'requests after the rollout');
    const records = await load.stop();

    assert.equal(result.code, 0, result.stderr);
    assert.equal(failedOf(records).length, 0, await explainFailed(f, records, loadStart));
    const out = JSON.parse(result.stdout) as {
      reloads: number;
      switchedAt?: string;
      switchIssuedAt?: string;
      instances: { version: string }[];
      health?: { failed5xx: number; dropped: number; mixedVersionWindowMs: number; firstNewResponseAt: string };
    };
    assert.equal(out.reloads, 1, 'one reload: the switch');
    // The switch is recorded twice: issued, and in force (every nginx confirmed its new workers).
    // Users' first answers from the new set come between the two (or, with no request in that
    // moment, soon after), never before the issue: compared with this run's own access log, not
    // with a bound chosen on a quiet machine.
    const switchedAt = Date.parse(out.switchedAt ?? '');
    const issuedAt = Date.parse(out.switchIssuedAt ?? '');
    const firstNew = Date.parse(out.health?.firstNewResponseAt ?? '');
    t.diagnostic(
      `switch issued ${out.switchIssuedAt}, in force ${out.switchedAt} (${switchedAt - issuedAt} ms); first new answer in the access log ${out.health?.firstNewResponseAt} (${firstNew - switchedAt} ms after in force)`,
    );
    assert.ok(Number.isFinite(switchedAt) && Number.isFinite(issuedAt), `switchedAt ${out.switchedAt}, switchIssuedAt ${out.switchIssuedAt}`);
    assert.ok(issuedAt <= switchedAt, 'issued before in force');
    // Two clocks (this process's, nginx's $msec) on one machine: within a few ms of each other.
    assert.ok(firstNew >= issuedAt - 20, `first new answer ${issuedAt - firstNew} ms before the switch was issued`);
    // The same, as nginx's access log tells it (the deploy's own health numbers).
    assert.ok(out.health && 'mixedVersionWindowMs' in out.health, JSON.stringify(out.health));
    assert.deepEqual([out.health.failed5xx, out.health.dropped], [0, 0]);
    t.diagnostic(`access log: mixed-version window ${out.health.mixedVersionWindowMs} ms`);
    assert.deepEqual(
      out.instances.map((i) => i.version),
      Array(4).fill('1.1.0'),
    );
    assert.equal(maxAlive, 8, 'the whole new set beside the old one');
    assert.ok(minUp >= 4, `${minUp} servers up at the lowest`);
    assert.match(result.stderr, /kept running 3 s \(scaleDownDelaySeconds\)/);
    // Users saw two versions only around the one reload: every request sent once the switch was in
    // force was answered by the new set (what is still answered by the old set was sent before).
    const { firstLate, lastEarly } = overlap(records, '1.0.0', '1.1.0');
    const windowMs = Math.max(0, lastEarly - firstLate);
    t.diagnostic(`requests: ${records.length}, failed: 0, mixed-version window ${Math.round(windowMs)} ms`);
    const oldAfter = records.filter((r) => loadStart + r.t > switchedAt + 20 && r.version !== '1.1.0');
    assert.deepEqual(
      oldAfter.map((r) => `${r.method} sent ${Math.round(loadStart + r.t - switchedAt)} ms after the switch was in force: ${r.version}`),
      [],
    );
    assert.ok(
      records.some((r) => loadStart + r.t < issuedAt && r.version === '1.0.0'),
      'the old set served before the switch',
    );
    assert.equal((await f.instances()).length, 4, 'the old set is removed after the delay');
    assert.deepEqual(await switchBackContainers(f.names.service), [], 'the offer ends with the rollout');
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [4, 0], up.content);
  });

  it('undo during scaleDownDelaySeconds switches back with one reload: the old set serves again, the new set is removed, nothing failed', async (t) => {
    const f = await fleet('it-bgundo');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, type: 'BlueGreen' })])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 2 });
    const loadStart = Date.now() - load.elapsed();
    const file = f.fleetFile({ replicas: 3, type: 'BlueGreen', scaleDownDelaySeconds: 60, image: 'fleetroll-example:1.1.0' });
    const running = await startCliUntil(['deploy', '-f', file], /switched: the old set/);
    await moreRequests(load, 10, 'requests served by the new set');
    // The rollout offers to switch back while its old set waits (made just after it says so).
    await waitForOffer(f.names.service);
    const undoFrom = load.elapsed();
    const undo = await runCli(['undo', '-f', file]);
    const deployed = await running.exited;
    const undoneAt = load.elapsed();
    await moreRequests(load, 10, 'requests after the switch-back');
    const records = await load.stop();

    assert.equal(undo.code, 0, undo.stdout + undo.stderr);
    const ms = Number(/switched back: .* (\d+) ms after this request/.exec(undo.stdout)?.[1]);
    assert.ok(Number.isFinite(ms), undo.stdout);
    // Two moments, from the command's start: the last request sent that nginx still gave the new
    // set (every later one went to the old set: users were back), and that request's answer (a
    // POST sent just before the switch-back is answered by the new set, as long as it takes).
    const newSet = records.filter((r) => r.version === '1.1.0');
    const lastSent = Math.max(...newSet.map((r) => r.t));
    const lastNew = Math.max(...newSet.map((r) => r.t + r.latencyMs));
    t.diagnostic(
      `undo: traffic back on the old set ${ms} ms after the request; the last request nginx gave the new set was sent ${Math.round(lastSent - undoFrom)} ms and answered ${Math.round(lastNew - undoFrom)} ms after the command started`,
    );
    assert.equal(deployed.code, 1, deployed.stdout + deployed.stderr);
    assert.match(deployed.stderr, /rolled back \(undo\)/);
    assert.deepEqual(
      failedOf(records).length,
      0,
      `${await explainFailed(f, records, loadStart)}\nundo:\n${undo.stdout}${undo.stderr}\ndeploy:\n${deployed.stdout}${deployed.stderr}`,
    );
    assert.ok(
      records.some((r) => r.version === '1.1.0'),
      'the new set served before the undo',
    );
    assert.deepEqual(
      records
        .filter((r) => r.t > undoneAt)
        .map((r) => r.version)
        .filter((v) => v !== '1.0.0'),
      [],
      'only the old set answers after the switch-back',
    );
    assert.deepEqual((await f.versions()).sort(), Array(3).fill('1.0.0'));
    assert.equal((await f.instances()).length, 3, 'the new set is gone');
    assert.deepEqual(await switchBackContainers(f.names.service), [], 'the offer and the ask end with the rollout');
    const history = JSON.parse((await runCli(['history', '-f', file, '--json'])).stdout) as {
      number: number;
      version: string;
      outcome: string;
      switchedAt?: string;
    }[];
    assert.equal(history.at(-1)?.version, '1.1.0');
    assert.equal(history.at(-1)?.outcome, 'rolled back');
    // The switch time is kept with the revision, and shown.
    assert.match(history.at(-1)?.switchedAt ?? '', /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const shown = await runCli(['history', '-f', file, '--revision', String(history.at(-1)?.number)]);
    assert.match(shown.stdout, new RegExp(`switched at\\s+${history.at(-1)!.switchedAt!.replace('T', ' ').replace(/\./g, '\\.')}`));
  });

  it('a new set that never becomes ready fails at the deadline without taking traffic', async () => {
    const f = await fleet('it-bgbad');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, type: 'BlueGreen' })])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
    const r = await runCli([
      'deploy',
      '-f',
      f.fleetFile({ replicas: 2, type: 'BlueGreen', image: 'fleetroll-example:1.1.0', env: { BROKEN_NEVER_READY: '1' }, progressDeadlineSeconds: 6 }),
    ]);
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /made no progress for 6 s/);
    assert.deepEqual(failedOf(records), []);
    assert.deepEqual([...new Set(records.map((x) => x.version))], ['1.0.0'], 'the new set never took a request');
    const up = await f.upstream();
    assert.equal(up.up, 2);
    assert.equal(up.down, 0);
  });
});
