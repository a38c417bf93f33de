/**
 * Each strategy driver (src/engine/strategies) on the simulated ports and a
 * virtual clock: a named table of scenarios per driver (fleet sizes, surge
 * and unavailable, slow reloads, slow and failing readiness, crashes, and the
 * strategy's own ways back: an interrupt, a switch back, an abort), each run
 * with the invariants every strategy keeps and the driver's own checked after
 * every event (test/support/sim-invariants.ts). test/unit/controller.test.ts
 * has the hand-worked rollouts and the property tests.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planRollout } from '../../src/core/plan.js';
import { resolveStrategy, type ResolvedStrategy } from '../../src/core/strategy.js';
import { ExitCode, FleetrollError } from '../../src/errors.js';
import { LABELS } from '../../src/ports.js';
import type { SimulationSetup, SimulationTimings } from '../../src/sim/simulate.js';
import {
  ANALYSIS,
  blueGreenChecks,
  canaryChecks,
  checkedRun,
  logsSaying,
  rollingChecks,
  runningVersions,
  T,
  type DriverChecks,
} from '../support/sim-invariants.js';

interface Scenario {
  name: string;
  s: ResolvedStrategy;
  t?: Partial<SimulationTimings>;
  /** More of the setup; `now` reads the virtual clock (to undo or abort at a time). */
  setup?: (now: () => number) => Partial<SimulationSetup>;
  /** An analysis (the gate, or a canary's analysis steps) reading access logs that pass or fail it. */
  analysis?: 'passes' | 'fails';
  /** How the rollout fails (exit code, default 1, and message); undefined: it completes, every instance new. */
  fails?: { exit?: number; message: RegExp };
  /**
   * What a failed rollout leaves in service in every nginx: 'available', at least minAvailable running
   * instances; 'old', the whole old set and nothing else; 'alone', that, and the new set removed.
   */
  serving?: 'available' | 'old' | 'alone';
}

const never = new Set(['new']);
const crashes = { crashAfterReadyMs: { versions: never, ms: 1000 } };

/** Runs one scenario under `invariants` and the driver's checks, and checks how it ended. */
async function play(row: Scenario, checks: DriverChecks): Promise<void> {
  const logs = row.analysis ? logsSaying(row.analysis === 'fails' ? 10 : 0) : undefined;
  const initial = row.setup?.(() => 0).initialReplicas ?? row.s.replicas;
  const { outcome, world, violations, events } = await checkedRun(
    row.s,
    { ...T, ...row.t },
    (now) => ({
      progressDeadlineSeconds: 60,
      ...(logs ? { trafficWindow: logs.trafficWindow, ...(row.s.type !== 'Canary' ? { analysis: ANALYSIS } : {}) } : {}),
      ...row.setup?.(now),
      ...(logs ? { world: logs.world } : {}),
    }),
    checks,
  );
  assert.deepEqual(violations, []);
  assert.ok(events > 0, 'the checks saw events');
  if (!row.fails) {
    assert.ok(!(outcome instanceof Error), String(outcome));
    assert.deepEqual(runningVersions(world), Array<string>(row.s.replicas).fill('new'));
    // Done means served: every nginx routes to the whole new set, and nothing else.
    for (const r of world.routers) {
      const up = [...r.up].map((a) => world.byAddress(a));
      assert.deepEqual(
        up.map((c) => `${c?.labels[LABELS.version]} ${c?.state}`),
        Array<string>(row.s.replicas).fill('new running'),
        `${r.name} serves the whole new set at the end`,
      );
    }
    return;
  }
  assert.ok(outcome instanceof FleetrollError, String(outcome));
  assert.equal(outcome.exitCode, row.fails.exit ?? ExitCode.rolloutFailed, outcome.message);
  assert.match(outcome.message, row.fails.message);
  for (const r of world.routers) {
    const up = [...r.up].map((a) => world.byAddress(a));
    assert.ok(
      up.every((c) => c?.state === 'running'),
      `${r.name} routes only to running instances`,
    );
    if (row.serving === 'available') assert.ok(up.length >= row.s.minAvailable, `${r.name} routes to ${up.length} >= minAvailable ${row.s.minAvailable}`);
    else if (row.serving)
      assert.deepEqual(
        up.map((c) => c?.labels[LABELS.version]),
        Array<string>(initial).fill('old'),
        `${r.name} routes to the whole old set alone`,
      );
  }
  if (row.serving === 'alone') assert.deepEqual(runningVersions(world).sort(), Array<string>(initial).fill('old'), 'the new set is gone');
}

