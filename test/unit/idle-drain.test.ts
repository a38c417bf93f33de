/**
 * Drains that end when their last request does (src/engine/idleDrain.ts), on
 * the simulated world with every nginx counting requests in flight (the
 * dynamic mode), under the invariant checks after every event: nothing is
 * stopped while an nginx still routes to it, and nothing sooner after its
 * mark-down is in force than its last request took.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy, type ResolvedStrategy } from '../../src/core/strategy.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { NOMINAL_IDLE_DRAIN_MS, simulateRollout, withNginxMode, type SimulationSetup } from '../../src/sim/simulate.js';
import type { Fleet } from '../../src/config/load.js';
import { invariants, T } from '../support/sim-invariants.js';

const rolling = (replicas: number, maxSurge: number, maxUnavailable: number, policy?: string) =>
  resolveStrategy({ replicas, strategy: { rollingUpdate: { maxSurge, maxUnavailable } }, replacementPolicy: { own: policy } });

async function run(s: ResolvedStrategy, setup: SimulationSetup, minDrainMs: number) {
  const timings = { ...T, drainMs: 3000 };
  const inv = invariants(s, timings, { minDrainMs });
  const events: { e: RolloutEvent; at: number }[] = [];
  const r = await simulateRollout(s, timings, { ...setup, ...inv.setup, events: (e, at) => events.push({ e, at }) });
  const drained = events.flatMap(({ e }) => (e.type === 'drained' ? [e] : []));
  return { r, drained, violations: inv.checked.violations };
}

describe('drains that end when no request is in flight (every nginx counts them)', () => {
  it('requests done 200 ms after the mark-down: each drain ends then, not at drainSeconds (3 s); with every start after a stop (0/1, TerminationComplete) the rollout is shorter by each', async () => {
    const s = rolling(4, 0, 1, 'TerminationComplete');
    const idle = await run(s, { inFlight: (_a, downFor) => (downFor < 200 ? 2 : 0) }, 200);
    const timed = await run(s, {}, 3000);
    assert.deepEqual(idle.violations, []);
    assert.deepEqual(timed.violations, []);
    assert.equal(idle.drained.length, 4);
    for (const d of idle.drained) {
      assert.equal(d.reason, 'idle');
      assert.ok(d.ms >= 200 && d.ms < 400, `ended ${d.ms} ms after the mark-down`);
    }
    assert.equal(timed.drained.length, 0, 'a router that cannot count says nothing of drains');
    assert.ok(idle.r.durationMs <= timed.r.durationMs - 4 * 2500, `${idle.r.durationMs} ms against ${timed.r.durationMs} ms`);
  });

  it('a request that never ends: every drain lasts drainSeconds, and the log says so', async () => {
    const { drained, violations } = await run(rolling(3, 0, 1), { inFlight: () => 1 }, 3000);
    assert.deepEqual(violations, []);
    assert.deepEqual(
      drained.map((d) => d.reason),
      ['drainSeconds', 'drainSeconds', 'drainSeconds'],
    );
    for (const d of drained) assert.ok(d.ms >= 3000, `${d.ms} ms`);
  });

  it('blue-green keeps its old set for scaleDownDelaySeconds however idle it is (undo needs it)', async () => {
    const s = resolveStrategy({ replicas: 3, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 20 } } });
    const timings = { ...T, drainMs: 3000 };
    const stops: number[] = [];
    let switched: number | undefined;
    await simulateRollout(s, timings, {
      inFlight: () => 0,
      events: (e, at) => {
        if (e.type === 'switched') switched ??= at;
        if (e.type === 'stopped') stops.push(at);
      },
    });
    assert.ok(switched !== undefined);
    for (const at of stops) assert.ok(at - switched >= 20_000, `an old instance stopped ${at - switched} ms after the switch`);
  });
});

describe('simulate and plan of a dynamic-mode fleet (withNginxMode)', () => {
  const lbs = (...modes: string[]) => ({ loadBalancers: modes.map((mode) => ({ nginx: { mode } })) }) as unknown as Pick<Fleet, 'loadBalancers'>;
  const rows: { name: string; fleet: Pick<Fleet, 'loadBalancers'> | undefined; want: number | undefined }[] = [
    { name: 'no fleet file: reload mode', fleet: undefined, want: undefined },
    { name: 'no load balancer: nothing to drain from', fleet: lbs(), want: undefined },
    { name: 'every load balancer dynamic: drains end when idle', fleet: lbs('dynamic', 'dynamic'), want: NOMINAL_IDLE_DRAIN_MS },
    { name: 'one reload-mode load balancer keeps every drain to drainSeconds', fleet: lbs('dynamic', 'reload'), want: undefined },
  ];
  for (const r of rows) {
    it(r.name, () => {
      assert.equal(withNginxMode({ ...T }, r.fleet).idleDrainMs, r.want);
    });
  }

  it('a dynamic-mode rollout: no reload counted, every drain ends on idle, and the rollout is shorter than in reload mode by what the drains saved; the invariants hold', async () => {
    const s = rolling(4, 0, 1, 'TerminationComplete');
    const timings = { ...T, drainMs: 3000 };
    const inv = invariants(s, timings, { minDrainMs: 200 });
    const drained: string[] = [];
    const dynamic = await simulateRollout(s, withNginxMode(timings, lbs('dynamic')), {
      ...inv.setup,
      events: (e) => void (e.type === 'drained' && drained.push(e.reason)),
    });
    const reload = await simulateRollout(s, withNginxMode(timings, lbs('reload')));
    assert.deepEqual(inv.checked.violations, []);
    assert.equal(dynamic.reloads, 0);
    assert.ok(reload.reloads > 0);
    assert.deepEqual(drained, ['idle', 'idle', 'idle', 'idle']);
    assert.ok(dynamic.durationMs <= reload.durationMs - 4 * 2500, `${dynamic.durationMs} ms against ${reload.durationMs} ms`);
  });
});

describe('reload-free membership across several load balancers: all or nothing', () => {
  it('one of two cannot confirm a change: the other gets its previous servers back, and the rollout fails saying so', async () => {
    const s = rolling(3, 1, 0);
    const inForce: string[] = [];
    const err = await simulateRollout(s, T, {
      loadBalancers: 2,
      reloadFree: true,
      faults: { failReload: new Map([['nginx 2', 1]]) },
      world: (w) => {
        const before = w.onEvent;
        w.onEvent = (e) => {
          before?.(e);
          if (e.kind === 'reloaded' && e.lb.name === 'nginx 1') inForce.push(e.lb.inForce ?? '');
        };
      },
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof Error, String(err));
    assert.match(err.message, /nginx 2: reload failed \(simulated\); nginx 1 put back on the previous servers/);
    // nginx 1 took the change, then the servers from before it, before anything else happened.
    assert.ok(inForce.length >= 2, `${inForce.length} changes in force on nginx 1`);
    const [took, back] = inForce;
    assert.notEqual(took, back);
    assert.doesNotMatch(back ?? '', /down|10\.0\.0\.[4-9]/, `the set from before the change: the old instances, all up:\n${back}`);
  });
});
