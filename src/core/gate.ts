/**
 * The analysis gate: should a rollout go on, given what the access log says
 * about the new revision (the canary) next to the old one (stable)? Argo
 * Rollouts and Flagger answer this with Prometheus queries; fleetroll answers
 * it from nginx's log (./logStats.ts), with the same shape of rules:
 *
 *   analysis:
 *     interval: 10s          one measurement per 10 s of traffic
 *     minRequests: 50        fewer on either compared side → inconclusive
 *     maxErrorRate: 1%       canary error rate above this → the measurement fails
 *     maxErrorRateIncrease   canary rate − stable rate, in percentage points
 *     maxLatencyRatio: 1.5   canary p99 / stable p99 above this → fails
 *     failureLimit: 2        failed measurements tolerated; one more fails the gate
 *     inconclusiveLimit: 0   inconclusive measurements tolerated; one more stops it
 *     onInconclusive: pause  ... and then the rollout pauses (or fails)
 *
 * Two steps, both pure, so a controller can rebuild the gate's state from the
 * measurements it journaled after a crash (level-triggered, like decide()):
 *
 *   evaluate(canary, stable, spec)   one interval's figures → pass | fail | inconclusive,
 *                                    with a reason per check carrying the figures
 *   gateStatus(measurements, spec)   the measurements so far → running | passed |
 *                                    failed | inconclusive, and the message to print
 *
 * The canary's error rate is logStats' `errorRate`: 5xx answers plus failed
 * connection attempts that nginx retried elsewhere, over all attempts sent to
 * it, so a canary that refuses connections fails the gate even though users
 * got answers from stable. Its request count for minRequests is `attempts`
 * for the same reason. Every comparison is strict: a value equal to its limit
 * passes.
 *
 * Worked example: spec { minRequests: 50, maxErrorRate: 0.05, failureLimit: 1 }
 *   interval 1: 41 errors of 562 on 1.1.0 → fail ("error rate 7.3% on 1.1.0 over
 *               10 s (41 of 562 requests), limit 5%"); 1 failure ≤ 1 → running
 *   interval 2: 30 requests                → inconclusive; 1 > inconclusiveLimit 0
 *               → gate inconclusive (pause, or failed with onInconclusive: fail)
 *   had interval 2 had 44 errors of 600    → 2 failures > 1 → gate failed
 *   had it had 2 errors of 600             → 1 pass ≥ successCount 1 → gate passed
 *
 * PURE: no I/O, no clock.
 */
import type { TrafficStats } from './logStats.js';

export interface AnalysisSpec {
  /** Seconds of traffic per measurement. */
  interval: number;
  /** Requests each compared side needs in an interval; fewer makes the measurement inconclusive. */
  minRequests: number;
  /** Highest canary error rate, a fraction (0.01 = 1%). */
  maxErrorRate?: number | undefined;
  /** Highest canary error rate minus stable's, a fraction (0.01 = 1 percentage point). */
  maxErrorRateIncrease?: number | undefined;
  /** Highest canary p99 / stable p99. */
  maxLatencyRatio?: number | undefined;
  /**
   * A stable p99 below this many ms counts as this much in the latency ratio,
   * so 1 ms against 3 ms (nginx's resolution is 1 ms) is not a "3×" regression.
   * Default 10.
   */
  latencyFloorMs?: number | undefined;
  /** Failed measurements tolerated; the next one fails the gate. */
  failureLimit: number;
  /** Inconclusive measurements tolerated; the next one stops the gate. Default 0. */
  inconclusiveLimit?: number | undefined;
  /** Passing measurements the gate needs to pass. Default 1. */
  successCount?: number | undefined;
  /** What an inconclusive gate does: pause the rollout (a human decides) or fail it. */
  onInconclusive: 'pause' | 'fail';
}

/** The defaults the `analysis:` block fills in (src/config/analysis.ts). */
export const ANALYSIS_DEFAULTS = {
  interval: 10,
  minRequests: 50,
  latencyFloorMs: 10,
  failureLimit: 0,
  inconclusiveLimit: 0,
  successCount: 1,
  onInconclusive: 'pause',
} as const satisfies Partial<AnalysisSpec>;

export type Verdict = 'pass' | 'fail' | 'inconclusive';