/** Aborts the run (SIGINT) at the first drain. */
function interruptAtFirstDrain(): Partial<SimulationSetup> {
  const ac = new AbortController();
  return { signal: ac.signal, events: (e) => e.type === 'draining' && ac.abort() };
}

describe('RollingUpdate and Recreate (RollingDriver)', () => {
  const rolling = (replicas: number, maxSurge: number | string, maxUnavailable: number | string, policy?: string) =>
    resolveStrategy({ replicas, strategy: { rollingUpdate: { maxSurge, maxUnavailable } }, replacementPolicy: { own: policy } });
  const recreate = (replicas: number) => resolveStrategy({ replicas, strategy: { type: 'Recreate' } });
  const rows: Scenario[] = [
    { name: '1 replica, 1/0', s: rolling(1, 1, 0) },
    { name: '0/1 on 4', s: rolling(4, 0, 1) },
    { name: '1/0 on 4', s: rolling(4, 1, 0) },
    { name: '3/0 on 3 (surge the whole fleet)', s: rolling(3, 3, 0) },
    { name: '25%/25% on 8, two hosts', s: rolling(8, '25%', '25%'), setup: () => ({ hosts: 2 }) },
    { name: '2/2 on 6, TerminationComplete, jitter', s: rolling(6, 2, 2, 'TerminationComplete'), t: { jitter: 0.4, seed: 7 } },
    { name: 'slow reloads (4 s), 1/1 on 5, two load balancers', s: rolling(5, 1, 1), t: { reloadMs: 4000 }, setup: () => ({ loadBalancers: 2 }) },
    { name: 'slow readiness (20 s to ready), 0/2 on 6', s: rolling(6, 0, 2), t: { startupMs: 20_000 } },
    { name: 'minReadySeconds 5, 1/0 on 3', s: rolling(3, 1, 0), t: { minReadyMs: 5000 } },
    { name: 'scale up 3 → 6, 1/0', s: rolling(6, 1, 0), setup: () => ({ initialReplicas: 3 }) },
    { name: 'scale down 6 → 3, 1/1', s: rolling(3, 1, 1), setup: () => ({ initialReplicas: 6 }) },
    {
      name: 'never ready, 1/0 on 3: fails at the deadline, the old set serving',
      s: rolling(3, 1, 0),
      setup: () => ({ faults: { neverReady: never } }),
      fails: { message: /made no progress for 60 s/ },
      serving: 'old',
    },
    {
      name: 'never ready, 0/1 on 4: fails at the deadline, minAvailable serving',
      s: rolling(4, 0, 1),
      setup: () => ({ faults: { neverReady: never } }),
      fails: { message: /made no progress for 60 s/ },
      serving: 'available',
    },
    {
      name: 'new instances crash before minReadySeconds, 1/0 on 3: fails, the old set serving',
      s: rolling(3, 1, 0),
      t: { minReadyMs: 5000 },
      setup: () => ({ faults: crashes }),
      fails: { message: /within its monitor window/ },
      serving: 'old',
    },
    { name: 'old instances exit as soon as they are drained, 0/1 on 3', s: rolling(3, 0, 1), setup: () => ({ faults: { exitWhenMarkedDown: true } }) },
    {
      name: 'interrupted at the first drain, 0/1 on 4: exit 130, the fleet serving',
      s: rolling(4, 0, 1),
      setup: interruptAtFirstDrain,
      fails: { exit: ExitCode.interrupted, message: /interrupted/ },
      serving: 'available',
    },
    { name: 'analysis after the first wave passes, 1/0 on 4', s: rolling(4, 1, 0), analysis: 'passes' },
    {
      name: 'analysis after the first wave passes, slow reloads (4 s), 2/0 on 6, two load balancers',
      s: rolling(6, 2, 0),
      t: { reloadMs: 4000 },
      setup: () => ({ loadBalancers: 2 }),
      analysis: 'passes',
    },
    {
      name: 'analysis after the first wave fails, 1/0 on 4: stops at the first wave',
      s: rolling(4, 1, 0),
      analysis: 'fails',
      fails: { message: /analysis after the first wave: analysis failed/ },
      serving: 'available',
    },
    {
      name: 'a rollback whose target is already in service: the failed instance stops slower (20 s) than the deadline (5 s); completes, scaling down is progress',
      s: rolling(3, 1, 0),
      t: { stopMs: 20_000 },
      setup: () => ({ progressDeadlineSeconds: 5, start: { instances: [{}, {}, {}, { revision: 'old', state: 'unready', inNginx: false }] } }),
    },
    { name: 'Recreate on 1', s: recreate(1) },
    { name: 'Recreate on 4, two hosts', s: recreate(4), setup: () => ({ hosts: 2 }) },
    {
      name: 'Recreate on 5, slow reloads (4 s), two load balancers, jitter',
      s: recreate(5),
      t: { reloadMs: 4000, jitter: 0.3, seed: 3 },
      setup: () => ({ loadBalancers: 2 }),
    },
    { name: 'Recreate on 3, slow readiness (20 s)', s: recreate(3), t: { startupMs: 20_000 } },
    {
      name: 'Recreate on 3, never ready: fails at the deadline',
      s: recreate(3),
      setup: () => ({ faults: { neverReady: never } }),
      fails: { message: /made no progress for 60 s/ },
    },
  ];
  for (const row of rows) {
    it(row.name, () => play(row, rollingChecks(row.s, row.analysis ? (planRollout(row.s).waves[1]?.[1] ?? row.s.replicas) : undefined)));
  }
});

