/**
 * plan for BlueGreen and Canary: the steps, the instances alive, the traffic
 * share after each step, the peak; a canary's final rolling update comes from
 * planRollout (the one rolling algorithm), started where the last step left
 * the fleet. Rows worked by hand.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { planRollout, planStrategy, type PlannedStep } from '../../src/core/plan.js';
import { finalRollingUpdate, resolveStrategy, type CanaryStepInput, type ResolvedStrategy, type StrategyInput } from '../../src/core/strategy.js';

/** [kind, old, new, traffic to new %, alive, started, stopped] */
type Row = [PlannedStep['kind'], number, number, number, number, number, number];
const rowsOf = (steps: PlannedStep[]): Row[] => steps.map((s) => [s.kind, s.old, s.new, s.trafficNewPercent, s.alive, s.started, s.stopped]);

describe('plan: BlueGreen', () => {
  const rows: { name: string; replicas: number; blueGreen?: StrategyInput['blueGreen']; prePromotion?: boolean; steps: Row[] }[] = [
    {
      name: '3 replicas, built-in settings: start 3 beside 3, switch, keep 30 s, remove the old',
      replicas: 3,
      steps: [
        ['startNew', 3, 3, 0, 6, 3, 0],
        ['switch', 3, 3, 100, 6, 0, 0],
        ['scaleDownDelay', 3, 3, 100, 6, 0, 0],
        ['removeOld', 0, 3, 100, 6, 0, 3],
      ],
    },
    {
      name: 'a preview upstream, a prePromotion hook and a manual promote come before the switch, all at 0% new',
      replicas: 2,
      blueGreen: { previewUpstream: 'api_preview', autoPromote: false },
      prePromotion: true,
      steps: [
        ['startNew', 2, 2, 0, 4, 2, 0],
        ['preview', 2, 2, 0, 4, 0, 0],
        ['prePromotion', 2, 2, 0, 4, 0, 0],
        ['awaitPromote', 2, 2, 0, 4, 0, 0],
        ['switch', 2, 2, 100, 4, 0, 0],
        ['scaleDownDelay', 2, 2, 100, 4, 0, 0],
        ['removeOld', 0, 2, 100, 4, 0, 2],
      ],
    },
    {
      name: 'scaleDownDelaySeconds 0: the old set goes right after the switch',
      replicas: 1,
      blueGreen: { scaleDownDelaySeconds: 0 },
      steps: [
        ['startNew', 1, 1, 0, 2, 1, 0],
        ['switch', 1, 1, 100, 2, 0, 0],
        ['removeOld', 0, 1, 100, 2, 0, 1],
      ],
    },
    { name: '0 replicas: nothing to do', replicas: 0, steps: [] },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const p = planStrategy(resolveStrategy({ replicas: r.replicas, strategy: { type: 'BlueGreen', blueGreen: r.blueGreen } }), {
        prePromotion: r.prePromotion,
      });
      assert.equal(p.type, 'BlueGreen');
      assert.ok(p.type === 'BlueGreen');
      assert.deepEqual(rowsOf(p.steps), r.steps);
      assert.deepEqual(
        p.steps.map((s) => s.index),
        r.steps.map((_, i) => i + 1),
      );
      assert.equal(p.peakAlive, 2 * r.replicas);
      if (r.replicas > 0)
        assert.deepEqual(p.waves, [
          [r.replicas, 0],
          [r.replicas, r.replicas],
          [0, r.replicas],
        ]);
    });
  }

  it('the steps carry what they need: the preview upstream, the delay', () => {
    const p = planStrategy(resolveStrategy({ replicas: 2, strategy: { type: 'BlueGreen', blueGreen: { previewUpstream: 'pv', scaleDownDelaySeconds: 90 } } }));
    assert.ok(p.type === 'BlueGreen');
    assert.deepEqual(
      p.steps.find((s) => s.kind === 'preview'),
      { index: 2, kind: 'preview', upstream: 'pv', old: 2, new: 2, started: 0, stopped: 0, alive: 4, trafficNewPercent: 0 },
    );
    assert.equal(p.steps.find((s) => s.kind === 'scaleDownDelay' && s.seconds === 90)?.index, 4);
  });
});

