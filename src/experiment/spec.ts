/**
 * The experiment spec: a matrix of rollouts to run on a local fleet under load.
 *
 *   strategies × every list-valued setting of `fleet` and `load`, each run
 *   `repetitions` times.
 *
 * A setting given as a list (`replicas: [3, 6]`) is a dimension of the
 * matrix; a single value applies to every run. Each combination is a "cell"
 * (one configuration); its repetitions are aggregated (median, min, max).
 *
 * Validation reports every problem with its path (`strategies/1/maxSurge: ...`)
 * and nothing runs until the whole spec is valid.
 */
import type * as zod from 'zod';
import { VERSION_RE, zodIssues } from '../config/schema.js';
import * as z from '../config/zod.js';
import { readDocument } from '../config/load.js';
import { resolveStrategy, type ResolvedStrategy } from '../core/strategy.js';
import { ValidationError, type FieldIssue } from '../errors.js';

const msg = (what: string) => ({ error: (i: { input?: unknown }) => `must be ${what}, got ${JSON.stringify(i.input)}` });
const number = (min: number, max: number, what = 'a number') => z.number(msg(`${what} from ${min} to ${max}`)).min(min, msg(`${what} from ${min} to ${max}`)).max(max, msg(`${what} from ${min} to ${max}`));
const integer = (min: number, max: number) => number(min, max, 'an integer').int(msg(`an integer from ${min} to ${max}`));
/** One value, or a list of values: a dimension of the matrix. */
const oneOrMany = <T extends zod.ZodType>(t: T) => z.union([t, z.array(t).min(1, 'must list at least one value').max(12, 'must list at most 12 values')]);
const intOrPercent = z.union([z.number(), z.string()], msg('an integer or a percentage string like "25%"'));

const strategySchema = z
  .object({
    /** Shown in tables and charts; default derived from the settings ("1/0", "Recreate", "naive", "script b=2"). */
    name: z.string(msg('a short label')).min(1, 'must not be empty').max(40, 'must be at most 40 characters').optional(),
    type: z.enum(['RollingUpdate', 'Recreate', 'naive', 'script'], msg('"RollingUpdate", "Recreate", "naive" or "script"')).default('RollingUpdate'),
    maxSurge: intOrPercent.optional(),
    maxUnavailable: intOrPercent.optional(),
    /** RollingUpdate only: the fleet file's replacementPolicy; unset leaves the fleet's default. */
    replacementPolicy: z.enum(['TerminationStarted', 'TerminationComplete'], msg('"TerminationStarted" or "TerminationComplete"')).optional(),
    /** naive only: pause between two replaced instances (the article's `sleep 3`). */
    intervalSeconds: number(0, 60).optional(),
    /** script only (required): instances the hand-written script replaces at once. */
    batch: integer(1, 20).optional(),
    /** script only: seconds between two readiness polls of a new instance (the script's `sleep 1`); default 1. */
    pollSeconds: number(0.1, 60).optional(),
    /** The command exits 1 when any run of this strategy had a failed request. */
    expectZeroFailures: z.boolean(msg('true or false')).optional(),
  })
  .strict();

