import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { simulateRollout, type SimulationTimings } from '../../src/core/simulate.js';
import { resolveStrategy } from '../../src/core/strategy.js';

const timings = (t: Partial<SimulationTimings> = {}): SimulationTimings => ({ startupMs: 3000, drainMs: 2000, stopMs: 1000, minReadyMs: 0, jitter: 0, seed: 1, ...t });
const pick = (r: ReturnType<typeof simulateRollout>) => ({
  durationMs: r.durationMs,
  waves: r.waves,
  peakInstances: r.peakInstances,
  lowestCapacity: r.lowestCapacity,
  mixedVersionWindowMs: r.mixedVersionWindowMs,
  reloads: r.reloads,
});

describe('simulateRollout on a virtual clock', () => {
  const rows: { name: string; replicas: number; strategy: Parameters<typeof resolveStrategy>[0]['strategy']; t?: Partial<SimulationTimings>; want: ReturnType<typeof pick> }[] = [
    {
      // t=0 start n1; t=3 n1 ready, o1 down; t=6 o1 gone, start n2; t=9 n2 ready, o2 down; t=12 o2 gone.
      name: '2 replicas, surge 1, unavailable 0: worked by hand',
      replicas: 2,
      strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      want: { durationMs: 12000, waves: 3, peakInstances: 3, lowestCapacity: 2, mixedVersionWindowMs: 6000, reloads: 2 },
    },
    {
      name: 'minReadySeconds delays availability, not service',
      replicas: 2,
      strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
      t: { minReadyMs: 5000 },
      // t=3 n1 ready; t=8 n1 available, o1 down; t=11 start n2; t=14 ready; t=19 available, o2 down; t=22 done.
      want: { durationMs: 22000, waves: 3, peakInstances: 3, lowestCapacity: 2, mixedVersionWindowMs: 16000, reloads: 4 },
    },
    {
      // t=0 all down, t=3 gone and 3 start, t=6 all ready.
      name: 'Recreate: zero capacity, no mixed versions',
      replicas: 3,
      strategy: { type: 'Recreate' },
      want: { durationMs: 6000, waves: 1, peakInstances: 3, lowestCapacity: 0, mixedVersionWindowMs: 0, reloads: 2 },
    },
    {
      name: '100% surge: everything new at once, then all old go',
      replicas: 4,
      strategy: { rollingUpdate: { maxSurge: '100%', maxUnavailable: 0 } },
      want: { durationMs: 6000, waves: 2, peakInstances: 8, lowestCapacity: 4, mixedVersionWindowMs: 0, reloads: 1 },
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const s = resolveStrategy({ replicas: r.replicas, strategy: r.strategy });
      assert.deepEqual(pick(simulateRollout(s, timings(r.t))), r.want);
    });
  }

  it('jitter is reproducible from the seed and changes with it', () => {
    const s = resolveStrategy({ replicas: 20 });
    const a = simulateRollout(s, timings({ jitter: 0.5, seed: 7 }));
    const b = simulateRollout(s, timings({ jitter: 0.5, seed: 7 }));
    const c = simulateRollout(s, timings({ jitter: 0.5, seed: 8 }));
    assert.deepEqual(a, b);
    assert.notEqual(a.durationMs, c.durationMs);
  });

  it('never goes beyond the strategy bounds', () => {
    for (const [surge, unav] of [[1, 0], [0, 1], ['25%', '25%'], ['50%', 0]] as const) {
      const s = resolveStrategy({ replicas: 12, cli: { maxSurge: surge, maxUnavailable: unav } });
      const r = simulateRollout(s, timings({ jitter: 0.4, seed: 3 }));
      assert.ok(r.peakInstances <= s.maxTotal, `${surge}/${unav}: peak ${r.peakInstances} > ${s.maxTotal}`);
      assert.ok(r.lowestCapacity >= s.minAvailable, `${surge}/${unav}: capacity ${r.lowestCapacity} < ${s.minAvailable}`);
    }
  });
});
