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
import { expandCells, loadExperimentSpec, parseExperimentSpec, planRuns, strategyName } from '../../src/experiment/spec.js';

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
    assert.deepEqual(s.fleet, { replicas: 3, drainSeconds: 2, warmupSeconds: 1, minReadySeconds: 0, prestopSeconds: 1 });
    assert.deepEqual(s.load, { getPerSecond: 10, postConcurrency: 1, postDurationMs: 200, keepAlive: false, timeoutMs: 5000, beforeSeconds: 1.5, afterSeconds: 1 });
    assert.equal(s.from, '1.0.0');
    assert.equal(s.to, '1.1.0');
    assert.equal(s.repetitions, 1);
    assert.deepEqual(s.records, ['ndjson']);
  });

  const rows: { name: string; raw: Record<string, unknown>; labels: string[]; ids: string[] }[] = [
    {
      name: 'one cell per strategy when nothing is a list; default names from the settings',
      raw: { name: 'x', strategies: [{ type: 'naive' }, { maxSurge: 1, maxUnavailable: 0 }, { maxSurge: '100%', maxUnavailable: 0 }, { type: 'Recreate' }, {}] },
      labels: ['naive', '1/0', '100%/0', 'Recreate', '25%/25%'],
      ids: ['c01-naive', 'c02-1-0', 'c03-100pct-0', 'c04-recreate', 'c05-25pct-25pct'],
    },
    {
      name: 'lists are dimensions: strategies × replicas × keepAlive, varying settings named in labels',
      raw: { name: 'x', strategies: [{ name: 'batch 1', maxSurge: 0, maxUnavailable: 1 }], fleet: { replicas: [3, 6] }, load: { keepAlive: [false, true], getPerSecond: [50] } },
      labels: ['batch 1, replicas 3, new connections', 'batch 1, replicas 3, keep-alive', 'batch 1, replicas 6, new connections', 'batch 1, replicas 6, keep-alive'],
      ids: ['c01-batch-1-replicas-3-new-connections', 'c02-batch-1-replicas-3-keep-alive', 'c03-batch-1-replicas-6-new-connections', 'c04-batch-1-replicas-6-keep-alive'],
    },
    {
      name: 'the script control is named by its batch; a replacementPolicy joins the rolling name',
      raw: { name: 'x', strategies: [{ type: 'script', batch: 2 }, { type: 'script', batch: 3, pollSeconds: 0.5 }, { maxSurge: 0, maxUnavailable: 2 }, { maxSurge: 0, maxUnavailable: 2, replacementPolicy: 'TerminationComplete' }, { maxSurge: 1, maxUnavailable: 0, replacementPolicy: 'TerminationStarted' }] },
      labels: ['script b=2', 'script b=3', '0/2', '0/2 TerminationComplete', '1/0 TerminationStarted'],
      ids: ['c01-script-b-2', 'c02-script-b-3', 'c03-0-2', 'c04-0-2-terminationcomplete', 'c05-1-0-terminationstarted'],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const cells = expandCells(parseExperimentSpec(row.raw, 'spec.yaml'));
      assert.deepEqual(cells.map((c) => c.label), row.labels);
      assert.deepEqual(cells.map((c) => c.id), row.ids);
    });
  }

  it('resolves each cell\'s strategy for its replicas (batch = maxUnavailable with maxSurge 0)', () => {
    const cells = expandCells(parseExperimentSpec({ name: 'x', fleet: { replicas: [4, 6] }, strategies: [{ maxSurge: 0, maxUnavailable: 2 }, { type: 'Recreate' }, { type: 'naive' }] }, 'spec.yaml'));
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

  it('runs go repetition by repetition through every cell', () => {
    const cells = expandCells(parseExperimentSpec({ name: 'x', strategies: [{ type: 'naive' }, { maxSurge: 1, maxUnavailable: 0 }] }, 'spec.yaml'));
    assert.deepEqual(planRuns(cells, 2).map((r) => [r.index, r.id, r.repetition]), [
      [1, 'c01-naive-r1', 1],
      [2, 'c02-1-0-r1', 1],
      [3, 'c01-naive-r2', 2],
      [4, 'c02-1-0-r2', 2],
    ]);
  });

  it('a script strategy keeps its batch and pollSeconds, and resolves to no engine strategy; replacementPolicy is kept as given', () => {
    const spec = parseExperimentSpec({ name: 'x', strategies: [{ type: 'script', batch: 2 }, { maxSurge: 0, maxUnavailable: 1, replacementPolicy: 'TerminationComplete' }, { maxSurge: 0, maxUnavailable: 1 }] }, 'spec.yaml');
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
    { name: 'a bad name', raw: { name: 'Bad Name', strategies: [{}] }, want: ['name: must be lowercase letters, digits and dashes, at most 40 characters, got "Bad Name"'] },
    {
      name: 'out of range and unknown fields',
      raw: { name: 'x', strategies: [{}], fleet: { replicas: 0, extra: 1 }, repetitions: 0 },
      want: ['repetitions: must be an integer from 1 to 50, got 0', 'fleet/replicas: must be an integer from 1 to 20, got 0', 'fleet: unknown field "extra"'],
    },
    { name: 'a bad element of a list names its index', raw: { name: 'x', strategies: [{}], load: { getPerSecond: [10, 'fast'] } }, want: ['load/getPerSecond/1: must be a number from 0 to 2000, got "fast"'] },
    { name: 'a bad single value', raw: { name: 'x', strategies: [{}], load: { keepAlive: 'yes' } }, want: ['load/keepAlive: must be true or false, got "yes"'] },
    { name: 'unknown strategy type', raw: { name: 'x', strategies: [{ type: 'BlueGreen' }] }, want: ['strategies/0/type: must be "RollingUpdate", "Recreate", "naive" or "script", got "BlueGreen"'] },
    { name: 'script without a batch', raw: { name: 'x', strategies: [{}, { type: 'script' }] }, want: ['strategies/1/batch: is required for type script: how many instances the script replaces at once (1 to 20)'] },
    {
      name: 'script batch and pollSeconds out of range',
      raw: { name: 'x', strategies: [{ type: 'script', batch: 0 }, { type: 'script', batch: 21 }, { type: 'script', batch: 1.5 }, { type: 'script', batch: 2, pollSeconds: 0 }] },
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
        strategies: [{ maxSurge: 0, maxUnavailable: 1, batch: 1 }, { type: 'naive', pollSeconds: 1 }, { type: 'script', batch: 2, replacementPolicy: 'TerminationComplete' }, { type: 'Recreate', replacementPolicy: 'TerminationStarted' }, { type: 'script', batch: 3, maxUnavailable: 3 }],
      },
      want: [
        'strategies/0/batch: only applies to type script, not RollingUpdate',
        'strategies/1/pollSeconds: only applies to type script, not naive',
        'strategies/2/replacementPolicy: only applies to type RollingUpdate, not script',
        'strategies/3/replacementPolicy: only applies to type RollingUpdate, not Recreate',
        'strategies/4/maxUnavailable: only applies to type RollingUpdate, not script',
      ],
    },
    { name: 'an unknown replacementPolicy', raw: { name: 'x', strategies: [{ maxSurge: 0, maxUnavailable: 1, replacementPolicy: 'Eventually' }] }, want: ['strategies/0/replacementPolicy: must be "TerminationStarted" or "TerminationComplete", got "Eventually"'] },
    { name: 'two scripts with the same batch need distinct names', raw: { name: 'x', strategies: [{ type: 'script', batch: 2 }, { type: 'script', batch: 2, pollSeconds: 0.5 }] }, want: ['strategies/1/name: duplicate strategy name "script b=2" (also strategies/0); give each a distinct name'] },
    {
      name: 'maxSurge and maxUnavailable both 0 (for the replicas listed)',
      raw: { name: 'x', strategies: [{ maxSurge: 0, maxUnavailable: 0 }] },
      want: ['strategies/0/maxSurge and strategies/0/maxUnavailable: maxSurge and maxUnavailable may not both be 0: the rollout could never replace an instance. Allow at least one, e.g. maxSurge 1'],
    },
    { name: 'a malformed percentage', raw: { name: 'x', strategies: [{ maxSurge: '25 percent' }] }, want: ['strategies/0/maxSurge: must be a non-negative integer (e.g. 1) or a percentage of replicas (e.g. "25%"), got "25 percent"'] },
    {
      name: 'fields that do not fit the type, and duplicate names',
      raw: { name: 'x', strategies: [{ type: 'Recreate', maxSurge: 1 }, { type: 'naive', maxUnavailable: 1 }, { intervalSeconds: 3 }, { name: 'naive', maxSurge: 1 }] },
      want: [
        'strategies/0/maxSurge: only applies to type RollingUpdate, not Recreate',
        'strategies/1/maxUnavailable: only applies to type RollingUpdate, not naive',
        'strategies/2/intervalSeconds: only applies to type naive',
        'strategies/3/name: duplicate strategy name "naive" (also strategies/1); give each a distinct name',
      ],
    },
    { name: 'an unknown record format', raw: { name: 'x', strategies: [{}], records: ['parquet'] }, want: ['records/0: must be "ndjson" or "csv", got "parquet"'] },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(problems(row.raw), row.want);
    });
  }
});

describe('shipped experiment specs', () => {
  const files = readdirSync(examples).filter((f) => /\.ya?ml$/.test(f));
  it('there are at least four', () => assert.ok(files.length >= 4, files.join(', ')));
  for (const f of files) {
    it(`${f} loads and expands`, async () => {
      const spec = await loadExperimentSpec(join(examples, f));
      assert.ok(expandCells(spec).length >= 1);
    });
  }
});
