/**
 * A run's recording cut into named phases (what the deploy was doing at each
 * moment), and each failed request pinned on the phase it failed in: the
 * "failures by phase" table of a report.
 *
 * A run leaves two recordings on one clock (ms since the load probes
 * started): every request the probes sent, and every event of the deploy
 * (the engine's own RolloutEvents, plus markers the runner adds). The
 * events' types and the runner's markers are defined here, the first thing
 * every reading of a run needs.
 *
 * PURE: no I/O, no clock, no randomness.
 */
import type { RolloutEvent } from '../engine/events.js';
import { isOkByDefault, outcomeKey, type RequestRecord } from './metrics.js';

/** Markers the experiment runner adds to the deploy's own events. */
export type RunnerEvent =
  | { type: 'load-start' }
  | { type: 'deploy-start' }
  /** nginx `lb` finished a reload; `up` are the servers in service after it, `down` the ones listed down. */
  /** reloadFree: a membership change of the dynamic mode, not a reload (not counted as one). */
  | { type: 'reload'; lb: number; up: string[]; down: string[]; count: number; reloadFree?: boolean | undefined }
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

/** The events in time order (a run's recordings are merged from two sources). */
export const byTime = (events: readonly TimedEvent[]) => [...events].sort((a, b) => a.t - b.t);

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
export function attributeFailures(
  records: readonly RequestRecord[],
  phases: readonly Phase[],
  isOk: (r: RequestRecord) => boolean = isOkByDefault,
): PhaseCount[] {
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
