/**
 * `fleetroll watch` on a real Docker engine and nginx, under load through
 * nginx: an instance killed (SIGKILL), one removed, one moved to a new
 * address, a deploy while the watch runs, a second watch. After each fault
 * the fleet must be whole again: as many running, ready containers of the
 * current revision as replicas, and nothing else; nginx listing exactly
 * their addresses, none down. The time each took is printed.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { execa } from 'execa';
import { parseUpstreamServers } from '../../src/core/upstream.js';
import { LABELS } from '../../src/ports.js';
import { DEMO_LABEL } from '../../src/experiment/rehearse.js';
import {
  docker,
  explainFailed,
  failedOf,
  guard,
  prober,
  runCli,
  startCliUntil,
  startLoad,
  useFleets,
  waitFor,
  type RunningCli,
  type TestFleet,
} from './fixture.js';

/** Why the fleet is not whole at `revision`, or undefined when it is. */
async function notWhole(f: TestFleet, replicas: number, revision: string): Promise<string | undefined> {
  const all = await f.instances();
  const current = all.filter((i) => i.running && i.labels[LABELS.revision] === revision);
  if (all.length !== replicas || current.length !== replicas) return `${all.length} container(s), ${current.length} running of the revision`;
  for (const i of current) if (!(await prober.ready({ id: i.id, host: i.host, address: i.address }).catch(() => false))) return `${i.name} not ready`;
  const up = await f.upstream();
  const servers = parseUpstreamServers(up.content);
  if (servers.some((s) => s.down)) return `nginx lists a server down:\n${up.content}`;
  const listed = servers.map((s) => s.address).sort();
  const want = current.map((i) => i.address ?? '').sort();
  if (JSON.stringify(listed) !== JSON.stringify(want)) return `nginx lists ${listed.join(', ')}, the instances are at ${want.join(', ')}`;
  return undefined;
}

async function untilWhole(f: TestFleet, replicas: number, revision: string, what: string): Promise<number> {
  let why: string | undefined = 'not looked at yet';
  try {
    return await waitFor(what, async () => (why = await notWhole(f, replicas, revision)) === undefined, 90_000, 100);
  } catch (err) {
    throw new Error(`${(err as Error).message}: ${why}`);
  }
}

/** Run inside an instance (its image has node and no shell): SIGKILL every process but docker-init (PID 1) and itself; docker-init then exits, and Docker's restart policy applies. */
const KILL_THE_APP =
  "for (const p of require('fs').readdirSync('/proc')) if (/^[0-9]+$/.test(p) && +p !== 1 && +p !== process.pid) try { process.kill(+p, 'SIGKILL') } catch {}";

async function stopWatch(w: RunningCli): Promise<{ code: number | null; stdout: string; stderr: string }> {
  w.child.kill('SIGTERM');
  return w.exited;
}

