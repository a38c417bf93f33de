/**
 * What an experiment's summary.json holds: one run as the report needs it,
 * each configuration's aggregate, the per-run lines, and the summary around
 * them. The report (report.ts) and its charts are built from these alone.
 */
import type { DeployHealthReport } from '../core/deployHealth.js';
import type { StrategyInput } from '../core/strategy.js';
import type { CellAggregate, DeployOutcome, NewVersionMetrics, RunMetrics } from './analysis.js';
import type { SecondBucket } from './metrics.js';
import type { CellParams, Dimension } from './matrix.js';
import type { StrategySpec } from './specSchema.js';

/** One run as the report needs it. */
export interface RunOutcome {
  id: string;
  index: number;
  cellId: string;
  label: string;
  repetition: number;
  startedAt: string;
  metrics: RunMetrics;
  deployError?: string | undefined;
  /** The version every instance should run at the end: `to`, or `from` when the analysis stopped the deploy. */
  expectedVersion: string;
  /** Instances that did not report expectedVersion at the end ("name: version"). */
  wrongVersions: string[];
  buckets: SecondBucket[];
  deployStartMs: number;
  deployEndMs: number;
  loadEndMs: number;
  /** Paths relative to the output directory; calibratedEvents: the calibrated prediction's events (virtual ms from the deploy's start), for runs that had one. */
  files: { requests: string[]; events: string; metrics: string; calibratedEvents?: string | undefined };
}

export interface CellSummary {
  id: string;
  label: string;
  strategy: Pick<StrategySpec, 'type' | 'maxSurge' | 'maxUnavailable' | 'replacementPolicy' | 'intervalSeconds' | 'batch' | 'pollSeconds' | 'expectStopped'> & {
    name: string;
    /** BlueGreen and Canary: the fleet file's strategy block the runs used. */
    fleet?: StrategyInput | undefined;
    /** The fleet file's analysis block (RollingUpdate, BlueGreen). */
    analysis?: Record<string, unknown> | undefined;
    /** Where the analysis gate judged the new version ("after the first wave", ...); null or absent: no gate. */
    gate?: string | null | undefined;
  };
  /** maxSurge/maxUnavailable as instance counts (null for the naive and script controls). */
  resolved: { maxSurge: number; maxUnavailable: number } | null;
  params: CellParams;
  varying: Partial<Record<Dimension, number | boolean>>;
  runs: string[];
  aggregate: CellAggregate;
  expectZeroFailures: boolean;
  /** null when nothing was expected. */
  expectationMet: boolean | null;
}

/** One line per run in summary.json (the capacity timelines and phases are in runs/<id>/metrics.json). */
export interface RunLine {
  id: string;
  cell: string;
  repetition: number;
  /** completed, stopped (the analysis took the new version out and the fleet rolled back), failed. */
  outcome: DeployOutcome;
  requests: { total: number; ok: number; failed: number; retried: number; byOutcome: Record<string, number> };
  failuresByPhase: RunMetrics['failuresByPhase'];
  windowMs: number;
  /** The new version's traffic, its own failures and the others, and the times to roll back (see RunMetrics.newVersion). */
  newVersion: NewVersionMetrics;
  /** The deploy's health numbers from nginx's access log; null for the naive and script controls. */
  health: DeployHealthReport | null;
  deployDurationMs: number;
  minCapacity: number;
  peakInstances: number;
  reloads: number;
  waves: number;
  overheadRatio: number | null;
  deployError?: string | undefined;
  wrongVersions: string[];
  files: RunOutcome['files'];
}

export interface ExperimentSummary {
  experiment: {
    name: string;
    title: string;
    description?: string | undefined;
    specFile: string;
    from: string;
    to: string;
    repetitions: number;
    /** resend false: a strict client (keep-alive resets count as failures); absent in summaries from before it existed. */
    load: { timeoutMs: number; beforeSeconds: number; afterSeconds: number; users: number; resend?: boolean | undefined };
    /**
     * The new version was made subtly bad: share of its API answers that are
     * 500s, latency added (null: a good version). A list, as given, is a
     * dimension: each configuration's values are in its params (badErrorRate, badLatencyMs).
     */
    badVersion: { errorRate: number | number[]; latencyMs: number | number[] } | null;
    /** The spec's analysis block (merged under each strategy's). */
    analysis: Record<string, unknown> | null;
    startedAt: string;
    finishedAt: string;
    machine: { node: string; platform: string; cpus: number };
    /**
     * The unmeasured run made before each nginx mode's first measured run
     * (spec calibrationRun), whose step costs price the calibrated
     * predictions: its configuration and deploy duration. Absent in
     * summaries from before it existed; empty when none was made.
     */
    calibrationRuns?: { mode: 'reload' | 'dynamic'; label: string; deployMs: number }[] | undefined;
  };
  /** Every deploy completed or was stopped as expected, every instance ended where it should (naive aside), every expectation met. */
  ok: boolean;
  problems: string[];
  cells: CellSummary[];
  /** Each script control beside fleetroll with the same batch (maxSurge 0 / maxUnavailable b) and settings. */
  scriptComparison: ScriptComparisonRow[];
  runs: RunLine[];
  outDir: string;
  files: { report: string; html: string; summary: string; charts: string[] };
}

/** One script control and the fleetroll configuration that replaces the same batch: medians over the runs, failed in the worst run. */
export interface ScriptComparisonRow {
  batch: number;
  script: string;
  fleetroll: string;
  /** fleetroll's replacementPolicy when its strategy sets one. */
  replacementPolicy?: string | undefined;
  durationMs: { fleetroll: number; script: number };
  /** fleetroll's deploy duration / the script's; null when the script's is 0. */
  durationRatio: number | null;
  windowMs: { fleetroll: number; script: number };
  reloads: { fleetroll: number; script: number };
  failed: { fleetroll: number; script: number };
  /** Runs whose deploy failed. */
  deployErrors: { fleetroll: number; script: number };
}

export function runLine(r: RunOutcome): RunLine {
  const byOutcome: Record<string, number> = {};
  for (const m of Object.values(r.metrics.requests.byMethod)) for (const [k, n] of Object.entries(m.byStatus)) byOutcome[k] = (byOutcome[k] ?? 0) + n;
  return {
    id: r.id,
    cell: r.cellId,
    repetition: r.repetition,
    requests: { total: r.metrics.requests.total, ok: r.metrics.requests.ok, failed: r.metrics.requests.failed, retried: r.metrics.requests.retried, byOutcome },
    outcome: r.metrics.outcome,
    failuresByPhase: r.metrics.failuresByPhase,
    windowMs: Math.round(r.metrics.windowMs),
    newVersion: r.metrics.newVersion,
    health: r.metrics.health,
    deployDurationMs: Math.round(r.metrics.deployDurationMs),
    minCapacity: r.metrics.minCapacity,
    peakInstances: r.metrics.peakInstances,
    reloads: r.metrics.reloads,
    waves: r.metrics.waves,
    overheadRatio: r.metrics.overheadRatio,
    ...(r.deployError ? { deployError: r.deployError } : {}),
    wrongVersions: r.wrongVersions,
    files: r.files,
  };
}
