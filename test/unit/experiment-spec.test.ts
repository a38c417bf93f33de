/**
 * The experiment spec: defaults, the matrix, and validation that names the
 * field. Also every shipped spec in examples/experiments/ must load.
 */
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { ValidationError } from '../../src/errors.js';
import { badVersionEnv, expandCells, loadExperimentSpec, parseExperimentSpec, planRuns, strategyName } from '../../src/experiment/spec.js';

const examples = fileURLToPath(new URL('../../examples/experiments/', import.meta.url));

function problems(raw: unknown): string[] {
  try {
    parseExperimentSpec(raw, 'spec.yaml');
  } catch (err) {
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.exitCode, 2);
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
  return [];
}

describe('experiment spec: defaults and the matrix', () => {
  it('fills in defaults: 3 replicas, drain 2 s, warm-up 1 s, 10 GET/s, 1 POST stream of 200 ms, no keep-alive, NDJSON', () => {
    const s = parseExperimentSpec({ name: 'x', strategies: [{ maxSurge: 1, maxUnavailable: 0 }] }, 'spec.yaml');
    assert.deepEqual(s.fleet, { replicas: 3, drainSeconds: 2, warmupSeconds: 1, minReadySeconds: 0, prestopSeconds: 1, nginxMode: 'reload' });
    assert.equal(s.calibrationRun, true, 'a calibration run by default');
    assert.deepEqual(s.load, {
      getPerSecond: 10,
      postConcurrency: 1,
      postDurationMs: 200,
      keepAlive: false,
      resend: true,
      timeoutMs: 5000,
      beforeSeconds: 1.5,
      afterSeconds: 1,
      users: 1000,
    });
    assert.equal(s.analysis, undefined);
    assert.equal(s.badVersion, undefined);
    assert.equal(s.from, '1.0.0');
    assert.equal(s.to, '1.1.0');
    assert.equal(s.repetitions, 1);
    assert.deepEqual(s.records, ['ndjson']);
  });

  const rows: { name: string; raw: Record<string, unknown>; labels: string[]; ids: string[] }[] = [
    {
      name: 'one cell per strategy when nothing is a list; default names from the settings',
      raw: {
        name: 'x',
        strategies: [{ type: 'naive' }, { maxSurge: 1, maxUnavailable: 0 }, { maxSurge: '100%', maxUnavailable: 0 }, { type: 'Recreate' }, {}],
      },
      labels: ['naive', '1/0', '100%/0', 'Recreate', '25%/25%'],
      ids: ['c01-naive', 'c02-1-0', 'c03-100pct-0', 'c04-recreate', 'c05-25pct-25pct'],
    },
    {
      name: 'lists are dimensions: strategies × replicas × keepAlive, varying settings named in labels',
      raw: {
        name: 'x',
        strategies: [{ name: 'batch 1', maxSurge: 0, maxUnavailable: 1 }],
        fleet: { replicas: [3, 6] },
        load: { keepAlive: [false, true], getPerSecond: [50] },
      },
      labels: [
        'batch 1, replicas 3, new connections',
        'batch 1, replicas 3, keep-alive',
        'batch 1, replicas 6, new connections',
        'batch 1, replicas 6, keep-alive',
      ],
      ids: [
        'c01-batch-1-replicas-3-new-connections',
        'c02-batch-1-replicas-3-keep-alive',
        'c03-batch-1-replicas-6-new-connections',
        'c04-batch-1-replicas-6-keep-alive',
      ],
    },
    {
      name: "nginx's mode is a dimension: reload against dynamic (07-reload-free.yaml), after the load settings",
      raw: {
        name: 'x',
        strategies: [{ name: 'r', maxSurge: 1, maxUnavailable: 0 }],
        fleet: { nginxMode: ['reload', 'dynamic'] },
        load: { keepAlive: true, resend: false },
      },
      labels: ['r, nginx reload', 'r, nginx dynamic'],
      ids: ['c01-r-nginx-reload', 'c02-r-nginx-dynamic'],
    },
    {
      name: 'the script control is named by its batch; a replacementPolicy joins the rolling name',
      raw: {
        name: 'x',
        strategies: [
          { type: 'script', batch: 2 },
          { type: 'script', batch: 3, pollSeconds: 0.5 },
          { maxSurge: 0, maxUnavailable: 2 },
          { maxSurge: 0, maxUnavailable: 2, replacementPolicy: 'TerminationComplete' },
          { maxSurge: 1, maxUnavailable: 0, replacementPolicy: 'TerminationStarted' },
        ],
      },
      labels: ['script b=2', 'script b=3', '0/2', '0/2 TerminationComplete', '1/0 TerminationStarted'],
      ids: ['c01-script-b-2', 'c02-script-b-3', 'c03-0-2', 'c04-0-2-terminationcomplete', 'c05-1-0-terminationstarted'],
    },
    {
      name: 'badVersion lists are dimensions too: errorRate × latencyMs after the load settings, "bad 2% 5xx" and "bad +300 ms"',
      raw: {
        name: 'x',
        strategies: [{ name: 'r', maxSurge: 1, maxUnavailable: 0 }],
        load: { keepAlive: [false, true] },
        badVersion: { errorRate: ['2%', 0.1], latencyMs: [0, 300] },
      },
      labels: [
        'r, new connections, bad 2% 5xx, bad +0 ms',
        'r, new connections, bad 2% 5xx, bad +300 ms',
        'r, new connections, bad 10% 5xx, bad +0 ms',
        'r, new connections, bad 10% 5xx, bad +300 ms',
        'r, keep-alive, bad 2% 5xx, bad +0 ms',
        'r, keep-alive, bad 2% 5xx, bad +300 ms',
        'r, keep-alive, bad 10% 5xx, bad +0 ms',
        'r, keep-alive, bad 10% 5xx, bad +300 ms',
      ],
      ids: [
        'c01-r-new-connections-bad-2pct-5xx-bad-0-ms',
        // Cut at 40 characters after the index; the cut never leaves a trailing dash.
        'c02-r-new-connections-bad-2pct-5xx-bad-300-m',
        'c03-r-new-connections-bad-10pct-5xx-bad-0-ms',
        'c04-r-new-connections-bad-10pct-5xx-bad-300',
        'c05-r-keep-alive-bad-2pct-5xx-bad-0-ms',
        'c06-r-keep-alive-bad-2pct-5xx-bad-300-ms',
        'c07-r-keep-alive-bad-10pct-5xx-bad-0-ms',
        'c08-r-keep-alive-bad-10pct-5xx-bad-300-ms',
      ],
    },
    {
      name: 'a fraction of a percent stays file-name safe; single badVersion values are not named',
      raw: { name: 'x', strategies: [{ name: 'r' }], badVersion: { errorRate: ['0.5%', '12.25%'], latencyMs: 300 } },
      labels: ['r, bad 0.5% 5xx', 'r, bad 12.25% 5xx'],
      ids: ['c01-r-bad-0-5pct-5xx', 'c02-r-bad-12-25pct-5xx'],
    },
    {
      name: 'a single errorRate and a list of latencies',
      raw: { name: 'x', strategies: [{ name: 'r' }], badVersion: { errorRate: '20%', latencyMs: [0, 250] } },
      labels: ['r, bad +0 ms', 'r, bad +250 ms'],
      ids: ['c01-r-bad-0-ms', 'c02-r-bad-250-ms'],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const cells = expandCells(parseExperimentSpec(row.raw, 'spec.yaml'));
      assert.deepEqual(
        cells.map((c) => c.label),
        row.labels,
      );
      assert.deepEqual(
        cells.map((c) => c.id),
        row.ids,
      );
    });
  }

  it("resolves each cell's strategy for its replicas (batch = maxUnavailable with maxSurge 0)", () => {
    const cells = expandCells(
      parseExperimentSpec(
        { name: 'x', fleet: { replicas: [4, 6] }, strategies: [{ maxSurge: 0, maxUnavailable: 2 }, { type: 'Recreate' }, { type: 'naive' }] },
        'spec.yaml',
      ),
    );
    assert.deepEqual(
      cells.map((c) => [c.label, c.params.replicas, c.resolved?.maxSurge, c.resolved?.maxUnavailable]),
      [
        ['0/2, replicas 4', 4, 0, 2],
        ['0/2, replicas 6', 6, 0, 2],
        ['Recreate, replicas 4', 4, 0, 4],
        ['Recreate, replicas 6', 6, 0, 6],
        ['naive, replicas 4', 4, undefined, undefined],
        ['naive, replicas 6', 6, undefined, undefined],
      ],
    );
    assert.deepEqual(cells[0]!.varying, { replicas: 4 });
  });

  it("the bad version in each cell's params (a share, 0 and 0 without badVersion) and in varying only when listed", () => {
    const good = expandCells(parseExperimentSpec({ name: 'x', strategies: [{}] }, 'spec.yaml'));
    assert.deepEqual(
      good.map((c) => [c.params.badErrorRate, c.params.badLatencyMs, c.varying]),
      [[0, 0, {}]],
    );
    const swept = expandCells(parseExperimentSpec({ name: 'x', strategies: [{}], badVersion: { errorRate: ['2%', '30%'], latencyMs: 100 } }, 'spec.yaml'));
    assert.deepEqual(
      swept.map((c) => [c.params.badErrorRate, c.params.badLatencyMs, c.varying]),
      [
        [0.02, 100, { badErrorRate: 0.02 }],
        [0.3, 100, { badErrorRate: 0.3 }],
      ],
    );
  });

  it('runs go repetition by repetition through every cell', () => {
    const cells = expandCells(parseExperimentSpec({ name: 'x', strategies: [{ type: 'naive' }, { maxSurge: 1, maxUnavailable: 0 }] }, 'spec.yaml'));
    assert.deepEqual(
      planRuns(cells, 2).map((r) => [r.index, r.id, r.repetition]),
      [
        [1, 'c01-naive-r1', 1],
        [2, 'c02-1-0-r1', 1],
        [3, 'c01-naive-r2', 2],
        [4, 'c02-1-0-r2', 2],
      ],
    );
  });

  it('a script strategy keeps its batch and pollSeconds, and resolves to no engine strategy; replacementPolicy is kept as given', () => {
    const spec = parseExperimentSpec(
      {
        name: 'x',
        strategies: [
          { type: 'script', batch: 2 },
          { maxSurge: 0, maxUnavailable: 1, replacementPolicy: 'TerminationComplete' },
          { maxSurge: 0, maxUnavailable: 1 },
        ],
      },
      'spec.yaml',
    );
    const [script, complete, plain] = expandCells(spec);
    assert.deepEqual([script?.strategy.batch, script?.strategy.pollSeconds, script?.resolved], [2, undefined, undefined]);
    assert.equal(complete?.strategy.replacementPolicy, 'TerminationComplete');
    assert.equal(plain?.strategy.replacementPolicy, undefined, 'unset stays unset: the fleet file gets no field');
  });

  it('strategyName: explicit name wins', () => {
    assert.equal(strategyName({ name: 'mine', type: 'Recreate' }), 'mine');
  });
});