export const experimentSchema = z
  .object({
    name: z.string(msg('a name')).regex(/^[a-z0-9][a-z0-9-]{0,39}$/, msg('lowercase letters, digits and dashes, at most 40 characters')),
    title: z.string(msg('a title')).max(200).optional(),
    description: z.string(msg('text')).max(5000).optional(),
    from: z.string(msg('a version like 1.0.0')).regex(VERSION_RE, msg('a version like 1.0.0')).default('1.0.0'),
    to: z.string(msg('a version like 1.1.0')).regex(VERSION_RE, msg('a version like 1.1.0')).default('1.1.0'),
    repetitions: integer(1, 50).default(1),
    fleet: z
      .object({
        replicas: oneOrMany(integer(1, 20)).default(3),
        /** drainSeconds of the fleet. */
        drainSeconds: oneOrMany(number(0, 60)).default(2),
        /** The app's warm-up: not ready for this long after start (WARMUP_SECONDS). */
        warmupSeconds: oneOrMany(number(0, 120)).default(1),
        minReadySeconds: oneOrMany(number(0, 120)).default(0),
        /** The app keeps serving this long after SIGTERM before it closes (PRESTOP_SECONDS). */
        prestopSeconds: oneOrMany(number(0, 30)).default(1),
      })
      .strict()
      .prefault({}),
    load: z
      .object({
        getPerSecond: oneOrMany(number(0, 2000)).default(10),
        /** Back-to-back POST streams. */
        postConcurrency: oneOrMany(integer(0, 64)).default(1),
        /** How long each POST takes in the app (ORDER_DELAY_MS). */
        postDurationMs: oneOrMany(integer(0, 10_000)).default(200),
        /** Keep-alive connections from the probes to nginx (a reused connection that a reload closed is resent once, and counted). */
        keepAlive: oneOrMany(z.boolean(msg('true or false'))).default(false),
        timeoutMs: integer(100, 60_000).default(5000),
        /** Load before the deploy starts and after it ends. */
        beforeSeconds: number(0, 60).default(1.5),
        afterSeconds: number(0, 60).default(1),
      })
      .strict()
      .prefault({}),
    strategies: z.array(strategySchema, msg('a list of strategies')).min(1, 'must list at least one strategy').max(20, 'must list at most 20 strategies'),
    /** Formats for the per-request recordings. */
    records: z.array(z.enum(['ndjson', 'csv'], msg('"ndjson" or "csv"'))).min(1).default(['ndjson']),
  })
  .strict();

export type ExperimentSpecInput = zod.input<typeof experimentSchema>;
export type ExperimentSpec = zod.output<typeof experimentSchema>;
export type StrategySpec = zod.output<typeof strategySchema>;

/** The dimensions a cell can vary along, in the order their values appear in labels. */
export const DIMENSIONS = ['replicas', 'drainSeconds', 'warmupSeconds', 'minReadySeconds', 'prestopSeconds', 'getPerSecond', 'postConcurrency', 'postDurationMs', 'keepAlive'] as const;
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

const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);

export function strategyName(s: StrategySpec): string {
  if (s.name) return s.name;
  if (s.type === 'naive') return 'naive';
  if (s.type === 'Recreate') return 'Recreate';
  if (s.type === 'script') return `script b=${s.batch ?? '?'}`;
  return `${s.maxSurge ?? '25%'}/${s.maxUnavailable ?? '25%'}${s.replacementPolicy ? ` ${s.replacementPolicy}` : ''}`;
}

const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/%/g, 'pct')
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40) || 'x';

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
  }
}

/** Cross-field rules: strategy fields that only fit one type, duplicate names, and what resolveStrategy rejects. */
function strategyIssues(spec: ExperimentSpec): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const names = new Map<string, number>();
  spec.strategies.forEach((s, i) => {
    const p = `strategies/${i}`;
    if (s.type !== 'RollingUpdate') {
      for (const f of ['maxSurge', 'maxUnavailable'] as const) {
        if (s[f] !== undefined) issues.push({ path: `${p}/${f}`, message: `only applies to type RollingUpdate, not ${s.type}` });
      }
    }
    if (s.type !== 'RollingUpdate' && s.replacementPolicy !== undefined) issues.push({ path: `${p}/replacementPolicy`, message: `only applies to type RollingUpdate, not ${s.type}` });
    if (s.type !== 'naive' && s.intervalSeconds !== undefined) issues.push({ path: `${p}/intervalSeconds`, message: 'only applies to type naive' });
    if (s.type === 'script' && s.batch === undefined) issues.push({ path: `${p}/batch`, message: 'is required for type script: how many instances the script replaces at once (1 to 20)' });
    for (const f of ['batch', 'pollSeconds'] as const) {
      if (s.type !== 'script' && s[f] !== undefined) issues.push({ path: `${p}/${f}`, message: `only applies to type script, not ${s.type}` });
    }
    const name = strategyName(s);
    const seen = names.get(name);
    if (seen !== undefined) issues.push({ path: `${p}/name`, message: `duplicate strategy name ${JSON.stringify(name)} (also strategies/${seen}); give each a distinct name` });
    names.set(name, i);
    if (s.type === 'RollingUpdate') {
      for (const replicas of list(spec.fleet.replicas)) {
        try {
          resolveStrategy({ replicas, cli: { maxSurge: s.maxSurge, maxUnavailable: s.maxUnavailable }, paths: { cliMaxSurge: `${p}/maxSurge`, cliMaxUnavailable: `${p}/maxUnavailable` } });
        } catch (err) {
          if (!(err instanceof ValidationError)) throw err;
          for (const issue of err.issues) if (!issues.some((x) => x.path === issue.path && x.message === issue.message)) issues.push(issue);
        }
      }
    }
  });
  return issues;
}