describe('fleetroll watch, for real', { timeout: guard(600_000) }, () => {
  const fleet = useFleets();

  it('heals under load: a SIGKILLed instance and a removed one are replaced, one moved to a new address is followed; each time nginx lists exactly the instances, none down, and no request fails', async (t) => {
    const f = await fleet('it-watch');
    const revision = await f.at100(3);
    const file = f.fleetFile({ replicas: 3 });
    const watch = await startCliUntil(['watch', '-f', file, '--interval', '2s', '--settle', '300ms'], /watch: whole at revision 1/);
    const loadStart = Date.now();
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
    const faults: { at: number; text: string; address: string }[] = [];
    const fault = (text: string, address: string | undefined) => faults.push({ at: Date.now(), text, address: address ?? '' });
    const healed = () => [...watch.stdout().matchAll(/watch: healed \(/g)].length;
    // One fault at a time: the next comes once the watch says it healed the last (the fleet looks whole a little before its heal ends).
    const healOver = (before: number) => waitFor('the watch to say it healed', () => healed() > before, 60_000);
    try {
      const figures: string[] = [];

      const killed = (await f.instances())[0]!;
      let before = healed();
      fault(`SIGKILL ${killed.name}`, killed.address);
      await docker.getContainer(killed.id).kill({ signal: 'SIGKILL' });
      const killMs = await untilWhole(f, 3, revision, `the fleet whole after SIGKILL of ${killed.name}`);
      await healOver(before);
      assert.ok(!(await f.instances()).some((i) => i.name === killed.name), 'the killed container is replaced, not left behind');
      figures.push(`SIGKILL: whole again after ${killMs} ms`);

      const removed = (await f.instances())[0]!;
      before = healed();
      fault(`rm -f ${removed.name}`, removed.address);
      await docker.getContainer(removed.id).remove({ force: true });
      const rmMs = await untilWhole(f, 3, revision, `the fleet whole after removing ${removed.name}`);
      await healOver(before);
      figures.push(`docker rm -f: whole again after ${rmMs} ms`);

      // Disconnected, its address taken by another container, and connected again: it comes back at a new address.
      const moved = (await f.instances())[0]!;
      before = healed();
      const network = docker.getNetwork(f.names.network);
      fault(`disconnect ${moved.name}`, moved.address);
      await network.disconnect({ Container: moved.id, Force: true });
      const squatter = await docker.createContainer({
        Image: 'fleetroll-example:1.0.0',
        name: `${f.names.service}-squatter`,
        Labels: { [DEMO_LABEL]: f.names.service },
        HostConfig: { NetworkMode: f.names.network, Init: true },
      });
      await squatter.start();
      await network.connect({ Container: moved.id });
      const after = (await f.instances()).find((i) => i.id === moved.id);
      assert.ok(after?.address && after.address !== moved.address, `a new address: ${moved.address} -> ${after?.address}`);
      const moveMs = await untilWhole(f, 3, revision, `nginx following ${moved.name} to ${after?.address}`);
      await healOver(before);
      assert.ok(
        (await f.instances()).some((i) => i.id === moved.id),
        'the moved instance is kept, at its new address',
      );
      figures.push(`new address ${moved.address} -> ${after?.address}: whole again after ${moveMs} ms`);

      const records = await load.stop();
      // A request the faulted instance was serving when it was killed, removed or cut off fails with it: no balancer can
      // save it. Such a request was in flight at the fault, and nginx logged it ending at the faulted address (502 for a connection
      // reset, 499 when the client gave up on a connection cut without a reset), or it timed out while the fault happened.
      // Nothing else may fail.
      const log = await f.accessLog();
      const atFault = (r: (typeof records)[number]) => {
        const start = loadStart + r.t;
        const end = start + r.latencyMs;
        // nginx logs a request the client gave up on only when it notices (a stalled upstream connection: maybe not at all).
        return faults.some(
          (x) =>
            start <= x.at + 200 &&
            x.at <= end &&
            (r.error === 'timeout' ||
              log.some((l) => ['499', '502', '504'].includes(l.status ?? '') && l.upstream_addr === x.address && Math.abs(Number(l.time) * 1000 - end) < 1000)),
        );
      };
      const failed = failedOf(records);
      const others = failed.filter((r) => !atFault(r));
      t.diagnostic(
        `${figures.join('; ')}; ${records.length} requests through nginx, ${failed.length} failed (${failed.length - others.length} in flight on the faulted instance at its fault)`,
      );
      assert.deepEqual(
        others,
        [],
        `${await explainFailed(f, others, loadStart)}\nfaults:\n  ${faults.map((x) => `${new Date(x.at).toISOString()} ${x.text} (${x.address})`).join('\n  ')}\nwatch:\n${watch.stdout()}`,
      );
      const heals = [...watch.stdout().matchAll(/watch: healed \(([^)]*)\) in ([0-9.]+) s/g)].map((m) => `${m[1]} ${m[2]} s`);
      const reloads = [...watch.stdout().matchAll(/upstream: nginx -t ok, reloaded .*?\[(\d+) reloads\]/g)].map((m) => Number(m[1]));
      t.diagnostic(`heals: ${heals.join('; ')}; nginx reloads over the ${heals.length} heals: ${reloads.length}`);
      assert.equal(heals.length, 3, watch.stdout());
      assert.doesNotMatch(watch.stdout(), /heal .* failed/, 'no heal failed');

      const status = await runCli(['status', '-f', file]);
      assert.match(status.stdout, /watch: running \(.*pid \d+\) since .*; last action .*: healed /);
    } finally {
      await load.stop();
      const end = await stopWatch(watch);
      assert.equal(end.code, 0, end.stdout + end.stderr);
      assert.match(end.stdout, /watch: stopped after \d+ heal\(s\)/);
    }
    assert.match((await runCli(['status', '-f', file])).stdout, /watch: not running/);
  });

  it("a deploy while the watch runs: the watch steps back, the deploy completes, and the watch keeps the new revision (a killed instance comes back at 1.1.0); the revision record is the deploy's", async () => {
    const f = await fleet('it-watch-dep');
    await f.at100(2);
    const watch = await startCliUntil(['watch', '-f', f.fleetFile({ replicas: 2 }), '--interval', '2s', '--settle', '300ms'], /watch: whole at revision 1/);
    try {
      const target = f.fleetFile({ replicas: 2, image: 'fleetroll-example:1.1.0' });
      const r = await runCli(['deploy', '-f', target]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      const revision = (await f.instances())[0]!.labels[LABELS.revision]!;
      await waitFor('the watch on revision 2', () => /watch: whole at revision 2/.test(watch.stdout()), 30_000);
      const killed = (await f.instances())[0]!;
      await docker.getContainer(killed.id).kill({ signal: 'SIGKILL' });
      await untilWhole(f, 2, revision, 'the fleet whole at revision 2 after a SIGKILL');
      assert.deepEqual((await f.versions()).sort(), ['1.1.0', '1.1.0']);
      const history = await runCli(['history', '-f', target, '--json']);
      const revisions = JSON.parse(history.stdout) as { number: number; outcome: string; message: string }[];
      assert.deepEqual(
        revisions.map((x) => [x.number, x.outcome]),
        [
          [1, 'complete'],
          [2, 'complete'],
        ],
      );
      assert.match(revisions[1]!.message, /verified/, 'the record says what the deploy did, not the heal');
    } finally {
      await stopWatch(watch);
    }
  });

  it('a deploy that finds a heal holding the lock asks it to stop: the heal ends with its step, the deploy runs (exit 0), the ask is gone', async () => {
    const f = await fleet('it-watch-ask');
    await f.at100(2);
    // minReadySeconds 8: the heal's new instance would hold the lock 8 s after it is ready; asked, it ends at its readiness.
    const watch = await startCliUntil(
      ['watch', '-f', f.fleetFile({ replicas: 2, minReadySeconds: 8 }), '--interval', '2s', '--settle', '300ms'],
      /watch: whole at revision 1/,
    );
    try {
      await docker.getContainer((await f.instances())[0]!.id).kill({ signal: 'SIGKILL' });
      await waitFor('the watch healing', () => /watch: healing \(/.test(watch.stdout()), 30_000);
      // The heal ends with its step: a new instance it started is waited for until it is ready, which a busy CI machine has
      // taken longer than the 10 s a deploy waits by default; --lock-wait gives it that time and still asks.
      const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, minReadySeconds: 8, image: 'fleetroll-example:1.1.0' }), '--lock-wait', '60s']);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.match(r.stdout + r.stderr, /fleetroll watch is healing the fleet: asked it to stop; waiting up to 60 s/);
      await waitFor('the watch stepping back', () => /stepping back: a deploy asked for the fleet: the heal ended with its step/.test(watch.stdout()), 30_000);
      assert.deepEqual((await f.versions()).sort(), ['1.1.0', '1.1.0']);
      await assert.rejects(docker.getContainer(`fleetroll-yield-ask-${f.names.service}`).inspect(), /no such container/i, 'the ask is withdrawn');
    } finally {
      await stopWatch(watch);
    }
  });

  it('a second watch of the same fleet waits, naming the first, and takes over when the first stops', async () => {
    const f = await fleet('it-watch-two');
    await f.at100(1);
    const file = f.fleetFile({ replicas: 1 });
    const first = await startCliUntil(['watch', '-f', file, '--interval', '2s'], /watch: whole at revision 1/);
    const second = await startCliUntil(['watch', '-f', file, '--interval', '2s'], /watch: waiting: another watch of \S+ runs \(.*pid \d+/);
    try {
      assert.match(second.stdout(), new RegExp(`pid ${first.child.pid}`));
      await stopWatch(first);
      await waitFor('the second watch to take over', () => /watch: whole at revision 1/.test(second.stdout()), 30_000);
    } finally {
      await stopWatch(first).catch(() => undefined);
      const end = await stopWatch(second);
      assert.equal(end.code, 0, end.stdout + end.stderr);
    }
  });

  it("Docker's event stream wakes the watch: with a look only every 120 s, a killed instance is replaced long before the next look", async (t) => {
    const f = await fleet('it-watch-ev');
    const revision = await f.at100(2);
    const watch = await startCliUntil(['watch', '-f', f.fleetFile({ replicas: 2 }), '--interval', '120s', '--settle', '300ms'], /watch: whole at revision 1/);
    try {
      const killed = (await f.instances())[0]!;
      await docker.getContainer(killed.id).kill({ signal: 'SIGKILL' });
      const ms = await untilWhole(f, 2, revision, 'the fleet whole after a SIGKILL, woken by the event');
      t.diagnostic(`with --interval 120s: whole again ${ms} ms after the SIGKILL`);
      assert.ok(ms < 60_000, `${ms} ms: the next look was not due for 120 s`);
      // Found exited; or, when the event woke it before Docker had reaped the killed process (a CI run at load
      // about 18 still listed it running 1.4 s later, at the heal's second look), found unready and healed as
      // such: the heal's own look then finds it exited and replaces it, and says so.
      const out = watch.stdout();
      assert.ok(
        /watch: healing \(exited/.test(out) ||
          (/watch: healing \(unready\)/.test(out) && new RegExp(`removed ${killed.name} on local: already exited`).test(out)),
        `the killed instance healed as exited, or found unready and then removed as exited by the heal:\n${out}`,
      );
    } finally {
      await stopWatch(watch);
    }
  });

  it("out of nginx on Docker's event itself: a SIGKILLed instance is marked down before any look or heal (a look every 120 s, a 5 s settle window), then replaced", async (t) => {
    const f = await fleet('it-watch-out');
    const revision = await f.at100(2);
    const watch = await startCliUntil(['watch', '-f', f.fleetFile({ replicas: 2 }), '--interval', '120s', '--settle', '5s'], /watch: whole at revision 1/);
    try {
      const killed = (await f.instances())[0]!;
      await docker.getContainer(killed.id).kill({ signal: 'SIGKILL' });
      const outMs = await waitFor(
        `${killed.name} marked down in nginx`,
        async () => parseUpstreamServers((await f.upstream()).content).some((s) => s.name === killed.name && s.down),
        10_000,
        10,
      );
      const said = watch.stdout();
      assert.doesNotMatch(said, /watch: healing/, `out before the heal, which waits 5 s:\n${said}`);
      await waitFor('the watch to say so', () => new RegExp(`watch: out of nginx: ${killed.name} \\((killed|exited)`).test(watch.stdout()), 5000);
      const inWatch = new RegExp(`out of nginx: ${killed.name} .*`).exec(watch.stdout())?.[0];
      t.diagnostic(`SIGKILL to marked down in the upstream file: ${outMs} ms as the test polls it (every 10 ms); the watch: ${inWatch}`);
      const ms = await untilWhole(f, 2, revision, 'the fleet whole after the SIGKILL');
      t.diagnostic(`whole again ${ms} ms later`);
    } finally {
      await stopWatch(watch);
    }
  });

  it('an instance of a revision the history does not know is reported and left alone through a heal; a crash loop (Docker restarting an instance again and again) is reported, and the fleet is whole once it stops', async (t) => {
    const f = await fleet('it-watch-loop');
    const revision = await f.at100(3);
    // Someone else's container with the fleet's labels but a revision the history lacks (another machine's fleetroll, a state restored from an older backup).
    const model = (await f.instances())[0]!;
    const stranger = await docker.createContainer({
      Image: 'fleetroll-example:1.0.0',
      name: `${f.names.service}-stranger`,
      Labels: { ...model.labels, [LABELS.revision]: 'someone-elses' },
      HostConfig: { NetworkMode: f.names.network, Init: true },
    });
    await stranger.start();
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
    const watch = await startCliUntil(
      ['watch', '-f', f.fleetFile({ replicas: 3 }), '--interval', '2s', '--settle', '1s'],
      /watch: whole at revision 1; .* which the fleet's history does not know: left alone/,
    );
    try {
      // A heal (an instance killed) must not take the stranger with it.
      const killed = (await f.instances()).find((i) => i.labels[LABELS.revision] === revision)!;
      await docker.getContainer(killed.id).kill({ signal: 'SIGKILL' });
      await waitFor('the heal of the killed instance', () => /watch: healed \(/.test(watch.stdout()), 90_000);
      const s = await stranger.inspect();
      assert.ok(s.State.Running && s.RestartCount === 0, `the stranger is untouched: ${s.State.Status}, ${s.RestartCount} restarts`);
      await stranger.remove({ force: true });
      await untilWhole(f, 3, revision, 'the fleet whole after the heal');

      // A crash loop: the app inside one instance dies four times in a row; Docker restarts it (restart: unless-stopped) each time.
      const looping = (await f.instances())[0]!;
      const c = docker.getContainer(looping.id);
      const t0 = Date.now();
      let outOfTraffic = false;
      for (let n = 1; n <= 4; n++) {
        await execa('docker', ['exec', looping.id, 'node', '-e', KILL_THE_APP], { reject: false });
        await waitFor(`restart ${n} of ${looping.name}`, async () => (await c.inspect()).RestartCount >= n, 60_000, 100);
        const up = parseUpstreamServers((await f.upstream()).content);
        if (!up.some((x) => x.address === looping.address && !x.down)) outOfTraffic = true;
      }
      await waitFor('the watch to name the crash loop', () => /watch: .*keeps being restarted by Docker \(\d+ restarts\)/.test(watch.stdout()), 90_000);
      const wholeMs = await untilWhole(f, 3, revision, 'the fleet whole once the crash loop stopped');
      const records = await load.stop();
      t.diagnostic(
        `crash loop of ${looping.name}: 4 restarts by Docker, named by the watch, out of nginx at a look between restarts: ${outOfTraffic}; whole ${Date.now() - t0} ms after the first crash (${wholeMs} ms of waiting); ${records.length} requests, ${failedOf(records).length} failed`,
      );
      assert.ok(
        (await f.instances()).some((i) => i.id === looping.id),
        'the looping instance is kept (Docker restarts it), not replaced',
      );
    } finally {
      await load.stop();
      await stranger.remove({ force: true }).catch(() => undefined);
      await stopWatch(watch);
    }
  });

  it('--once on a fleet missing an instance: one heal, exit 0, the fleet whole', async () => {
    const f = await fleet('it-watch-once');
    const revision = await f.at100(2);
    await docker.getContainer((await f.instances())[0]!.id).remove({ force: true });
    const r = await runCli(['watch', '-f', f.fleetFile({ replicas: 2 }), '--once', '--settle', '0s']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /watch: healed \(missing(, stray)?\) in [0-9.]+ s/);
    assert.equal(await notWhole(f, 2, revision), undefined);
  });
});
