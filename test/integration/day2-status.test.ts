/**
 * Day-2 operations on a real fleet: status, pause and resume, the lock.
 * (history, undo, restart and adopt: day2.test.ts; crash recovery: day2-crash.test.ts)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FleetLock } from '../../src/adapters/fleetState.js';
import { type CliRun, docker, failedOf, runCli, startCliUntil, useFleets, startLoad, waitFor } from './fixture.js';

const fleet = useFleets();



describe('status, pause and resume, the lock', () => {
  it('pause stops a running rollout after its wave (exit 4), status shows it, resume finishes it; zero failed requests', async () => {
    const f = await fleet('it-pause');
    // Slow enough (4 s to become ready, one at a time) that the pause below lands mid-rollout even on a busy
    // machine: the three CLI runs before it take several seconds when the whole suite runs at once.
    const file = f.fleetFile({ replicas: 4, maxSurge: 1, maxUnavailable: 0, drainSeconds: 1, env: { WARMUP_SECONDS: '4' } });
    assert.equal((await runCli(['deploy', '-f', file])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const running = await startCliUntil(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'], /wave 2:/);
    const locked = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(locked.code, 3, 'a second deploy fails fast while the first holds the lock');
    assert.match(locked.stderr, /is locked by .*@.* \(pid \d+, since .*\): fleetroll deploy -f/);
    const lockStatus = await runCli(['lock', 'status', '-f', file]);
    assert.match(lockStatus.stdout, /locked by .* since/);

    assert.equal((await runCli(['pause', '-f', file])).code, 0);
    const { code, stdout, stderr } = await running.exited;
    assert.equal(code, 4, stdout + stderr);
    assert.match(stderr, /paused after \d+ wave\(s\)/);
    const status = await runCli(['status', '-f', file, '--json']);
    const s = JSON.parse(status.stdout) as { paused: boolean; upToDate: boolean; lastRollout: { outcome: string }; instances: { upstreams: Record<string, string> }[] };
    assert.equal(s.paused, true);
    assert.equal(s.upToDate, false);
    assert.equal(s.lastRollout.outcome, 'paused');
    assert.ok(s.instances.every((i) => Object.values(i.upstreams).every((u) => u !== 'down')), 'nothing left marked down');
    const blocked = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(blocked.code, 4);
    assert.match(blocked.stderr, /is paused/);

    const resuming = runCli(['resume', '-f', file]);
    // status --watch is to watch the resumed rollout, so start it once the resume has begun.
    await waitFor('resume to clear the pause', async () => !(JSON.parse((await runCli(['status', '-f', file, '--json'])).stdout) as { paused: boolean }).paused, 20_000, 100);
    const watched: CliRun = await runCli(['status', '-f', file, '--watch', '--timeout', '2m']);
    const resumed = await resuming;
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(watched.code, 0, watched.stdout + watched.stderr);
    const records = await load.stop();
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0', '1.1.0']);
    assert.deepEqual(failedOf(records), []);
    const human = await runCli(['status', '-f', file]);
    assert.match(human.stdout, /4 of the desired revision, 4 ready — up to date/);
    assert.match(human.stdout, /last rollout: revision 2 \(fleetroll-example:1\.1\.0\) complete/);
  });

  it('a lock whose holder is gone is taken over; a live one can be forced', async () => {
    const f = await fleet('it-lock');
    const file = f.fleetFile({ replicas: 1 });
    assert.equal((await runCli(['deploy', '-f', file])).code, 0);
    // A holder that stopped renewing its lease 10 minutes ago.
    const stale = new FleetLock(docker, f.names.service, () => Date.now() - 600_000);
    await stale.acquire('fleetroll-example:1.0.0', 'fleetroll deploy (a laptop that went to sleep)');
    const st = await runCli(['lock', 'status', '-f', file]);
    assert.match(st.stdout, /STALE: the holder looks gone/);
    const r = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /took over a stale lock of .*a laptop that went to sleep/);
    await stale.release(); // stops its renewal timer; the lock itself is long gone

    const live = new FleetLock(docker, f.names.service);
    await live.acquire('fleetroll-example:1.0.0', 'fleetroll deploy (still running)');
    assert.equal((await runCli(['lock', 'release', '-f', file])).code, 3, 'not without --force');
    const forced = await runCli(['lock', 'release', '-f', file, '--force']);
    assert.equal(forced.code, 0);
    assert.match(forced.stdout, /released the lock .* held by/);
    await live.release();
  });
});