describe('plan: Canary', () => {
  const DESIGN: CanaryStepInput[] = [{ setWeight: 10 }, { pause: { duration: '30s' } }, { analysis: {} }, { setWeight: 50 }, { pause: {} }];
  const rows: {
    name: string;
    replicas: number;
    strategy: StrategyInput;
    steps: Row[];
    /** The final rolling update's [old, new] waves. */
    waves: [number, number][];
    peak: number;
  }[] = [
    {
      // 10% of 10 → 1 canary; 50% → 5. Then 25%/25% (surge 3, unavailable 2) from [10, 5]:
      // total 15 > 13: no start; may stop 15 - 8 = 7 old → [3, 5]; start min(13 - 8, 10 - 5) = 5 → [3, 10];
      // then the last 3 old. TerminationStarted: 15 alive + 5 starting while 7 drain = 20.
      name: 'the design example on 10 replicas, built-in 25%/25% for the rolling update',
      replicas: 10,
      strategy: { type: 'Canary', canary: { steps: DESIGN } },
      steps: [
        ['setWeight', 10, 1, 10, 11, 1, 0],
        ['pause', 10, 1, 10, 11, 0, 0],
        ['analysis', 10, 1, 10, 11, 0, 0],
        ['setWeight', 10, 5, 50, 15, 4, 0],
        ['pause', 10, 5, 50, 15, 0, 0],
      ],
      waves: [
        [10, 5],
        [3, 10],
        [0, 10],
      ],
      peak: 20,
    },
    {
      // 25% of 4 → 1; 100% → all 4 (8 alive, every request on the canary). Then 1/0 from [4, 4]:
      // min available 4, 8 available: all 4 old stop at once → [0, 4].
      name: '4 replicas up to 100%: the rolling update only removes the stable set',
      replicas: 4,
      strategy: {
        type: 'Canary',
        rollingUpdate: { maxSurge: 1, maxUnavailable: 0 },
        canary: { steps: [{ setWeight: 25 }, { pause: {} }, { setWeight: 100 }] },
      },
      steps: [
        ['setWeight', 4, 1, 25, 5, 1, 0],
        ['pause', 4, 1, 25, 5, 0, 0],
        ['setWeight', 4, 4, 100, 8, 3, 0],
      ],
      waves: [
        [4, 4],
        [0, 4],
      ],
      peak: 8,
    },
    {
      name: 'a pause first: one canary at 0% from the first step on',
      replicas: 3,
      strategy: { type: 'Canary', rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }, canary: { steps: [{ pause: { duration: 60 } }, { setWeight: 34 }] } },
      steps: [
        ['pause', 3, 1, 0, 4, 1, 0],
        ['setWeight', 3, 2, 34, 5, 1, 0],
      ],
      // From [3, 2] at 1/0: total 5 > 4, may stop 5 - 3 = 2 old → [1, 2]; start 1 → [1, 3]; then the last old.
      waves: [
        [3, 2],
        [1, 3],
        [0, 3],
      ],
      peak: 6,
    },
    {
      name: 'a weight going down stops canaries (alive counts the step before they are gone)',
      replicas: 10,
      strategy: { type: 'Canary', rollingUpdate: { maxSurge: 0, maxUnavailable: 5 }, canary: { steps: [{ setWeight: 50 }, { setWeight: 10 }] } },
      steps: [
        ['setWeight', 10, 5, 50, 15, 5, 0],
        ['setWeight', 10, 1, 10, 15, 0, 4],
      ],
      // From [10, 1] at 0/5: total 11 > 10: may stop 11 - 5 = 6 → [4, 1], then start up to 10: [4, 6]; then stop 4, start 4: [0, 10].
      // Peak (TerminationStarted, plan's worst case): wave 2's 10 + 4 starting while its 4 and wave 1's 6 may still drain = 20.
      waves: [
        [10, 1],
        [4, 6],
        [0, 10],
      ],
      peak: 20,
    },
    {
      name: 'a fixed canaryReplicas holds whatever the weight',
      replicas: 10,
      strategy: {
        type: 'Canary',
        rollingUpdate: { maxSurge: 2, maxUnavailable: 0 },
        canary: { canaryReplicas: 2, steps: [{ setWeight: 5 }, { analysis: { interval: '1m' } }, { setWeight: 20 }] },
      },
      steps: [
        ['setWeight', 10, 2, 5, 12, 2, 0],
        ['analysis', 10, 2, 5, 12, 0, 0],
        ['setWeight', 10, 2, 20, 12, 0, 0],
      ],
      // From [10, 2] at 2/0: 12 alive = replicas + surge, so each wave stops 2 old and starts 2 new.
      // Peak: 12 + 2 starting while this wave's and the previous wave's 2 drain = 16 (14 in the first wave).
      waves: [
        [10, 2],
        [8, 4],
        [6, 6],
        [4, 8],
        [2, 10],
        [0, 10],
      ],
      peak: 16,
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const s = resolveStrategy({ replicas: r.replicas, strategy: r.strategy });
      const p = planStrategy(s);
      assert.ok(p.type === 'Canary');
      assert.deepEqual(rowsOf(p.steps), r.steps);
      assert.deepEqual(p.rolling.waves, r.waves);
      assert.equal(p.peakAlive, r.peak);
    });
  }

  it('the final rolling update is planRollout itself, from where the last step left the fleet', () => {
    const s = resolveStrategy({
      replicas: 6,
      strategy: { type: 'Canary', rollingUpdate: { maxSurge: 1, maxUnavailable: 1 }, canary: { steps: [{ setWeight: 30 }] } },
    });
    assert.ok(s.type === 'Canary');
    const p = planStrategy(s);
    assert.ok(p.type === 'Canary');
    assert.deepEqual(p.rolling, planRollout(finalRollingUpdate(s), { old: 6, new: 2 }));
  });

  it('steps keep their kind-specific fields: the weight, a pause in seconds or null (until resumed), analysis overrides, their path', () => {
    const p = planStrategy(
      resolveStrategy({ replicas: 10, strategy: { type: 'Canary', canary: { steps: [...DESIGN, { analysis: { maxErrorRate: '1%' } }] } } }),
    );
    assert.ok(p.type === 'Canary');
    assert.deepEqual(
      p.steps.map(({ old: _o, new: _n, started: _s, stopped: _t, trafficNewPercent: _w, alive: _a, ...rest }) => rest),
      [
        { index: 1, kind: 'setWeight', weight: 10, path: 'strategy/canary/steps/0' },
        { index: 2, kind: 'pause', seconds: 30, path: 'strategy/canary/steps/1' },
        { index: 3, kind: 'analysis', overrides: {}, path: 'strategy/canary/steps/2' },
        { index: 4, kind: 'setWeight', weight: 50, path: 'strategy/canary/steps/3' },
        { index: 5, kind: 'pause', seconds: null, path: 'strategy/canary/steps/4' },
        { index: 6, kind: 'analysis', overrides: { maxErrorRate: '1%' }, path: 'strategy/canary/steps/5' },
      ],
    );
  });
});

describe('plan: RollingUpdate and Recreate are planRollout as before', () => {
  const rows: [string, ResolvedStrategy][] = [
    ['RollingUpdate 1/1 on 4', resolveStrategy({ replicas: 4, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 1 } } })],
    ['Recreate on 3', resolveStrategy({ replicas: 3, strategy: { type: 'Recreate' } })],
  ];
  for (const [name, s] of rows) {
    it(name, () => {
      const p = planStrategy(s);
      assert.ok(p.type === 'RollingUpdate' || p.type === 'Recreate');
      assert.deepEqual(p.rolling, planRollout(s));
    });
  }
});
