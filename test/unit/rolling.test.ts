import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, type InstanceView, type Phase } from '../../src/core/decide.js';
import { placement, planRollout } from '../../src/core/plan.js';
import { decideStep, isComplete, planWave, type FleetCounts, type Step } from '../../src/core/rolling.js';
import { resolveStrategy } from '../../src/core/strategy.js';

const rolling = (replicas: number, maxSurge: number | string, maxUnavailable: number | string) =>
  resolveStrategy({ replicas, cli: { maxSurge, maxUnavailable } });

/** counts(replicas, [newTotal, newAvailable], ...[oldTotal, oldAvailable] per old revision, oldest first: old0, old1, ...) */
function counts(replicas: number, cur: [number, number], ...old: [number, number][]): FleetCounts {
  return {
    replicas,
    current: { revision: 'v2', total: cur[0], available: cur[1] },
    old: old.map(([total, available], i) => ({ revision: `old${i}`, total, available })),
  };
}

describe('planRollout: the waves of the issue and of the Kubernetes docs', () => {
  const rows: [string, number, number | string, number | string, [number, number][]][] = [
    [
      '4 replicas, surge 1, unavailable 1',
      4,
      1,
      1,
      [
        [4, 0],
        [3, 2],
        [1, 4],
        [0, 4],
      ],
    ],
    [
      '4 replicas, surge 1, unavailable 0',
      4,
      1,
      0,
      [
        [4, 0],
        [4, 1],
        [3, 2],
        [2, 3],
        [1, 4],
        [0, 4],
      ],
    ],
    [
      '10 replicas, 25%/25%',
      10,
      '25%',
      '25%',
      [
        [10, 0],
        [8, 5],
        [3, 10],
        [0, 10],
      ],
    ],
    [
      '4 replicas, surge 0, unavailable 1',
      4,
      0,
      1,
      [
        [4, 0],
        [3, 1],
        [2, 2],
        [1, 3],
        [0, 4],
      ],
    ],
    [
      '4 replicas, surge 100%, unavailable 0',
      4,
      '100%',
      0,
      [
        [4, 0],
        [4, 4],
        [0, 4],
      ],
    ],
    [
      '3 replicas, 25%/25% (surge 1, unavailable 0)',
      3,
      '25%',
      '25%',
      [
        [3, 0],
        [3, 1],
        [2, 2],
        [1, 3],
        [0, 3],
      ],
    ],
    [
      '1 replica, 25%/25%',
      1,
      '25%',
      '25%',
      [
        [1, 0],
        [1, 1],
        [0, 1],
      ],
    ],
    ['0 replicas', 0, '25%', '25%', [[0, 0]]],
  ];
  for (const [name, replicas, surge, unav, waves] of rows) {
    it(name, () => assert.deepEqual(planRollout(rolling(replicas, surge, unav)).waves, waves));
  }

  it('Recreate stops everything, then starts everything, in one wave', () => {
    const p = planRollout(resolveStrategy({ replicas: 3, strategy: { type: 'Recreate' } }));
    assert.deepEqual(p.waves, [
      [3, 0],
      [0, 3],
    ]);
    assert.deepEqual(p.details[0]?.capacity, { min: 0, max: 3 });
  });

  const peaks: { name: string; policy: 'TerminationStarted' | 'TerminationComplete'; want: number[][] }[] = [
    // Starts wait for the stops: never above replicas + maxSurge = 5.
    {
      name: 'TerminationComplete',
      policy: 'TerminationComplete',
      want: [
        [2, 1, 3, 5],
        [2, 2, 3, 5],
        [0, 1, 4, 5],
      ],
    },
    // A wave's starts begin while the instances it replaces (and, at worst, the previous wave's) still drain;
    // simulate of the same rollout peaks at 8 too.
    {
      name: 'TerminationStarted',
      policy: 'TerminationStarted',
      want: [
        [2, 1, 3, 6],
        [2, 2, 3, 8],
        [0, 1, 4, 7],
      ],
    },
  ];
  for (const row of peaks) {
    it(`wave details: starts, stops, capacity range and peak alive, ${row.name}`, () => {
      const p = planRollout(
        resolveStrategy({ replicas: 4, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 1 } }, replacementPolicy: { own: row.policy } }),
      );
      assert.deepEqual(
        p.details.map((d) => [d.started, d.stopped, d.capacity.min, d.peakAlive]),
        row.want,
      );
    });
  }
});

