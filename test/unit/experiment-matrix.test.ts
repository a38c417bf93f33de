/**
 * The size of an experiment's matrix is computed from its
 * list lengths before anything is expanded, and a spec that plans more than
 * MAX_PLANNED_RUNS runs is refused (exit 2) naming the lists, fast, however
 * large the product (12^5 values once ran V8 out of memory).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ValidationError } from '../../src/errors.js';
import { assertPlannable, expandCells, matrixSize, MAX_PLANNED_RUNS, parseExperimentSpec, planRuns } from '../../src/experiment/spec.js';

const twelve = (f: (k: number) => number) => Array.from({ length: 12 }, (_, k) => f(k));
/** Up to 5 lists of 12 values, in matrix order. */
const LISTS: Record<string, Record<string, unknown>> = {
  fleet: { replicas: twelve((k) => k + 1), drainSeconds: twelve((k) => k), warmupSeconds: twelve((k) => k) },
  load: { getPerSecond: twelve((k) => 10 * (k + 1)), postConcurrency: twelve((k) => k) },
};
function spec(lists: number, strategies: number, repetitions: number): Record<string, unknown> {
  const fleet: Record<string, unknown> = {};
  const load: Record<string, unknown> = {};
  const order: [Record<string, unknown>, string, unknown][] = [
    [fleet, 'replicas', LISTS.fleet!.replicas],
    [fleet, 'drainSeconds', LISTS.fleet!.drainSeconds],
    [load, 'getPerSecond', LISTS.load!.getPerSecond],
    [fleet, 'warmupSeconds', LISTS.fleet!.warmupSeconds],
    [load, 'postConcurrency', LISTS.load!.postConcurrency],
  ];
  for (const [into, key, values] of order.slice(0, lists)) into[key] = values;
  return {
    name: 'big',
    repetitions,
    fleet,
    load,
    strategies: Array.from({ length: strategies }, (_, i) => ({ name: `s${i}`, maxSurge: 1, maxUnavailable: 0 })),
  };
}

/**
 * CPU time of this process in ms, not wall time: the guards below are about
 * the work done (expanding the product would take seconds of CPU), and a busy
 * machine stretches wall time without doing more work (a wall-clock 2 s guard
 * failed beside a full test run at load 28).
 */
function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

function refusal(raw: unknown): { issue: string; ms: number } {
  const t0 = cpuMs();
  try {
    parseExperimentSpec(raw, 'spec.yaml');
  } catch (err) {
    const ms = cpuMs() - t0;
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.exitCode, 2);
    const matrix = err.issues.filter((i) => i.path === 'matrix');
    assert.equal(matrix.length, 1, err.message);
    return { issue: `${matrix[0]!.path}: ${matrix[0]!.message}`, ms };
  }
  assert.fail('the spec was accepted');
}

