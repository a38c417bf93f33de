import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { FleetrollError } from '../../src/errors.js';
import { resolveStrategy } from '../../src/core/strategy.js';
import { simulateRollout, type SimulationTimings } from '../../src/sim/simulate.js';

const timings = (t: Partial<SimulationTimings> = {}): SimulationTimings => ({
  startupMs: 3000,
  drainMs: 2000,
  stopMs: 1000,
  minReadyMs: 0,
  jitter: 0,
  seed: 1,
  ...t,
});
const pick = (r: Awaited<ReturnType<typeof simulateRollout>>) => ({
  durationMs: r.durationMs,
  peakInstances: r.peakInstances,
  lowestCapacity: r.lowestCapacity,
  mixedVersionWindowMs: r.mixedVersionWindowMs,
  reloads: r.reloads,
});

/**
 * simulate is the engine itself on simulated ports, so these rows are the
 * controller's timings, worked by hand. Every nginx change waits up to 50 ms
 * for others to share its reload (the +50s); readiness probes run every 250 ms.
 * Before the event-driven controller, 2 replicas at 1/0 took 12 s: the second
 * new instance waited for the first old one's drain and stop (a blocking wave);
 * now it starts as soon as the old one is marked for termination.
 */
describe('simulate: the engine on a virtual clock', () => {
  const rows: {
    name: string;
    replicas: number;
    strategy: Parameters<typeof resolveStrategy>[0]['strategy'];
    t?: Partial<SimulationTimings>;
    want: ReturnType<typeof pick>;
  }[] = [
    {
      // t=0 n1 starts; t=3000 n1 ready: o1 terminated, n2 starts; t=3050 one reload (n1 in, o1 down);
      // t=5050 o1 stops, gone 6050; t=6000 n2 ready: o2 terminated; t=6050 reload; t=8050 stop; t=9050 gone.
      name: '2 replicas, surge 1, unavailable 0: worked by hand',
      replicas: 2,
      strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      want: { durationMs: 9050, peakInstances: 4, lowestCapacity: 2, mixedVersionWindowMs: 3000, reloads: 2 },
    },
    {
      // t=0 all three terminated; t=50 reload (all down); t=2050 stops, gone 3050; 3 start; ready 6050 and
      // the rollout is complete: its last write (all three up) goes out at once, without waiting 50 ms.
      name: 'Recreate: zero capacity, no mixed versions',
      replicas: 3,
      strategy: { type: 'Recreate' },
      want: { durationMs: 6050, peakInstances: 3, lowestCapacity: 0, mixedVersionWindowMs: 0, reloads: 2 },
    },
    {
      // t=0 four new start; t=3000 all ready and available: all four old terminated; t=3050 one reload; gone 6050.
      name: '100% surge: everything new at once, then all old go, in one reload',
      replicas: 4,
      strategy: { rollingUpdate: { maxSurge: '100%', maxUnavailable: 0 } },
      want: { durationMs: 6050, peakInstances: 8, lowestCapacity: 4, mixedVersionWindowMs: 0, reloads: 1 },
    },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const s = resolveStrategy({ replicas: r.replicas, strategy: r.strategy });
      assert.deepEqual(pick(await simulateRollout(s, timings(r.t))), r.want);
    });
  }

  it('jitter is reproducible from the seed and changes with it', async () => {
    const s = resolveStrategy({ replicas: 20 });
    const strip = (x: Awaited<ReturnType<typeof simulateRollout>>) => pick(x);
    const a = strip(await simulateRollout(s, timings({ jitter: 0.5, seed: 7 })));
    const b = strip(await simulateRollout(s, timings({ jitter: 0.5, seed: 7 })));
    const c = strip(await simulateRollout(s, timings({ jitter: 0.5, seed: 8 })));
    assert.deepEqual(a, b);
    assert.notEqual(a.durationMs, c.durationMs);
  });

  it('never goes below minAvailable; with TerminationComplete never above maxTotal', async () => {
    for (const [surge, unav] of [
      [1, 0],
      [0, 1],
      ['25%', '25%'],
      ['50%', 0],
    ] as const) {
      const s = resolveStrategy({ replicas: 12, cli: { maxSurge: surge, maxUnavailable: unav }, replacementPolicy: { own: 'TerminationComplete' } });
      const r = await simulateRollout(s, timings({ jitter: 0.4, seed: 3 }));
      assert.ok(r.peakInstances <= s.maxTotal, `${surge}/${unav}: peak ${r.peakInstances} > ${s.maxTotal}`);
      assert.ok(r.lowestCapacity >= s.minAvailable, `${surge}/${unav}: capacity ${r.lowestCapacity} < ${s.minAvailable}`);
    }
  });
});
