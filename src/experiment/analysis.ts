/**
 * What one experiment run measured, and the same numbers over repetitions.
 *
 * A run leaves two recordings on one clock (ms since the load probes started):
 * every request the probes sent, and every event of the deploy (the engine's
 * own RolloutEvents, plus markers the runner adds: deploy start and end, and
 * each nginx reload with the servers it left in service). Everything here is
 * computed from those two lists alone, so a report can be recomputed from the
 * saved NDJSON files and every figure checked by hand.
 *
 * PURE: no I/O, no clock, no randomness.
 */
import type { Fleet } from '../config/load.js';
import type { RolloutEvent } from '../engine/events.js';
import { simulateRollout, type SimulationResult } from '../sim/simulate.js';
import { isHealthUnavailable, type DeployHealthNumbers, type DeployHealthReport } from '../core/deployHealth.js';
import type { ResolvedStrategy } from '../core/strategy.js';
import {
  isOkByDefault,
  mixedVersionSpans,
  mixedVersionWindow,
  newVersionFigures,
  outcomeKey,
  summarizeRequests,
  type MixedVersionWindow,
  type NewVersionFigures,
  type RequestRecord,
  type RequestSummary,
  type Span,
} from './metrics.js';

/** Markers the experiment runner adds to the deploy's own events. */
export type RunnerEvent =
  | { type: 'load-start' }
  | { type: 'deploy-start' }
  /** nginx `lb` finished a reload; `up` are the servers in service after it, `down` the ones listed down. */
  | { type: 'reload'; lb: number; up: string[]; down: string[]; count: number }
  /** outcome 'stopped': the deploy failed because the analysis gate failed (the new version was taken out, the fleet rolled back). */
  | { type: 'deploy-end'; outcome: 'complete' | 'failed' | 'stopped'; error?: string }
  | { type: 'load-stop' };

export interface TimedEvent {
  /** ms since the load probes started (the clock of RequestRecord.t) */
  t: number;
  source: 'engine' | 'runner';
  event: RolloutEvent | RunnerEvent;
}

/** How the fleet was rolled: fleetroll's engine, the naive kill-and-start control, or the hand-written script control. */
export type RolloutMode = 'engine' | 'naive' | 'script';

export interface Phase {
  name: string;
  startMs: number;
  endMs: number;
}

const byTime = (events: readonly TimedEvent[]) => [...events].sort((a, b) => a.t - b.t);

/**
 * Cuts the run into named phases from the timestamped events, so that each
 * failed request can be pinned on what the deploy was doing at that moment.
 *
 * The engine, per wave N:
 *   "wave N: marking down"   from the wave event until the reload that takes its old instances out
 *   "wave N: draining"       the drainSeconds pause (from the draining event)
 *   "wave N: stopping"       from the end of the drain until the last of its old instances is stopped
 *   "wave N: starting"       until every new instance of the wave has started (a wave without old
 *                            instances to stop begins here)
 *   "wave N: waiting for readiness"   until the next wave
 * then "verifying" from the first version check. Blue-green, canary and a
 * rollback add the phases their messages announce ("switching to the new
 * set", "old set kept (scaleDownDelaySeconds)", "switching back", "canary
 * 25%", "canary analysis at 25%", "aborting the canary", "final rolling
 * update", "rolling back"; see INFO_PHASES). The script control has the
 * same phases per batch ("batch N: marking down", ...), and once every new
 * instance of the batch is ready "batch N: re-enabling" (the reload that puts
 * them in). The naive control, per replaced instance N: "naive N: killing",
 * "naive N: starting", "naive N: reloading nginx", "naive N: pause". Before
 * the deploy started it is "before deploy", after it ended "after deploy",
 * and between its start and the first wave "observing".
 *
 * Phases are contiguous from `startMs` to `endMs`; empty ones are dropped.
 */
