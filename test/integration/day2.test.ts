/**
 * Day-2 operations on a real fleet: history that lives with the fleet, undo,
 * restart, status, pause/resume, the lock, and recovery after fleetroll is
 * killed with SIGKILL at different points of a rollout.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { execa } from 'execa';
import { FleetLock, FleetStateStore } from '../../src/adapters/fleetState.js';
import { type CliRun, bin, docker, failedOf, root, runCli, startCliUntil, useFleets, startLoad, waitFor } from './fixture.js';

const fleet = useFleets();


interface HistoryRow {
  number: number;
  image: string;
  version: string;
  outcome: string;
  changeCause: string;
  env: string[];
}
async function history(file: string, cwd = root): Promise<HistoryRow[]> {
  const r = await execa(process.execPath, [bin, 'history', '-f', file, '--json'], { cwd, reject: false });
  assert.equal(r.exitCode, 0, String(r.stderr));
  return JSON.parse(String(r.stdout)) as HistoryRow[];
}

describe('revisions: history, undo, restart', () => {
  it('records every rollout, undoes to the previous revision as a new one, and restarts in place', async () => {
    const f = await fleet('it-hist');
    const v1 = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, env: { DB_PASSWORD: 'hunter2' } });
    assert.equal((await runCli(['deploy', '-f', v1, '--change-cause', 'first release'])).code, 0);
    const r2 = await runCli(['deploy', '-f', v1, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(r2.code, 0, r2.stderr);

    // From another working directory (another machine would do the same): the history is on the fleet.
    const h = await history(v1, '/tmp');
    assert.deepEqual(h.map((r) => [r.number, r.version, r.outcome]), [[1, '1.0.0', 'complete'], [2, '1.1.0', 'complete']]);
    assert.equal(h[0]?.changeCause, 'first release');
    assert.deepEqual(h[0]?.env, ['DB_PASSWORD', 'PRESTOP_SECONDS', 'WARMUP_SECONDS'], 'env names only');
    const shown = await runCli(['history', '-f', v1, '--revision', '1']);
    assert.doesNotMatch(shown.stdout + (await runCli(['history', '-f', v1, '--json'])).stdout, /hunter2/, 'secrets never shown');

    const undo = await runCli(['undo', '-f', v1]);
    assert.equal(undo.code, 0, undo.stderr);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0']);
    const h3 = await history(v1);
    assert.deepEqual(h3.map((r) => [r.number, r.version, r.changeCause]).at(-1), [3, '1.0.0', 'undo to revision 1']);

    const redo = await runCli(['undo', '-f', v1]);
    assert.equal(redo.code, 0, redo.stderr);
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0'], 'an undo can be undone');

    const before = (await f.instances()).map((i) => i.name).sort();
    const restart = await runCli(['restart', '-f', v1]);
    assert.equal(restart.code, 0, restart.stderr);
    const afterNames = (await f.instances()).map((i) => i.name).sort();
    assert.equal(afterNames.filter((n) => before.includes(n)).length, 0, 'every instance was replaced');
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0']);
    // A plain deploy of the same file afterwards changes nothing (the restart marker is kept).
    const again = await runCli(['deploy', '-f', v1, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(again.code, 0);
    assert.match(again.stdout, /0 wave\(s\)/);
    assert.deepEqual((await f.instances()).map((i) => i.name).sort(), afterNames);

    const missing = await runCli(['undo', '-f', v1, '--to-revision', '99']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--to-revision: no revision 99/);
  });

  it('undo to a revision whose image is gone fails in preflight', async () => {
    const f = await fleet('it-undoimg');
    const tag = `fleetroll-example:${f.names.service}`;
    await docker.getImage('fleetroll-example:1.0.0').tag({ repo: 'fleetroll-example', tag: f.names.service });
    const file = f.fleetFile({ replicas: 1, image: tag, version: '1.0.0', env: { APP_X: '1' } });
    assert.equal((await runCli(['deploy', '-f', file])).code, 0);
    assert.equal((await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'])).code, 0);
    await docker.getImage(tag).remove();
    const r = await runCli(['undo', '-f', file, '--to-revision', '1']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`preflight failed, nothing was changed:\\s+image ${tag} is not present on host local`));
    assert.deepEqual(await f.versions(), ['1.1.0']);
  });
});

describe('status, pause and resume, the lock', () => {
  it('pause stops a running rollout after its wave (exit 4), status shows it, resume finishes it; zero failed requests', async () => {
    const f = await fleet('it-pause');
    // Slow enough (2 s to become ready, one at a time) that the pause below lands mid-rollout even on a busy machine.
    const file = f.fleetFile({ replicas: 4, maxSurge: 1, maxUnavailable: 0, drainSeconds: 1, env: { WARMUP_SECONDS: '2' } });
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

describe('crash-safe resume', () => {
  for (const point of ['after-mark-down', 'before-reload', 'after-stop', 'waiting-for-readiness']) {
    it(`SIGKILL ${point}: the next deploy converges with zero failed requests`, async () => {
      const f = await fleet(`it-kill`);
      const file = f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, drainSeconds: 1, image: 'fleetroll-example:1.0.0' });
      assert.equal((await runCli(['deploy', '-f', file])).code, 0);
      const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
      const killed = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => {
        const child = spawn(process.execPath, [bin, 'deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'], {
          cwd: root,
          stdio: 'ignore',
          env: { ...process.env, FLEETROLL_FAULT: `kill-at:${point}:2` },
        });
        child.on('close', (code, signal) => res({ code, signal }));
      });
      assert.equal(killed.signal, 'SIGKILL', `the fault point ${point} was reached`);
      const again = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
      const records = await load.stop();
      assert.equal(again.code, 0, again.stdout + again.stderr);
      assert.match(again.stdout, /took over a stale lock/);
      assert.match(again.stdout, /recovering: the previous rollout .* stopped without finishing/);
      assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
      const list = await f.instances();
      assert.equal(list.length, 3, 'no orphan containers');
      assert.equal(new Set(list.map((i) => i.name)).size, 3);
      const up = await f.upstream();
      assert.deepEqual([up.up, up.down], [3, 0]);
      const journal = await new FleetStateStore(docker, f.names.service, 'local').journal();
      assert.ok(journal.some((e) => e.step === 'recovered'), 'the journal shows the recovery');
      assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
    });
  }
});

describe('adopting a running fleet', () => {
  it('takes over containers started by hand without restarting them, then deploy rolls them with zero failed requests', async () => {
    const f = await fleet('it-adopt');
    const role = `legacy-${f.names.service}`;
    const started: string[] = [];
    for (let i = 1; i <= 3; i++) {
      const c = await docker.createContainer({
        name: `${f.names.service}-legacy-${i}`,
        Image: 'fleetroll-example:1.0.0',
        Env: ['PRESTOP_SECONDS=1'],
        Labels: { 'legacy.role': role },
        HostConfig: { NetworkMode: f.names.network, Init: true },
      });
      await c.start();
      started.push(c.id);
    }
    try {
      const file = f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, drainSeconds: 1 });
      const before = await Promise.all(started.map(async (id) => (await docker.getContainer(id).inspect()).State.StartedAt));
      const r = await runCli(['adopt', '-f', file, '--match', `legacy.role=${role}`]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /adopted 3 container\(s\) as revision 1/);
      const startedAgain = await Promise.all(started.map(async (id) => (await docker.getContainer(id).inspect()).State.StartedAt));
      assert.deepEqual(startedAgain, before, 'not restarted');
      const up = await f.upstream();
      assert.deepEqual([up.up, up.down], [3, 0]);
      assert.equal(await (await fetch(`${f.url}/api/version`)).text(), '1.0.0', 'nginx now routes to them');
      const status = JSON.parse((await runCli(['status', '-f', file, '--json'])).stdout) as { instances: { name: string; ready: boolean }[] };
      assert.equal(status.instances.filter((i) => i.ready).length, 3);

      const again = await runCli(['adopt', '-f', file, '--match', `legacy.role=${role}`]);
      assert.equal(again.code, 2, 'adopting twice is refused');

      const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
      const d = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
      const records = await load.stop();
      assert.equal(d.code, 0, d.stdout + d.stderr);
      assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
      for (const id of started) await assert.rejects(docker.getContainer(id).inspect(), 'the adopted containers were replaced');
      assert.deepEqual(failedOf(records), []);
      const h = await history(file);
      assert.deepEqual(h.map((x) => [x.number, x.version, x.outcome]), [[1, '1.0.0', 'complete'], [2, '1.1.0', 'complete']]);
      assert.match(h[0]?.changeCause ?? '', /adopted 3 running container\(s\)/);
    } finally {
      await Promise.all(started.map((id) => docker.getContainer(id).remove({ force: true }).catch(() => {})));
    }
  });
});