describe('experiment spec: every problem named by its path', () => {
  const rows: { name: string; raw: unknown; want: string[] }[] = [
    { name: 'no strategies', raw: { name: 'x', strategies: [] }, want: ['strategies: must list at least one strategy'] },
    {
      name: 'a bad name',
      raw: { name: 'Bad Name', strategies: [{}] },
      want: ['name: must be lowercase letters, digits and dashes, at most 40 characters, got "Bad Name"'],
    },
    {
      name: 'out of range and unknown fields',
      raw: { name: 'x', strategies: [{}], fleet: { replicas: 0, extra: 1 }, repetitions: 0 },
      want: ['repetitions: must be an integer from 1 to 50, got 0', 'fleet/replicas: must be an integer from 1 to 20, got 0', 'fleet: unknown field "extra"'],
    },
    {
      name: 'a bad element of a list names its index',
      raw: { name: 'x', strategies: [{}], load: { getPerSecond: [10, 'fast'] } },
      want: ['load/getPerSecond/1: must be a number from 0 to 2000, got "fast"'],
    },
    {
      name: 'a bad single value',
      raw: { name: 'x', strategies: [{}], load: { keepAlive: 'yes' } },
      want: ['load/keepAlive: must be true or false, got "yes"'],
    },
    {
      name: 'calibrationRun is true or false',
      raw: { name: 'x', strategies: [{}], calibrationRun: 'first' },
      want: ['calibrationRun: must be true or false, got "first"'],
    },
    {
      name: 'an unknown nginx mode',
      raw: { name: 'x', strategies: [{}], fleet: { nginxMode: ['reload', 'lua'] } },
      want: ['fleet/nginxMode/1: must be reload or dynamic, got "lua"'],
    },
    {
      name: 'unknown strategy type',
      raw: { name: 'x', strategies: [{ type: 'Linear' }] },
      want: ['strategies/0/type: must be "RollingUpdate", "Recreate", "BlueGreen", "Canary", "naive" or "script", got "Linear"'],
    },
    {
      name: 'script without a batch',
      raw: { name: 'x', strategies: [{}, { type: 'script' }] },
      want: ['strategies/1/batch: is required for type script: how many instances the script replaces at once (1 to 20)'],
    },
    {
      name: 'script batch and pollSeconds out of range',
      raw: {
        name: 'x',
        strategies: [
          { type: 'script', batch: 0 },
          { type: 'script', batch: 21 },
          { type: 'script', batch: 1.5 },
          { type: 'script', batch: 2, pollSeconds: 0 },
        ],
      },
      want: [
        'strategies/0/batch: must be an integer from 1 to 20, got 0',
        'strategies/1/batch: must be an integer from 1 to 20, got 21',
        'strategies/2/batch: must be an integer from 1 to 20, got 1.5',
        'strategies/3/pollSeconds: must be a number from 0.1 to 60, got 0',
      ],
    },
    {
      name: 'batch and pollSeconds only for script; replacementPolicy only for RollingUpdate; no maxSurge for script',
      raw: {
        name: 'x',
        strategies: [
          { maxSurge: 0, maxUnavailable: 1, batch: 1 },
          { type: 'naive', pollSeconds: 1 },
          { type: 'script', batch: 2, replacementPolicy: 'TerminationComplete' },
          { type: 'Recreate', replacementPolicy: 'TerminationStarted' },
          { type: 'script', batch: 3, maxUnavailable: 3 },
        ],
      },
      want: [
        'strategies/0/batch: only applies to type script, not RollingUpdate',
        'strategies/1/pollSeconds: only applies to type script, not naive',
        'strategies/2/replacementPolicy: only applies to types RollingUpdate and Canary (its final rolling update), not script',
        'strategies/3/replacementPolicy: only applies to types RollingUpdate and Canary (its final rolling update), not Recreate',
        'strategies/4/maxUnavailable: only applies to types RollingUpdate and Canary (its final rolling update), not script',
      ],
    },
    {
      name: 'an unknown replacementPolicy',
      raw: { name: 'x', strategies: [{ maxSurge: 0, maxUnavailable: 1, replacementPolicy: 'Eventually' }] },
      want: ['strategies/0/replacementPolicy: must be "TerminationStarted" or "TerminationComplete", got "Eventually"'],
    },
    {
      name: 'two scripts with the same batch need distinct names',
      raw: {
        name: 'x',
        strategies: [
          { type: 'script', batch: 2 },
          { type: 'script', batch: 2, pollSeconds: 0.5 },
        ],
      },
      want: ['strategies/1/name: duplicate strategy name "script b=2" (also strategies/0); give each a distinct name'],
    },
    {
      name: 'maxSurge and maxUnavailable both 0 (for the replicas listed)',
      raw: { name: 'x', strategies: [{ maxSurge: 0, maxUnavailable: 0 }] },
      want: [
        'strategies/0/maxSurge and strategies/0/maxUnavailable: maxSurge and maxUnavailable may not both be 0: the rollout could never replace an instance. Allow at least one, e.g. maxSurge 1',
      ],
    },
    {
      name: 'a malformed percentage',
      raw: { name: 'x', strategies: [{ maxSurge: '25 percent' }] },
      want: ['strategies/0/maxSurge: must be a non-negative integer (e.g. 1) or a percentage of replicas (e.g. "25%"), got "25 percent"'],
    },
    {
      name: 'fields that do not fit the type, and duplicate names',
      raw: {
        name: 'x',
        strategies: [{ type: 'Recreate', maxSurge: 1 }, { type: 'naive', maxUnavailable: 1 }, { intervalSeconds: 3 }, { name: 'naive', maxSurge: 1 }],
      },
      want: [
        'strategies/0/maxSurge: only applies to types RollingUpdate and Canary (its final rolling update), not Recreate',
        'strategies/1/maxUnavailable: only applies to types RollingUpdate and Canary (its final rolling update), not naive',
        'strategies/2/intervalSeconds: only applies to type naive',
        'strategies/3/name: duplicate strategy name "naive" (also strategies/1); give each a distinct name',
      ],
    },
    {
      name: 'an unknown record format',
      raw: { name: 'x', strategies: [{}], records: ['parquet'] },
      want: ['records/0: must be "ndjson" or "csv", got "parquet"'],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(problems(row.raw), row.want);
    });
  }
});