describe('decideStep: one controller sync', () => {
  const rows: { name: string; c: FleetCounts; s: ReturnType<typeof rolling>; want: Step }[] = [
    { name: 'fresh rollout scales up by maxSurge first', c: counts(4, [0, 0], [4, 4]), s: rolling(4, 1, 1), want: { kind: 'scaleUp', count: 1 } },
    {
      name: 'at maxTotal, scales old down within maxUnavailable',
      c: counts(4, [1, 0], [4, 4]),
      s: rolling(4, 1, 1),
      want: { kind: 'scaleDownOld', byRevision: [{ revision: 'old0', count: 1 }] },
    },
    { name: 'unready new instances count against the scale-down budget', c: counts(4, [2, 0], [3, 3]), s: rolling(4, 1, 1), want: { kind: 'none' } },
    {
      name: 'never-ready new instances stall without breaking bounds (maxUnavailable 0)',
      c: counts(4, [1, 0], [4, 4]),
      s: rolling(4, 1, 0),
      want: { kind: 'none' },
    },
    {
      name: 'half-done: ready new instances let old go',
      c: counts(4, [2, 2], [3, 3]),
      s: rolling(4, 1, 1),
      want: { kind: 'scaleDownOld', byRevision: [{ revision: 'old0', count: 2 }] },
    },
    { name: 'missing instances of the new revision are started', c: counts(4, [2, 2], [0, 0]), s: rolling(4, 1, 1), want: { kind: 'scaleUp', count: 2 } },
    // maxScaledDown = 5 - 3 - 1 = 1, spent on the unhealthy one; available 3 is already at the floor.
    {
      name: 'unhealthy old instances are cleaned up first, within maxScaledDown',
      c: counts(4, [1, 0], [4, 3]),
      s: rolling(4, 1, 1),
      want: { kind: 'scaleDownOld', byRevision: [{ revision: 'old0', count: 1 }] },
    },
    // maxScaledDown = 5 - 4 - 1 = 0: Kubernetes waits too (the deadline then reports it).
    {
      name: 'with maxUnavailable 0 and an unready new instance, even unhealthy old ones wait',
      c: counts(4, [1, 0], [4, 3]),
      s: rolling(4, 1, 0),
      want: { kind: 'none' },
    },
    {
      name: 'two old revisions: unhealthy go first, then the oldest revision',
      c: counts(4, [1, 1], [2, 2], [2, 1]),
      s: rolling(4, 1, 1),
      // maxScaledDown = 5 - 3 - 0 = 2: the unhealthy one of old1 first (cleanup), then
      // available 4 - 3 = 1 more from the oldest revision (old0).
      want: {
        kind: 'scaleDownOld',
        byRevision: [
          { revision: 'old0', count: 1 },
          { revision: 'old1', count: 1 },
        ],
      },
    },
    {
      name: 'more new than replicas (replicas lowered) stops the excess',
      c: counts(2, [4, 4], [0, 0]),
      s: rolling(2, 1, 0),
      want: { kind: 'scaleDownNew', count: 2 },
    },
    { name: 'complete fleet does nothing', c: counts(3, [3, 3]), s: rolling(3, 1, 0), want: { kind: 'none' } },
    {
      name: 'Recreate stops all old first',
      c: counts(3, [0, 0], [3, 3]),
      s: resolveStrategy({ replicas: 3, strategy: { type: 'Recreate' } }),
      want: { kind: 'scaleDownOld', byRevision: [{ revision: 'old0', count: 3 }] },
    },
    {
      name: 'Recreate starts all new once no old is left',
      c: counts(3, [0, 0]),
      s: resolveStrategy({ replicas: 3, strategy: { type: 'Recreate' } }),
      want: { kind: 'scaleUp', count: 3 },
    },
    {
      name: 'old instances beyond maxTotal are stopped as availability allows',
      c: counts(3, [0, 0], [6, 6]),
      s: rolling(3, 1, 0),
      want: { kind: 'scaleDownOld', byRevision: [{ revision: 'old0', count: 3 }] },
    },
  ];
  for (const r of rows) it(r.name, () => assert.deepEqual(decideStep(r.c, r.s), r.want));

  it('complete only when all replicas are new and available and no old remain', () => {
    assert.equal(isComplete(counts(3, [3, 3])), true);
    assert.equal(isComplete(counts(3, [3, 2])), false);
    assert.equal(isComplete(counts(3, [3, 3], [1, 1])), false);
    assert.equal(isComplete(counts(3, [4, 4])), false);
  });
});

describe('planWave: the order of a wave keeps both bounds', () => {
  it('starts what fits now and the rest after the stops', () => {
    const w = planWave(counts(4, [0, 0], [4, 4]), rolling(4, 1, 1));
    assert.deepEqual([w.start, w.startBeforeStops, w.stopOld, w.peakTotal, w.minAvailableDuring], [2, 1, [{ revision: 'old0', count: 1 }], 5, 3]);
  });
  it('Recreate starts nothing before the old ones are gone', () => {
    const w = planWave(counts(3, [0, 0], [3, 3]), resolveStrategy({ replicas: 3, strategy: { type: 'Recreate' } }));
    assert.deepEqual([w.start, w.startBeforeStops], [3, 0]);
  });
});

