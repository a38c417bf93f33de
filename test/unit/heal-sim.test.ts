/**
 * Heal mode (`fleetroll watch`'s rollout of the current revision, DeployOptions
 * heal and knownRevisions) on the simulated world: a named table of fleets
 * found at the current revision with faults (sim/fleetAtStart.ts), each
 * healed by the real controller with the invariants every rollout keeps and
 * a heal's own (test/support/heal-checks.ts) checked after every event, and
 * how it must end: the fleet whole and every nginx routing to exactly it.
 * test/unit/watch-sim.test.ts drives the watch's loop over the same world.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy, type ResolvedStrategy } from '../../src/core/strategy.js';
import { LABELS } from '../../src/ports.js';
import type { FleetAtStart } from '../../src/sim/fleetAtStart.js';
import { isReady } from '../../src/sim/ports.js';
import type { SimulationSetup, SimulationTimings } from '../../src/sim/simulate.js';
import { assertWhole, healChecks } from '../support/heal-checks.js';
import { ANALYSIS, checkedRun, logsSaying, T } from '../support/sim-invariants.js';

interface Scenario {
  name: string;
  s: ResolvedStrategy;
  start: FleetAtStart;
  t?: Partial<SimulationTimings>;
  setup?: Partial<SimulationSetup>;
  /** Containers the heal starts. */
  started: number;
  /** Reloads each nginx takes: one change per load balancer per step. */
  reloads?: number;
  /** Running instances of the current revision per host at the end. */
  perHost?: Record<string, number>;
  /** Access logs that would fail the new revision's analysis: a heal must not read them. */
  failingAnalysis?: boolean;
  /** How the heal fails, and how many ready servers every nginx still routes to then; undefined: it completes, the fleet whole. */
  fails?: { message: RegExp; serving: number };
  /** Instances (container names) the heal leaves running unready and out of every nginx: the watch's from then on. */
  leftOut?: string[];
  /** The heal ends within this long on the virtual clock, ms. */
  endsWithinMs?: number;
}

const rolling = (replicas: number) => resolveStrategy({ replicas });
/** A fleet of n ready instances of the current revision in nginx, with `faults` after them. */
const fleet = (n: number, ...faults: FleetAtStart['instances'][number][]): FleetAtStart['instances'] => [...Array.from({ length: n }, () => ({})), ...faults];

