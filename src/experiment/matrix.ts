/**
 * The experiment's matrix: its dimensions, its size (by arithmetic, before
 * anything is expanded, so an oversized spec is refused cheaply), its cells
 * (one per strategy and combination of list-valued settings) and the runs
 * in execution order.
 */
import type { ResolvedStrategy, StrategyInput } from '../core/strategy.js';
import { ValidationError, type FieldIssue } from '../errors.js';
import { fleetSettings, resolveFor } from './specFleet.js';
import { gateOf, percentText, strategyName } from './specNames.js';
import { list, type ExperimentSpec, type StrategySpec } from './specSchema.js';

/** The dimensions a cell can vary along, in the order their values appear in labels. */
export const DIMENSIONS = [
  'replicas',
  'drainSeconds',
  'warmupSeconds',
  'minReadySeconds',
  'prestopSeconds',
  'getPerSecond',
  'postConcurrency',
  'postDurationMs',
  'keepAlive',
  'dynamicNginx',
  'badErrorRate',
  'badLatencyMs',
] as const;
export type Dimension = (typeof DIMENSIONS)[number];

export interface CellParams {
  replicas: number;
  drainSeconds: number;
  warmupSeconds: number;
  minReadySeconds: number;
  prestopSeconds: number;
  getPerSecond: number;
  postConcurrency: number;
  postDurationMs: number;
  keepAlive: boolean;
  /** fleet.nginxMode is dynamic (fleetroll's Lua balancer, no reload) in this cell. */
  dynamicNginx: boolean;
  /** badVersion.errorRate, a share from 0 to 1 (0 without badVersion). */
  badErrorRate: number;
  /** badVersion.latencyMs (0 without badVersion). */
  badLatencyMs: number;
}

export interface Cell {
  /** 1-based position in the matrix. */
  index: number;
  /** e.g. "c02-1-0-replicas-6": unique, file-name safe. */
  id: string;
  /** e.g. "1/0, replicas 6": the strategy and the settings that vary between cells. */
  label: string;
  strategy: StrategySpec & { name: string };
  /** Resolved for this cell's replicas; undefined for the naive and script controls. */
  resolved?: ResolvedStrategy | undefined;
  /** The fleet file's strategy block for BlueGreen and Canary (canary analysis steps carry the merged settings); undefined otherwise. */
  fleetStrategy?: StrategyInput | undefined;
  /** The fleet file's `analysis:` block (spec and strategy merged; RollingUpdate and BlueGreen only); undefined: no gate there. */
  analysis?: Record<string, unknown> | undefined;
  /** Where the analysis gate judges the new version: "after the first wave", "after the switch", "at canary step 2"; undefined: no gate. */
  gate?: string | undefined;
  params: CellParams;
  /** Values of the dimensions that vary across the matrix (for charts). */
  varying: Partial<Record<Dimension, number | boolean>>;
}

export interface PlannedRun {
  /** 1-based, in execution order. */
  index: number;
  /** e.g. "c02-1-0-replicas-6-r1" */
  id: string;
  cell: Cell;
  repetition: number;
}

// Trimmed after the cut, so a cut between two words leaves no dash to meet the run's "-r1".
const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/%/g, 'pct')
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 40)
    .replace(/^-+|-+$/g, '') || 'x';

function describeDim(d: Dimension, v: number | boolean): string {
  switch (d) {
    case 'replicas':
      return `replicas ${v}`;
    case 'drainSeconds':
      return `drain ${v} s`;
    case 'warmupSeconds':
      return `warm-up ${v} s`;
    case 'minReadySeconds':
      return `minReady ${v} s`;
    case 'prestopSeconds':
      return `prestop ${v} s`;
    case 'getPerSecond':
      return `${v} GET/s`;
    case 'postConcurrency':
      return `${v} POST streams`;
    case 'postDurationMs':
      return `POST ${v} ms`;
    case 'keepAlive':
      return v ? 'keep-alive' : 'new connections';
    case 'dynamicNginx':
      return v ? 'nginx dynamic' : 'nginx reload';
    case 'badErrorRate':
      return `bad ${percentText(Number(v))} 5xx`;
    case 'badLatencyMs':
      return `bad +${v} ms`;
  }
}

