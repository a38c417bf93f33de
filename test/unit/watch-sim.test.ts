/**
 * `fleetroll watch` itself (watchFleet, src/engine/watch.ts) over the
 * simulated world on the virtual clock: its looks are the real statusReport
 * and its heals the real runManaged in heal mode, on the simulated hosts and
 * nginx, with the fleet's state and locks in memory
 * (test/support/memory-state.ts). The invariants of every rollout and of a
 * heal (sim-invariants.ts, heal-checks.ts) are checked after every event of
 * the whole watch. test/unit/watch-loop.test.ts has the loop's own rows on
 * hand-made ports; test/unit/heal-sim.test.ts the heals themselves.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy, type ResolvedStrategy } from '../../src/core/strategy.js';
import { watchFleet } from '../../src/engine/watch.js';
import type { FleetState, RevisionRecord } from '../../src/ports.js';
import type { VirtualClock } from '../../src/sim/clock.js';
import { OLD_REVISION } from '../../src/sim/fleetAtStart.js';
import type { SimContainer, SimWorld } from '../../src/sim/ports.js';
import { simulatedFleet, type SimulatedFleet, type SimulationSetup } from '../../src/sim/simulate.js';
import { assertWhole, healChecks } from '../support/heal-checks.js';
import { MemoryLock, MemoryStateStore, MemoryYieldAsks } from '../support/memory-state.js';
import { invariants, T } from '../support/sim-invariants.js';

const INTERVAL_MS = 2000;
const SETTLE_MS = 1000;

const record = (number: number, hash: string, image: string, version: string): RevisionRecord => ({
  number,
  hash,
  image,
  version,
  port: 8080,
  env: {},
  envSecrets: {},
  changeCause: 'fleetroll deploy',
  who: 'ci@runner',
  when: '2026-12-03T00:00:00.000Z',
  outcome: 'complete',
});

/** The history a deploy of the simulated fleet leaves: the old revision, then the current one, both complete. */
function historyOf(sim: SimulatedFleet): FleetState {
  return {
    service: sim.fleet.service,
    nextRevision: 3,
    revisions: [record(1, OLD_REVISION, 'simulated:old', 'old'), record(2, sim.revision, sim.fleet.image, sim.fleet.version)],
  };
}

