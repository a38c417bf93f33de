/**
 * The analysis gate (src/core/gate.ts): one measurement's verdict for each
 * threshold, inconclusive for too little traffic, the messages' figures, the
 * gate's state over successive measurements (failureLimit, inconclusiveLimit,
 * successCount, onInconclusive), and the `analysis:` block's schema
 * (src/config/analysis.ts).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { analysisSchema, parseDurationSeconds, parsePercent } from '../../src/config/analysis.js';
import { zodIssues } from '../../src/config/fields.js';
import { evaluate, formatPercent, gateStatus, type AnalysisSpec, type GateState, type Measurement, type Verdict } from '../../src/core/gate.js';
import type { TrafficStats } from '../../src/core/logStats.js';

/** A side of the comparison over a 10 s interval: `attempts` requests, `errors` of them 5xx, latencies by p99. */
function side(label: string, o: { requests: number; errors5xx?: number; retried?: number; p99?: number }): TrafficStats {
  const retried = o.retried ?? 0;
  const errors5xx = o.errors5xx ?? 0;
  const attempts = o.requests + retried;
  const errors = errors5xx + retried;
  const p99 = o.p99 ?? 100;
  return {
    label,
    startMs: 0,
    endMs: 10_000,
    requests: o.requests,
    errors5xx,
    clientClosed: 0,
    connectionFailures: retried,
    retriedFailures: retried,
    attempts,
    errors,
    errorRate: attempts === 0 ? 0 : errors / attempts,
    latencyMs: { p50: p99 / 2, p95: p99, p99, max: p99 },
  };
}

const spec = (o: Partial<AnalysisSpec> = {}): AnalysisSpec => ({ interval: 10, minRequests: 50, failureLimit: 0, onInconclusive: 'pause', ...o });

