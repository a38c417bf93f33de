/**
 * The experiment report: what summary.json holds, the Markdown/HTML
 * document, and the charts, all built from the measured runs.
 *
 * PURE: the caller writes the files and renders the chart specs.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { DeployHealthReport } from '../core/deployHealth.js';
import type { StrategyInput } from '../core/strategy.js';
import type { CellAggregate, DeployOutcome, NewVersionMetrics, RunMetrics, Stat } from './analysis.js';
import type { CapacityPoint } from './timeline.js';
import { capacitySpec, failuresSpec, versionsPerSecondSpec, windowDurationSpec, type FailuresRow, type WindowDurationRow } from './charts.js';
import type { Block } from './document.js';
import type { SecondBucket } from './metrics.js';
import { percentText, type CellParams, type Dimension, type ExperimentSpec, type StrategySpec } from './spec.js';

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
  /** Paths relative to the output directory. */
  files: { requests: string[]; events: string; metrics: string };
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
    load: { timeoutMs: number; beforeSeconds: number; afterSeconds: number; users: number };
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

// ---- formatting ----

/** Fixed decimals; for counts (0 digits) a median halfway between two runs keeps its .5. */
const num = (x: number, digits: number) => (digits === 0 && !Number.isInteger(x) ? x.toFixed(1) : x.toFixed(digits));

