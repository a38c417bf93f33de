/**
 * The analysis gate, run: every `interval` seconds the access logs give the
 * last interval's figures per revision (engine/health.ts), core/gate.ts
 * judges the new revision against the old, and the measurements so far decide
 * whether the gate passed, failed, needs a human (inconclusive, with
 * onInconclusive: pause) or takes another measurement.
 *
 * A canary's analysis steps and RollingUpdate's check after its first wave
 * both run it; what a failure does (weight to 0, roll back) is theirs.
 */
import { evaluate, gateStatus, type AnalysisSpec, type Measurement } from '../core/gate.js';
import type { TrafficStats, WindowStats } from '../core/logStats.js';
import { RolloutFailedError } from '../errors.js';
import type { Clock } from '../ports.js';
import type { EventSink } from './events.js';

export type GateOutcome = 'passed' | 'inconclusive';

/**
 * Where the first measurement window starts, and why then: the time every
 * load balancer confirmed in force the reload that routes what is judged
 * (clock ms). On a busy load balancer that reload lands seconds after the
 * new instance became available; a window started before it judges traffic
 * the instance never got.
 */
export interface GateStart {
  atMs: number;
  why: string;
}

export interface GateDeps {
  clock: Clock;
  emit: EventSink;
  /** Per-revision figures for [from, to), or undefined when no access log can be read. */
  window: (fromMs: number, toMs: number) => Promise<WindowStats | undefined>;
  /** The new revision's hash, and the version to name it by in messages. */
  revision: string;
  version: string;
  /** Stops waiting early (the rollout is ending). */
  stopped?: () => boolean;
}

/** No traffic at all over a range: a measurement of it is inconclusive. */
function none(label: string, startMs: number, endMs: number): TrafficStats {
  return {
    label,
    startMs,
    endMs,
    requests: 0,
    errors5xx: 0,
    clientClosed: 0,
    connectionFailures: 0,
    retriedFailures: 0,
    attempts: 0,
    errors: 0,
    errorRate: 0,
    latencyMs: { p50: 0, p95: 0, p99: 0, max: 0 },
  };
}

/**
 * Runs the gate until it decides. Resolves 'passed' or 'inconclusive'
 * (onInconclusive: pause); a failed gate rejects with a RolloutFailedError
 * whose message carries the figures and whose details say `analysisFailed`.
 */
export async function runGate(spec: AnalysisSpec, d: GateDeps, what: string, start?: GateStart): Promise<GateOutcome> {
  const measurements: Measurement[] = [];
  // From when nginx routes what is judged (never earlier: a window before it holds none of the
  // new revision's traffic), and never in the future.
  let from = Math.min(start?.atMs ?? d.clock.now(), d.clock.now());
  if (start) d.emit({ type: 'info', message: `${what}: measuring from ${new Date(from).toISOString()} (${start.why}, ${d.clock.now() - from} ms ago)` });
  for (;;) {
    // In steps of at most a second, so a rollout that ends meanwhile is not kept waiting for the interval.
    const until = from + spec.interval * 1000;
    while (d.clock.now() < until) {
      await d.clock.sleep(Math.min(1000, until - d.clock.now()));
      if (d.stopped?.()) return 'inconclusive';
    }
    const to = d.clock.now();
    const w = await d.window(from, to);
    if (!w) {
      throw new RolloutFailedError(
        `${what}: no access log could be read, so the new revision cannot be judged`,
        'check loadBalancers/N/nginx/accessLog and that nginx writes the fleetroll_json format there',
        { analysisFailed: true, stoppedBy: 'analysis' },
      );
    }
    const fresh = w.byRevision[d.revision];
    const canary = { ...(fresh ?? none(d.version, from, to)), label: d.version };
    // The old side: the revision that served most (there is usually one).
    const old = Object.entries(w.byRevision)
      .filter(([rev]) => rev !== d.revision)
      .map(([, s]) => s)
      .sort((a, b) => b.attempts - a.attempts)[0];
    const stable = old ? { ...old, label: 'stable' } : undefined;
    const m = evaluate(canary, stable, spec);
    measurements.push(m);
    d.emit({ type: 'info', message: `${what}, measurement ${measurements.length} (${spec.interval} s): ${m.verdict}: ${m.message}` });
    const status = gateStatus(measurements, spec);
    if (status.state === 'passed') {
      d.emit({ type: 'info', message: `${what}: ${status.message}` });
      return 'passed';
    }
    if (status.state === 'failed') {
      throw new RolloutFailedError(`${what}: ${status.message}`, 'the new revision was taken out of traffic; fix it and deploy again', {
        analysisFailed: true,
        stoppedBy: 'analysis',
        measurements: measurements.length,
      });
    }
    if (status.state === 'inconclusive') {
      d.emit({ type: 'info', message: `${what}: ${status.message}` });
      return 'inconclusive';
    }
    from = to;
  }
}