describe('evaluate: one measurement', () => {
  const rows: {
    name: string;
    spec: AnalysisSpec;
    canary: TrafficStats;
    stable?: TrafficStats;
    verdict: Verdict;
    /** The message, exactly, or a pattern. */
    message: string | RegExp;
    failing?: string[];
  }[] = [
    {
      name: 'maxErrorRate: above the limit fails, with the figures',
      spec: spec({ maxErrorRate: 0.05 }),
      canary: side('1.1.0', { requests: 562, errors5xx: 41 }),
      verdict: 'fail',
      message: 'error rate 7.3% on 1.1.0 over 10 s (41 of 562 requests), limit 5%',
      failing: ['errorRate'],
    },
    {
      name: 'maxErrorRate: exactly the limit passes (comparisons are strict)',
      spec: spec({ maxErrorRate: 0.05 }),
      canary: side('1.1.0', { requests: 100, errors5xx: 5 }),
      verdict: 'pass',
      message: 'error rate 5% on 1.1.0 over 10 s (5 of 100 requests), limit 5%',
    },
    {
      name: 'maxErrorRate: failed connections retried elsewhere count against the canary',
      spec: spec({ maxErrorRate: 0.01 }),
      canary: side('1.1.0', { requests: 90, errors5xx: 0, retried: 10 }),
      verdict: 'fail',
      message: 'error rate 10% on 1.1.0 over 10 s (10 of 100 requests: 0 5xx, 10 failed connections retried elsewhere), limit 1%',
      failing: ['errorRate'],
    },
    {
      name: 'maxErrorRate: needs no stable side',
      spec: spec({ maxErrorRate: 0.01 }),
      canary: side('1.1.0', { requests: 100 }),
      verdict: 'pass',
      message: 'error rate 0% on 1.1.0 over 10 s (0 of 100 requests), limit 1%',
    },
    {
      name: 'maxErrorRateIncrease: canary 6% vs stable 1% is 5 points, above 2 → fails',
      spec: spec({ maxErrorRateIncrease: 0.02 }),
      canary: side('1.1.0', { requests: 100, errors5xx: 6 }),
      stable: side('1.0.0', { requests: 300, errors5xx: 3 }),
      verdict: 'fail',
      message: 'error rate 6% on 1.1.0 (6 of 100 requests) vs 1% on 1.0.0 (3 of 300 requests) over 10 s: 5 points higher, limit 2 points',
      failing: ['errorRateIncrease'],
    },
    {
      name: 'maxErrorRateIncrease: both bad alike (the backend behind both is failing) passes',
      spec: spec({ maxErrorRateIncrease: 0.02 }),
      canary: side('1.1.0', { requests: 100, errors5xx: 30 }),
      stable: side('1.0.0', { requests: 300, errors5xx: 90 }),
      verdict: 'pass',
      message: /0 points higher, limit 2 points/,
    },
    {
      name: 'maxErrorRateIncrease: a canary better than stable passes',
      spec: spec({ maxErrorRateIncrease: 0.01 }),
      canary: side('1.1.0', { requests: 100 }),
      stable: side('1.0.0', { requests: 100, errors5xx: 5 }),
      verdict: 'pass',
      message: /5 points lower, limit 1 point$/,
    },
    {
      name: 'maxLatencyRatio: p99 412 ms vs 120 ms is 3.43×, above 1.5 → fails',
      spec: spec({ maxLatencyRatio: 1.5 }),
      canary: side('1.1.0', { requests: 100, p99: 412 }),
      stable: side('1.0.0', { requests: 100, p99: 120 }),
      verdict: 'fail',
      message: 'p99 latency 412 ms on 1.1.0 vs 120 ms on 1.0.0 over 10 s: 3.43×, limit 1.5×',
      failing: ['latencyRatio'],
    },
    {
      name: 'maxLatencyRatio: 180 vs 120 ms is exactly 1.5 → passes',
      spec: spec({ maxLatencyRatio: 1.5 }),
      canary: side('1.1.0', { requests: 100, p99: 180 }),
      stable: side('1.0.0', { requests: 100, p99: 120 }),
      verdict: 'pass',
      message: /1\.5×, limit 1\.5×$/,
    },
    {
      name: 'maxLatencyRatio: a stable p99 under the floor counts as the floor (3 ms vs 1 ms is no regression)',
      spec: spec({ maxLatencyRatio: 1.5 }),
      canary: side('1.1.0', { requests: 100, p99: 3 }),
      stable: side('1.0.0', { requests: 100, p99: 1 }),
      verdict: 'pass',
      message: 'p99 latency 3 ms on 1.1.0 vs 1 ms on 1.0.0 (counted as the 10 ms floor) over 10 s: 0.3×, limit 1.5×',
    },
    {
      name: 'maxLatencyRatio: above the floor, a slow canary still fails',
      spec: spec({ maxLatencyRatio: 1.5, latencyFloorMs: 10 }),
      canary: side('1.1.0', { requests: 100, p99: 60 }),
      stable: side('1.0.0', { requests: 100, p99: 2 }),
      verdict: 'fail',
      message: /6×, limit 1\.5×$/,
      failing: ['latencyRatio'],
    },
    {
      name: 'every threshold failing: each is named',
      spec: spec({ maxErrorRate: 0.01, maxErrorRateIncrease: 0.01, maxLatencyRatio: 2 }),
      canary: side('1.1.0', { requests: 100, errors5xx: 10, p99: 900 }),
      stable: side('1.0.0', { requests: 100, p99: 100 }),
      verdict: 'fail',
      message: /^error rate 10% on 1\.1\.0 over 10 s .*; error rate 10% on 1\.1\.0 .* vs 0% .*; p99 latency 900 ms .* 9×, limit 2×$/,
      failing: ['errorRate', 'errorRateIncrease', 'latencyRatio'],
    },
    {
      name: 'inconclusive: canary below minRequests',
      spec: spec({ maxErrorRate: 0.01 }),
      canary: side('1.1.0', { requests: 12, errors5xx: 12 }),
      verdict: 'inconclusive',
      message: 'only 12 requests on 1.1.0 over 10 s, need 50',
    },
    {
      name: 'inconclusive: stable below minRequests when the spec compares',
      spec: spec({ maxLatencyRatio: 1.5 }),
      canary: side('1.1.0', { requests: 100 }),
      stable: side('1.0.0', { requests: 3 }),
      verdict: 'inconclusive',
      message: 'only 3 requests on 1.0.0 over 10 s, need 50',
    },
    {
      name: 'inconclusive: no stable traffic at all when the spec compares',
      spec: spec({ maxErrorRateIncrease: 0.01 }),
      canary: side('1.1.0', { requests: 100 }),
      verdict: 'inconclusive',
      message: 'no stable traffic over 10 s to compare 1.1.0 with',
    },
    {
      name: 'minRequests counts attempts: a canary refusing every connection is measured, and fails',
      spec: spec({ maxErrorRate: 0.01 }),
      canary: side('1.1.0', { requests: 0, retried: 80 }),
      verdict: 'fail',
      message: /^error rate 100% on 1\.1\.0 .*80 failed connections retried elsewhere/,
      failing: ['errorRate'],
    },
    {
      name: 'minRequests 0: an idle canary passes on nothing',
      spec: spec({ minRequests: 0, maxErrorRate: 0.01 }),
      canary: side('1.1.0', { requests: 0 }),
      verdict: 'pass',
      message: /0 of 0 requests/,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const m = evaluate(row.canary, row.stable, row.spec);
      assert.equal(m.verdict, row.verdict, m.message);
      if (typeof row.message === 'string') assert.equal(m.message, row.message);
      else assert.match(m.message, row.message);
      assert.deepEqual(
        m.reasons.filter((r) => !r.ok && r.metric !== 'requests').map((r) => r.metric),
        row.failing ?? [],
      );
      assert.deepEqual([m.startMs, m.endMs], [0, 10_000]);
    });
  }

  it('reasons carry value and threshold for every check, passing ones too', () => {
    const m = evaluate(
      side('1.1.0', { requests: 562, errors5xx: 41, p99: 150 }),
      side('1.0.0', { requests: 1000, p99: 100 }),
      spec({ maxErrorRate: 0.1, maxLatencyRatio: 2 }),
    );
    assert.deepEqual(
      m.reasons.map((r) => [r.metric, r.revision, Number(r.value.toFixed(4)), r.threshold, r.ok]),
      [
        ['requests', '1.1.0', 562, 50, true],
        ['requests', '1.0.0', 1000, 50, true],
        ['errorRate', '1.1.0', 0.073, 0.1, true],
        ['latencyRatio', '1.1.0', 1.5, 2, true],
      ],
    );
  });

  const percents: [number, string][] = [
    [0.073, '7.3%'],
    [0.0504, '5.04%'],
    [0.05, '5%'],
    [41 / 562, '7.3%'],
    [0, '0%'],
    [1, '100%'],
  ];
  for (const [f, want] of percents) it(`formatPercent(${f}) is ${want}`, () => assert.equal(formatPercent(f), want));
});