export interface Reason {
  metric: 'requests' | 'errorRate' | 'errorRateIncrease' | 'latencyRatio';
  /** The revision the check is about (the canary's, or stable's for its traffic). */
  revision: string;
  /** requests: a count; errorRate / errorRateIncrease: a fraction; latencyRatio: a ratio. */
  value: number;
  threshold: number;
  ok: boolean;
  /** The figures in words, e.g. "error rate 7.3% on 1.1.0 over 10 s (41 of 562 requests), limit 5%". */
  message: string;
}

export interface Measurement {
  verdict: Verdict;
  startMs: number;
  endMs: number;
  /** Every check made, passing ones too; an inconclusive measurement only has the traffic checks. */
  reasons: Reason[];
  /** One line: the failing (or, when none failed, all) reasons. */
  message: string;
}

/** 0.073 → "7.3%", 0.0504 → "5.04%", 0.05 → "5%". */
export function formatPercent(fraction: number): string {
  return `${Number((fraction * 100).toFixed(2))}%`;
}

function formatSeconds(ms: number): string {
  return `${Number((ms / 1000).toFixed(1))} s`;
}

function rateFigures(s: TrafficStats): string {
  if (s.retriedFailures === 0) return `${s.errors} of ${s.attempts} requests`;
  return `${s.errors} of ${s.attempts} requests: ${s.errors5xx} 5xx, ${s.retriedFailures} failed connection${s.retriedFailures === 1 ? '' : 's'} retried elsewhere`;
}

function trafficCheck(s: TrafficStats, spec: AnalysisSpec, over: string): Reason {
  const ok = s.attempts >= spec.minRequests;
  return {
    metric: 'requests',
    revision: s.label,
    value: s.attempts,
    threshold: spec.minRequests,
    ok,
    message: ok
      ? `${s.attempts} requests on ${s.label} over ${over} (need ${spec.minRequests})`
      : `only ${s.attempts} requests on ${s.label} over ${over}, need ${spec.minRequests}`,
  };
}

/**
 * One measurement: the canary's figures for an interval against stable's for
 * the same interval. `stable` may be undefined (no stable traffic, as in a
 * blue-green preview); then only maxErrorRate can be checked, and a spec
 * with a comparison (maxErrorRateIncrease, maxLatencyRatio) is inconclusive.
 * Stable traffic is only required (minRequests) when the spec compares.
 */
export function evaluate(canary: TrafficStats, stable: TrafficStats | undefined, spec: AnalysisSpec): Measurement {
  const over = formatSeconds(canary.endMs - canary.startMs);
  const compares = spec.maxErrorRateIncrease !== undefined || spec.maxLatencyRatio !== undefined;
  const traffic = [trafficCheck(canary, spec, over)];
  if (compares) {
    traffic.push(
      stable
        ? trafficCheck(stable, spec, over)
        : {
            metric: 'requests',
            revision: '',
            value: 0,
            threshold: spec.minRequests,
            ok: false,
            message: `no stable traffic over ${over} to compare ${canary.label} with`,
          },
    );
  }
  const base = { startMs: canary.startMs, endMs: canary.endMs };
  if (traffic.some((r) => !r.ok)) {
    return {
      ...base,
      verdict: 'inconclusive',
      reasons: traffic,
      message: traffic
        .filter((r) => !r.ok)
        .map((r) => r.message)
        .join('; '),
    };
  }
  const checks: Reason[] = [];
  if (spec.maxErrorRate !== undefined) {
    const ok = canary.errorRate <= spec.maxErrorRate;
    checks.push({
      metric: 'errorRate',
      revision: canary.label,
      value: canary.errorRate,
      threshold: spec.maxErrorRate,
      ok,
      message: `error rate ${formatPercent(canary.errorRate)} on ${canary.label} over ${over} (${rateFigures(canary)}), limit ${formatPercent(spec.maxErrorRate)}`,
    });
  }
  if (spec.maxErrorRateIncrease !== undefined && stable) {
    const increase = canary.errorRate - stable.errorRate;
    const points = (f: number) => `${Number((f * 100).toFixed(2))} point${Number((f * 100).toFixed(2)) === 1 ? '' : 's'}`;
    checks.push({
      metric: 'errorRateIncrease',
      revision: canary.label,
      value: increase,
      threshold: spec.maxErrorRateIncrease,
      ok: increase <= spec.maxErrorRateIncrease,
      message:
        `error rate ${formatPercent(canary.errorRate)} on ${canary.label} (${rateFigures(canary)}) vs ${formatPercent(stable.errorRate)} on ${stable.label} (${rateFigures(stable)}) over ${over}: ` +
        `${increase >= 0 ? `${points(increase)} higher` : `${points(-increase)} lower`}, limit ${points(spec.maxErrorRateIncrease)}`,
    });
  }
  if (spec.maxLatencyRatio !== undefined && stable) {
    const floor = spec.latencyFloorMs ?? ANALYSIS_DEFAULTS.latencyFloorMs;
    const ratio = canary.latencyMs.p99 / Math.max(stable.latencyMs.p99, floor, Number.MIN_VALUE);
    checks.push({
      metric: 'latencyRatio',
      revision: canary.label,
      value: ratio,
      threshold: spec.maxLatencyRatio,
      ok: ratio <= spec.maxLatencyRatio,
      message:
        `p99 latency ${canary.latencyMs.p99} ms on ${canary.label} vs ${stable.latencyMs.p99} ms on ${stable.label}` +
        `${stable.latencyMs.p99 < floor ? ` (counted as the ${floor} ms floor)` : ''} over ${over}: ${Number(ratio.toFixed(2))}×, limit ${spec.maxLatencyRatio}×`,
    });
  }
  const failed = checks.filter((r) => !r.ok);
  const reasons = [...traffic, ...checks];
  if (failed.length > 0) return { ...base, verdict: 'fail', reasons, message: failed.map((r) => r.message).join('; ') };
  return { ...base, verdict: 'pass', reasons, message: (checks.length > 0 ? checks : traffic).map((r) => r.message).join('; ') };
}

