/**
 * Report plumbing: number formatting, the Markdown/HTML renderings of one
 * document, the CSV and NDJSON recordings, that the chart specs render
 * to SVG through Vega-Lite + Vega headless, the script control beside
 * fleetroll, and the strategies against a bad version (problems, table).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderSvg, versionsPerSecondSpec, windowDurationSpec } from '../../src/experiment/charts.js';
import { toHtml, toMarkdown, type Block } from '../../src/experiment/document.js';
import { RolloutFailedError } from '../../src/errors.js';
import { cellProblems, eventLines, recordsToCsv, toNdjson } from '../../src/experiment/experiment.js';
import { perSecond, type RequestRecord } from '../../src/experiment/metrics.js';
import type { CellAggregate, RunMetrics, Stat } from '../../src/experiment/analysis.js';
import { stoppedByAnalysisGate } from '../../src/experiment/rehearse.js';
import {
  badVersionTable,
  badVersionText,
  checkTargets,
  configurationsTable,
  fmtStat,
  scriptComparison,
  scriptComparisonTable,
  type CellSummary,
  type ExperimentSummary,
  type RunOutcome,
  type ScriptComparisonRow,
  type TargetCheck,
} from '../../src/experiment/report.js';
import { expandCells, parseExperimentSpec, type Cell, type CellParams } from '../../src/experiment/spec.js';

describe('fmtStat', () => {
  const rows: { name: string; args: Parameters<typeof fmtStat>; want: string }[] = [
    { name: 'missing', args: [null], want: 'n/a' },
    { name: 'one run: just the value', args: [{ median: 3, min: 3, max: 3, n: 1 }], want: '3' },
    { name: 'spread: median (min–max)', args: [{ median: 2, min: 0, max: 5, n: 3 }], want: '2 (0–5)' },
    { name: 'ms as seconds with one decimal', args: [{ median: 9640, min: 9100, max: 10230, n: 3 }, 1000, 1], want: '9.6 (9.1–10.2)' },
    { name: 'a spread that vanishes when rounded is not shown', args: [{ median: 212, min: 205, max: 230, n: 3 }, 1000, 1], want: '0.2' },
    { name: 'with decimals asked for, always that many', args: [{ median: 2.5, min: 1, max: 4, n: 4 }, 1, 1], want: '2.5 (1.0–4.0)' },
    { name: 'a count median between two runs keeps its half', args: [{ median: 0.5, min: 0, max: 1, n: 2 }], want: '0.5 (0–1)' },
  ];
  for (const row of rows) it(row.name, () => assert.equal(fmtStat(...row.args), row.want));
});

describe('document: the same blocks as Markdown and HTML', () => {
  const blocks: Block[] = [
    { kind: 'h1', text: 'Experiment: a <b> test' },
    { kind: 'p', text: 'uses `code` and **bold**' },
    { kind: 'table', head: ['config', 'failed'], align: ['l', 'r'], rows: [['naive | control', '2']] },
    { kind: 'img', src: 'charts/x.svg', alt: 'a chart' },
  ];
  it('Markdown: headings, escaped pipes in cells, right-aligned columns, images', () => {
    assert.equal(
      toMarkdown(blocks),
      '# Experiment: a <b> test\n\nuses `code` and **bold**\n\n| config | failed |\n| --- | ---: |\n| naive \\| control | 2 |\n\n![a chart](charts/x.svg)\n',
    );
  });
  it('HTML: escaped text, inline code and bold, table cells, images', () => {
    const html = toHtml('t', blocks);
    assert.match(html, /<h1>Experiment: a &lt;b&gt; test<\/h1>/);
    assert.match(html, /<p>uses <code>code<\/code> and <strong>bold<\/strong><\/p>/);
    assert.match(html, /<td>naive \| control<\/td><td class="r">2<\/td>/);
    assert.match(html, /<img src="charts\/x.svg" alt="a chart">/);
    assert.match(html, /^<!doctype html>/);
  });
});

describe('recordings', () => {
  const records: RequestRecord[] = [
    { t: 0.5, method: 'GET', path: '/api/books', latencyMs: 3.2, status: 200, version: '1.0.0' },
    { t: 12, method: 'POST', path: '/api/orders', latencyMs: 4, error: 'socket hang up, "really"' },
    { t: 20, method: 'GET', path: '/api/books', latencyMs: 30, status: 200, version: '1.1.0', retried: true, retryError: 'ECONNRESET' },
  ];
  it('CSV: one header, one row per request, quoting where needed', () => {
    assert.equal(
      recordsToCsv(records),
      't,method,path,status,error,latencyMs,version,retried,retryError\n' +
        '0.5,GET,/api/books,200,,3.2,1.0.0,,\n' +
        '12,POST,/api/orders,,"socket hang up, ""really""",4,,,\n' +
        '20,GET,/api/books,200,,30,1.1.0,true,ECONNRESET\n',
    );
  });
  it('NDJSON: one JSON object per line; events flattened with their time and source', () => {
    assert.equal(toNdjson([]), '');
    assert.equal(toNdjson(records.slice(0, 1)), '{"t":0.5,"method":"GET","path":"/api/books","latencyMs":3.2,"status":200,"version":"1.0.0"}\n');
    assert.deepEqual(eventLines([{ t: 1.23456, source: 'engine', event: { type: 'ready', name: 'n1' } }]), [
      { t: 1.235, source: 'engine', type: 'ready', name: 'n1' },
    ]);
  });
});

describe('charts render to SVG with Vega-Lite + Vega, headless', () => {
  it('versions per second: a stacked bar per second, the versions in the legend', async () => {
    const records: RequestRecord[] = [
      { t: 100, method: 'GET', path: '/', latencyMs: 1, status: 200, version: '1.0.0' },
      { t: 1100, method: 'GET', path: '/', latencyMs: 1, status: 200, version: '1.1.0' },
      { t: 1200, method: 'GET', path: '/', latencyMs: 1, status: 502 },
    ];
    const svg = await renderSvg(
      versionsPerSecondSpec({ title: 'run 1', from: '1.0.0', to: '1.1.0', buckets: perSecond(records), deployStartMs: 500, deployEndMs: 1500 }),
    );
    assert.match(svg, /^<svg/);
    for (const text of ['run 1', '1.0.0', '1.1.0', 'failed', 'deploy starts', 'seconds since the probes started']) assert.ok(svg.includes(text), text);
  });
  it('window and duration: measured beside predicted, one panel per metric', async () => {
    const svg = await renderSvg(
      windowDurationSpec(
        [
          { cell: 'batch 1', metric: 'mixed-version window', kind: 'measured', value: 30, min: 29, max: 31 },
          { cell: 'batch 1', metric: 'mixed-version window', kind: 'predicted by simulate', value: 28 },
          { cell: 'batch 1', metric: 'deploy duration', kind: 'measured', value: 40, min: 39, max: 41 },
        ],
        'exp',
        ['batch 1'],
      ),
    );
    for (const text of ['mixed-version window', 'deploy duration', 'batch 1', 'predicted by simulate']) assert.ok(svg.includes(text), text);
  });
});

describe('scriptComparison: the script control beside fleetroll with the same batch', () => {
  const st = (median: number, min = median, max = median): Stat => ({ median, min, max, n: 1 });
  const PARAMS: CellParams = {
    replicas: 6,
    drainSeconds: 2,
    warmupSeconds: 3,
    minReadySeconds: 0,
    prestopSeconds: 2,
    getPerSecond: 20,
    postConcurrency: 2,
    postDurationMs: 200,
    keepAlive: false,
    dynamicNginx: false,
    badErrorRate: 0,
    badLatencyMs: 0,
  };
  function cell(
    label: string,
    strategy: CellSummary['strategy'],
    resolved: CellSummary['resolved'],
    m: { durationMs: number; windowMs: number; reloads: number; failed?: [number, number]; deployErrors?: number },
    params: Partial<CellParams> = {},
  ): CellSummary {
    const failed = m.failed ?? [0, 0];
    const zero = st(0);
    const aggregate: CellAggregate = {
      runs: 1,
      deployErrors: m.deployErrors ?? 0,
      requests: { total: st(300), ok: st(300 - failed[0]), failed: st(failed[0], 0, failed[1]), retried: zero },
      byOutcome: {},
      failuresByPhase: [],
      windowMs: st(m.windowMs),
      deployDurationMs: st(m.durationMs),
      minCapacity: zero,
      peakInstances: zero,
      reloads: st(m.reloads),
      waves: zero,
      latencyP99Ms: zero,
      overheadRatio: null,
      predicted: null,
      calibratedRatio: null,
      calibratedDurationMs: null,
      outcomes: { completed: 1, stopped: 0, failed: 0 },
      newVersion: {
        answeredInDeploy: zero,
        sentInDeploy: zero,
        ownFailures: zero,
        otherFailures: zero,
        stopMs: null,
        stopAfterFirstFailureMs: null,
        exposureMs: null,
      },
      health: null,
    };
    return {
      id: label,
      label,
      strategy,
      resolved,
      params: { ...PARAMS, ...params },
      varying: {},
      runs: [],
      aggregate,
      expectZeroFailures: true,
      expectationMet: null,
    };
  }
  const script = (b: number, m: Parameters<typeof cell>[3], params?: Partial<CellParams>) =>
    cell(`script b=${b}`, { name: `script b=${b}`, type: 'script', batch: b }, null, m, params);
  const rolling = (
    label: string,
    surge: number,
    unavailable: number,
    m: Parameters<typeof cell>[3],
    policy?: 'TerminationStarted' | 'TerminationComplete',
    params?: Partial<CellParams>,
  ) =>
    cell(
      label,
      { name: label, type: 'RollingUpdate', maxSurge: surge, maxUnavailable: unavailable, replacementPolicy: policy },
      { maxSurge: surge, maxUnavailable: unavailable },
      m,
      params,
    );

  const rows: { name: string; cells: CellSummary[]; want: [number, string, string, number | null][] }[] = [
    {
      name: 'each batch pairs with 0/b under both policies, in spec order',
      cells: [
        script(1, { durationMs: 40_000, windowMs: 30_000, reloads: 12 }),
        script(2, { durationMs: 20_000, windowMs: 14_000, reloads: 6 }),
        rolling('0/1', 0, 1, { durationMs: 22_000, windowMs: 20_000, reloads: 7 }),
        rolling('0/2', 0, 2, { durationMs: 12_000, windowMs: 9_000, reloads: 4 }),
        rolling('0/2 TerminationComplete', 0, 2, { durationMs: 15_000, windowMs: 10_000, reloads: 4 }, 'TerminationComplete'),
      ],
      want: [
        [1, 'script b=1', '0/1', 0.55],
        [2, 'script b=2', '0/2', 0.6],
        [2, 'script b=2', '0/2 TerminationComplete', 0.75],
      ],
    },
    {
      name: 'no pair: surge above 0, another batch, other settings (a worse bad version too), Recreate, naive',
      cells: [
        script(2, { durationMs: 20_000, windowMs: 14_000, reloads: 6 }),
        rolling('1/2', 1, 2, { durationMs: 9_000, windowMs: 9_000, reloads: 4 }),
        rolling('0/3', 0, 3, { durationMs: 9_000, windowMs: 9_000, reloads: 3 }),
        rolling('0/2 drain 1', 0, 2, { durationMs: 9_000, windowMs: 9_000, reloads: 4 }, undefined, { drainSeconds: 1 }),
        rolling('0/2 bad 5% 5xx', 0, 2, { durationMs: 9_000, windowMs: 9_000, reloads: 4 }, undefined, { badErrorRate: 0.05 }),
        cell('Recreate', { name: 'Recreate', type: 'Recreate' }, { maxSurge: 0, maxUnavailable: 6 }, { durationMs: 5_000, windowMs: 1_000, reloads: 2 }),
        cell('naive', { name: 'naive', type: 'naive' }, null, { durationMs: 5_000, windowMs: 1_000, reloads: 6 }),
      ],
      want: [],
    },
    {
      name: 'a script whose duration is 0 (nothing measured) has no ratio',
      cells: [script(1, { durationMs: 0, windowMs: 0, reloads: 0 }), rolling('0/1', 0, 1, { durationMs: 1_000, windowMs: 0, reloads: 1 })],
      want: [[1, 'script b=1', '0/1', null]],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(
        scriptComparison(row.cells).map((r) => [r.batch, r.script, r.fleetroll, r.durationRatio]),
        row.want,
      );
    });
  }

  it('a row carries both sides: medians, failed in the worst run, deploy errors, the policy', () => {
    const [r] = scriptComparison([
      script(3, { durationMs: 14_000, windowMs: 10_000, reloads: 4, failed: [0, 1] }),
      rolling('0/3 TerminationComplete', 0, 3, { durationMs: 7_000, windowMs: 6_500, reloads: 3, deployErrors: 1 }, 'TerminationComplete'),
    ]);
    assert.deepEqual(r, {
      batch: 3,
      script: 'script b=3',
      fleetroll: '0/3 TerminationComplete',
      replacementPolicy: 'TerminationComplete',
      durationMs: { fleetroll: 7000, script: 14000 },
      durationRatio: 0.5,
      windowMs: { fleetroll: 6500, script: 10000 },
      reloads: { fleetroll: 3, script: 4 },
      failed: { fleetroll: 0, script: 1 },
      deployErrors: { fleetroll: 1, script: 0 },
    });
  });

  const base: ScriptComparisonRow = {
    batch: 2,
    script: 'script b=2',
    fleetroll: '0/2',
    durationMs: { fleetroll: 12_000, script: 20_000 },
    durationRatio: 0.6,
    windowMs: { fleetroll: 15_000, script: 14_000 },
    reloads: { fleetroll: 6, script: 6 },
    failed: { fleetroll: 0, script: 0 },
    deployErrors: { fleetroll: 0, script: 0 },
  };
  const targets: { name: string; row: ScriptComparisonRow; want: TargetCheck }[] = [
    {
      name: 'every target met at its bound (ratio 0.6, window + 1 s, equal reloads)',
      row: base,
      want: { duration: true, window: true, reloads: true, zeroFailures: true },
    },
    { name: 'slower than 0.6×', row: { ...base, durationRatio: 0.61 }, want: { duration: false, window: true, reloads: true, zeroFailures: true } },
    { name: 'no ratio is no success', row: { ...base, durationRatio: null }, want: { duration: false, window: true, reloads: true, zeroFailures: true } },
    {
      name: 'window more than 1 s longer',
      row: { ...base, windowMs: { fleetroll: 15_001, script: 14_000 } },
      want: { duration: true, window: false, reloads: true, zeroFailures: true },
    },
    {
      name: 'more reloads',
      row: { ...base, reloads: { fleetroll: 7, script: 6 } },
      want: { duration: true, window: true, reloads: false, zeroFailures: true },
    },
    {
      name: 'a failed request on the script side',
      row: { ...base, failed: { fleetroll: 0, script: 1 } },
      want: { duration: true, window: true, reloads: true, zeroFailures: false },
    },
    {
      name: 'a failed deploy',
      row: { ...base, deployErrors: { fleetroll: 1, script: 0 } },
      want: { duration: true, window: true, reloads: true, zeroFailures: false },
    },
  ];
  for (const t of targets) it(`checkTargets: ${t.name}`, () => assert.deepEqual(checkTargets(t.row), t.want));

  it('the table: one line per pair, both sides in seconds', () => {
    const table = scriptComparisonTable([base]);
    assert.equal(table.kind, 'table');
    assert.deepEqual(table.kind === 'table' ? table.rows : [], [['2', '0/2', 'script b=2', '12.0 / 20.0', '0.60×', '15.0 / 14.0', '6 / 6', '0 / 0']]);
  });
});

describe('strategies against a bad version: what counts as a problem, and the table', () => {
  /** The cell's bad version: good, 20% 500s, or only slower. */
  const GOOD = { badErrorRate: 0, badLatencyMs: 0 };
  const BAD = { badErrorRate: 0.2, badLatencyMs: 0 };
  const SLOW = { badErrorRate: 0, badLatencyMs: 300 };
  /** A run with the figures cellProblems reads. */
  function run(outcome: RunMetrics['outcome'], o: { failed?: number; own?: number; wrong?: boolean; expected?: string } = {}): RunOutcome {
    const failed = o.failed ?? 0;
    const metrics = {
      outcome,
      requests: { total: 100, ok: 100 - failed, failed, retried: 0, byMethod: {}, latencyMs: { p50: 1, p95: 1, p99: 1, max: 1 } },
      newVersion: { ownFailures: o.own ?? 0, otherFailures: failed - (o.own ?? 0) },
    } as unknown as RunMetrics;
    return { metrics, wrongVersions: o.wrong ? ['web-1: 1.1.0'] : [], expectedVersion: o.expected ?? '1.1.0' } as unknown as RunOutcome;
  }
  const cell = (strategy: Partial<Cell['strategy']>) => ({ label: 'c', strategy: { type: 'RollingUpdate', name: 'c', ...strategy } as Cell['strategy'] });
  const rows: { name: string; cell: ReturnType<typeof cell>; runs: RunOutcome[]; bad: typeof GOOD; want: string[] }[] = [
    { name: 'a good version, every deploy completed: none', cell: cell({}), runs: [run('completed')], bad: GOOD, want: [] },
    {
      name: 'a good version stopped by the analysis: a false alarm',
      cell: cell({}),
      runs: [run('stopped', { expected: '1.0.0' })],
      bad: GOOD,
      want: ['c: the analysis stopped 1 deploy(s) of a good version'],
    },
    {
      name: 'a bad version stopped, and expected to be: none',
      cell: cell({ expectStopped: true }),
      runs: [run('stopped', { expected: '1.0.0', failed: 5, own: 5 })],
      bad: BAD,
      want: [],
    },
    {
      name: 'a bad version completed where it should have been stopped',
      cell: cell({ expectStopped: true }),
      runs: [run('completed'), run('stopped')],
      bad: BAD,
      want: ['c: 1 deploy(s) completed; the analysis was expected to stop the new version'],
    },
    {
      name: 'expectStopped false, but the analysis stopped it',
      cell: cell({ expectStopped: false }),
      runs: [run('stopped')],
      bad: BAD,
      want: ['c: the analysis stopped 1 deploy(s) of the new version'],
    },
    { name: 'a deploy that failed for another reason', cell: cell({}), runs: [run('failed')], bad: BAD, want: ['c: 1 deploy(s) failed'] },
    {
      name: 'instances left on the wrong version, named by what was expected',
      cell: cell({}),
      runs: [run('stopped', { wrong: true, expected: '1.0.0' })],
      bad: BAD,
      want: ['c: 1 run(s) ended with instances not serving 1.0.0'],
    },
    {
      name: 'expectZeroFailures with a bad version: its own 500s do not count',
      cell: cell({ expectZeroFailures: true }),
      runs: [run('completed', { failed: 30, own: 30 })],
      bad: BAD,
      want: [],
    },
    {
      name: 'expectZeroFailures with a bad version: any other failure does',
      cell: cell({ expectZeroFailures: true }),
      runs: [run('completed', { failed: 31, own: 30 })],
      bad: BAD,
      want: ["c: expected zero failed requests other than the bad version's own, got 1 in the worst run"],
    },
    {
      name: 'expectZeroFailures with a good version: every failure counts',
      cell: cell({ expectZeroFailures: true }),
      runs: [run('completed', { failed: 2, own: 2 })],
      bad: GOOD,
      want: ['c: expected zero failed requests, got 2 in the worst run'],
    },
    { name: 'a bad version that is only slower: a stop is no false alarm', cell: cell({}), runs: [run('stopped', { expected: '1.0.0' })], bad: SLOW, want: [] },
    {
      name: 'a bad version that is only slower: expectZeroFailures counts what it did not answer itself',
      cell: cell({ expectZeroFailures: true }),
      runs: [run('completed', { failed: 3, own: 1 })],
      bad: SLOW,
      want: ["c: expected zero failed requests other than the bad version's own, got 2 in the worst run"],
    },
  ];
  for (const row of rows) it(`cellProblems: ${row.name}`, () => assert.deepEqual(cellProblems({ ...row.cell, params: row.bad }, row.runs), row.want));

  it("stoppedByAnalysisGate reads the engine's stoppedBy (every strategy sets it: test/unit/controller.test.ts), never the message", () => {
    assert.equal(
      stoppedByAnalysisGate(
        new RolloutFailedError('analysis after the first wave: analysis failed\nrolled back', '', {
          analysisFailed: true,
          stoppedBy: 'analysis',
          rolledBackTo: 'abc',
        }),
      ),
      true,
    );
    assert.equal(
      stoppedByAnalysisGate(new RolloutFailedError('canary aborted (the analysis failed): ...', '', { aborted: 'the analysis failed', stoppedBy: 'analysis' })),
      true,
    );
    assert.equal(
      stoppedByAnalysisGate(
        new RolloutFailedError('rolled back (the analysis failed): traffic switched back ...', '', { switchedBack: true, stoppedBy: 'analysis' }),
      ),
      true,
    );
    assert.equal(
      stoppedByAnalysisGate(new RolloutFailedError('rolled back (the analysis failed): a message alone says nothing', '', { switchedBack: true })),
      false,
    );
    assert.equal(
      stoppedByAnalysisGate(new RolloutFailedError('rolled back (undo): traffic switched back ...', '', { switchedBack: true })),
      false,
      'fleetroll undo',
    );
    assert.equal(stoppedByAnalysisGate(new RolloutFailedError('canary aborted (fleetroll abort): ...', '', { aborted: 'fleetroll abort' })), false);
    assert.equal(stoppedByAnalysisGate(new RolloutFailedError('progress deadline exceeded', '', { stuck: [] })), false);
    assert.equal(stoppedByAnalysisGate(new Error('boom')), false);
  });

  it('the table: gate, outcome, failures split, window, share of the deploy, times to roll back, access log', () => {
    const st = (median: number, min = median, max = median): Stat => ({ median, min, max, n: 2 });
    const zero = st(0);
    const agg = (o: Partial<CellAggregate>): CellAggregate => ({
      runs: 2,
      deployErrors: 0,
      requests: { total: st(350), ok: zero, failed: zero, retried: zero },
      byOutcome: {},
      failuresByPhase: [],
      windowMs: st(3900, 3800, 4000),
      deployDurationMs: zero,
      minCapacity: zero,
      peakInstances: zero,
      reloads: zero,
      waves: zero,
      latencyP99Ms: zero,
      overheadRatio: null,
      predicted: null,
      calibratedRatio: null,
      calibratedDurationMs: null,
      outcomes: { completed: 0, stopped: 2, failed: 0 },
      newVersion: {
        answeredInDeploy: st(25),
        sentInDeploy: st(250),
        ownFailures: st(5),
        otherFailures: zero,
        stopMs: st(6100),
        stopAfterFirstFailureMs: st(3300),
        exposureMs: st(4000),
      },
      health: { requests: st(245), failed5xx: st(5), dropped: zero, mixedVersionWindowMs: zero },
      ...o,
    });
    const cells = [
      {
        label: 'rolling + gate',
        strategy: {
          name: 'rolling + gate',
          type: 'RollingUpdate',
          gate: 'after the first wave',
          analysis: { interval: '4s', minRequests: 10, maxErrorRate: '5%' },
        },
        aggregate: agg({}),
      },
      {
        label: 'rolling, no gate',
        strategy: { name: 'rolling, no gate', type: 'RollingUpdate', gate: null },
        aggregate: agg({
          outcomes: { completed: 2, stopped: 0, failed: 0 },
          newVersion: {
            answeredInDeploy: st(137),
            sentInDeploy: st(259),
            ownFailures: st(32),
            otherFailures: zero,
            stopMs: null,
            stopAfterFirstFailureMs: null,
            exposureMs: null,
          },
          health: null,
        }),
      },
    ] as unknown as CellSummary[];
    const table = badVersionTable({ cells } as unknown as ExperimentSummary);
    assert.deepEqual(table.kind === 'table' ? table.rows : [], [
      [
        'rolling + gate',
        'after the first wave: error rate ≤ 5%, measured every 4s, at least 10 requests',
        'stopped by the analysis',
        '350',
        '5 / 0',
        '3.90 (3.80–4.00)',
        '25 of 250 (10%)',
        '6.1 / 3.3',
        '4.0',
        '5 / 0',
      ],
      ['rolling, no gate', 'none', 'completed', '350', '32 / 0', '3.90 (3.80–4.00)', '137 of 259 (53%), then all', 'not stopped', 'not stopped', 'n/a'],
    ]);
  });
});

