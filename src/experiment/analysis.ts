/**
 * What one experiment run measured, and the same numbers over repetitions.
 *
 * Everything here is computed from a run's two recordings alone (the
 * requests and the events, see phases.ts), plus the prediction the runner
 * got from `simulate` (predict.ts) beforehand, so a report can be recomputed
 * from the saved NDJSON files and every figure checked by hand.
 *
 * PURE: no I/O, no clock, no randomness.
 */
import { isHealthUnavailable, type DeployHealthNumbers, type DeployHealthReport } from '../core/deployHealth.js';
import type { ResolvedStrategy } from '../core/strategy.js';
import {
  mixedVersionSpans,
  mixedVersionWindow,
  newVersionFigures,
  summarizeRequests,
  type MixedVersionWindow,
  type NewVersionFigures,
  type RequestRecord,
  type RequestSummary,
  type Span,
} from './metrics.js';
import { attributeFailures, derivePhases, type Phase, type PhaseCount, type RolloutMode, type TimedEvent } from './phases.js';
import type { NominalTimings, Prediction } from './predict.js';
import { capacityTimeline, measuredTimings, rangeOver, type CapacityPoint } from './timeline.js';

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

export interface RunInput {
  /** What `simulate` predicted for this run (predict()), for engine runs. */
  predicted?: Prediction | undefined;
  /** The same, priced with the step costs of the experiment's earlier deploys (predictCalibrated), and how many measured runs were among them. */
  calibrated?: (Prediction & { fromRuns: number; fromCalibrationRun?: boolean }) | undefined;
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
  measured: {
    startToReadyMs: Stat | null;
    stopMs: Stat | null;
    decisionToReloadMs: Stat | null;
    readyToInNginxMs: Stat | null;
    removedToStartedMs: Stat | null;
  };
  /** `simulate` with the nominal timings (a rollout that completes); null for the naive control. */
  predicted: Prediction | null;
  /**
   * Measured deploy duration over the floor the timings imply: simulate's
   * critical path (per wave drain + stop + start-to-ready + minReadySeconds,
   * with the overlaps the algorithm allows). 1.0 means no overhead at all.
   * Null unless the deploy completed (simulate predicts the rollout that passes).
   */
  overheadRatio: number | null;
  /** `simulate` priced with the costs of the experiment's earlier deploys (its fleet's first deploy included); null without a strategy. */
  calibrated: (Prediction & { fromRuns: number; fromCalibrationRun?: boolean }) | null;
  /** Measured deploy duration over the calibrated prediction; null unless both exist and the deploy completed. */
  calibratedRatio: number | null;
}

/** The outcome the runner recorded in its deploy-end event ('completed' when there is none). */
export function deployOutcome(events: readonly TimedEvent[]): DeployOutcome {
  const end = [...events].reverse().find((e) => e.source === 'runner' && e.event.type === 'deploy-end')?.event;
  if (!end || end.type !== 'deploy-end') return 'completed';
  return end.outcome === 'complete' ? 'completed' : end.outcome;
}

export function runMetrics(i: RunInput): RunMetrics {
  const phases = derivePhases(i.events, {
    deployStartMs: i.deployStartMs,
    deployEndMs: i.deployEndMs,
    startMs: 0,
    endMs: Math.max(i.loadEndMs, i.deployEndMs),
    mode: i.mode,
  });
  const capacity = capacityTimeline(i.events, i.initial, 0);
  const window = mixedVersionWindow(i.records, i.from, i.to) ?? null;
  const mixed = mixedVersionSpans(i.records, i.from, i.to);
  const deployEvents = i.events.filter((e) => e.t >= i.deployStartMs && e.t <= i.deployEndMs);
  const reloads = deployEvents.filter((e) => e.source === 'runner' && e.event.type === 'reload' && !e.event.reloadFree).length;
  const waves = deployEvents.filter((e) => e.source === 'engine' && e.event.type === 'wave').length;
  const timings = measuredTimings(deployEvents);
  const predicted = i.mode === 'engine' ? (i.predicted ?? null) : null;
  const calibrated = i.mode === 'engine' ? (i.calibrated ?? null) : null;
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
    calibrated,
    calibratedRatio: calibrated && calibrated.durationMs > 0 && outcome === 'completed' ? round3(deployDurationMs / calibrated.durationMs) : null,
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
  /** Measured over the calibrated prediction, over the runs that had one. */
  calibratedRatio: Stat | null;
  /** The calibrated predictions' durations. */
  calibratedDurationMs: Stat | null;
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
    calibratedRatio: stat(present(runs.map((r) => r.calibratedRatio))) ?? null,
    calibratedDurationMs: stat(runs.flatMap((r) => (r.calibrated ? [r.calibrated.durationMs] : []))) ?? null,
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
  return {
    requests: of((h) => h.requests),
    failed5xx: of((h) => h.failed5xx),
    dropped: of((h) => h.dropped),
    mixedVersionWindowMs: of((h) => h.mixedVersionWindowMs),
  };
}