export function derivePhases(
  events: readonly TimedEvent[],
  o: { deployStartMs: number; deployEndMs: number; startMs: number; endMs: number; mode: RolloutMode },
): Phase[] {
  const points: { t: number; name: string }[] = [
    { t: o.startMs, name: 'before deploy' },
    { t: o.deployStartMs, name: 'observing' },
  ];
  const at = (t: number, name: string) => points.push({ t, name });
  const unit = o.mode === 'script' ? 'batch' : 'wave';

  interface Wave {
    n: number;
    victims: Set<string>;
    startTarget: number;
    started: number;
    ready: number;
    /** When the drain pause ends, while it is still ahead. */
    drainEnd?: number | undefined;
  }
  let wave: Wave | undefined;
  let verifying = false;
  /** Blue-green announced that the old set is kept out of traffic: its drain event follows at once. */
  let kept = false;
  const flushDrain = (t: number) => {
    if (wave?.drainEnd !== undefined && wave.drainEnd <= t) {
      at(wave.drainEnd, `${unit} ${wave.n}: stopping`);
      wave.drainEnd = undefined;
    }
  };

  for (const { t, event: e } of byTime(events)) {
    if (t < o.deployStartMs || t > o.deployEndMs) continue;
    if (o.mode === 'naive') {
      if (e.type === 'wave') {
        wave = { n: e.index, victims: new Set(e.stop), startTarget: e.start, started: 0, ready: 0 };
        at(t, `naive ${e.index}: killing`);
      } else if (wave && e.type === 'stopped') at(t, `naive ${wave.n}: starting`);
      else if (wave && e.type === 'started') at(t, `naive ${wave.n}: reloading nginx`);
      else if (wave && e.type === 'reload') at(t, `naive ${wave.n}: pause`);
      continue;
    }
    flushDrain(t);
    switch (e.type) {
      case 'wave':
        wave = { n: e.index, victims: new Set(e.stop), startTarget: e.start, started: 0, ready: 0 };
        at(t, e.stop.length > 0 ? `${unit} ${e.index}: marking down` : `${unit} ${e.index}: starting`);
        break;
      case 'upstream':
        // The reload that marks this wave's old instances down is done: with
        // no drain pause, stopping comes next.
        if (wave && e.action === 'drain' && wave.victims.size > 0 && e.down.some((n) => wave!.victims.has(n))) at(t, `${unit} ${wave.n}: stopping`);
        break;
      case 'draining':
        if (wave) {
          // Blue-green: the old set drains while it is kept out of traffic; the message named that phase already.
          if (!kept) at(t, `${unit} ${wave.n}: draining`);
          kept = false;
          wave.drainEnd = t + e.seconds * 1000;
        }
        break;
      case 'stopped':
        if (wave?.victims.delete(e.name) && wave.victims.size === 0) {
          wave.drainEnd = undefined;
          at(t, wave.started >= wave.startTarget ? `${unit} ${wave.n}: waiting for readiness` : `${unit} ${wave.n}: starting`);
        }
        break;
      case 'started':
        if (wave) {
          wave.started++;
          if (wave.victims.size === 0 && wave.started === wave.startTarget) at(t, `${unit} ${wave.n}: waiting for readiness`);
        }
        break;
      case 'ready':
        // The script waits for its whole batch, then reloads nginx with it.
        if (o.mode === 'script' && wave && ++wave.ready === wave.startTarget) at(t, `${unit} ${wave.n}: re-enabling`);
        break;
      case 'verified':
        if (!verifying) at(t, 'verifying');
        verifying = true;
        break;
      default: {
        const name = strategyPhase(e);
        if (name === undefined) break;
        at(t, name);
        if (name === KEPT) kept = true;
        // A switch back keeps the old set: its drain never ends in a stop.
        if (name === 'switching back' && wave) wave.drainEnd = undefined;
        break;
      }
    }
  }
  flushDrain(o.deployEndMs);
  at(o.deployEndMs, 'after deploy');

  // Stable sort keeps the order of points at the same instant: the last one wins.
  points.sort((a, b) => a.t - b.t);
  const phases: Phase[] = [];
  for (let i = 0; i < points.length; i++) {
    const p = points[i]!;
    const startMs = Math.max(p.t, o.startMs);
    const endMs = Math.min(points[i + 1]?.t ?? o.endMs, o.endMs);
    if (endMs <= startMs && !(i === points.length - 1 && phases.length === 0)) continue;
    const last = phases[phases.length - 1];
    if (last && last.name === p.name) last.endMs = endMs;
    else phases.push({ name: p.name, startMs, endMs: Math.max(endMs, startMs) });
  }
  return phases;
}