const GATE = { interval: '4s', minRequests: 10, maxErrorRate: '5%' };
const CANARY = { type: 'Canary', maxSurge: 1, maxUnavailable: 0, canary: { steps: [{ setWeight: 25 }, { analysis: {} }] } };

describe('experiment spec: BlueGreen, Canary, the analysis gate and a bad version', () => {
  const rows: {
    name: string;
    raw: Record<string, unknown>;
    want: { label: string; gate?: string; analysis?: Record<string, unknown>; fleet?: unknown; type?: string; surge?: number }[];
  }[] = [
    {
      name: 'the spec\'s analysis gates RollingUpdate (after the first wave) and BlueGreen (after the switch); analysis: false turns it off; names say "+ analysis"',
      raw: {
        name: 'x',
        fleet: { replicas: 4 },
        analysis: GATE,
        strategies: [
          { maxSurge: 1, maxUnavailable: 0, analysis: false },
          { maxSurge: 1, maxUnavailable: 0 },
          { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 10 } },
        ],
      },
      want: [
        { label: '1/0', type: 'RollingUpdate', surge: 1 },
        { label: '1/0 + analysis', gate: 'after the first wave', analysis: { onInconclusive: 'fail', ...GATE }, type: 'RollingUpdate', surge: 1 },
        {
          label: 'BlueGreen + analysis',
          gate: 'after the switch',
          analysis: { onInconclusive: 'fail', ...GATE },
          fleet: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 10 } },
          type: 'BlueGreen',
          surge: 4,
        },
      ],
    },
    {
      name: "a strategy's analysis is merged over the spec's, field by field; true takes the spec's as they are",
      raw: {
        name: 'x',
        analysis: GATE,
        strategies: [
          { name: 'strict', maxSurge: 1, maxUnavailable: 0, analysis: { maxErrorRate: '1%', failureLimit: 1 } },
          { name: 'plain', maxSurge: 0, maxUnavailable: 1, analysis: true },
        ],
      },
      want: [
        {
          label: 'strict',
          gate: 'after the first wave',
          analysis: { onInconclusive: 'fail', interval: '4s', minRequests: 10, maxErrorRate: '1%', failureLimit: 1 },
          type: 'RollingUpdate',
          surge: 1,
        },
        { label: 'plain', gate: 'after the first wave', analysis: { onInconclusive: 'fail', ...GATE }, type: 'RollingUpdate', surge: 0 },
      ],
    },
    {
      name: "a canary sticks on the probes' X-User header; its analysis steps carry the merged settings; the final rolling update takes maxSurge/maxUnavailable",
      raw: {
        name: 'x',
        fleet: { replicas: 4 },
        analysis: GATE,
        strategies: [
          CANARY,
          {
            type: 'Canary',
            canary: { canaryReplicas: 2, steps: [{ setWeight: 10 }, { pause: { duration: '2s' } }, { setWeight: 50 }, { analysis: { maxErrorRate: '1%' } }] },
          },
        ],
      },
      want: [
        {
          label: 'Canary 25% + analysis',
          gate: 'at canary step 2',
          fleet: { type: 'Canary', canary: { stickyKey: 'header:X-User', steps: [{ setWeight: 25 }, { analysis: { onInconclusive: 'fail', ...GATE } }] } },
          type: 'Canary',
          surge: 1,
        },
        {
          label: 'Canary 10%→50% + analysis',
          gate: 'at canary step 4',
          fleet: {
            type: 'Canary',
            canary: {
              canaryReplicas: 2,
              stickyKey: 'header:X-User',
              steps: [
                { setWeight: 10 },
                { pause: { duration: '2s' } },
                { setWeight: 50 },
                { analysis: { onInconclusive: 'fail', ...GATE, maxErrorRate: '1%' } },
              ],
            },
          },
          type: 'Canary',
          surge: 1,
        },
      ],
    },
    {
      name: 'without analysis settings nothing is gated: a canary without analysis steps, BlueGreen, RollingUpdate',
      raw: { name: 'x', strategies: [{ type: 'Canary', canary: { steps: [{ setWeight: 50 }, { pause: { duration: 3 } }] } }, { type: 'BlueGreen' }, {}] },
      want: [
        {
          label: 'Canary 50%',
          fleet: { type: 'Canary', canary: { stickyKey: 'header:X-User', steps: [{ setWeight: 50 }, { pause: { duration: 3 } }] } },
          type: 'Canary',
          surge: 1,
        },
        { label: 'BlueGreen', fleet: { type: 'BlueGreen', blueGreen: {} }, type: 'BlueGreen', surge: 3 },
        { label: '25%/25%', type: 'RollingUpdate', surge: 1 },
      ],
    },
    {
      name: 'a canary whose analysis step brings its own thresholds needs no analysis block',
      raw: { name: 'x', strategies: [{ type: 'Canary', canary: { steps: [{ setWeight: 20 }, { analysis: { interval: 2, maxErrorRate: 0.02 } }] } }] },
      want: [
        {
          label: 'Canary 20% + analysis',
          gate: 'at canary step 2',
          fleet: {
            type: 'Canary',
            canary: { stickyKey: 'header:X-User', steps: [{ setWeight: 20 }, { analysis: { onInconclusive: 'fail', interval: 2, maxErrorRate: 0.02 } }] },
          },
          type: 'Canary',
          surge: 1,
        },
      ],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const cells = expandCells(parseExperimentSpec(row.raw, 'spec.yaml'));
      assert.deepEqual(
        cells.map((c) => ({
          label: c.label,
          ...(c.gate ? { gate: c.gate } : {}),
          ...(c.analysis ? { analysis: c.analysis } : {}),
          ...(c.fleetStrategy ? { fleet: c.fleetStrategy } : {}),
          type: c.resolved?.type,
          surge: c.resolved?.maxSurge,
        })),
        row.want,
      );
    });
  }

  const envRows: { name: string; badVersion: unknown; env: Record<string, string>[] }[] = [
    { name: 'a percentage', badVersion: { errorRate: '20%' }, env: [{ BAD_ERROR_RATE: '0.2' }] },
    { name: 'a fraction and added latency', badVersion: { errorRate: 0.05, latencyMs: 300 }, env: [{ BAD_ERROR_RATE: '0.05', BAD_LATENCY_MS: '300' }] },
    { name: 'latency only', badVersion: { latencyMs: 250 }, env: [{ BAD_LATENCY_MS: '250' }] },
    { name: 'no badVersion: a good version, no env', badVersion: undefined, env: [{}] },
    {
      name: 'a list of error rates: each cell its own, the single latency in every one',
      badVersion: { errorRate: ['2%', '10%', '30%'], latencyMs: 300 },
      env: [
        { BAD_ERROR_RATE: '0.02', BAD_LATENCY_MS: '300' },
        { BAD_ERROR_RATE: '0.1', BAD_LATENCY_MS: '300' },
        { BAD_ERROR_RATE: '0.3', BAD_LATENCY_MS: '300' },
      ],
    },
    {
      name: 'a list of latencies with 0: that cell only has the error rate',
      badVersion: { errorRate: '20%', latencyMs: [0, 250] },
      env: [{ BAD_ERROR_RATE: '0.2' }, { BAD_ERROR_RATE: '0.2', BAD_LATENCY_MS: '250' }],
    },
  ];
  for (const row of envRows) {
    it(`badVersion → the new version's env, per cell: ${row.name}`, () => {
      const spec = parseExperimentSpec({ name: 'x', strategies: [{}], ...(row.badVersion ? { badVersion: row.badVersion } : {}) }, 'spec.yaml');
      assert.deepEqual(
        expandCells(spec).map((c) => badVersionEnv(c.params)),
        row.env,
      );
    });
  }

  it('the default name of a gated strategy, and an explicit name', () => {
    assert.equal(strategyName({ type: 'RollingUpdate', maxSurge: 1, maxUnavailable: 0 }, GATE), '1/0 + analysis');
    assert.equal(strategyName({ type: 'RollingUpdate', maxSurge: 1, maxUnavailable: 0, analysis: false }, GATE), '1/0');
    assert.equal(strategyName({ type: 'BlueGreen', name: 'bg' }, GATE), 'bg');
  });
});