describe('BlueGreen (BlueGreenDriver)', () => {
  const blueGreen = (replicas: number, scaleDownDelaySeconds = 30, more: Record<string, unknown> = {}) =>
    resolveStrategy({ replicas, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds, ...more } } });
  const undoAt = (ms: number) => (now: () => number) => ({ switchBack: async () => now() >= ms });
  const rows: Scenario[] = [
    { name: '1 replica', s: blueGreen(1) },
    { name: '4 replicas, two load balancers', s: blueGreen(4), setup: () => ({ loadBalancers: 2 }) },
    { name: '6 replicas on three hosts, jitter', s: blueGreen(6), t: { jitter: 0.4, seed: 5 }, setup: () => ({ hosts: 3 }) },
    { name: 'scaleDownDelaySeconds 0 (shorter than the drain)', s: blueGreen(3, 0) },
    { name: 'slow reloads (4 s), two load balancers', s: blueGreen(4), t: { reloadMs: 4000 }, setup: () => ({ loadBalancers: 2 }) },
    { name: 'slow readiness (20 s), 5 replicas', s: blueGreen(5), t: { startupMs: 20_000 } },
    { name: 'scale up 2 → 4', s: blueGreen(4), setup: () => ({ initialReplicas: 2 }) },
    {
      name: 'never ready: fails at the deadline, the old set serving',
      s: blueGreen(3),
      setup: () => ({ faults: { neverReady: never } }),
      fails: { message: /made no progress for 60 s/ },
      serving: 'old',
    },
    {
      name: 'new instances crash before minReadySeconds: fails, the old set serving',
      s: blueGreen(3),
      t: { minReadyMs: 5000 },
      setup: () => ({ faults: crashes }),
      fails: { message: /within its monitor window/ },
      serving: 'old',
    },
    { name: 'old instances exit as soon as they are switched out', s: blueGreen(3), setup: () => ({ faults: { exitWhenMarkedDown: true } }) },
    { name: 'preview upstream, autoPromote', s: blueGreen(3, 30, { previewUpstream: 'preview_1' }) },
    {
      name: 'first deploy (nothing running) with a preview upstream',
      s: blueGreen(3, 2, { previewUpstream: 'preview_1' }),
      setup: () => ({ initialReplicas: 0 }),
    },
    { name: 'first deploy (nothing running)', s: blueGreen(3), setup: () => ({ initialReplicas: 0 }) },
    {
      name: 'preview upstream, autoPromote false: promoted at 20 s',
      s: blueGreen(3, 10, { previewUpstream: 'preview_1', autoPromote: false }),
      setup: (now) => ({ promoted: async () => now() >= 20_000 }),
    },
    {
      name: 'switch back (undo) 7 s after the switch: the old set back in one reload, the new set removed',
      s: blueGreen(3),
      setup: undoAt(10_000),
      fails: { message: /rolled back \(undo\)/ },
      serving: 'alone',
    },
    {
      name: 'switch back with slow reloads (4 s) and two load balancers',
      s: blueGreen(4),
      t: { reloadMs: 4000 },
      setup: (now) => ({ loadBalancers: 2, ...undoAt(20_000)(now) }),
      fails: { message: /rolled back \(undo\)/ },
      serving: 'alone',
    },
    {
      name: 'switch back asked before the switch: ignored, the rollout completes',
      s: blueGreen(3, 5),
      setup: (now) => ({ switchBack: async () => now() < 2000 }),
    },
    { name: 'analysis after the switch passes', s: blueGreen(3, 60), analysis: 'passes' },
    {
      name: 'analysis after the switch fails: switched back while the old set waits',
      s: blueGreen(3, 60),
      analysis: 'fails',
      fails: { message: /rolled back \(the analysis failed\)/ },
      serving: 'alone',
    },
    {
      name: 'analysis fails with slow reloads (4 s) and two load balancers',
      s: blueGreen(4, 60),
      t: { reloadMs: 4000 },
      setup: () => ({ loadBalancers: 2 }),
      analysis: 'fails',
      fails: { message: /rolled back \(the analysis failed\)/ },
      serving: 'alone',
    },
  ];
  for (const row of rows) it(row.name, () => play(row, blueGreenChecks(row.s, row.setup?.(() => 0).initialReplicas)));
});