describe('gateStatus: successive measurements', () => {
  const m = (verdict: Verdict, i: number): Measurement => ({
    verdict,
    startMs: i * 10_000,
    endMs: (i + 1) * 10_000,
    reasons: [],
    message: `${verdict} #${i + 1}`,
  });
  const seq = (...v: Verdict[]) => v.map(m);
  const rows: { name: string; spec: AnalysisSpec; verdicts: Verdict[]; state: GateState; counts: [number, number, number]; message: string | RegExp }[] = [
    { name: 'no measurement yet: running', spec: spec(), verdicts: [], state: 'running', counts: [0, 0, 0], message: 'analysis running: no measurement yet' },
    {
      name: 'one pass: passed',
      spec: spec(),
      verdicts: ['pass'],
      state: 'passed',
      counts: [1, 0, 0],
      message: 'analysis passed: 1 of 1 measurement passed; last: pass #1',
    },
    {
      name: 'failureLimit 0: the first failure fails the gate',
      spec: spec(),
      verdicts: ['fail'],
      state: 'failed',
      counts: [0, 1, 0],
      message: 'analysis failed: 1 of 1 measurement failed (failureLimit 0); last: fail #1',
    },
    {
      name: 'failureLimit 1: one failure is tolerated',
      spec: spec({ failureLimit: 1 }),
      verdicts: ['fail'],
      state: 'running',
      counts: [0, 1, 0],
      message: /^analysis running: 0 passed, 1 failed, 0 inconclusive of 1 measurement; last: fail #1$/,
    },
    {
      name: 'failureLimit 1: the second failure fails it',
      spec: spec({ failureLimit: 1 }),
      verdicts: ['fail', 'fail'],
      state: 'failed',
      counts: [0, 2, 0],
      message: /^analysis failed: 2 of 2 measurements failed \(failureLimit 1\); last: fail #2$/,
    },
    {
      name: 'failureLimit 1: a failure then a pass passes',
      spec: spec({ failureLimit: 1 }),
      verdicts: ['fail', 'pass'],
      state: 'passed',
      counts: [1, 1, 0],
      message: /^analysis passed: 1 of 2 measurements passed/,
    },
    {
      name: 'failureLimit 2 (DESIGN example): three failures fail it',
      spec: spec({ failureLimit: 2 }),
      verdicts: ['fail', 'fail', 'fail'],
      state: 'failed',
      counts: [0, 3, 0],
      message: /failureLimit 2/,
    },
    {
      name: 'inconclusiveLimit 0, onInconclusive pause: the first inconclusive pauses',
      spec: spec(),
      verdicts: ['inconclusive'],
      state: 'inconclusive',
      counts: [0, 0, 1],
      message: /^analysis inconclusive, pausing: 1 of 1 measurement without enough traffic \(inconclusiveLimit 0\); last: inconclusive #1$/,
    },
    {
      name: 'onInconclusive fail: inconclusive fails the gate',
      spec: spec({ onInconclusive: 'fail' }),
      verdicts: ['inconclusive'],
      state: 'failed',
      counts: [0, 0, 1],
      message: /^analysis failed, inconclusive: 1 of 1 measurement/,
    },
    {
      name: 'inconclusiveLimit 1: a quiet interval, then a pass, passes',
      spec: spec({ inconclusiveLimit: 1 }),
      verdicts: ['inconclusive', 'pass'],
      state: 'passed',
      counts: [1, 0, 1],
      message: /^analysis passed/,
    },
    {
      name: 'inconclusiveLimit 1: two quiet intervals pause',
      spec: spec({ inconclusiveLimit: 1 }),
      verdicts: ['inconclusive', 'inconclusive'],
      state: 'inconclusive',
      counts: [0, 0, 2],
      message: /inconclusiveLimit 1/,
    },
    {
      name: 'successCount 3: two passes keep it running',
      spec: spec({ successCount: 3 }),
      verdicts: ['pass', 'pass'],
      state: 'running',
      counts: [2, 0, 0],
      message: /^analysis running: 2 passed/,
    },
    {
      name: 'successCount 3, failureLimit 1: pass, fail, pass, pass → passed',
      spec: spec({ successCount: 3, failureLimit: 1 }),
      verdicts: ['pass', 'fail', 'pass', 'pass'],
      state: 'passed',
      counts: [3, 1, 0],
      message: /^analysis passed: 3 of 4 measurements passed/,
    },
    {
      name: 'failures win over passes in the same count (checked first)',
      spec: spec({ successCount: 2, failureLimit: 0 }),
      verdicts: ['pass', 'fail'],
      state: 'failed',
      counts: [1, 1, 0],
      message: /^analysis failed/,
    },
    {
      name: 'measurements after the deciding one are ignored',
      spec: spec(),
      verdicts: ['fail', 'pass', 'pass'],
      state: 'failed',
      counts: [0, 1, 0],
      message: /last: fail #1$/,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const s = gateStatus(seq(...row.verdicts), row.spec);
      assert.equal(s.state, row.state);
      assert.deepEqual([s.passes, s.failures, s.inconclusives], row.counts);
      if (typeof row.message === 'string') assert.equal(s.message, row.message);
      else assert.match(s.message, row.message);
    });
  }

  it('a failed gate carries the deciding measurement and its figures end to end', () => {
    const sp = spec({ maxErrorRate: 0.05, failureLimit: 1 });
    const bad = evaluate(side('1.1.0', { requests: 562, errors5xx: 41 }), undefined, sp);
    const s = gateStatus([bad, bad], sp);
    assert.equal(s.state, 'failed');
    assert.equal(s.last, bad);
    assert.equal(
      s.message,
      'analysis failed: 2 of 2 measurements failed (failureLimit 1); last: error rate 7.3% on 1.1.0 over 10 s (41 of 562 requests), limit 5%',
    );
  });
});