describe('experiment spec: BlueGreen, Canary, analysis and badVersion problems, named by their path', () => {
  const rows: { name: string; raw: unknown; want: string[] }[] = [
    {
      name: 'blocks that do not fit the type; maxSurge on BlueGreen',
      raw: {
        name: 'x',
        strategies: [
          { name: 'a', blueGreen: {} },
          { name: 'b', type: 'BlueGreen', canary: { steps: [{ setWeight: 5 }] } },
          { name: 'c', type: 'BlueGreen', maxSurge: 1 },
        ],
      },
      want: [
        'strategies/0/blueGreen: only applies to type BlueGreen, not RollingUpdate',
        'strategies/1/canary: only applies to type Canary, not BlueGreen',
        'strategies/2/maxSurge: only applies to types RollingUpdate and Canary (its final rolling update), not BlueGreen',
      ],
    },
    {
      name: 'what would wait for fleetroll promote or resume: autoPromote false, a pause without a duration; no preview',
      raw: {
        name: 'x',
        strategies: [
          { type: 'BlueGreen', blueGreen: { autoPromote: false, preview: { upstream: 'p' } } },
          { type: 'Canary', canary: { steps: [{ setWeight: 10 }, { pause: {} }] } },
        ],
      },
      want: [
        'strategies/0/blueGreen/preview: is not available in an experiment: the nginx of a run serves one upstream, and no prePromotion hook runs',
        'strategies/0/blueGreen/autoPromote: must be true (the default) in an experiment: nobody runs fleetroll promote during a run, got false',
        'strategies/1/canary/steps/1/pause: needs a duration in an experiment (e.g. { duration: 5s }): nobody runs fleetroll promote or abort during a run',
      ],
    },
    {
      name: "the sticky key is the experiment's; canary steps are checked like the fleet file's; steps are required",
      raw: {
        name: 'x',
        fleet: { replicas: 2 },
        strategies: [
          { type: 'Canary', canary: { stickyKey: 'cookie:s', canaryReplicas: 3, steps: [{ setWeight: 125 }, { setWeight: 5, pause: { duration: 1 } }] } },
          { type: 'Canary', name: 'empty' },
        ],
      },
      want: [
        'strategies/0/canary/stickyKey: is set by the experiment: header:X-User (the probes send one of load.users ids per request; they all come from one client address), remove it',
        'strategies/0/canary/canaryReplicas: must be at most replicas (2), got 3',
        'strategies/0/canary/steps/0/setWeight: must be a whole percent from 0 to 100, got 125',
        'strategies/0/canary/steps/1: must be exactly one of setWeight, pause or analysis (e.g. { setWeight: 20 }), got "setWeight" and "pause"',
        'strategies/1/canary/steps: is required with type Canary: a list of steps such as [{ setWeight: 10 }, { pause: { duration: 5m } }, { setWeight: 50 }, { pause: {} }]',
      ],
    },
    {
      name: "analysis settings are checked with the fleet file's rules, each problem where it is written (spec, strategy or step)",
      raw: {
        name: 'x',
        analysis: { interval: 'soon', maxErrorRate: '5%' },
        strategies: [
          { maxSurge: 1, maxUnavailable: 0, analysis: { maxErrorRate: 2 } },
          { type: 'Canary', canary: { steps: [{ setWeight: 10 }, { analysis: { minRequests: -1 } }] } },
        ],
      },
      want: [
        'analysis/interval: must be a duration from 1 s to 3600 s: a number of seconds or a string like "10s", "500ms", "1m", got "soon"',
        'strategies/0/analysis/maxErrorRate: must be the highest error rate of the new revision: a percentage like "1%" or a fraction below 1 like 0.01, got 2',
        'strategies/1/canary/steps/1/analysis/minRequests: must be a number of requests from 0 to 1000000, got -1',
      ],
    },
    {
      name: 'a gate without a threshold: named at the innermost block that exists',
      raw: {
        name: 'x',
        analysis: { interval: '4s' },
        strategies: [
          { name: 'a', maxSurge: 1, maxUnavailable: 0 },
          { name: 'b', maxSurge: 1, maxUnavailable: 0, analysis: { minRequests: 5 } },
          { type: 'Canary', canary: { steps: [{ setWeight: 10 }, { analysis: {} }] } },
        ],
      },
      want: [
        'analysis: must set at least one threshold: maxErrorRate (e.g. "1%"), maxErrorRateIncrease (e.g. "0.5%") or maxLatencyRatio (e.g. 1.5)',
        'strategies/1/analysis: must set at least one threshold: maxErrorRate (e.g. "1%"), maxErrorRateIncrease (e.g. "0.5%") or maxLatencyRatio (e.g. 1.5)',
        'strategies/2/canary/steps/1/analysis: must set at least one threshold: maxErrorRate (e.g. "1%"), maxErrorRateIncrease (e.g. "0.5%") or maxLatencyRatio (e.g. 1.5)',
      ],
    },
    {
      name: 'onInconclusive: pause would wait for a human: refused wherever it is written',
      raw: {
        name: 'x',
        analysis: { ...GATE, onInconclusive: 'pause' },
        strategies: [
          { maxSurge: 1, maxUnavailable: 0 },
          { type: 'Canary', canary: { steps: [{ setWeight: 10 }, { analysis: { onInconclusive: 'pause' } }] } },
        ],
      },
      want: [
        'analysis/onInconclusive: must be "fail" (the default) in an experiment: nobody runs fleetroll resume, promote or abort during a run',
        'strategies/1/canary/steps/1/analysis/onInconclusive: must be "fail" (the default) in an experiment: nobody runs fleetroll resume, promote or abort during a run',
      ],
    },
    {
      name: 'analysis where no gate can use it',
      raw: {
        name: 'x',
        strategies: [
          { type: 'naive', analysis: GATE },
          { type: 'Recreate', analysis: GATE },
          { type: 'Canary', analysis: GATE, canary: { steps: [{ setWeight: 10 }] } },
          { name: 'r', analysis: true },
        ],
      },
      want: [
        'strategies/0/analysis: only applies to types RollingUpdate (after the first wave), BlueGreen (after the switch) and Canary (its analysis steps), not naive',
        'strategies/1/analysis: only applies to types RollingUpdate (after the first wave), BlueGreen (after the switch) and Canary (its analysis steps), not Recreate',
        'strategies/2/analysis: a canary is judged only at its analysis steps: add { analysis: {} } to canary/steps',
        'strategies/3/analysis: true takes the spec\'s analysis settings, but the spec has no analysis: give the settings here (e.g. { interval: 4s, maxErrorRate: "5%" }) or in the spec',
      ],
    },
    {
      name: "the spec's analysis used by no strategy; an analysis step under analysis: false",
      raw: {
        name: 'x',
        analysis: GATE,
        strategies: [
          { type: 'naive' },
          { maxSurge: 1, maxUnavailable: 0, analysis: false },
          { type: 'Canary', analysis: false, canary: { steps: [{ setWeight: 10 }, { analysis: {} }] } },
        ],
      },
      want: [
        'strategies/2/canary/steps/1/analysis: this strategy turns the analysis gate off (strategies/2/analysis: false); remove the step or the false',
        "analysis: no strategy uses it: it gates RollingUpdate (after the first wave), BlueGreen (after the switch) and a Canary's analysis steps, unless the strategy says analysis: false",
      ],
    },
    {
      name: 'blue-green: the old set must wait longer than the analysis takes to fail, or nothing can switch back',
      raw: {
        name: 'x',
        analysis: { interval: '10s', maxErrorRate: '5%', failureLimit: 1 },
        strategies: [
          { name: 'short', type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 20 } },
          { name: 'default', type: 'BlueGreen', analysis: { interval: '30s', failureLimit: 0 } },
          { name: 'ok', type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 21 } },
        ],
      },
      want: [
        'strategies/0/blueGreen/scaleDownDelaySeconds: must be longer than the analysis takes to fail (interval 10 s × (failureLimit 1 + 1) = 20 s): the gate switches back only while the old set waits; got 20',
        'strategies/1/blueGreen/scaleDownDelaySeconds: must be longer than the analysis takes to fail (interval 30 s × (failureLimit 0 + 1) = 30 s): the gate switches back only while the old set waits; got 30 (the default)',
      ],
    },
    {
      name: "expectStopped needs a gate, and fleetroll's strategies",
      raw: {
        name: 'x',
        strategies: [
          { type: 'script', batch: 1, expectStopped: true },
          { maxSurge: 1, maxUnavailable: 0, expectStopped: true },
          { name: 'fine', maxSurge: 1, maxUnavailable: 0, expectStopped: false },
        ],
      },
      want: [
        "strategies/0/expectStopped: only applies to fleetroll's strategies (the analysis gate), not script",
        "strategies/1/expectStopped: this strategy has no analysis gate, so nothing can stop its deploy: give it analysis settings (here or in the spec's analysis) or an analysis step",
      ],
    },
    {
      name: 'badVersion: a share from 0 to 1, a latency in ms, and something bad',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: '120%', latencyMs: -5, extra: 1 } },
      want: [
        'badVersion/errorRate: must be a share from 0 to 1 like "20%" or 0.2, got "120%"',
        'badVersion/latencyMs: must be an integer from 0 to 10000, got -5',
        'badVersion: unknown field "extra"',
      ],
    },
    {
      name: 'badVersion that is not bad',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: 0, latencyMs: 0 } },
      want: ['badVersion: must make the new version bad: errorRate above 0 (e.g. "20%") and/or latencyMs above 0'],
    },
    {
      name: 'badVersion with neither field',
      raw: { name: 'x', strategies: [{}], badVersion: {} },
      want: ['badVersion: must make the new version bad: errorRate above 0 (e.g. "20%") and/or latencyMs above 0'],
    },
    {
      name: 'badVersion lists: every bad element named by its index',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: ['2%', '150%', 'x'], latencyMs: [100, 2.5] } },
      want: [
        'badVersion/errorRate/1: must be a share from 0 to 1 like "20%" or 0.2, got "150%"',
        'badVersion/errorRate/2: must be a share from 0 to 1 like "20%" or 0.2, got "x"',
        'badVersion/latencyMs/1: must be an integer from 0 to 10000, got 2.5',
      ],
    },
    {
      name: 'badVersion: a single value of the wrong type',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: true } },
      want: ['badVersion/errorRate: must be a share like "20%" or 0.2, got true'],
    },
    {
      name: 'badVersion: an empty list',
      raw: { name: 'x', strategies: [{}], badVersion: { latencyMs: [] } },
      want: ['badVersion/latencyMs: must list at least one value'],
    },
    {
      name: 'badVersion: a 0 in the errorRate list without latency is a good version',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: [0, '5%'] } },
      want: [
        'badVersion/errorRate/0: 0 with latencyMs unset (0) would run a good version: every combination must make it bad (errorRate above 0 and/or latencyMs above 0), so errorRate may list 0 only when every latencyMs is above 0',
      ],
    },
    {
      name: 'badVersion: both lists hold 0: named at errorRate, pointing at the latency',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: ['5%', 0], latencyMs: [300, 0] } },
      want: [
        'badVersion/errorRate/1: 0 with latencyMs 0 (badVersion/latencyMs/1) would run a good version: every combination must make it bad (errorRate above 0 and/or latencyMs above 0), so errorRate may list 0 only when every latencyMs is above 0',
      ],
    },
    {
      name: 'badVersion: a 0 in the latency list with errorRate 0',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: 0, latencyMs: [0, 100] } },
      want: [
        'badVersion/latencyMs/0: 0 with errorRate 0 would run a good version: every combination must make it bad (errorRate above 0 and/or latencyMs above 0), so latencyMs may list 0 only when every errorRate is above 0',
      ],
    },
    {
      name: 'badVersion: a 0 in a list is fine when the other field is above 0 everywhere',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: [0, '5%'], latencyMs: [100, 300] } },
      want: [],
    },
    {
      name: 'badVersion: the same value twice, however written, would make two cells with one label',
      raw: { name: 'x', strategies: [{}], badVersion: { errorRate: ['20%', 0.2], latencyMs: [5, 10, 5] } },
      want: [
        'badVersion/errorRate/1: repeats 20% (badVersion/errorRate/0): each value is a configuration of its own, list it once',
        'badVersion/latencyMs/2: repeats 5 ms (badVersion/latencyMs/0): each value is a configuration of its own, list it once',
      ],
    },
    {
      name: 'load.users: at least one',
      raw: { name: 'x', strategies: [{}], load: { users: 0 } },
      want: ['load/users: must be an integer from 1 to 100000, got 0'],
    },
    {
      name: "a strategy's analysis must be a mapping or a boolean",
      raw: { name: 'x', strategies: [{ analysis: 'yes' }] },
      want: ['strategies/0/analysis: must be a mapping of analysis settings, true (the spec\'s analysis) or false (no analysis gate), got "yes"'],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(problems(row.raw), row.want);
    });
  }
});