describe('Canary (CanaryDriver)', () => {
  type Step = { setWeight: number } | { pause: { duration?: number } } | { analysis: Record<string, unknown> };
  const canary = (replicas: number, steps: Step[], extra: Record<string, unknown> = {}) => {
    const s = resolveStrategy({
      replicas,
      strategy: { type: 'Canary', canary: { steps, stickyKey: 'header:X-User', ...extra }, rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } as never,
    });
    if (s.type === 'Canary') for (const st of s.canary.steps) if (st.kind === 'analysis') st.spec = ANALYSIS;
    return s;
  };
  const pause = (duration?: number): Step => ({ pause: duration === undefined ? {} : { duration } });
  const w = (setWeight: number): Step => ({ setWeight });
  const analysis: Step = { analysis: {} };
  const abortAt = (ms: number) => (now: () => number) => ({ aborted: async () => now() >= ms });
  const rows: Scenario[] = [
    { name: '1 replica: setWeight 10, pause 5 s', s: canary(1, [w(10), pause(5)]) },
    { name: '4 replicas: setWeight 25, pause 10 s, setWeight 50, pause 10 s', s: canary(4, [w(25), pause(10), w(50), pause(10)]) },
    {
      name: '5 replicas, two load balancers: 20, 40, 60, 80 with pauses',
      s: canary(5, [w(20), pause(5), w(40), pause(5), w(60), pause(5), w(80)]),
      setup: () => ({ loadBalancers: 2 }),
    },
    { name: 'back to 0: setWeight 50, pause, setWeight 0, pause', s: canary(4, [w(50), pause(10), w(0), pause(10)]) },
    { name: 'ends with setWeight 100 (a switch)', s: canary(4, [w(25), pause(10), w(100)]) },
    { name: 'setWeight 100 mid-steps, then down to 10', s: canary(3, [w(100), pause(5), w(10), pause(5)]) },
    { name: 'canaryReplicas 2 on 6: 10%, 30%', s: canary(6, [w(10), pause(5), w(30)], { canaryReplicas: 2 }) },
    { name: 'canary.force: a header sends testers to the canary', s: canary(4, [w(25), pause(10), w(50)], { force: 'header:X-Canary' }) },
    { name: 'jitter on three hosts', s: canary(6, [w(33), pause(5), w(66), pause(5)]), t: { jitter: 0.4, seed: 11 }, setup: () => ({ hosts: 3 }) },
    {
      name: 'slow reloads (4 s), two load balancers: 25, pause, 50',
      s: canary(4, [w(25), pause(5), w(50)]),
      t: { reloadMs: 4000 },
      setup: () => ({ loadBalancers: 2 }),
    },
    { name: 'slow readiness (20 s): 25, pause', s: canary(4, [w(25), pause(5)]), t: { startupMs: 20_000 } },
    {
      name: 'never ready: fails at the deadline, the stable set serving',
      s: canary(3, [w(30), pause(5)]),
      setup: () => ({ faults: { neverReady: never } }),
      fails: { message: /made no progress for 60 s/ },
      serving: 'old',
    },
    {
      name: 'canaries crash before minReadySeconds: fails, the stable set serving',
      s: canary(3, [w(30), pause(5)]),
      t: { minReadyMs: 5000 },
      setup: () => ({ faults: crashes }),
      fails: { message: /within its monitor window/ },
      serving: 'old',
    },
    {
      name: 'abort during an open pause: the canary out in one reload, removed',
      s: canary(3, [w(30), pause()]),
      setup: abortAt(30_000),
      fails: { message: /canary aborted \(fleetroll abort\)/ },
      serving: 'alone',
    },
    {
      name: 'abort at 50% with slow reloads (4 s) and two load balancers',
      s: canary(4, [w(25), pause(5), w(50), pause()]),
      t: { reloadMs: 4000 },
      setup: (now) => ({ loadBalancers: 2, ...abortAt(60_000)(now) }),
      fails: { message: /canary aborted \(fleetroll abort\)/ },
      serving: 'alone',
    },
    {
      name: 'promote during an open pause skips the rest',
      s: canary(3, [w(30), pause(), w(60), pause()]),
      setup: (now) => ({ promoted: async () => now() >= 30_000 }),
    },
    { name: 'an analysis step passes: 25, analysis, 50', s: canary(4, [w(25), analysis, w(50)]), analysis: 'passes' },
    {
      name: 'an analysis step passes with slow reloads (4 s) and two load balancers',
      s: canary(4, [w(25), analysis, w(50), analysis]),
      t: { reloadMs: 4000 },
      setup: () => ({ loadBalancers: 2 }),
      analysis: 'passes',
    },
    {
      name: 'an analysis step fails: the canary aborted, the stable set serving',
      s: canary(4, [w(25), analysis, w(50)]),
      analysis: 'fails',
      fails: { message: /canary aborted \(the analysis failed\)/ },
      serving: 'alone',
    },
    {
      name: 'an analysis step at 50% fails with slow reloads (4 s)',
      s: canary(4, [w(25), pause(5), w(50), analysis]),
      t: { reloadMs: 4000 },
      analysis: 'fails',
      fails: { message: /canary aborted \(the analysis failed\)/ },
      serving: 'alone',
    },
  ];
  for (const row of rows) it(row.name, () => play(row, canaryChecks(row.s)));
});