/** Whether a cell's new version is bad: in every cell of a spec with badVersion, in none without. */
export const isBadVersion = (p: Pick<CellParams, 'badErrorRate' | 'badLatencyMs'>) => p.badErrorRate > 0 || p.badLatencyMs > 0;

/** The environment that makes `to` the cell's bad version (the example app's BAD_ERROR_RATE, BAD_LATENCY_MS); empty for a good version. */
export function badVersionEnv(p: Pick<CellParams, 'badErrorRate' | 'badLatencyMs'>): Record<string, string> {
  return {
    ...(p.badErrorRate > 0 ? { BAD_ERROR_RATE: String(p.badErrorRate) } : {}),
    ...(p.badLatencyMs > 0 ? { BAD_LATENCY_MS: String(p.badLatencyMs) } : {}),
  };
}

/**
 * Most runs one experiment may plan. Each run rolls a real local fleet under
 * load (tens of seconds), so 1,000 runs is already most of a day; and the
 * matrix is a product, so three 12-value lists with 20 strategies and 50
 * repetitions would plan 1.7 million runs, whose cells alone take gigabytes
 * to expand. The size is computed from the list lengths before anything is
 * expanded.
 */
export const MAX_PLANNED_RUNS = 1000;

/** Where each dimension's values come from in the spec (the paths an issue names). */
const DIMENSION_PATHS: Record<Dimension, string> = {
  replicas: 'fleet/replicas',
  drainSeconds: 'fleet/drainSeconds',
  warmupSeconds: 'fleet/warmupSeconds',
  minReadySeconds: 'fleet/minReadySeconds',
  prestopSeconds: 'fleet/prestopSeconds',
  getPerSecond: 'load/getPerSecond',
  postConcurrency: 'load/postConcurrency',
  postDurationMs: 'load/postDurationMs',
  keepAlive: 'load/keepAlive',
  dynamicNginx: 'fleet/nginxMode',
  badErrorRate: 'badVersion/errorRate',
  badLatencyMs: 'badVersion/latencyMs',
};

function dimensionValues(spec: ExperimentSpec): Record<Dimension, (number | boolean)[]> {
  return {
    replicas: list(spec.fleet.replicas),
    drainSeconds: list(spec.fleet.drainSeconds),
    warmupSeconds: list(spec.fleet.warmupSeconds),
    minReadySeconds: list(spec.fleet.minReadySeconds),
    prestopSeconds: list(spec.fleet.prestopSeconds),
    getPerSecond: list(spec.load.getPerSecond),
    postConcurrency: list(spec.load.postConcurrency),
    postDurationMs: list(spec.load.postDurationMs),
    keepAlive: list(spec.load.keepAlive),
    dynamicNginx: list(spec.fleet.nginxMode).map((m) => m === 'dynamic'),
    // Without badVersion every cell runs a good version: 0 and 0.
    badErrorRate: list(spec.badVersion?.errorRate ?? 0),
    badLatencyMs: list(spec.badVersion?.latencyMs ?? 0),
  };
}

export interface MatrixSize {
  /** strategies × the product of the value counts × repetitions. */
  runs: number;
  cells: number;
  /** The lists of more than one value, with their value counts, in DIMENSIONS order. */
  lists: { path: string; values: number }[];
  strategies: number;
  repetitions: number;
}

/** The size of the matrix, by arithmetic on the list lengths (nothing is expanded). */
export function matrixSize(spec: ExperimentSpec): MatrixSize {
  const values = dimensionValues(spec);
  const lists = DIMENSIONS.filter((d) => values[d].length > 1).map((d) => ({ path: DIMENSION_PATHS[d], values: values[d].length }));
  const cells = lists.reduce((n, l) => n * l.values, spec.strategies.length);
  return { runs: cells * spec.repetitions, cells, lists, strategies: spec.strategies.length, repetitions: spec.repetitions };
}