async function play(row: Scenario): Promise<void> {
  const hosts = Array.from({ length: row.setup?.hosts ?? 1 }, (_, i) => ({ name: `h${i + 1}`, maxInstances: row.setup?.maxInstances?.[i] }));
  const checks = healChecks(hosts);
  const logs = row.failingAnalysis ? logsSaying(10) : undefined;
  // A heal that waits for something that never comes would run forever on the virtual clock: 10 minutes end it.
  const guard = new AbortController();
  let started = 0;
  const { outcome, world, violations, events } = await checkedRun(
    row.s,
    { ...T, ...row.t },
    () => ({
      heal: true,
      start: row.start,
      progressDeadlineSeconds: 60,
      signal: guard.signal,
      ...(logs ? { analysis: ANALYSIS, trafficWindow: logs.trafficWindow } : {}),
      ...row.setup,
      world: (w, clock) => {
        logs?.world(w);
        clock.timer(600_000, () => guard.abort());
        const before = w.onEvent;
        w.onEvent = (e) => {
          before?.(e);
          if (e.kind === 'started') started++;
        };
      },
    }),
    checks,
  );
  assert.deepEqual(violations, []);
  assert.ok(events > 0, 'the checks saw events');
  assert.deepEqual(logs?.asked ?? [], [], 'a heal reads no analysis window: its revision was judged when it was deployed');
  if (!row.fails) assert.ok(!(outcome instanceof Error), String(outcome));
  assert.equal(started, row.started, 'containers the heal started');
  if (row.reloads !== undefined) for (const r of world.routers) assert.equal(r.reloads, row.reloads, `${r.name}'s reloads`);
  if (row.fails) {
    assert.ok(outcome instanceof Error, 'the heal fails');
    assert.match(outcome.message, row.fails.message);
    assert.doesNotMatch(outcome.message, /rollback|rolled back/, 'a heal fails as it is: it keeps the revision it heals');
    for (const r of world.routers) {
      const up = [...r.up].map((a) => world.byAddress(a));
      assert.ok(
        up.every((c) => c && isReady(world, c)),
        `${r.name} routes only to ready instances`,
      );
      assert.equal(up.length, row.fails.serving, `${r.name} serves the rest`);
    }
    return;
  }
  assert.ok(!(outcome instanceof Error), String(outcome));
  const { revision } = (outcome as { deploy: { revision: string } }).deploy;
  if (row.endsWithinMs !== undefined) {
    const took = (outcome as { durationMs: number }).durationMs;
    assert.ok(took <= row.endsWithinMs, `the heal ended at t=${took}, not waiting for what it left out (within ${row.endsWithinMs} ms)`);
  }
  const left = (row.leftOut ?? []).map((name) => [...world.containers.values()].find((c) => c.name === name));
  for (const [k, c] of left.entries()) assert.ok(c && c.state === 'running' && !isReady(world, c), `${row.leftOut![k]} left running, unready`);
  assertWhole(
    world,
    revision,
    row.s.replicas,
    checks,
    left.map((c) => c!.address),
  );
  if (row.perHost) {
    const perHost: Record<string, number> = {};
    for (const c of world.containers.values())
      if (c.state === 'running' && c.labels[LABELS.revision] === revision) perHost[c.host] = (perHost[c.host] ?? 0) + 1;
    assert.deepEqual(perHost, row.perHost, 'instances per host');
  }
}