describe('the analysis: block', () => {
  const parse = (v: unknown) => {
    const r = analysisSchema.safeParse(v);
    return r.success ? { data: r.data } : { issues: zodIssues(r.error, 'analysis') };
  };

  const valid: { name: string; input: unknown; want: Partial<AnalysisSpec> }[] = [
    {
      name: 'the DESIGN example, defaults filled in',
      input: { interval: '10s', minRequests: 50, maxErrorRate: '1%', maxLatencyRatio: 1.5, failureLimit: 2 },
      want: {
        interval: 10,
        minRequests: 50,
        maxErrorRate: 0.01,
        maxLatencyRatio: 1.5,
        failureLimit: 2,
        inconclusiveLimit: 0,
        successCount: 1,
        latencyFloorMs: 10,
        onInconclusive: 'pause',
      },
    },
    { name: 'a bare number interval is seconds', input: { interval: 30, maxErrorRate: 0.02 }, want: { interval: 30, maxErrorRate: 0.02 } },
    { name: 'a minute interval', input: { interval: '1m', maxErrorRate: '0.5%' }, want: { interval: 60, maxErrorRate: 0.005 } },
    {
      name: 'milliseconds, at least a second',
      input: { interval: '1500ms', maxErrorRateIncrease: '0.5%' },
      want: { interval: 1.5, maxErrorRateIncrease: 0.005 },
    },
    {
      name: 'onInconclusive fail',
      input: { maxErrorRate: '1%', onInconclusive: 'fail', inconclusiveLimit: 3 },
      want: { onInconclusive: 'fail', inconclusiveLimit: 3 },
    },
  ];
  for (const row of valid) {
    it(`accepts ${row.name}`, () => {
      const r = parse(row.input);
      assert.ok(r.data, JSON.stringify(r.issues));
      for (const [k, v] of Object.entries(row.want)) assert.deepEqual(r.data[k as keyof AnalysisSpec], v, k);
    });
  }

  const invalid: { name: string; input: unknown; path: string; message: RegExp }[] = [
    {
      name: 'no threshold at all',
      input: { interval: '10s' },
      path: 'analysis',
      message: /at least one threshold: maxErrorRate .*maxErrorRateIncrease .*maxLatencyRatio/,
    },
    { name: 'not a mapping', input: 'strict', path: 'analysis', message: /must be a mapping of analysis settings/ },
    { name: 'an unknown field', input: { maxErrorRate: '1%', maxErrors: 3 }, path: 'analysis', message: /unknown field "maxErrors"/ },
    {
      name: 'an interval in words',
      input: { maxErrorRate: '1%', interval: '10 sec' },
      path: 'analysis/interval',
      message: /duration .*"10s", "500ms", "1m", got "10 sec"/,
    },
    { name: 'an interval under a second', input: { maxErrorRate: '1%', interval: '200ms' }, path: 'analysis/interval', message: /from 1 s to 3600 s/ },
    {
      name: 'a rate over 100%',
      input: { maxErrorRate: '150%' },
      path: 'analysis/maxErrorRate',
      message: /percentage like "1%" or a fraction below 1 like 0\.01, got "150%"/,
    },
    { name: 'a bare 1 as a rate (meant 1%?)', input: { maxErrorRate: 1 }, path: 'analysis/maxErrorRate', message: /fraction below 1/ },
    { name: 'a rate in words', input: { maxErrorRateIncrease: 'one percent' }, path: 'analysis/maxErrorRateIncrease', message: /percentage points/ },
    { name: 'a latency ratio under 1', input: { maxLatencyRatio: 0.8 }, path: 'analysis/maxLatencyRatio', message: /from 1 to 1000, got 0\.8/ },
    {
      name: 'a fractional minRequests',
      input: { maxErrorRate: '1%', minRequests: 2.5 },
      path: 'analysis/minRequests',
      message: /number of requests from 0 to 1000000, got 2\.5/,
    },
    {
      name: 'a negative failureLimit',
      input: { maxErrorRate: '1%', failureLimit: -1 },
      path: 'analysis/failureLimit',
      message: /number of measurements from 0 to 1000, got -1/,
    },
    { name: 'successCount 0', input: { maxErrorRate: '1%', successCount: 0 }, path: 'analysis/successCount', message: /from 1 to 1000/ },
    {
      name: 'an unknown onInconclusive',
      input: { maxErrorRate: '1%', onInconclusive: 'retry' },
      path: 'analysis/onInconclusive',
      message: /must be "pause" or "fail", got "retry"/,
    },
  ];
  for (const row of invalid) {
    it(`refuses ${row.name}`, () => {
      const r = parse(row.input);
      assert.ok(r.issues, 'invalid');
      const issue = r.issues.find((i) => i.path === row.path);
      assert.ok(issue, `an issue at ${row.path}: ${JSON.stringify(r.issues)}`);
      assert.match(issue.message, row.message);
    });
  }

  const durations: [unknown, number | undefined][] = [
    [10, 10],
    ['10s', 10],
    ['500ms', 0.5],
    ['2m', 120],
    ['10', undefined],
    ['1h', undefined],
    [null, undefined],
  ];
  for (const [v, want] of durations) it(`parseDurationSeconds(${JSON.stringify(v)}) is ${want}`, () => assert.equal(parseDurationSeconds(v), want));
  const percents: [unknown, number | undefined][] = [
    ['1%', 0.01],
    ['7.5 %', 0.075],
    [0.02, 0.02],
    ['0.02', undefined],
    ['-1%', undefined],
  ];
  for (const [v, want] of percents) it(`parsePercent(${JSON.stringify(v)}) is ${want}`, () => assert.equal(parsePercent(v), want));
});