export type GateState = 'running' | 'passed' | 'failed' | 'inconclusive';

export interface GateStatus {
  /**
   * running: take another measurement. passed: go on. failed: abort the
   * rollout (exit 1, `message` says why). inconclusive: pause the rollout for
   * a human (only with onInconclusive: pause; with fail the state is failed).
   */
  state: GateState;
  passes: number;
  failures: number;
  inconclusives: number;
  /** The measurement that decided the state (the last one while running); undefined before the first. */
  last: Measurement | undefined;
  /** What to print, with the figures, e.g. "analysis failed: 2 of 2 measurements failed (failureLimit 1); last: error rate 7.3% on ...". */
  message: string;
}

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? '' : 's'}`;

/**
 * The gate's state after `measurements` (oldest first), in this order:
 *   failures > failureLimit           → failed
 *   inconclusives > inconclusiveLimit → inconclusive (failed when onInconclusive is fail)
 *   passes >= successCount            → passed
 *   otherwise                         → running
 * Measurements after the one that decided are ignored, so the same list
 * always gives the same answer. The gate ends after at most
 * successCount + failureLimit + inconclusiveLimit + 1 measurements.
 */
export function gateStatus(measurements: readonly Measurement[], spec: AnalysisSpec): GateStatus {
  const inconclusiveLimit = spec.inconclusiveLimit ?? ANALYSIS_DEFAULTS.inconclusiveLimit;
  const successCount = spec.successCount ?? ANALYSIS_DEFAULTS.successCount;
  let passes = 0;
  let failures = 0;
  let inconclusives = 0;
  for (const m of measurements) {
    if (m.verdict === 'pass') passes++;
    else if (m.verdict === 'fail') failures++;
    else inconclusives++;
    const n = passes + failures + inconclusives;
    const counts = { passes, failures, inconclusives, last: m };
    if (failures > spec.failureLimit) {
      return {
        state: 'failed',
        ...counts,
        message: `analysis failed: ${failures} of ${plural(n, 'measurement')} failed (failureLimit ${spec.failureLimit}); last: ${m.message}`,
      };
    }
    if (inconclusives > inconclusiveLimit) {
      const what = `${inconclusives} of ${plural(n, 'measurement')} without enough traffic (inconclusiveLimit ${inconclusiveLimit}); last: ${m.message}`;
      return spec.onInconclusive === 'fail'
        ? { state: 'failed', ...counts, message: `analysis failed, inconclusive: ${what}` }
        : { state: 'inconclusive', ...counts, message: `analysis inconclusive, pausing: ${what}` };
    }
    if (passes >= successCount) {
      return { state: 'passed', ...counts, message: `analysis passed: ${passes} of ${plural(n, 'measurement')} passed; last: ${m.message}` };
    }
  }
  const last = measurements[measurements.length - 1];
  return {
    state: 'running',
    passes,
    failures,
    inconclusives,
    last,
    message: last
      ? `analysis running: ${passes} passed, ${failures} failed, ${inconclusives} inconclusive of ${plural(measurements.length, 'measurement')}; last: ${last.message}`
      : 'analysis running: no measurement yet',
  };
}