describe('experiment matrix: refused above MAX_PLANNED_RUNS before it is expanded', () => {
  const rows = [
    {
      name: '12^3 values × 20 strategies × 50 repetitions: 1,728,000 runs',
      raw: spec(3, 20, 50),
      issue:
        'matrix: 1,728,000 runs planned (12 × 12 × 12 values × 20 strategies × 50 repetitions), more than the 1,000 an experiment may plan; the lists: fleet/replicas (12), fleet/drainSeconds (12), load/getPerSecond (12): list fewer values, strategies or repetitions, or split the spec',
    },
    {
      name: '12^4 values × 20 × 50 (once 57 s and 3.4 GB)',
      raw: spec(4, 20, 50),
      issue:
        'matrix: 20,736,000 runs planned (12 × 12 × 12 × 12 values × 20 strategies × 50 repetitions), more than the 1,000 an experiment may plan; the lists: fleet/replicas (12), fleet/drainSeconds (12), fleet/warmupSeconds (12), load/getPerSecond (12): list fewer values, strategies or repetitions, or split the spec',
    },
    {
      name: '12^5 values × 20 × 50 (once out of memory)',
      raw: spec(5, 20, 50),
      issue:
        'matrix: 248,832,000 runs planned (12 × 12 × 12 × 12 × 12 values × 20 strategies × 50 repetitions), more than the 1,000 an experiment may plan; the lists: fleet/replicas (12), fleet/drainSeconds (12), fleet/warmupSeconds (12), load/getPerSecond (12), load/postConcurrency (12): list fewer values, strategies or repetitions, or split the spec',
    },
    {
      name: 'one list of 2 values over 20 strategies × 50 repetitions (1,000 without it) is enough',
      raw: { ...spec(0, 20, 50), fleet: { replicas: [3, 4] } },
      issue:
        'matrix: 2,000 runs planned (2 values × 20 strategies × 50 repetitions), more than the 1,000 an experiment may plan; the lists: fleet/replicas (2): list fewer values, strategies or repetitions, or split the spec',
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      // Best of 3 against noise (a GC pause on a busy machine), like the accepted side.
      const tries = [1, 2, 3].map(() => refusal(row.raw));
      const issue = tries[0]!.issue;
      const ms = Math.min(...tries.map((t) => t.ms));
      assert.equal(issue, row.issue);
      // The same validation work, accepted: 20 strategies resolved at 12 replica counts (240 runs). Best of 3 against noise.
      const accepted = Math.min(
        ...[1, 2, 3].map(() => {
          const t0 = cpuMs();
          parseExperimentSpec(spec(1, 20, 1), 'spec.yaml');
          return cpuMs() - t0;
        }),
      );
      // Generous guards only: refusing costs what validating the strategies costs, never the product.
      assert.ok(ms < 2000, `refused in ${ms.toFixed(0)} ms of CPU`);
      // Expanding 1,728,000 runs takes seconds and gigabytes: 50 × a small spec's time is far below that.
      assert.ok(ms < 50 * accepted + 200, `refused in ${ms.toFixed(1)} ms; a 240-run spec is accepted in ${accepted.toFixed(1)} ms`);
    });
  }

  it('exactly MAX_PLANNED_RUNS is accepted and plans that many runs', () => {
    assert.equal(MAX_PLANNED_RUNS, 1000);
    const s = parseExperimentSpec(spec(0, 20, 50), 'spec.yaml');
    assert.deepEqual(matrixSize(s), { runs: 1000, cells: 20, lists: [], strategies: 20, repetitions: 50 });
    assert.equal(planRuns(expandCells(s), s.repetitions).length, 1000);
  });

  it('matrixSize counts only the lists of more than one value (a one-value list is a single value)', () => {
    const s = parseExperimentSpec(
      {
        name: 'x',
        strategies: [{}, { type: 'naive' }],
        fleet: { replicas: [3, 6], drainSeconds: [2] },
        load: { keepAlive: [false, true] },
        badVersion: { errorRate: ['2%', '10%', '30%'] },
        repetitions: 2,
      },
      'spec.yaml',
    );
    assert.deepEqual(matrixSize(s), {
      runs: 2 * 2 * 2 * 3 * 2,
      cells: 24,
      lists: [
        { path: 'fleet/replicas', values: 2 },
        { path: 'load/keepAlive', values: 2 },
        { path: 'badVersion/errorRate', values: 3 },
      ],
      strategies: 2,
      repetitions: 2,
    });
    assert.equal(expandCells(s).length, 24);
  });

  it('--repetitions raised after parsing is refused by name, and expandCells refuses too', () => {
    const s = parseExperimentSpec(spec(1, 20, 1), 'spec.yaml');
    s.repetitions = 50;
    assert.throws(
      () => assertPlannable(s, 'spec.yaml', '--repetitions'),
      (err: unknown) =>
        err instanceof ValidationError &&
        err.exitCode === 2 &&
        err.message ===
          'spec.yaml: matrix: 12,000 runs planned (12 values × 20 strategies × 50 repetitions (--repetitions)), more than the 1,000 an experiment may plan; the lists: fleet/replicas (12): list fewer values, strategies or repetitions, or split the spec',
    );
    assert.throws(() => expandCells(s), ValidationError);
  });

  it('the other issues are still reported beside the matrix issue', () => {
    const raw = spec(3, 20, 50);
    (raw.strategies as Record<string, unknown>[])[0]!.batch = 2;
    assert.throws(
      () => parseExperimentSpec(raw, 'spec.yaml'),
      (err: unknown) => err instanceof ValidationError && err.issues[0]!.path === 'matrix' && err.issues.some((i) => i.path === 'strategies/0/batch'),
    );
  });

  it('lists that are not multiplied are capped too: canary steps, record formats', () => {
    const steps = Array.from({ length: 51 }, () => ({ setWeight: 10 }));
    assert.throws(
      () => parseExperimentSpec({ name: 'x', strategies: [{ type: 'Canary', canary: { steps } }] }, 'spec.yaml'),
      (err: unknown) => err instanceof ValidationError && err.issues.some((i) => i.path === 'strategies/0/canary/steps' && /at most 50 steps/.test(i.message)),
    );
    assert.throws(
      () => parseExperimentSpec({ name: 'x', strategies: [{}], records: ['csv', 'csv', 'ndjson'] }, 'spec.yaml'),
      (err: unknown) => err instanceof ValidationError && err.issues.some((i) => i.path === 'records' && /at most 2/.test(i.message)),
    );
  });
});