describe('heal mode on the simulated world', () => {
  const rows: Scenario[] = [
    {
      name: 'an exited instance: removed and replaced; its address out of nginx at the first change, the replacement in once ready',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'exited' }) },
      started: 1,
      reloads: 2,
    },
    {
      name: 'a removed instance that nginx still routes to: replaced',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'removed' }) },
      started: 1,
      reloads: 2,
    },
    {
      name: 'an unready instance nginx routes to, two load balancers: out of both in one change, and the heal ends there without waiting for it to answer (8 s: the watch puts it back)',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'unready', readyAtMs: 8000 }) },
      setup: { loadBalancers: 2 },
      started: 0,
      reloads: 1,
      leftOut: ['new-3'],
      endsWithinMs: 1000,
    },
    {
      name: 'an unready instance that never answers again: out of nginx at once, not replaced, and the heal ends there, well before its deadline, nginx listing the others',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'unready' }) },
      started: 0,
      reloads: 1,
      leftOut: ['new-3'],
      endsWithinMs: 1000,
    },
    {
      name: 'the same with onFailure rollback: the heal ends as soon, nothing rolled back',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'unready' }) },
      setup: { onFailure: 'rollback' },
      started: 0,
      leftOut: ['new-3'],
      endsWithinMs: 1000,
    },
    {
      name: 'an unready instance already out of nginx, beside an exited one: the heal replaces the exited one and ends once the replacement is in, not waiting for the unready one',
      s: rolling(3),
      start: { instances: fleet(1, { state: 'exited' }, { state: 'unready', inNginx: false }) },
      started: 1,
      reloads: 2,
      leftOut: ['new-3'],
      endsWithinMs: 5000,
    },
    {
      name: 'a stuck instance named by the watch (unready for its bound): stopped and replaced under maxSurge, the replacement in once ready, no more than replicas + maxSurge alive',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'unready', inNginx: false }) },
      setup: { replace: ['new-3'] },
      started: 1,
      reloads: 1,
      endsWithinMs: 10_000,
    },
    {
      name: 'a stuck instance still in nginx, two load balancers: out of both and replaced',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'unready' }) },
      setup: { replace: ['new-3'], loadBalancers: 2 },
      started: 1,
      endsWithinMs: 10_000,
    },
    {
      name: 'a stuck instance, maxSurge 0 and TerminationComplete: its replacement starts once it is gone',
      s: resolveStrategy({
        replicas: 3,
        replacementPolicy: 'TerminationComplete',
        strategy: { type: 'RollingUpdate', rollingUpdate: { maxSurge: 0, maxUnavailable: 1 } },
      } as never),
      start: { instances: fleet(2, { state: 'unready', inNginx: false }) },
      setup: { replace: ['new-3'] },
      started: 1,
      endsWithinMs: 10_000,
    },
    {
      name: 'a stuck instance on a host at maxInstances: its replacement waits for its room, never over the limit',
      s: rolling(3),
      start: { instances: [{ host: 'h1' }, { host: 'h1', state: 'unready', inNginx: false }, { host: 'h2' }] },
      setup: { hosts: 2, maxInstances: [2, 1], replace: ['new-2'] },
      started: 1,
      perHost: { h1: 2, h2: 1 },
    },
    {
      name: 'a stuck instance that answers by the time the heal begins: kept, nothing started',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'unready', readyAtMs: 0, inNginx: false }) },
      setup: { replace: ['new-3'] },
      started: 0,
      reloads: 1,
    },
    {
      name: 'an instance back at a new address: nginx gets the new address in one change, nothing restarted',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'moved' }) },
      started: 0,
      reloads: 1,
    },
    {
      name: 'a server nginx routes to that no container has: out in one change',
      s: rolling(3),
      start: { instances: fleet(3), strays: 2 },
      started: 0,
      reloads: 1,
    },
    {
      name: 'a ready instance out of nginx: put back in one change',
      s: rolling(3),
      start: { instances: fleet(2, { inNginx: false }) },
      started: 0,
      reloads: 1,
    },
    {
      name: 'an instance of the old revision: replaced as a deploy would, drained before it stops',
      s: rolling(3),
      start: { instances: fleet(2, { revision: 'old' }) },
      started: 1,
    },
    {
      name: 'several faults at once behind two load balancers (exited, moved, unready for 5 s, a stray): one change per load balancer for all that is wrong, then one per step',
      s: rolling(4),
      start: { instances: fleet(1, { state: 'exited' }, { state: 'moved' }, { state: 'unready', readyAtMs: 5000 }), strays: 1 },
      setup: { loadBalancers: 2 },
      started: 1,
      // All that is wrong out (and the moved one at its address) in one, the replacement in at 3 s; the unready one is the watch's (back at 5 s).
      reloads: 2,
      leftOut: ['new-4'],
    },
    {
      name: 'several faults at once, the unready one back as the replacement is ready: they go in together',
      s: rolling(4),
      start: { instances: fleet(1, { state: 'removed' }, { state: 'moved' }, { state: 'unready', readyAtMs: 3000 }), strays: 1 },
      setup: { loadBalancers: 2 },
      started: 1,
      reloads: 2,
    },
    {
      name: 'slow reloads (4 s), two load balancers: a removed instance and a stray',
      s: rolling(3),
      t: { reloadMs: 4000 },
      start: { instances: fleet(2, { state: 'removed' }), strays: 1 },
      setup: { loadBalancers: 2 },
      started: 1,
      reloads: 2,
    },
    {
      name: 'an instance of an unknown revision out of nginx, beside an exited one: never stopped, removed or recreated, and left out',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'exited' }, { revision: 'unknown', inNginx: false }) },
      started: 1,
      reloads: 2,
    },
    {
      name: 'an instance of an unknown revision nginx routes to, beside an exited one: never stopped, removed or recreated, and nginx goes on routing to it',
      s: rolling(3),
      start: { instances: fleet(2, { state: 'exited' }, { revision: 'unknown' }) },
      started: 1,
      reloads: 2,
    },
    {
      name: 'three hosts: two instances exited on h3 are replaced there, the spread even',
      s: rolling(6),
      start: { instances: [{ host: 'h1' }, { host: 'h1' }, { host: 'h2' }, { host: 'h2' }, { host: 'h3', state: 'exited' }, { host: 'h3', state: 'exited' }] },
      setup: { hosts: 3 },
      started: 2,
      perHost: { h1: 2, h2: 2, h3: 2 },
    },
    {
      name: 'maxInstances: the replacement goes to the host with room, not the one the spread prefers',
      s: rolling(3),
      start: { instances: [{ host: 'h1' }, { host: 'h2' }, { host: 'h2', state: 'removed' }] },
      setup: { hosts: 2, maxInstances: [1, 3] },
      started: 1,
      perHost: { h1: 1, h2: 2 },
    },
    {
      name: 'maxInstances counts a container of an unknown revision on the host: the replacement goes to the host with room',
      s: rolling(4),
      start: {
        instances: [{ host: 'h1' }, { host: 'h2' }, { host: 'h2' }, { host: 'h1', state: 'removed' }, { host: 'h1', revision: 'unknown', inNginx: false }],
      },
      setup: { hosts: 2, maxInstances: [2, 3] },
      started: 1,
      perHost: { h1: 1, h2: 3 },
    },
  ];
  for (const row of rows) it(row.name, () => play(row));
});