const count = (n: number, one: string, many = `${one}s`) => `${n.toLocaleString('en-US')} ${n === 1 ? one : many}`;

/**
 * The issue when the spec plans more than MAX_PLANNED_RUNS runs, or
 * undefined; `repetitionsFrom` says where repetitions came from when not the
 * spec (the command's --repetitions).
 */
export function matrixIssue(spec: ExperimentSpec, repetitionsFrom?: string): FieldIssue | undefined {
  const m = matrixSize(spec);
  if (m.runs <= MAX_PLANNED_RUNS) return undefined;
  const values = m.lists.length === 0 ? [] : [`${m.lists.map((l) => l.values).join(' × ')} values`];
  const factors = [
    ...values,
    count(m.strategies, 'strategy', 'strategies'),
    `${count(m.repetitions, 'repetition')}${repetitionsFrom ? ` (${repetitionsFrom})` : ''}`,
  ];
  const lists = m.lists.length === 0 ? '' : `; the lists: ${m.lists.map((l) => `${l.path} (${l.values})`).join(', ')}`;
  return {
    path: 'matrix',
    message: `${count(m.runs, 'run')} planned (${factors.join(' × ')}), more than the ${MAX_PLANNED_RUNS.toLocaleString('en-US')} an experiment may plan${lists}: list fewer values, strategies or repetitions, or split the spec`,
  };
}

/** Throws ValidationError when the spec plans more runs than MAX_PLANNED_RUNS (see matrixIssue). */
export function assertPlannable(spec: ExperimentSpec, source?: string, repetitionsFrom?: string): void {
  const issue = matrixIssue(spec, repetitionsFrom);
  if (issue) throw new ValidationError([issue], source === undefined ? {} : { source });
}

/** The matrix: one cell per strategy and combination of list-valued settings, in spec order. */
export function expandCells(spec: ExperimentSpec): Cell[] {
  // Again here: a caller may have changed the spec after parsing it (the command's --repetitions).
  assertPlannable(spec);
  const values = dimensionValues(spec);
  const varying = DIMENSIONS.filter((d) => values[d].length > 1);
  let combos: Partial<Record<Dimension, number | boolean>>[] = [{}];
  for (const d of DIMENSIONS) combos = combos.flatMap((c) => values[d].map((v) => ({ ...c, [d]: v })));

  const cells: Cell[] = [];
  spec.strategies.forEach((s, i) => {
    const name = strategyName(s, spec.analysis);
    const fleet = fleetSettings(spec, s, i);
    const gate = gateOf(s, spec.analysis);
    for (const combo of combos) {
      const params = combo as CellParams;
      const index = cells.length + 1;
      const vary = Object.fromEntries(varying.map((d) => [d, combo[d]!])) as Partial<Record<Dimension, number | boolean>>;
      const extra = varying.map((d) => describeDim(d, combo[d]!));
      cells.push({
        index,
        id: `c${String(index).padStart(2, '0')}-${slug([name, ...extra].join(' '))}`,
        label: [name, ...extra].join(', '),
        strategy: { ...s, name },
        resolved: resolveFor(s, i, params.replicas, fleet.strategy),
        ...(fleet.strategy ? { fleetStrategy: fleet.strategy } : {}),
        ...(fleet.analysis ? { analysis: fleet.analysis } : {}),
        ...(gate ? { gate } : {}),
        params,
        varying: vary,
      });
    }
  });
  return cells;
}

/** Runs in execution order: repetition by repetition, so slow drift of the machine spreads over every cell. */
export function planRuns(cells: readonly Cell[], repetitions: number): PlannedRun[] {
  const runs: PlannedRun[] = [];
  for (let rep = 1; rep <= repetitions; rep++) {
    for (const cell of cells) runs.push({ index: runs.length + 1, id: `${cell.id}-r${rep}`, cell, repetition: rep });
  }
  return runs;
}