describe('a swept bad version in the report', () => {
  const texts: { name: string; badVersion: NonNullable<ExperimentSummary['experiment']['badVersion']>; want: string }[] = [
    { name: 'one error rate', badVersion: { errorRate: 0.2, latencyMs: 0 }, want: '20% of its API answers are 500s' },
    { name: 'an error rate and latency', badVersion: { errorRate: 0.05, latencyMs: 300 }, want: '5% of its API answers are 500s, 300 ms added to each' },
    { name: 'latency only', badVersion: { errorRate: 0, latencyMs: 250 }, want: '250 ms added to each' },
    {
      name: 'a list of error rates',
      badVersion: { errorRate: [0.02, 0.1, 0.3], latencyMs: 0 },
      want: '2%, 10% or 30% of its API answers are 500s, one configuration per value',
    },
    {
      name: 'a list of latencies with 0',
      badVersion: { errorRate: 0.05, latencyMs: [0, 300] },
      want: '5% of its API answers are 500s, 0 or 300 ms added to each, one configuration per value',
    },
  ];
  for (const t of texts) it(`badVersionText: ${t.name}`, () => assert.equal(badVersionText(t.badVersion), t.want));

  /** The configurations table of a spec, from its cells as the runner summarises them. */
  function configurations(raw: Record<string, unknown>): { head: string[]; rows: string[][] } {
    const spec = parseExperimentSpec(raw, 'spec.yaml');
    const cells = expandCells(spec).map((c) => ({
      label: c.label,
      strategy: { ...c.strategy, gate: c.gate ?? null },
      resolved: c.resolved ?? null,
      params: c.params,
    }));
    const badVersion = spec.badVersion ? { errorRate: spec.badVersion.errorRate ?? 0, latencyMs: spec.badVersion.latencyMs ?? 0 } : null;
    const table = configurationsTable({ experiment: { badVersion }, cells } as unknown as ExperimentSummary);
    assert.equal(table.kind, 'table');
    return table.kind === 'table' ? { head: table.head, rows: table.rows } : { head: [], rows: [] };
  }

  it("configurations: each cell's bad version in two columns, the share as a percent", () => {
    const t = configurations({
      name: 'x',
      strategies: [{ name: 'r', maxSurge: 1, maxUnavailable: 0 }],
      badVersion: { errorRate: ['2%', '12.5%'], latencyMs: 300 },
    });
    assert.deepEqual(t.head.slice(-2), ['bad version: 500s', 'bad version: added (ms)']);
    assert.deepEqual(
      t.rows.map((r) => [r[0], ...r.slice(-2)]),
      [
        ['r, bad 2% 5xx', '2%', '300'],
        ['r, bad 12.5% 5xx', '12.5%', '300'],
      ],
    );
  });

  it('configurations: no bad version columns for a good version', () => {
    const t = configurations({ name: 'x', strategies: [{ name: 'r', maxSurge: 1, maxUnavailable: 0 }] });
    assert.deepEqual(t.head.slice(-2), ['connections', 'nginx']);
    assert.equal(t.rows[0]?.length, t.head.length);
  });
});