/**
 * zod reports a value that fits neither "one value" nor "a list" as a bare
 * "Invalid input"; say what is wrong with it instead: for a list, the first
 * bad element (with its index), otherwise the single value.
 */
function issuesOf(error: zod.ZodError, raw: unknown): FieldIssue[] {
  const at = (path: readonly PropertyKey[]) => path.reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined), raw);
  const flat: zod.core.$ZodIssue[] = [];
  for (const issue of error.issues) {
    if (issue.code === 'invalid_union' && issue.errors.length === 2) {
      const [single, many] = issue.errors;
      const pick = Array.isArray(at(issue.path)) ? many : single;
      if (pick && pick.length > 0) {
        for (const sub of pick) flat.push({ ...sub, path: [...issue.path, ...sub.path] });
        continue;
      }
    }
    flat.push(issue);
  }
  return zodIssues(new z.ZodError(flat));
}

/** Validates a parsed document; throws ValidationError listing every problem. */
export function parseExperimentSpec(raw: unknown, source: string): ExperimentSpec {
  const parsed = experimentSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(issuesOf(parsed.error, raw), { source });
  const issues = strategyIssues(parsed.data);
  if (issues.length > 0) throw new ValidationError(issues, { source });
  return parsed.data;
}

export async function loadExperimentSpec(file: string): Promise<ExperimentSpec> {
  return parseExperimentSpec(await readDocument(file, 'experiment spec'), file);
}

/** The matrix: one cell per strategy and combination of list-valued settings, in spec order. */
export function expandCells(spec: ExperimentSpec): Cell[] {
  const values: Record<Dimension, (number | boolean)[]> = {
    replicas: list(spec.fleet.replicas),
    drainSeconds: list(spec.fleet.drainSeconds),
    warmupSeconds: list(spec.fleet.warmupSeconds),
    minReadySeconds: list(spec.fleet.minReadySeconds),
    prestopSeconds: list(spec.fleet.prestopSeconds),
    getPerSecond: list(spec.load.getPerSecond),
    postConcurrency: list(spec.load.postConcurrency),
    postDurationMs: list(spec.load.postDurationMs),
    keepAlive: list(spec.load.keepAlive),
  };
  const varying = DIMENSIONS.filter((d) => values[d].length > 1);
  let combos: Partial<Record<Dimension, number | boolean>>[] = [{}];
  for (const d of DIMENSIONS) combos = combos.flatMap((c) => values[d].map((v) => ({ ...c, [d]: v })));

  const cells: Cell[] = [];
  for (const s of spec.strategies) {
    const name = strategyName(s);
    for (const combo of combos) {
      const params = combo as CellParams;
      const index = cells.length + 1;
      const vary = Object.fromEntries(varying.map((d) => [d, combo[d]!])) as Partial<Record<Dimension, number | boolean>>;
      const extra = varying.map((d) => describeDim(d, combo[d]!));
      const resolved = s.type === 'naive' || s.type === 'script' ? undefined
        : s.type === 'Recreate' ? resolveStrategy({ replicas: params.replicas, strategy: { type: 'Recreate' } })
        : resolveStrategy({ replicas: params.replicas, cli: { maxSurge: s.maxSurge, maxUnavailable: s.maxUnavailable } });
      cells.push({
        index,
        id: `c${String(index).padStart(2, '0')}-${slug([name, ...extra].join(' '))}`,
        label: [name, ...extra].join(', '),
        strategy: { ...s, name },
        resolved,
        params,
        varying: vary,
      });
    }
  }
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
