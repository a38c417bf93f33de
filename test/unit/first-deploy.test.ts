/**
 * core/firstDeploy.ts: what counts as a stable revision running, and what a
 * first deploy of each strategy skips (the controller tests run it end to end).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { firstDeploySkips, stableRevisionRunning } from '../../src/core/firstDeploy.js';
import { resolveStrategy, type StrategyLayers } from '../../src/core/strategy.js';

describe('stableRevisionRunning', () => {
  const rows: { name: string; found: { revision: string; running: boolean }[]; stable: boolean }[] = [
    { name: 'nothing found', found: [], stable: false },
    {
      name: 'only instances of the target revision (a re-run)',
      found: [
        { revision: 'new', running: true },
        { revision: 'new', running: false },
      ],
      stable: false,
    },
    {
      name: 'an instance of an older revision, exited',
      found: [
        { revision: 'old', running: false },
        { revision: 'new', running: true },
      ],
      stable: false,
    },
    {
      name: 'an instance of an older revision, running',
      found: [
        { revision: 'new', running: true },
        { revision: 'old', running: true },
      ],
      stable: true,
    },
  ];
  for (const r of rows) it(r.name, () => assert.equal(stableRevisionRunning(r.found, 'new'), r.stable));
});

describe('firstDeploySkips', () => {
  const steps = { type: 'Canary', canary: { steps: [{ setWeight: 25 }, { analysis: {} }] } };
  const rows: { name: string; layers: StrategyLayers; analysis?: boolean; postWave?: boolean; said: RegExp | undefined }[] = [
    {
      name: 'Canary with steps: the steps',
      layers: { replicas: 4, strategy: steps } as never,
      said: /^no stable revision is running \(first deploy\): the canary steps are skipped and the fleet is created at full size \(4 instances\), as Argo Rollouts does$/,
    },
    {
      name: 'RollingUpdate with analysis: the gate, and the fleet at full size',
      layers: { replicas: 1, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } },
      analysis: true,
      said: /the analysis after the first wave is skipped .*, and the fleet is created at full size \(1 instance\)$/,
    },
    {
      name: 'RollingUpdate with analysis and hooks.postWave: the gate; the waves stay',
      layers: { replicas: 4, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } },
      analysis: true,
      postWave: true,
      said: /the analysis after the first wave is skipped .*; the waves stay, for hooks\.postWave$/,
    },
    {
      name: 'RollingUpdate without analysis: nothing to skip',
      layers: { replicas: 4, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } },
      said: undefined,
    },
    { name: 'Recreate with analysis: it has no gate', layers: { replicas: 4, strategy: { type: 'Recreate' } }, analysis: true, said: undefined },
    {
      name: 'BlueGreen with analysis: the gate after the switch',
      layers: { replicas: 3, strategy: { type: 'BlueGreen' } },
      analysis: true,
      said: /^no old set is running \(first deploy\): the new set takes all traffic at the switch and the analysis after the switch is skipped/,
    },
    { name: 'BlueGreen without analysis: nothing to skip', layers: { replicas: 3, strategy: { type: 'BlueGreen' } }, said: undefined },
    { name: '0 replicas: nothing to create or judge', layers: { replicas: 0, strategy: steps } as never, analysis: true, said: undefined },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const said = firstDeploySkips(resolveStrategy(r.layers), { analysis: r.analysis === true, postWave: r.postWave === true });
      if (r.said === undefined) assert.equal(said, undefined);
      else assert.match(said ?? '(nothing)', r.said);
    });
  }
});