/** The watch's sleep on the virtual clock: ends early when the watch is stopped. */
function sleepOn(clock: VirtualClock, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = clock.timer(ms, done);
    signal.addEventListener('abort', done, { once: true });
    function done() {
      timer.cancel();
      signal.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** Someone removes a container (docker rm -f): it stops, and is gone. */
function removeByHand(w: SimWorld, c: SimContainer): void {
  w.exit(c);
  w.forget(c);
  w.emit({ kind: 'removed', c });
}

const named = (w: SimWorld, name: string) => [...w.containers.values()].find((c) => c.name === name)!;

/**
 * Runs the watch over a whole simulated fleet until a look after a heal finds
 * every instance ready and in every nginx (or 10 virtual minutes); `script`
 * schedules the faults on the virtual clock.
 */
async function watchOver(
  s: ResolvedStrategy,
  setup: Partial<SimulationSetup>,
  script: (sim: SimulatedFleet, lock: MemoryLock, store: MemoryStateStore, asks: MemoryYieldAsks) => void,
) {
  const inv = invariants(s, T);
  const hosts = Array.from({ length: setup.hosts ?? 1 }, (_, i) => ({ name: `h${i + 1}`, maxInstances: setup.maxInstances?.[i] }));
  const checks = healChecks(hosts);
  // The fleet as its deploy left it: every instance of the current revision, ready and in every nginx.
  const sim = simulatedFleet(s, T, { start: { instances: Array.from({ length: s.replicas }, () => ({})) }, ...setup, inspect: inv.setup.inspect });
  const { clock, world } = sim;
  inv.setup.world?.(world, clock);
  checks.world(world, clock);
  const lock = new MemoryLock('fleet simulated');
  const history = historyOf(sim);
  const store = new MemoryStateStore(history);
  const asks = new MemoryYieldAsks();
  script(sim, lock, store, asks);
  const watchLock = new MemoryLock('the watch of simulated');
  const stop = new AbortController();
  clock.timer(600_000, () => stop.abort());
  const sleeps: { at: number; ms: number }[] = [];
  const lines: string[] = [];
  const heals: { at: number; reasons: string; ok: boolean }[] = [];
  let wholeAt: number | undefined;
  const end = await clock.run(
    watchFleet({
      fleet: sim.fleet,
      deps: sim.deps,
      h: { store, lock, watchLock, yieldAsks: asks, who: 'test@sim' },
      signal: stop.signal,
      intervalMs: INTERVAL_MS,
      settleMs: SETTLE_MS,
      log: (l) => lines.push(`t=${clock.now()} ${l}`),
      sleep: (ms, signal) => {
        sleeps.push({ at: clock.now(), ms });
        return sleepOn(clock, ms, signal);
      },
      onLook: (r) => {
        const whole =
          r.upToDate && r.instances.every((i) => Object.values(i.upstreams).every((u) => u === 'up')) && Object.values(r.strays).every((x) => x.length === 0);
        if (whole && heals.length > 0) {
          wholeAt = clock.now();
          stop.abort();
        }
      },
      onHeal: (reasons, ok) => heals.push({ at: clock.now(), reasons: reasons.join(', '), ok }),
    }),
  );
  return { sim, end, sleeps, lines, heals, wholeAt, checks, history, store, lock, watchLock, violations: [...inv.checked.violations, ...checks.violations] };
}

describe('fleetroll watch over the simulated world', () => {
  it('an instance killed: one heal through the watch (statusReport, settle, runManaged in heal mode), the fleet whole again, its revision record untouched', async () => {
    const killAt = 5000;
    const r = await watchOver(resolveStrategy({ replicas: 4 }), { hosts: 2, loadBalancers: 2 }, ({ clock, world }) =>
      clock.timer(killAt, () => world.exit(named(world, 'new-2'))),
    );
    assert.deepEqual(r.violations, []);
    assert.deepEqual(
      r.heals.map((h) => [h.reasons, h.ok]),
      [['exited, missing', true]],
      r.lines.join('\n'),
    );
    // Out of both nginx on Docker's event itself, before the look it wakes: the heal finds no stray server left.
    assert.ok(r.lines.includes(`t=${killAt} out of nginx: new-2 (exited, code 0) 0 ms after the event`), r.lines.join('\n'));
    assert.deepEqual(r.end, { whole: true, heals: 1 });
    assertWhole(r.sim.world, r.sim.revision, 4, r.checks);
    // Seen at the next look, still there after the settle window, replaced once ready (3 s) and in nginx.
    assert.ok(
      r.wholeAt !== undefined && r.wholeAt <= killAt + INTERVAL_MS + SETTLE_MS + T.startupMs + INTERVAL_MS,
      `whole again at t=${r.wholeAt}\n${r.lines.join('\n')}`,
    );
    assert.deepEqual(await r.store.read(), r.history, 'the revision record as the deploy left it');
    assert.equal(r.store.writes, 0, 'a heal writes no state');
    assert.deepEqual(
      r.store.entries.filter((e) => e.phase === 'begin' && e.step === 'begin').map((e) => e.detail?.heal),
      ['exited, missing'],
      'the heal is journaled',
    );
    assert.deepEqual(r.lock.taken, ['fleetroll watch'], 'one heal took the fleet lock once');
    assert.ok(!r.lock.isHeld && !r.watchLock.isHeld, 'both locks released');
    assert.ok(
      r.watchLock.notes.some((n) => /^healed exited, missing in/.test(n)),
      `status says the watch's last action: ${r.watchLock.notes.join('; ')}`,
    );
  });

  it('the engine with the fleet state disappears and returns with an instance gone: the watch backs off 1, 2, 4 s, says so once, then heals once and the fleet is whole', async () => {
    const goneAt = 5000;
    const backAt = 12_000;
    const r = await watchOver(resolveStrategy({ replicas: 4 }), { hosts: 2, faults: { hostsGone: new Set() } }, ({ clock, world }) => {
      clock.timer(goneAt, () => {
        world.faults.hostsGone?.add('h1');
        // The host came back without one of its containers (a reboot that lost it).
        removeByHand(world, named(world, 'new-1'));
      });
      clock.timer(backAt, () => world.faults.hostsGone?.delete('h1'));
    });
    assert.deepEqual(r.violations, []);
    // Looks every 2 s until one fails: at once (t=5 s), woken by the engine's event for the container removed
    // (the simulated engine streams events like Docker's), then 1, 2, 4 s apart until the engine answers.
    const failedAt = r.sleeps.findIndex((x) => x.ms !== INTERVAL_MS);
    assert.deepEqual(
      r.sleeps.slice(failedAt, failedAt + 3),
      [
        { at: 5000, ms: 1000 },
        { at: 6000, ms: 2000 },
        { at: 8000, ms: 4000 },
      ],
      r.lines.join('\n'),
    );
    assert.equal(r.lines.filter((l) => /cannot see the fleet: host h1: the Docker engine does not answer/.test(l)).length, 1, r.lines.join('\n'));
    assert.deepEqual(
      r.heals.map((h) => [h.reasons, h.ok]),
      [['missing', true]],
      r.lines.join('\n'),
    );
    // The removal's event came before the engine went away: its instance was out of nginx at once.
    assert.ok(r.lines.includes(`t=${goneAt} out of nginx: new-1 (exited, code 0) 0 ms after the event`), r.lines.join('\n'));
    assert.ok(r.heals[0]!.at >= backAt, 'no heal while the engine was away');
    assert.deepEqual(r.end, { whole: true, heals: 1 });
    assertWhole(r.sim.world, r.sim.revision, 4, r.checks);
  });
});

describe('fleetroll watch: out of nginx on the event itself', () => {
  const upAt = (w: SimWorld, name: string) => w.routers.every((lb) => lb.up.has(named(w, name).address));

  it('while a deploy holds the rollout lock: the watch changes nothing and says once that it yields; after it, the heal', async () => {
    const killAt = 5000;
    let stillUp: boolean | undefined;
    const r = await watchOver(resolveStrategy({ replicas: 4 }), { loadBalancers: 2 }, ({ clock, world }, lock, store) => {
      // As a deploy does: the lock, then the state written (which tells the watch to read the lock again).
      clock.timer(4000, async () => {
        await lock.acquire('img', 'fleetroll deploy');
        await store.write((await store.read())!);
      });
      clock.timer(killAt, () => world.exit(named(world, 'new-2')));
      clock.timer(killAt + 3000, () => (stillUp = upAt(world, 'new-2')));
      clock.timer(20_000, () => void lock.release());
    });
    assert.deepEqual(r.violations, []);
    assert.equal(stillUp, true, 'the deploy, not the watch, acts on what it sees');
    assert.ok(!r.lines.some((l) => / out of nginx: /.test(l)), r.lines.join('\n'));
    assert.equal(r.lines.filter((l) => /yielding: fleetroll deploy \(test@memory, pid \d+\) holds the rollout lock/.test(l)).length, 1, r.lines.join('\n'));
    assert.ok(r.heals.length >= 1 && r.heals[0]!.at >= 20_000, `healed once the lock was free:\n${r.lines.join('\n')}`);
    assert.deepEqual(r.end, { whole: true, heals: 1 });
  });

  it('a deploy asks for the fleet while a heal runs: the heal ends with its step, the lock comes free, the watch says it steps back; the fleet whole', async () => {
    let askedAt: number | undefined;
    let freeAt: number | undefined;
    const r = await watchOver(resolveStrategy({ replicas: 4 }), { loadBalancers: 2 }, ({ clock, world }, lock, _store, asks) => {
      clock.timer(5000, () => world.exit(named(world, 'new-2')));
      // The deploy's side (engine/session.ts acquireLock): it finds the heal holding the lock and asks, then waits.
      const poll = () => {
        if (askedAt === undefined && lock.isHeld) {
          askedAt = clock.now();
          void asks.ask();
        } else if (askedAt !== undefined && freeAt === undefined && !lock.isHeld) {
          freeAt = clock.now();
          // The deploy took the lock, did its work and withdrew the ask; here it simply withdraws.
          void asks.withdraw();
          return;
        }
        clock.timer(50, poll);
      };
      clock.timer(5000, poll);
    });
    assert.deepEqual(r.violations, []);
    assert.ok(askedAt !== undefined && freeAt !== undefined, r.lines.join('\n'));
    assert.ok(freeAt - askedAt <= 10_000, `the lock free ${freeAt - askedAt} ms after the ask, within the deploy's 10 s:\n${r.lines.join('\n')}`);
    assert.equal(r.lines.filter((l) => /stepping back: a deploy asked for the fleet: the heal ended with its step/.test(l)).length, 1, r.lines.join('\n'));
    assert.ok(!r.lines.some((l) => /heal .* failed/.test(l)), r.lines.join('\n'));
    // The heal's step was finished, as at Ctrl-C (its new instance ready and in nginx): the fleet whole, no heal counted.
    assert.deepEqual(r.lock.taken, ['fleetroll watch']);
    assert.equal(r.end.whole, true);
    assertWhole(r.sim.world, r.sim.revision, 4, r.checks);
  });

  it("an event for a container that is not the fleet's (a network event names only an id): nothing changes", async () => {
    const r = await watchOver(resolveStrategy({ replicas: 2 }), {}, ({ clock, world }) => {
      clock.timer(3000, () => {
        for (const l of world.streams) l({ action: 'disconnect', id: 'not-a-fleet-container' }, 'h1');
      });
      // Then a real fault, so that the run ends with a heal.
      clock.timer(5000, () => world.exit(named(world, 'new-1')));
    });
    assert.deepEqual(r.violations, []);
    assert.deepEqual(
      r.lines.filter((l) => / out of nginx: /.test(l)),
      ['t=5000 out of nginx: new-1 (exited, code 0) 0 ms after the event'],
    );
  });
});

/**
 * An instance that stops answering readiness for good (its app deadlocked,
 * its container running): out of nginx at once by a heal that then ends (the
 * fleet's lock free for a deploy), reported while the watch waits for it, and
 * replaced once it has been unready for progressDeadlineSeconds (60 s here).
 */
describe('fleetroll watch: an instance unready for good', () => {
  const DEADLINE_S = 60;
  const unreadyAt = 5000;
  /** new-2 stops answering at 5 s, and answers again at `backAt` (never: Infinity); a deploy asks for the fleet's lock at 30 s. */
  const run = (backAt: number) => {
    let started = 0;
    let deployAt30: boolean | undefined;
    return watchOver(resolveStrategy({ replicas: 3 }), { loadBalancers: 2, progressDeadlineSeconds: DEADLINE_S }, ({ clock, world }, lock) => {
      lockOf.current = lock;
      const before = world.onEvent;
      world.onEvent = (e) => {
        before?.(e);
        if (e.kind === 'started') started++;
      };
      clock.timer(unreadyAt, () => (named(world, 'new-2').readyAt = backAt));
      clock.timer(30_000, () => {
        void lockOf.current?.acquire('img', 'fleetroll deploy').then(
          () => ((deployAt30 = true), lockOf.current?.release()),
          () => (deployAt30 = false),
        );
      });
    }).then((r) => ({ ...r, started, deployAt30 }));
  };
  /** The fleet lock of the run under way (watchOver makes it). */
  const lockOf: { current?: MemoryLock } = {};

  const rows: { name: string; backAt: number; check: (r: Awaited<ReturnType<typeof run>>) => void }[] = [
    {
      name: 'never answers again: taken out at once by a heal that ends there (the lock free for a deploy), reported once, replaced after progressDeadlineSeconds; the fleet then whole with replicas ready',
      backAt: Number.POSITIVE_INFINITY,
      check: (r) => {
        assert.deepEqual(
          r.heals.map((h) => [h.reasons, h.ok]),
          [
            ['unready', true],
            ['stuck', true],
          ],
          r.lines.join('\n'),
        );
        // Seen at the next look, healed after the settle window, and the heal over within a second: no wait for the instance.
        assert.ok(r.heals[0]!.at <= unreadyAt + INTERVAL_MS + SETTLE_MS + 1000, `the first heal ended at t=${r.heals[0]!.at}\n${r.lines.join('\n')}`);
        assert.equal(r.deployAt30, true, 'a deploy at 30 s gets the fleet lock');
        const said = r.lines.filter((l) =>
          /whole at revision 2 except new-2: unready, out of traffic since 1970-01-01T00:00:06Z; replaced if still unready at 1970-01-01T00:01:06Z$/.test(l),
        );
        assert.equal(said.length, 1, `reported once while it waits:\n${r.lines.join('\n')}`);
        assert.ok(!r.lines.some((l) => /whole at revision 2: 2 of 3 ready/.test(l)), 'never called whole with an instance unready');
        // Replaced once unready for the bound, from when the watch first saw it so (6 s).
        assert.ok(r.heals[1]!.at >= 6000 + DEADLINE_S * 1000, `replaced at t=${r.heals[1]!.at}`);
        assert.ok(
          r.heals[1]!.at <= 6000 + DEADLINE_S * 1000 + INTERVAL_MS + SETTLE_MS + T.stopMs + T.startupMs + 2000,
          `replaced at t=${r.heals[1]!.at}\n${r.lines.join('\n')}`,
        );
        assert.equal(r.started, 1, 'one replacement');
        assert.ok(![...r.sim.world.containers.values()].some((c) => c.name === 'new-2'), 'the stuck container is removed');
        assert.deepEqual(r.end, { whole: true, heals: 2 });
        assertWhole(r.sim.world, r.sim.revision, 3, r.checks);
        assert.ok(
          r.lines.some((l) => /healed \(stuck\) in [\d.]+ s: revision 2 whole again$/.test(l)),
          r.lines.join('\n'),
        );
      },
    },
    {
      name: 'answers again at 20 s, before the bound: put back in (out of traffic), not replaced',
      backAt: 20_000,
      check: (r) => {
        assert.deepEqual(
          r.heals.map((h) => [h.reasons, h.ok]),
          [
            ['unready', true],
            ['out of traffic', true],
          ],
          r.lines.join('\n'),
        );
        assert.ok(r.heals[1]!.at < 20_000 + INTERVAL_MS + SETTLE_MS + 1000, `put back at t=${r.heals[1]!.at}`);
        assert.equal(r.started, 0, 'nothing replaced');
        assert.ok(
          [...r.sim.world.containers.values()].some((c) => c.name === 'new-2' && c.state === 'running'),
          'the same container serves again',
        );
        assert.deepEqual(r.end, { whole: true, heals: 2 });
        assertWhole(r.sim.world, r.sim.revision, 3, r.checks);
      },
    },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      const r = await run(row.backAt);
      assert.deepEqual(r.violations, []);
      assert.ok(!r.lock.isHeld && !r.watchLock.isHeld, 'both locks released');
      row.check(r);
    });
  }
});