describe('decide: picking concrete instances', () => {
  const inst = (id: string, revision: string, phase: Phase, created = 0, host = 'local'): InstanceView => ({
    id,
    host,
    revision,
    created,
    phase,
    routed: phase !== 'failed',
  });
  const decideFor = (revision: string, replicas: number, fleet: InstanceView[], maxSurge: number, maxUnavailable: number, hosts = ['local']) =>
    decide(fleet, { revision, replicas, strategy: rolling(replicas, maxSurge, maxUnavailable), now: 0, hosts: hosts.map((name) => ({ name })) });

  it('stops exited, then unready, then available old instances', () => {
    const fleet = [inst('a', 'v1', 'available'), inst('b', 'v1', 'unready'), inst('c', 'v1', 'failed'), inst('d', 'v1', 'available')];
    const d = decideFor('v2', 4, fleet, 0, 3);
    // maxUnavailable 3: both unhealthy ones are cleaned up, then one available one.
    assert.deepEqual(d.terminate.slice(0, 2), ['c', 'b']);
    assert.equal(d.terminate.length, 3);
  });

  it('oldest revision goes first', () => {
    const fleet = [inst('new1', 'v3', 'available', 30), inst('mid', 'v2', 'available', 20), inst('old', 'v1', 'available', 10)];
    const d = decideFor('v3', 2, fleet, 0, 1);
    assert.equal(d.terminate[0], 'old');
  });

  it('reports completion and does nothing on a finished fleet', () => {
    const fleet = [inst('a', 'v2', 'available'), inst('b', 'v2', 'available')];
    const d = decideFor('v2', 2, fleet, 1, 0);
    assert.equal(d.complete, true);
    assert.deepEqual([d.terminate.length, d.start.length], [0, 0]);
  });

  describe('stops even out the spread across hosts', () => {
    const on = (id: string, host: string, created: number, phase: Phase = 'available') => inst(id, 'v2', phase, created, host);
    const rows: { name: string; fleet: InstanceView[]; replicas: number; want: string[] }[] = [
      {
        // a3 (a is fullest), then a and b tie at 2: the newer b2, then a2; 1/1/1 left.
        name: 'scale 6 → 3 on hosts holding 3/2/1: always from the fullest host, leaving 1/1/1',
        fleet: [on('a1', 'a', 1), on('a2', 'a', 2), on('a3', 'a', 3), on('b1', 'b', 4), on('b2', 'b', 5), on('c1', 'c', 6)],
        replicas: 3,
        want: ['a3', 'b2', 'a2'],
      },
      {
        name: 'an unready instance still goes first, whatever its host',
        fleet: [on('a1', 'a', 1), on('a2', 'a', 2), on('b1', 'b', 3, 'unready')],
        replicas: 2,
        want: ['b1'],
      },
      {
        name: 'equal hosts: the newest first, as on one host',
        fleet: [on('a1', 'a', 1), on('b1', 'b', 2), on('a2', 'a', 3), on('b2', 'b', 4)],
        replicas: 2,
        want: ['b2', 'a2'],
      },
    ];
    for (const r of rows) {
      it(r.name, () => {
        const d = decideFor('v2', r.replicas, r.fleet, 1, 0, ['a', 'b', 'c']);
        assert.deepEqual(d.terminate, r.want);
      });
    }
  });

  it('an empty host gets its replicas started', () => {
    const d = decideFor('v2', 3, [], 1, 0);
    assert.deepEqual([d.start.length, d.terminate.length], [3, 0]);
  });
});

describe('placement across hosts', () => {
  const rows: [string, number, { name: string; maxInstances?: number }[], Record<string, number>, number][] = [
    ['even spread', 6, [{ name: 'a' }, { name: 'b' }, { name: 'c' }], { a: 2, b: 2, c: 2 }, 0],
    ['remainder goes to the first hosts', 4, [{ name: 'a' }, { name: 'b' }, { name: 'c' }], { a: 2, b: 1, c: 1 }, 0],
    ['maxInstances caps a host', 6, [{ name: 'a', maxInstances: 1 }, { name: 'b' }], { a: 1, b: 5 }, 0],
    [
      'more than every cap',
      5,
      [
        { name: 'a', maxInstances: 2 },
        { name: 'b', maxInstances: 2 },
      ],
      { a: 2, b: 2 },
      1,
    ],
  ];
  for (const [name, replicas, hosts, perHost, unplaced] of rows) {
    it(name, () => assert.deepEqual(placement(replicas, hosts), { perHost, unplaced }));
  }
});
