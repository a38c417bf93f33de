/**
 * Day-2 operations on a real fleet: status, pause and resume, the lock.
 * (history, undo, restart and adopt: day2.test.ts; crash recovery: day2-crash.test.ts)
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { FleetLock } from '../../src/adapters/fleetState.js';
import { type CliRun, docker, failedOf, runCli, startCliUntil, uniqueName, useFleets, startLoad, waitFor } from './fixture.js';
import { ownAppImages } from './rollouts.js';

const fleet = useFleets();
// Built from this worktree's examples/app (the shared fleetroll-example tags are rebuilt by
// whichever worktree's examples/app ran last), for READY_FILE; a name of this run's own, so
// that another run of this file removing its tags in after() cannot take these mid-test.
const { V1, V2 } = ownAppImages(uniqueName('fleetroll-pause'));

const gates: string[] = [];
after(() => {
  for (const dir of gates) rmSync(dir, { recursive: true, force: true });
});

/**
 * A host directory to bind-mount at /gate: with READY_FILE=/gate/ready an
 * instance is not ready until open() creates the file, so a rollout cannot
 * finish before the test lets it. The engine is local, so it sees this host's tmpdir.
 */
function readinessGate(): { volume: string; env: Record<string, string>; open(): void } {
  const dir = mkdtempSync(join(tmpdir(), 'fleetroll-gate-'));
  gates.push(dir);
  // The app runs as uid 1000; mkdtemp makes the directory 0700 for this (root) user.
  chmodSync(dir, 0o755);
  return {
    volume: `${dir}:/gate:ro`,
    env: { READY_FILE: '/gate/ready' },
    open() {
      const file = join(dir, 'ready');
      writeFileSync(file, '');
      chmodSync(file, 0o644);
    },
  };
}

describe('status, pause and resume, the lock', () => {
  it('pause stops a running rollout after its wave (exit 4), status shows it, resume finishes it; zero failed requests', async () => {
    const f = await fleet('it-pause');
    const roll = { replicas: 4, maxSurge: 1, maxUnavailable: 0, drainSeconds: 1 } as const;
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ ...roll, image: V1 })])).code, 0);
    // 1.1.0's instances are not ready until the gate opens, so its rollout cannot get past its
    // first new instance, however slow the CLI runs below are: the pause is sure to find it running.
    const gate = readinessGate();
    const file = f.fleetFile({ ...roll, image: V2, env: gate.env, container: { volumes: [gate.volume] } });
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const running = await startCliUntil(['deploy', '-f', file], /wave 1:/);
    const locked = await runCli(['deploy', '-f', file]);
    assert.equal(locked.code, 3, 'a second deploy fails fast while the first holds the lock');
    assert.match(locked.stderr, /is locked by .*@.* \(pid \d+, since .*\): fleetroll deploy -f/);
    const lockStatus = await runCli(['lock', 'status', '-f', file]);
    assert.match(lockStatus.stdout, /locked by .* since/);

    assert.equal((await runCli(['pause', '-f', file])).code, 0);
    const { code, stdout, stderr } = await running.exited;
    assert.equal(code, 4, stdout + stderr);
    assert.match(stderr, /paused after 1 wave\(s\) \(fleetroll pause\): 4 old and 1 new instance\(s\), 4 in service, none left marked down/);
    const status = await runCli(['status', '-f', file, '--json']);
    type Status = {
      paused: boolean;
      upToDate: boolean;
      lastRollout: { outcome: string };
      instances: { version: string; ready: boolean; upstreams: Record<string, string> }[];
    };
    const s = JSON.parse(status.stdout) as Status;
    assert.equal(s.paused, true);
    assert.equal(s.upToDate, false);
    assert.equal(s.lastRollout.outcome, 'paused');
    assert.ok(
      s.instances.every((i) => Object.values(i.upstreams).every((u) => u !== 'down')),
      'nothing left marked down',
    );
    const fresh = s.instances.filter((i) => i.version === '1.1.0');
    assert.deepEqual(
      fresh.map((i) => [i.ready, ...Object.values(i.upstreams)]),
      [[false, 'absent']],
      'the gate held: the one new instance waits, unready and out of traffic',
    );
    const blocked = await runCli(['deploy', '-f', file]);
    assert.equal(blocked.code, 4);
    assert.match(blocked.stderr, /is paused/);

    // Only now: a paused rollout ends once nothing is starting or stopping, without waiting for an
    // unready instance, so a gate opened before the deploy exits would race the pause (polled each second).
    gate.open();
    const resuming = runCli(['resume', '-f', file]);
    // status --watch is to watch the resumed rollout, so start it once the resume has taken the
    // rollout up: the pause flag clears first, and until the record leaves 'paused' a watch ends on it (exit 1).
    await waitFor(
      'resume to take the rollout up',
      async () => {
        const now = JSON.parse((await runCli(['status', '-f', file, '--json'])).stdout) as Status;
        return !now.paused && now.lastRollout.outcome !== 'paused';
      },
      60_000,
      100,
    );
    const watched: CliRun = await runCli(['status', '-f', file, '--watch', '--timeout', '2m']);
    const resumed = await resuming;
    assert.equal(resumed.code, 0, resumed.stderr);
    assert.equal(watched.code, 0, watched.stdout + watched.stderr);
    const records = await load.stop();
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0', '1.1.0']);
    assert.deepEqual(failedOf(records), []);
    // status probes every instance once: on a loaded machine one probe can miss its 1 s timeout, so ask until it says so.
    let human = await runCli(['status', '-f', file]);
    await waitFor(
      'status to say the fleet is up to date',
      async () => /4 of the desired revision, 4 ready — up to date/.test((human = await runCli(['status', '-f', file])).stdout),
      30_000,
      500,
    ).catch(() => undefined);
    assert.match(human.stdout, /4 of the desired revision, 4 ready — up to date/);
    assert.match(human.stdout, new RegExp(`last rollout: revision 2 \\(${V2.replace(/[.]/g, '\\.')}\\) complete`));
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