/**
 * The phases blue-green, canary and a rollback announce (engine/events.ts
 * StrategyEvent): each event starts the phase it names, until the next
 * phase starts.
 */
const KEPT = 'old set kept (scaleDownDelaySeconds)';

function strategyPhase(e: RolloutEvent | RunnerEvent): string | undefined {
  switch (e.type) {
    case 'switch':
      return 'switching to the new set';
    case 'switched':
      return KEPT;
    case 'switchingBack':
      return 'switching back';
    case 'canaryStep':
      return e.kind === 'setWeight' ? `canary ${e.weight}%` : e.kind === 'pause' ? `canary pause at ${e.weight}%` : `canary analysis at ${e.weight}%`;
    case 'canaryAborted':
      return 'aborting the canary';
    case 'canaryDone':
      return 'final rolling update';
    case 'rollingBack':
      return 'rolling back';
    default:
      return undefined;
  }
}

/**
 * When a failure happened, for attribution: when the client saw it fail
 * (sent + latency), since a reset, a refused connection or a 502 arrives the
 * moment the backend goes away. A timeout is the exception: it only says the
 * answer never came, and the moment it fired is an artefact of the probe's
 * timeout setting, so it is pinned on the moment the request was sent.
 */
export function failureTime(r: RequestRecord): number {
  return r.error === 'timeout' ? r.t : r.t + r.latencyMs;
}

export interface PhaseCount {
  phase: string;
  failed: number;
  /** outcomeKey -> count, as in RequestSummary byStatus */
  byStatus: Record<string, number>;
  /** Requests resent once on a fresh connection after a reused keep-alive connection failed (by send time). */
  retried: number;
}