/**
 * A heal keeps a revision that its deploy already took through the
 * strategy's steps: it runs none of them again (canary steps, an analysis
 * that could roll the fleet back, waiting for fleetroll promote), or it
 * would stop healthy instances, switch users to an old instance, or hold the
 * fleet's lock until an operator comes.
 */
describe('heal mode runs no strategy steps', () => {
  const canary = resolveStrategy({
    replicas: 3,
    strategy: {
      type: 'Canary',
      canary: { steps: [{ setWeight: 30 }, { pause: { duration: 5 } }] },
      rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
    } as never,
  });
  const blueGreen = (more: Record<string, unknown> = {}) =>
    resolveStrategy({ replicas: 3, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 30, ...more } } });
  const rows: Scenario[] = [
    {
      name: 'Canary, an instance of the old revision: replaced as a rolling update, no current instance stopped for a canary weight',
      s: canary,
      start: { instances: fleet(2, { revision: 'old' }) },
      started: 1,
    },
    {
      name: 'BlueGreen whose analysis would fail, an instance of the old revision: replaced, no analysis, no switch back to it',
      s: blueGreen(),
      start: { instances: fleet(2, { revision: 'old' }) },
      failingAnalysis: true,
      started: 1,
    },
    {
      name: 'BlueGreen with autoPromote false, an exited instance: the replacement goes in without waiting for fleetroll promote',
      s: blueGreen({ autoPromote: false }),
      start: { instances: fleet(2, { state: 'exited' }) },
      // As runManaged asks it: the state's promote flag, not set.
      setup: { promoted: async () => false },
      started: 1,
      reloads: 2,
    },
    {
      name: 'BlueGreen, an unready instance nginx routes to: out at once, and the heal ends without waiting for it (no switch to wait for)',
      s: blueGreen(),
      start: { instances: fleet(2, { state: 'unready' }) },
      started: 0,
      reloads: 1,
      leftOut: ['new-3'],
      endsWithinMs: 1000,
    },
    {
      name: 'BlueGreen, a stuck instance named by the watch: replaced, the replacement in without a switch',
      s: blueGreen(),
      start: { instances: fleet(2, { state: 'unready', inNginx: false }) },
      setup: { replace: ['new-3'] },
      started: 1,
      endsWithinMs: 10_000,
    },
  ];
  for (const row of rows) it(row.name, () => play(row));
});