/** "9.6" for one value or an exact repeat; "9.6 (9.1–10.2)" as median (min–max) otherwise. */
export function fmtStat(s: Stat | null | undefined, scale = 1, digits = 0): string {
  if (!s) return 'n/a';
  const f = (x: number) => num(x / scale, digits);
  return s.n <= 1 || f(s.min) === f(s.max) ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`;
}
const sec = (s: Stat | null | undefined) => fmtStat(s, 1000, 1);
const secOf = (ms: number) => (ms / 1000).toFixed(1);

function outcomes(map: Record<string, Stat>, onlyFailures: boolean): string {
  const entries = Object.entries(map).filter(([k, s]) => s.max > 0 && (!onlyFailures || !/^[23]\d\d$/.test(k)));
  return entries.length === 0 ? '–' : entries.map(([k, s]) => `${k} × ${fmtStat(s)}`).join(', ');
}

/** "25% → analysis" for a canary's steps as the fleet got them. */
function canarySteps(fleet: StrategyInput | undefined): string {
  const steps = (fleet?.canary?.steps ?? []) as readonly Record<string, unknown>[];
  return steps
    .map((st) => (st.setWeight !== undefined ? `${String(st.setWeight)}%` : st.analysis !== undefined ? 'analysis' : st.pause !== undefined ? `pause ${String((st.pause as { duration?: unknown }).duration)}` : '?'))
    .join(' → ');
}

function strategyText(c: CellSummary): string {
  if (c.strategy.type === 'BlueGreen') {
    const delay = c.strategy.fleet?.blueGreen?.scaleDownDelaySeconds;
    return `BlueGreen: the whole new set beside the old one, one reload switches; old set kept ${delay ?? 30} s (scaleDownDelaySeconds)`;
  }
  if (c.strategy.type === 'Canary') {
    return `Canary: ${canarySteps(c.strategy.fleet)} (sticky on ${c.strategy.fleet?.canary?.stickyKey ?? 'X-User'}), then a rolling update maxSurge ${c.strategy.maxSurge ?? '25%'} (${c.resolved?.maxSurge}), maxUnavailable ${c.strategy.maxUnavailable ?? '25%'} (${c.resolved?.maxUnavailable})`;
  }
  if (c.strategy.type === 'naive') return `naive control (kill, start, reload; ${c.strategy.intervalSeconds ?? 1} s pause)`;
  if (c.strategy.type === 'script') return `script control, batch ${c.strategy.batch} (mark down + reload, drain, stop, start, poll readiness every ${c.strategy.pollSeconds ?? 1} s, re-enable + reload)`;
  if (c.strategy.type === 'Recreate') return 'Recreate';
  const policy = c.strategy.replacementPolicy ? `, replacementPolicy ${c.strategy.replacementPolicy}` : '';
  return `maxSurge ${c.strategy.maxSurge ?? '25%'} (${c.resolved?.maxSurge}), maxUnavailable ${c.strategy.maxUnavailable ?? '25%'} (${c.resolved?.maxUnavailable})${policy}`;
}

/** "after the first wave: error rate ≤ 5%, every 4s, at least 10 requests" or "none". */
function gateText(c: CellSummary): string {
  if (!c.strategy.gate) return c.strategy.type === 'naive' || c.strategy.type === 'script' ? 'none (a control)' : 'none';
  const a = c.strategy.analysis ?? (c.strategy.fleet?.canary?.steps as readonly Record<string, unknown>[] | undefined)?.find((st) => st.analysis !== undefined)?.analysis as Record<string, unknown> | undefined;
  if (!a) return c.strategy.gate;
  const limits = [
    a.maxErrorRate !== undefined ? `error rate ≤ ${String(a.maxErrorRate)}` : '',
    a.maxErrorRateIncrease !== undefined ? `error rate ≤ stable + ${String(a.maxErrorRateIncrease)}` : '',
    a.maxLatencyRatio !== undefined ? `p99 ≤ ${String(a.maxLatencyRatio)}× stable` : '',
  ].filter(Boolean);
  const every = a.interval !== undefined ? `, measured every ${String(a.interval)}` : '';
  const min = a.minRequests !== undefined ? `, at least ${String(a.minRequests)} requests` : '';
  return `${c.strategy.gate}: ${limits.join(', ')}${every}${min}`;
}

const OUTCOME_TEXT: Record<DeployOutcome, string> = { completed: 'completed', stopped: 'stopped by the analysis', failed: 'FAILED' };

/** "stopped by the analysis" or "completed 2, stopped by the analysis 1". */
function outcomeText(a: CellAggregate): string {
  const parts = (Object.keys(OUTCOME_TEXT) as DeployOutcome[]).filter((k) => a.outcomes[k] > 0);
  return parts.length === 1 ? OUTCOME_TEXT[parts[0]!] : parts.map((k) => `${OUTCOME_TEXT[k]} ${a.outcomes[k]}`).join(', ');
}

/**
 * "20% of its API answers are 500s, 300 ms added to each"; a list names its
 * values ("2%, 5% or 20% ..."): the matrix has one configuration per value.
 */
export function badVersionText(b: NonNullable<ExperimentSummary['experiment']['badVersion']>): string {
  const rates = [b.errorRate].flat();
  const latencies = [b.latencyMs].flat();
  const alternatives = (xs: string[]) => (xs.length > 1 ? `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}` : (xs[0] ?? ''));
  const what = [
    rates.some((r) => r > 0) ? `${alternatives(rates.map(percentText))} of its API answers are 500s` : '',
    latencies.some((ms) => ms > 0) ? `${alternatives(latencies.map(String))} ms added to each` : '',
  ].filter(Boolean);
  return `${what.join(', ')}${rates.length > 1 || latencies.length > 1 ? ', one configuration per value' : ''}`;
}

/**
 * The strategies against the bad version, one line per configuration:
 * what the analysis did, the failures split by who caused them, the
 * mixed-version window, how much traffic the bad version took, how long it
 * took to get it out, and nginx's own count of 5xx.
 */
export function badVersionTable(summary: ExperimentSummary): Block {
  return {
    kind: 'table',
    head: [
      'configuration',
      'analysis gate',
      'outcome',
      'requests',
      "failed: bad version's own / other",
      'mixed-version window (s)',
      'bad version answered (in the deploy)',
      'time to roll back (s): from deploy start / from its first 500',
      'bad version in traffic (s)',
      'access log: 5xx / dropped',
    ],
    align: ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: summary.cells.map((c) => {
      const a = c.aggregate;
      const nv = a.newVersion;
      const stopped = a.outcomes.stopped > 0;
      const notStopped = a.outcomes.completed > 0 ? 'not stopped' : 'n/a';
      const share = nv.sentInDeploy.median > 0 ? ` (${((100 * nv.answeredInDeploy.median) / nv.sentInDeploy.median).toFixed(0)}%)` : '';
      return [
        c.label,
        gateText(c),
        outcomeText(a),
        fmtStat(a.requests.total),
        `${fmtStat(nv.ownFailures)} / ${fmtStat(nv.otherFailures)}`,
        // Hundredths: a blue-green switch is tens of milliseconds.
        fmtStat(a.windowMs, 1000, 2),
        `${fmtStat(nv.answeredInDeploy)} of ${fmtStat(nv.sentInDeploy)}${share}${a.outcomes.completed > 0 ? ', then all' : ''}`,
        stopped ? `${sec(nv.stopMs)} / ${sec(nv.stopAfterFirstFailureMs)}` : notStopped,
        stopped ? sec(nv.exposureMs) : a.outcomes.completed > 0 ? 'not stopped' : 'n/a',
        a.health ? `${fmtStat(a.health.failed5xx)} / ${fmtStat(a.health.dropped)}` : 'n/a',
      ];
    }),
  };
}

// ---- the script control beside fleetroll ----

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

const sameParams = (a: CellParams, b: CellParams) => (Object.keys(a) as (keyof CellParams)[]).every((k) => a[k] === b[k]);

/**
 * Pairs every `script` configuration of batch b with every RollingUpdate
 * configuration that resolves to maxSurge 0 / maxUnavailable b on the same
 * settings (replicas, timings, load): the same job done by hand and by
 * fleetroll. In spec order: script by script, then fleetroll by fleetroll.
 */
export function scriptComparison(cells: readonly CellSummary[]): ScriptComparisonRow[] {
  const rows: ScriptComparisonRow[] = [];
  for (const s of cells) {
    if (s.strategy.type !== 'script' || s.strategy.batch === undefined) continue;
    const b = s.strategy.batch;
    for (const f of cells) {
      if (f.strategy.type !== 'RollingUpdate' || f.resolved?.maxSurge !== 0 || f.resolved.maxUnavailable !== b || !sameParams(s.params, f.params)) continue;
      const fa = f.aggregate;
      const sa = s.aggregate;
      rows.push({
        batch: b,
        script: s.label,
        fleetroll: f.label,
        ...(f.strategy.replacementPolicy ? { replacementPolicy: f.strategy.replacementPolicy } : {}),
        durationMs: { fleetroll: fa.deployDurationMs.median, script: sa.deployDurationMs.median },
        durationRatio: sa.deployDurationMs.median > 0 ? Math.round((fa.deployDurationMs.median / sa.deployDurationMs.median) * 1000) / 1000 : null,
        windowMs: { fleetroll: fa.windowMs.median, script: sa.windowMs.median },
        reloads: { fleetroll: fa.reloads.median, script: sa.reloads.median },
        failed: { fleetroll: fa.requests.failed.max, script: sa.requests.failed.max },
        deployErrors: { fleetroll: fa.deployErrors, script: sa.deployErrors },
      });
    }
  }
  return rows;
}

/** What fleetroll should achieve against the script (the issue's targets; for information, never asserted). */
export const SCRIPT_TARGETS = { durationRatio: 0.6, windowSlackMs: 1000 } as const;

export interface TargetCheck {
  /** fleetroll's duration ≤ 0.6 × the script's */
  duration: boolean;
  /** fleetroll's mixed-version window ≤ the script's + 1 s */
  window: boolean;
  /** fleetroll reloads nginx no more often than the script */
  reloads: boolean;
  /** no failed request and no failed deploy for either */
  zeroFailures: boolean;
}

export function checkTargets(r: ScriptComparisonRow): TargetCheck {
  return {
    duration: r.durationRatio !== null && r.durationRatio <= SCRIPT_TARGETS.durationRatio,
    window: r.windowMs.fleetroll <= r.windowMs.script + SCRIPT_TARGETS.windowSlackMs,
    reloads: r.reloads.fleetroll <= r.reloads.script,
    zeroFailures: r.failed.fleetroll === 0 && r.failed.script === 0 && r.deployErrors.fleetroll === 0 && r.deployErrors.script === 0,
  };
}

const pair = (x: { fleetroll: number; script: number }, f: (v: number) => string) => `${f(x.fleetroll)} / ${f(x.script)}`;

export function scriptComparisonTable(rows: readonly ScriptComparisonRow[]): Block {
  return {
    kind: 'table',
    head: ['batch', 'fleetroll', 'script', 'duration (s) fleetroll / script', 'ratio', 'mixed-version window (s) fleetroll / script', 'reloads fleetroll / script', 'failed fleetroll / script'],
    align: ['r', 'l', 'l', 'r', 'r', 'r', 'r', 'r'],
    rows: rows.map((r) => [
      String(r.batch),
      r.fleetroll,
      r.script,
      pair(r.durationMs, secOf),
      r.durationRatio === null ? 'n/a' : `${r.durationRatio.toFixed(2)}×`,
      pair(r.windowMs, secOf),
      pair(r.reloads, (v) => num(v, 0)),
      pair(r.failed, (v) => num(v, 0)),
    ]),
  };
}

// ---- charts ----

export interface ChartFile {
  file: string;
  title: string;
  spec: TopLevelSpec;
}

export function buildCharts(summary: ExperimentSummary, runs: readonly RunOutcome[]): ChartFile[] {
  const e = summary.experiment;
  const order = summary.cells.map((c) => c.label);
  const charts: ChartFile[] = [];
  const wd: WindowDurationRow[] = [];
  for (const c of summary.cells) {
    const a = c.aggregate;
    wd.push({ cell: c.label, metric: 'mixed-version window', kind: 'measured', value: a.windowMs.median / 1000, min: a.windowMs.min / 1000, max: a.windowMs.max / 1000 });
    wd.push({ cell: c.label, metric: 'deploy duration', kind: 'measured', value: a.deployDurationMs.median / 1000, min: a.deployDurationMs.min / 1000, max: a.deployDurationMs.max / 1000 });
    if (a.predicted) {
      wd.push({ cell: c.label, metric: 'mixed-version window', kind: 'predicted by simulate', value: a.predicted.mixedVersionWindowMs / 1000 });
      wd.push({ cell: c.label, metric: 'deploy duration', kind: 'predicted by simulate', value: a.predicted.durationMs / 1000 });
    }
  }
  charts.push({ file: 'charts/window-duration.svg', title: 'Mixed-version window and deploy duration', spec: windowDurationSpec(wd, `${e.title}: mixed-version window and deploy duration`, order) });

  const labelOf = new Map(summary.cells.map((c) => [c.id, c.label]));
  charts.push({
    file: 'charts/capacity.svg',
    title: 'Capacity over time',
    spec: capacitySpec(
      runs.map((r) => ({ cell: labelOf.get(r.cellId) ?? r.cellId, run: r.id, points: r.metrics.capacity as CapacityPoint[], deployStartMs: r.deployStartMs, deployEndMs: r.deployEndMs, endMs: r.loadEndMs })),
      `${e.title}: capacity over time`,
      order,
    ),
  });

  const fr: FailuresRow[] = [];
  for (const c of summary.cells) {
    const totals: Record<string, number> = {};
    for (const r of runs.filter((x) => x.cellId === c.id)) {
      for (const m of Object.values(r.metrics.requests.byMethod)) for (const [k, n] of Object.entries(m.byStatus)) if (!/^[23]\d\d$/.test(k)) totals[k] = (totals[k] ?? 0) + n;
      if (r.metrics.requests.retried > 0) totals['retried (keep-alive)'] = (totals['retried (keep-alive)'] ?? 0) + r.metrics.requests.retried;
    }
    for (const [outcome, count] of Object.entries(totals)) fr.push({ cell: c.label, outcome, count });
  }
  if (fr.length > 0) charts.push({ file: 'charts/failures.svg', title: 'Failed and retried requests', spec: failuresSpec(fr, `${e.title}: failed and retried requests`, order) });

  for (const r of runs) {
    charts.push({
      file: `charts/versions-${r.id}.svg`,
      title: `Versions answering per second: ${r.label}, repetition ${r.repetition}`,
      spec: versionsPerSecondSpec({
        title: `${r.label} (repetition ${r.repetition}): responses per second by version`,
        subtitle: `${r.metrics.requests.total} requests, ${r.metrics.requests.failed} failed, ${r.metrics.requests.retried} retried; mixed-version window ${secOf(r.metrics.windowMs)} s; deploy ${secOf(r.metrics.deployDurationMs)} s`,
        from: e.from,
        to: e.to,
        buckets: r.buckets,
        deployStartMs: r.deployStartMs,
        deployEndMs: r.deployEndMs,
      }),
    });
  }
  return charts;
}

// ---- the document ----

function resultsTable(summary: ExperimentSummary): Block {
  return {
    kind: 'table',
    head: ['configuration', 'runs', 'requests', 'failed', 'retried', 'mixed-version window (s)', 'deploy duration (s)', 'simulate: duration / window (s)', 'overhead', 'min in service', 'peak instances', 'reloads'],
    align: ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: summary.cells.map((c) => {
      const a = c.aggregate;
      return [
        c.label,
        String(a.runs),
        fmtStat(a.requests.total),
        fmtStat(a.requests.failed),
        fmtStat(a.requests.retried),
        sec(a.windowMs),
        sec(a.deployDurationMs),
        a.predicted ? `${secOf(a.predicted.durationMs)} / ${secOf(a.predicted.mixedVersionWindowMs)}` : 'n/a',
        a.overheadRatio ? `${fmtStat(a.overheadRatio, 1, 2)}×` : 'n/a',
        `${fmtStat(a.minCapacity)} of ${c.params.replicas}${a.predicted ? ` (sim ${a.predicted.lowestCapacity})` : ''}`,
        `${fmtStat(a.peakInstances)}${a.predicted ? ` (sim ${a.predicted.peakInstances})` : ''}`,
        `${fmtStat(a.reloads)}${a.predicted ? ` (sim ${a.predicted.reloads})` : ''}`,
      ];
    }),
  };
}

/** Every setting of every configuration; the bad version's columns only when the spec has one. */
export function configurationsTable(summary: ExperimentSummary): Block {
  const bad = summary.experiment.badVersion !== null;
  return {
    kind: 'table',
    head: ['configuration', 'strategy', 'analysis gate', 'replicas', 'drain (s)', 'warm-up (s)', 'minReady (s)', 'prestop (s)', 'GET/s', 'POST streams', 'POST (ms)', 'connections', ...(bad ? ['bad version: 500s', 'bad version: added (ms)'] : [])],
    align: ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l', ...(bad ? (['r', 'r'] as const) : [])],
    rows: summary.cells.map((c) => [
      c.label,
      strategyText(c),
      gateText(c),
      String(c.params.replicas),
      String(c.params.drainSeconds),
      String(c.params.warmupSeconds),
      String(c.params.minReadySeconds),
      String(c.params.prestopSeconds),
      String(c.params.getPerSecond),
      String(c.params.postConcurrency),
      String(c.params.postDurationMs),
      c.params.keepAlive ? 'keep-alive (resend once on a reused connection)' : 'new connection per request',
      ...(bad ? [percentText(c.params.badErrorRate), String(c.params.badLatencyMs)] : []),
    ]),
  };
}

export function buildDocument(summary: ExperimentSummary, runs: readonly RunOutcome[], spec: ExperimentSpec, charts: readonly ChartFile[]): Block[] {
  const e = summary.experiment;
  const b: Block[] = [];
  b.push({ kind: 'h1', text: `Experiment: ${e.title}` });
  if (e.description) b.push({ kind: 'p', text: e.description.trim() });
  b.push({
    kind: 'p',
    text: `Rolling ${e.from} → ${e.to}; ${summary.cells.length} configuration(s) × ${e.repetitions} repetition(s) = ${runs.length} run(s), each on a fresh local fleet behind nginx with load probes running through the whole deploy. Spec \`${e.specFile}\`; run ${e.startedAt} to ${e.finishedAt} on Node ${e.machine.node}, ${e.machine.platform}, ${e.machine.cpus} CPU(s).`,
  });
  if (!summary.ok) b.push({ kind: 'p', text: `**Problems:** ${summary.problems.join('; ')}` });

  b.push({ kind: 'h2', text: 'Results' });
  b.push({ kind: 'p', text: 'Per configuration, over its repetitions: median (min–max) when they differ. "retried" counts requests resent once after a reused keep-alive connection was closed under them (see below); they are included in "requests" and counted as failed only if the resend failed too.' });
  b.push(resultsTable(summary));

  if (e.badVersion) {
    b.push({ kind: 'h3', text: 'Against a bad version' });
    b.push({
      kind: 'p',
      text: `The new version ${e.to} is subtly bad (\`badVersion\`: ${badVersionText(e.badVersion)}; readiness passes). Per configuration, median (min–max) over the repetitions. "failed" splits the failed requests into those the bad version answered itself (its 500s, with its X-App-Version) and every other failure (resets, timeouts, nginx's 502/504, the old version's errors): the second is what the rollout caused. "time to roll back" runs to the last answer the bad version gave, from the deploy's start and from its first 500; "in traffic" from its first answer to its last. A strategy that completed left the bad version serving everything. "access log" is nginx's own count over the deploy window (the deploy's health numbers), where the probes' count also covers the load before and after it.`,
    });
    b.push(badVersionTable(summary));
  }

  if (summary.scriptComparison.length > 0) {
    b.push({ kind: 'h3', text: 'fleetroll beside the hand-written script' });
    b.push({
      kind: 'p',
      text: 'Each script control beside the fleetroll configuration that replaces the same batch (maxSurge 0 / maxUnavailable b) with the same settings: medians over the repetitions, failed requests in the worst run. ratio = fleetroll\'s deploy duration / the script\'s.',
    });
    b.push(scriptComparisonTable(summary.scriptComparison));
  }

  b.push({ kind: 'h3', text: 'Configurations' });
  b.push(configurationsTable(summary));

  b.push({ kind: 'h2', text: 'Failed requests by deploy phase' });
  const withFailures = summary.cells.filter((c) => c.aggregate.failuresByPhase.some((f) => f.failed.max > 0));
  if (withFailures.length === 0) b.push({ kind: 'p', text: `No request failed in any of the ${runs.length} run(s).` });
  else {
    b.push({ kind: 'p', text: 'Each failure is pinned on the phase the deploy was in when the client saw it fail (a timeout: when it was sent). Counts per run, median (min–max).' });
    b.push({
      kind: 'table',
      head: ['configuration', 'phase', 'failed', 'outcomes'],
      align: ['l', 'l', 'r', 'l'],
      rows: withFailures.flatMap((c) => c.aggregate.failuresByPhase.filter((f) => f.failed.max > 0).map((f) => [c.label, f.phase, fmtStat(f.failed), outcomes(f.byStatus, true)])),
    });
  }

  const retried = summary.cells.filter((c) => c.aggregate.requests.retried.max > 0);
  b.push({ kind: 'h2', text: 'Keep-alive retries' });
  const keepAliveCells = summary.cells.filter((c) => c.params.keepAlive);
  if (keepAliveCells.length === 0) b.push({ kind: 'p', text: 'No configuration used keep-alive connections: every request went out on a new connection and nothing was resent.' });
  else {
    b.push({
      kind: 'p',
      text: 'Every nginx reload closes the idle client connections of its old workers; a request written on one at that instant meets a reset. Browsers and Go\'s http.Transport resend such a request once when the connection was reused and no byte of a response came back, and so do the keep-alive probes (`retried: true` in the request records). They are counted here, never hidden.',
    });
    if (retried.length === 0) b.push({ kind: 'p', text: 'No request needed a resend.' });
    else
      b.push({
        kind: 'table',
        head: ['configuration', 'phase', 'retried (per run)'],
        align: ['l', 'l', 'r'],
        rows: retried.flatMap((c) => c.aggregate.failuresByPhase.filter((f) => f.retried.max > 0).map((f) => [c.label, f.phase, fmtStat(f.retried)])),
      });
  }

  b.push({ kind: 'h2', text: 'Charts' });
  for (const ch of charts.filter((c) => !c.file.startsWith('charts/versions-'))) b.push({ kind: 'img', src: ch.file, alt: ch.title });
  b.push({ kind: 'h3', text: 'Versions answering per second' });
  b.push({ kind: 'p', text: 'Successful responses per second by the version that answered (bucketed by send time), failures in red; dashed lines mark the deploy.' });
  for (const ch of charts.filter((c) => c.file.startsWith('charts/versions-'))) b.push({ kind: 'img', src: ch.file, alt: ch.title });

  b.push({ kind: 'h2', text: 'Runs' });
  b.push({
    kind: 'table',
    head: ['run', 'requests', 'failed', 'retried', 'outcomes', 'window (s)', 'duration (s)', 'overhead', 'min in service', 'peak', 'reloads', 'start→ready (s)', 'stop (s)', 'recordings'],
    align: ['l', 'r', 'r', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
    rows: runs.map((r) => {
      const m = r.metrics;
      const line = runLine(r);
      return [
        r.id,
        String(m.requests.total),
        String(m.requests.failed),
        String(m.requests.retried),
        Object.entries(line.requests.byOutcome).map(([k, n]) => `${k} × ${n}`).join(', '),
        secOf(m.windowMs),
        secOf(m.deployDurationMs) + (m.outcome === 'stopped' ? ' (stopped by the analysis)' : r.deployError ? ' (deploy FAILED)' : ''),
        m.overheadRatio === null ? 'n/a' : `${m.overheadRatio.toFixed(2)}×`,
        String(m.minCapacity),
        String(m.peakInstances),
        String(m.reloads),
        sec(m.measured.startToReadyMs),
        sec(m.measured.stopMs),
        [...r.files.requests, r.files.events].map((f) => `[${f.split('/').pop()}](${f})`).join(' '),
      ];
    }),
  });

  b.push({ kind: 'h2', text: 'How the figures are measured' });
  b.push({
    kind: 'list',
    items: [
      'Every request the probes sent is in `runs/<run>/requests.ndjson` (time sent in ms since the probes started, method, path, status or error, latency, the `X-App-Version` that answered, `retried`); the deploy\'s events with the same clock are in `runs/<run>/events.ndjson`; `runs/<run>/metrics.json` has everything below per run.',
      'A request is ok when it got a 2xx/3xx and its whole body; anything else (5xx, reset, refused, timeout, a body cut off) is failed.',
      '**Mixed-version window**: the time during which both versions were answering, at the moments their answers arrived. Each version\'s answers (any status the app sent, a whole response) form spans; a gap longer than max(1 s, 5 × the median gap between that version\'s answers) ends a span (the version was out of traffic). The window is the total overlap of the old and the new version\'s spans: for a rollout that moves forward once, from the first answer by the new version to the last by the old one; for a canary taken out, the time it answered beside stable; for a blue-green switch and back, the overlap at each of the two switches, not the time in between. `mixedVersionWindow` in metrics.json keeps the first-new-to-last-old figure.',
      '**The new version** (`newVersion` in metrics.json): the requests sent during the deploy and how many of them it answered; the failed requests it answered itself (a 5xx with its `X-App-Version`: with `badVersion`, its own 500s) and every other failure. When the analysis stopped it (outcome "stopped": the deploy failed on the gate, the new version was taken out and the fleet rolled back), the **time to roll back** is measured to its last answer, from the deploy\'s start (`stopMs`) and from its first failed answer (`stopAfterFirstFailureMs`), and its **time in traffic** from its first answer to its last (`exposureMs`).',
      '**Access log** (`health` in metrics.json): the deploy reads nginx\'s fleetroll_json access log, as `fleetroll deploy` does with `accessLog:`: the analysis gate judges from it, and the deploy ends with its health numbers (requests, 5xx, dropped, its own mixed-version window, the first new instance\'s error rate). The naive and script controls do not deploy through the engine and have none.',
      '**Deploy duration**: from the call to deploy until it returned (for the naive control: until its last replacement and pause; for the script control: until its last batch was back in nginx).',
      '**The script control** is the proper hand-written rolling script (the article\'s `rolling.sh`) in batches of b: per batch it rewrites the upstream with the batch marked `down`, runs `nginx -t` and reloads; sleeps drainSeconds; stops the batch gracefully (side by side) and removes it; starts b new containers one after another on the same hosts; polls each one\'s readiness every pollSeconds (giving up after progressDeadlineSeconds); then rewrites the upstream with everything up and reloads again. It uses the same Docker, nginx and probe code as fleetroll and reports the same events, so its figures are measured the same way: two reloads per batch, one batch at a time. It is a control for experiments, not a way to deploy.',
      '**Phases** come from the timestamped events: per wave "marking down" (the reload that takes old instances out), "draining", "stopping", "starting", "waiting for readiness"; then "verifying". The script control has the same per batch ("batch N: ..."), then "re-enabling" (the reload that puts the ready batch in). The naive control: per instance "killing", "starting", "reloading nginx", "pause". Blue-green, canary and a rollback add what their messages announce: "switching to the new set", "old set kept (scaleDownDelaySeconds)", "switching back", "canary 25%", "canary analysis at 25%", "aborting the canary", "final rolling update", "rolling back".',
      '**Capacity**: servers nginx sends traffic to, tracked from the upstream events of the engine and the script control (and, for the naive control, from what each reload loaded), minus stopped containers. The naive control lists a new instance as soon as it starts, before it is ready.',
      '**Simulate** runs the same rolling algorithm on a virtual clock with the nominal timings: start-to-ready = warm-up, drain = drainSeconds, stop = prestop, minReadySeconds. Its duration is the floor the timings imply (per wave drain + stop + start-to-ready + minReadySeconds, with the overlaps the algorithm allows). **Overhead** = measured duration / that floor: container create/start, readiness polling, nginx reloads and fleetroll\'s own loop. simulate\'s access logs say the new version is healthy, so it predicts the rollout that passes its analysis; a deploy the analysis stopped has no overhead figure.',
      `Load: the probes start ${e.load.beforeSeconds} s before the deploy and stop ${e.load.afterSeconds} s after it; per-request timeout ${e.load.timeoutMs} ms. GETs go out on a fixed schedule (open loop), POSTs back to back per stream.`,
    ],
  });

  b.push({ kind: 'h2', text: 'Reproduce' });
  b.push({ kind: 'code', lang: 'sh', text: `npx fleetroll experiment -f ${e.specFile} --out ${summary.outDir}` });
  b.push({ kind: 'p', text: 'The spec as run:' });
  b.push({ kind: 'code', lang: 'json', text: JSON.stringify(spec, null, 2) });
  return b;
}