/** Index of the phase containing t; before the first phase counts as the first, after the last as the last. */
function phaseAt(phases: readonly Phase[], t: number): number {
  let lo = 0;
  let hi = phases.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (phases[mid]!.startMs <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Each failed request pinned on the phase in progress when it failed (see
 * failureTime), and each retried request on the phase it was sent in. Only
 * phases with a failure or a retry are listed, in phase order.
 */
export function attributeFailures(records: readonly RequestRecord[], phases: readonly Phase[], isOk: (r: RequestRecord) => boolean = isOkByDefault): PhaseCount[] {
  if (phases.length === 0) return [];
  const counts = phases.map((p): PhaseCount => ({ phase: p.name, failed: 0, byStatus: {}, retried: 0 }));
  for (const r of records) {
    if (r.retried) counts[phaseAt(phases, r.t)]!.retried++;
    if (isOk(r)) continue;
    const c = counts[phaseAt(phases, failureTime(r))]!;
    c.failed++;
    const key = outcomeKey(r);
    c.byStatus[key] = (c.byStatus[key] ?? 0) + 1;
  }
  return counts.filter((c) => c.failed > 0 || c.retried > 0);
}

export interface CapacityPoint {
  t: number;
  /** Servers in service in the nginx upstream (listed up and still running). */
  up: number;
  /** Instances (containers) alive. */
  alive: number;
}

/**
 * Capacity over time from the events: which servers nginx sends traffic to,
 * and how many containers exist. It starts from `initial` (the fleet in
 * service before the deploy), then
 *   - an engine `upstream` event adds its `up` servers and removes its `down` ones;
 *   - a runner `reload` event is a snapshot of the upstream after a reload, and
 *     replaces the set (the naive control writes nginx without engine events);
 *   - `stopped` removes the instance: a stopped container serves nothing, even
 *     while nginx still lists it (which is what the naive control does);
 *   - `started` adds a container to `alive`, `stopped` takes it away.
 * One point per event that changed something, plus the starting point.
 */
export function capacityTimeline(events: readonly TimedEvent[], initial: readonly string[], startMs = 0): CapacityPoint[] {
  const up = new Set(initial);
  const alive = new Set(initial);
  const out: CapacityPoint[] = [{ t: startMs, up: up.size, alive: alive.size }];
  for (const { t, event: e } of byTime(events)) {
    switch (e.type) {
      case 'upstream':
        if (e.action === 'restore') continue;
        for (const n of e.down) up.delete(n);
        for (const n of e.up) if (alive.has(n)) up.add(n);
        break;
      case 'reload':
        up.clear();
        for (const n of e.up) if (alive.has(n)) up.add(n);
        break;
      case 'stopped':
        up.delete(e.name);
        alive.delete(e.name);
        break;
      case 'started':
        alive.add(e.name);
        break;
      default:
        continue;
    }
    const last = out[out.length - 1]!;
    if (last.up === up.size && last.alive === alive.size) continue;
    if (last.t === t) out[out.length - 1] = { t, up: up.size, alive: alive.size };
    else out.push({ t, up: up.size, alive: alive.size });
  }
  return out;
}

/** The lowest and highest value of a step function over [fromMs, toMs]: its value at fromMs and every step inside. */
export function rangeOver(points: readonly CapacityPoint[], key: 'up' | 'alive', fromMs: number, toMs: number): { min: number; max: number } {
  let current: number | undefined;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const p of points) {
    if (p.t <= fromMs) current = p[key];
    else if (p.t <= toMs) {
      min = Math.min(min, p[key]);
      max = Math.max(max, p[key]);
    }
  }
  if (current !== undefined) {
    min = Math.min(min, current);
    max = Math.max(max, current);
  }
  if (min === Number.POSITIVE_INFINITY) return { min: 0, max: 0 };
  return { min, max };
}

export interface Stat {
  median: number;
  min: number;
  max: number;
  n: number;
}

/** Median (mean of the middle two for an even count), min and max; undefined for no values. */
export function stat(values: readonly number[]): Stat | undefined {
  if (values.length === 0) return undefined;
  const s = [...values].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { median, min: s[0]!, max: s[s.length - 1]!, n: s.length };
}

export interface MeasuredTimings {
  startToReadyMs: number[];
  stopMs: number[];
  /** From the decision to replace an instance to the reload that marked it down being in force. */
  decisionToReloadMs: number[];
  /** From an instance passing readiness to the reload that put it in nginx being in force. */
  readyToInNginxMs: number[];
  /** From a container stopped and removed to the next container started (what a start waiting for room costs). */
  removedToStartedMs: number[];
}

/**
 * The per-step costs read off the engine's events: start to ready, drain end
 * to stopped, decision to mark-down in force, ready to in nginx, and removed
 * to the next start.
 */
export function measuredTimings(events: readonly TimedEvent[]): MeasuredTimings {
  const startedAt = new Map<string, number>();
  const stopFrom = new Map<string, number>();
  const decidedAt = new Map<string, number>();
  const readyAt = new Map<string, number>();
  const removed: number[] = [];
  const out: MeasuredTimings = { startToReadyMs: [], stopMs: [], decisionToReloadMs: [], readyToInNginxMs: [], removedToStartedMs: [] };
  const { startToReadyMs, stopMs } = out;
  for (const { t, event: e } of byTime(events)) {
    switch (e.type) {
      case 'started':
        startedAt.set(e.name, t);
        for (const r of removed.splice(0)) out.removedToStartedMs.push(t - r);
        break;
      case 'ready': {
        const s = startedAt.get(e.name);
        if (s !== undefined) startToReadyMs.push(t - s);
        startedAt.delete(e.name);
        readyAt.set(e.name, t);
        break;
      }
      case 'upstream':
        for (const n of e.down) {
          const d = decidedAt.get(n);
          if (d !== undefined) out.decisionToReloadMs.push(t - d);
          decidedAt.delete(n);
        }
        for (const n of e.up) {
          const r = readyAt.get(n);
          if (r !== undefined) out.readyToInNginxMs.push(t - r);
          readyAt.delete(n);
        }
        break;
      case 'wave':
        for (const n of e.stop) {
          stopFrom.set(n, t);
          decidedAt.set(n, t);
        }
        break;
      case 'draining':
        for (const n of e.names) stopFrom.set(n, t + e.seconds * 1000);
        break;
      case 'stopped': {
        const s = stopFrom.get(e.name);
        if (s !== undefined) stopMs.push(Math.max(0, t - s));
        stopFrom.delete(e.name);
        removed.push(t);
        break;
      }
      default:
        break;
    }
  }
  return out;
}

/** The timings a run was configured with: what `simulate` is given to predict it. */
export interface NominalTimings {
  /** The app's warm-up: from start to readiness passing. */
  startupMs: number;
  drainMs: number;
  /** Graceful stop: the app keeps serving this long after SIGTERM (PRESTOP_SECONDS). */
  stopMs: number;
  minReadyMs: number;
}

export type Prediction = Pick<SimulationResult, 'durationMs' | 'waves' | 'peakInstances' | 'lowestCapacity' | 'mixedVersionWindowMs' | 'reloads'>;

/**
 * `simulate` (the engine itself on simulated ports) with the nominal timings,
 * the fleet's analysis settings (a gate that passes) and this machine's typical fixed costs: ~0.5 s from docker run to a running
 * container, ~0.3 s for an nginx in a container to take a new upstream (write, nginx -t, reload, in force).
 */
export async function predict(strategy: ResolvedStrategy, t: NominalTimings, analysis?: Fleet['analysis']): Promise<Prediction> {
  // simulate's access logs say the new version is as healthy as the old: an analysis costs its measurements' time and passes.
  const r = await simulateRollout(strategy, { ...t, jitter: 0, seed: 1, runMs: 500, reloadMs: 300 }, analysis ? { analysis } : {});
  return { durationMs: r.durationMs, waves: r.waves, peakInstances: r.peakInstances, lowestCapacity: r.lowestCapacity, mixedVersionWindowMs: r.mixedVersionWindowMs, reloads: r.reloads };
}

export interface RunInput {
  /** What `simulate` predicted for this run (predict()), for engine runs. */
  predicted?: Prediction | undefined;
  records: readonly RequestRecord[];
  events: readonly TimedEvent[];
  deployStartMs: number;
  deployEndMs: number;
  /** When the probes stopped sending (end of the recording). */
  loadEndMs: number;
  /** Instances in service when the deploy started. */
  initial: readonly string[];
  from: string;
  to: string;
  mode: RolloutMode;
  /** Resolved strategy for the engine; absent for the naive control (simulate does not model it). */
  strategy?: ResolvedStrategy | undefined;
  timings: NominalTimings;
  /** The deploy's health numbers from nginx's access log (engine deploys given the access log). */
  health?: DeployHealthReport | undefined;
}

/**
 * How the deploy ended, from the runner's deploy-end event: it completed,
 * the analysis gate stopped the new version (taken out, fleet rolled back),
 * or it failed for another reason.
 */
export type DeployOutcome = 'completed' | 'stopped' | 'failed';

/** What the new version did (NewVersionFigures) and, when the analysis stopped it, how long that took. */
export interface NewVersionMetrics extends NewVersionFigures {
  /** The analysis stopped it: its last answer is the end of its time in traffic. */
  stopped: boolean;
  /** Stopped only: from the deploy's start to its last answer (time to roll back). */
  stopMs: number | null;
  /** Stopped only: from the first failed answer it gave to its last answer (time to roll back after the first bad answer). */
  stopAfterFirstFailureMs: number | null;
  /** Stopped only: from its first answer to its last (how long users could get it). */
  exposureMs: number | null;
}

export interface RunMetrics {
  outcome: DeployOutcome;
  requests: RequestSummary;
  failuresByPhase: PhaseCount[];
  phases: Phase[];
  /** From the first successful answer by the new version to the last by the old one (metrics.ts mixedVersionWindow). */
  mixedVersionWindow: MixedVersionWindow | null;
  /** Where both versions were answering (metrics.ts mixedVersionSpans). */
  mixedVersionSpans: Span[];
  /** The mixed-version window: the total length of mixedVersionSpans, 0 when one version never answered. */
  windowMs: number;
  /** The new version's traffic and failures, and with `stopped` the time to roll back. */
  newVersion: NewVersionMetrics;
  /** The deploy's health numbers from nginx's access log; null when the deploy measured none (naive and script controls). */
  health: DeployHealthReport | null;
  deployDurationMs: number;
  waves: number;
  reloads: number;
  /** Lowest number of servers in service during the deploy. */
  minCapacity: number;
  peakInstances: number;
  capacity: CapacityPoint[];
  measured: { startToReadyMs: Stat | null; stopMs: Stat | null; decisionToReloadMs: Stat | null; readyToInNginxMs: Stat | null; removedToStartedMs: Stat | null };
  /** `simulate` with the nominal timings (a rollout that completes); null for the naive control. */
  predicted: Prediction | null;
  /**
   * Measured deploy duration over the floor the timings imply: simulate's
   * critical path (per wave drain + stop + start-to-ready + minReadySeconds,
   * with the overlaps the algorithm allows). 1.0 means no overhead at all.
   * Null unless the deploy completed (simulate predicts the rollout that passes).
   */
  overheadRatio: number | null;
}

/** The outcome the runner recorded in its deploy-end event ('completed' when there is none). */
export function deployOutcome(events: readonly TimedEvent[]): DeployOutcome {
  const end = [...events].reverse().find((e) => e.source === 'runner' && e.event.type === 'deploy-end')?.event;
  if (!end || end.type !== 'deploy-end') return 'completed';
  return end.outcome === 'complete' ? 'completed' : end.outcome;
}

export function runMetrics(i: RunInput): RunMetrics {
  const phases = derivePhases(i.events, { deployStartMs: i.deployStartMs, deployEndMs: i.deployEndMs, startMs: 0, endMs: Math.max(i.loadEndMs, i.deployEndMs), mode: i.mode });
  const capacity = capacityTimeline(i.events, i.initial, 0);
  const window = mixedVersionWindow(i.records, i.from, i.to) ?? null;
  const mixed = mixedVersionSpans(i.records, i.from, i.to);
  const deployEvents = i.events.filter((e) => e.t >= i.deployStartMs && e.t <= i.deployEndMs);
  const reloads = deployEvents.filter((e) => e.source === 'runner' && e.event.type === 'reload').length;
  const waves = deployEvents.filter((e) => e.source === 'engine' && e.event.type === 'wave').length;
  const timings = measuredTimings(deployEvents);
  const predicted = i.mode === 'engine' ? (i.predicted ?? null) : null;
  const deployDurationMs = i.deployEndMs - i.deployStartMs;
  const outcome = deployOutcome(i.events);
  const fresh = newVersionFigures(i.records, i.to, { startMs: i.deployStartMs, endMs: i.deployEndMs });
  const stopped = outcome === 'stopped' && fresh.lastAnswerMs !== null;
  const since = (from: number | null) => (stopped && from !== null && fresh.lastAnswerMs !== null ? round3(fresh.lastAnswerMs - from) : null);
  return {
    outcome,
    requests: summarizeRequests(i.records),
    failuresByPhase: attributeFailures(i.records, phases),
    phases,
    mixedVersionWindow: window,
    mixedVersionSpans: mixed?.spans ?? [],
    windowMs: mixed?.windowMs ?? 0,
    newVersion: {
      ...fresh,
      stopped,
      stopMs: since(i.deployStartMs),
      stopAfterFirstFailureMs: since(fresh.firstOwnFailureMs),
      exposureMs: since(fresh.firstAnswerMs),
    },
    health: i.health ?? null,
    deployDurationMs,
    waves,
    reloads,
    minCapacity: rangeOver(capacity, 'up', i.deployStartMs, i.deployEndMs).min,
    peakInstances: rangeOver(capacity, 'alive', i.deployStartMs, i.deployEndMs).max,
    capacity,
    measured: {
      startToReadyMs: stat(timings.startToReadyMs) ?? null,
      stopMs: stat(timings.stopMs) ?? null,
      decisionToReloadMs: stat(timings.decisionToReloadMs) ?? null,
      readyToInNginxMs: stat(timings.readyToInNginxMs) ?? null,
      removedToStartedMs: stat(timings.removedToStartedMs) ?? null,
    },
    predicted,
    overheadRatio: predicted && predicted.durationMs > 0 && outcome === 'completed' ? round3(deployDurationMs / predicted.durationMs) : null,
  };
}

const round3 = (x: number) => Math.round(x * 1000) / 1000;

export interface CellAggregate {
  runs: number;
  /** Runs whose deploy failed (the engine threw). */
  deployErrors: number;
  requests: { total: Stat; ok: Stat; failed: Stat; retried: Stat };
  /** Every outcome seen in any run (0 in runs without it); "200", "502", "error:ECONNRESET", ... */
  byOutcome: Record<string, Stat>;
  failuresByPhase: { phase: string; failed: Stat; retried: Stat; byStatus: Record<string, Stat> }[];
  windowMs: Stat;
  deployDurationMs: Stat;
  minCapacity: Stat;
  peakInstances: Stat;
  reloads: Stat;
  waves: Stat;
  latencyP99Ms: Stat;
  overheadRatio: Stat | null;
  predicted: Prediction | null;
  /** Runs per deploy outcome. */
  outcomes: Record<DeployOutcome, number>;
  /** The new version: its share of the deploy window, its own failures and the others; the times to roll back over the runs that stopped it (null when none did). */
  newVersion: {
    answeredInDeploy: Stat;
    sentInDeploy: Stat;
    ownFailures: Stat;
    otherFailures: Stat;
    stopMs: Stat | null;
    stopAfterFirstFailureMs: Stat | null;
    exposureMs: Stat | null;
  };
  /** nginx's access log over the runs that measured it; null when none did. */
  health: { requests: Stat; failed5xx: Stat; dropped: Stat; mixedVersionWindowMs: Stat } | null;
}

function mustStat(values: readonly number[]): Stat {
  return stat(values) ?? { median: 0, min: 0, max: 0, n: 0 };
}

/** Per-key stats where a run that lacks a key counts 0 for it. */
function statsByKey(maps: readonly Record<string, number>[]): Record<string, Stat> {
  const keys = [...new Set(maps.flatMap((m) => Object.keys(m)))].sort();
  return Object.fromEntries(keys.map((k) => [k, mustStat(maps.map((m) => m[k] ?? 0))]));
}

/** The repetitions of one configuration, summarised: median, min and max of each figure. */
export function aggregateRuns(runs: readonly RunMetrics[], deployErrors = 0): CellAggregate {
  const outcomes = runs.map((r) => {
    const m: Record<string, number> = {};
    for (const s of Object.values(r.requests.byMethod)) for (const [k, n] of Object.entries(s.byStatus)) m[k] = (m[k] ?? 0) + n;
    return m;
  });
  // Phases in the order they happen: by their median position among the runs that had them.
  const order = new Map<string, number[]>();
  for (const r of runs) r.phases.forEach((p, i) => order.set(p.name, [...(order.get(p.name) ?? []), i]));
  const names = [...new Set(runs.flatMap((r) => r.failuresByPhase.map((f) => f.phase)))];
  names.sort((a, b) => (stat(order.get(a) ?? [])?.median ?? 0) - (stat(order.get(b) ?? [])?.median ?? 0) || (a < b ? -1 : 1));
  const phaseOf = (r: RunMetrics, name: string) => r.failuresByPhase.find((f) => f.phase === name);
  const ratios = runs.map((r) => r.overheadRatio).filter((x): x is number => x !== null);
  return {
    runs: runs.length,
    deployErrors,
    requests: {
      total: mustStat(runs.map((r) => r.requests.total)),
      ok: mustStat(runs.map((r) => r.requests.ok)),
      failed: mustStat(runs.map((r) => r.requests.failed)),
      retried: mustStat(runs.map((r) => r.requests.retried)),
    },
    byOutcome: statsByKey(outcomes),
    failuresByPhase: names.map((phase) => ({
      phase,
      failed: mustStat(runs.map((r) => phaseOf(r, phase)?.failed ?? 0)),
      retried: mustStat(runs.map((r) => phaseOf(r, phase)?.retried ?? 0)),
      byStatus: statsByKey(runs.map((r) => phaseOf(r, phase)?.byStatus ?? {})),
    })),
    windowMs: mustStat(runs.map((r) => r.windowMs)),
    deployDurationMs: mustStat(runs.map((r) => r.deployDurationMs)),
    minCapacity: mustStat(runs.map((r) => r.minCapacity)),
    peakInstances: mustStat(runs.map((r) => r.peakInstances)),
    reloads: mustStat(runs.map((r) => r.reloads)),
    waves: mustStat(runs.map((r) => r.waves)),
    latencyP99Ms: mustStat(runs.map((r) => r.requests.latencyMs.p99)),
    overheadRatio: stat(ratios) ?? null,
    predicted: runs[0]?.predicted ?? null,
    outcomes: {
      completed: runs.filter((r) => r.outcome === 'completed').length,
      stopped: runs.filter((r) => r.outcome === 'stopped').length,
      failed: runs.filter((r) => r.outcome === 'failed').length,
    },
    newVersion: {
      answeredInDeploy: mustStat(runs.map((r) => r.newVersion.answeredInDeploy)),
      sentInDeploy: mustStat(runs.map((r) => r.newVersion.sentInDeploy)),
      ownFailures: mustStat(runs.map((r) => r.newVersion.ownFailures)),
      otherFailures: mustStat(runs.map((r) => r.newVersion.otherFailures)),
      stopMs: stat(present(runs.map((r) => r.newVersion.stopMs))) ?? null,
      stopAfterFirstFailureMs: stat(present(runs.map((r) => r.newVersion.stopAfterFirstFailureMs))) ?? null,
      exposureMs: stat(present(runs.map((r) => r.newVersion.exposureMs))) ?? null,
    },
    health: healthStats(runs.map((r) => r.health)),
  };
}

const present = (xs: readonly (number | null)[]) => xs.filter((x): x is number => x !== null);

function healthStats(reports: readonly (DeployHealthReport | null)[]): CellAggregate['health'] {
  const numbers = reports.filter((h): h is DeployHealthNumbers => h !== null && !isHealthUnavailable(h));
  if (numbers.length === 0) return null;
  const of = (f: (h: DeployHealthNumbers) => number) => mustStat(numbers.map(f));
  return { requests: of((h) => h.requests), failed5xx: of((h) => h.failed5xx), dropped: of((h) => h.dropped), mixedVersionWindowMs: of((h) => h.mixedVersionWindowMs) };
}