describe('shipped experiment specs', () => {
  const files = readdirSync(examples).filter((f) => /\.ya?ml$/.test(f));
  it('there are at least five', () => assert.ok(files.length >= 5, files.join(', ')));
  for (const f of files) {
    it(`${f} loads and expands`, async () => {
      const spec = await loadExperimentSpec(join(examples, f));
      assert.ok(expandCells(spec).length >= 1);
    });
  }
  it('06-bad-version-sweep.yaml sweeps the error rate: one configuration per strategy and value, each with its env', async () => {
    const cells = expandCells(await loadExperimentSpec(join(examples, '06-bad-version-sweep.yaml')));
    assert.deepEqual(
      cells.map((c) => [c.label, c.gate, badVersionEnv(c.params).BAD_ERROR_RATE]),
      [
        ['rolling + gate, bad 2% 5xx', 'after the first wave', '0.02'],
        ['rolling + gate, bad 10% 5xx', 'after the first wave', '0.1'],
        ['rolling + gate, bad 30% 5xx', 'after the first wave', '0.3'],
        ['canary 25% + analysis, bad 2% 5xx', 'at canary step 2', '0.02'],
        ['canary 25% + analysis, bad 10% 5xx', 'at canary step 2', '0.1'],
        ['canary 25% + analysis, bad 30% 5xx', 'at canary step 2', '0.3'],
      ],
    );
  });
});
