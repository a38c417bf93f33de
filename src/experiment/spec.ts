/**
 * The experiment spec: a matrix of rollouts to run on a local fleet under load.
 *
 *   strategies × every list-valued setting of `fleet`, `load` and `badVersion`,
 *   each run `repetitions` times.
 *
 * A setting given as a list (`replicas: [3, 6]`) is a dimension of the
 * matrix; a single value applies to every run. Each combination is a "cell"
 * (one configuration); its repetitions are aggregated (median, min, max).
 *
 * Validation reports every problem with its path (`strategies/1/maxSurge: ...`)
 * and nothing runs until the whole spec is valid.
 *
 * Strategies against a bad version (issue 13): `BlueGreen` and `Canary`
 * beside RollingUpdate, an `analysis:` block (the gate of the fleet file)
 * for the whole spec and per strategy (merged field by field; `false` turns
 * the gate off), and `badVersion:` to make the new version subtly bad (a
 * share of 500s and/or added latency, readiness still passing; a list of
 * either is a dimension, to find how bad a version the gate catches). Nobody runs
 * `fleetroll promote`, `resume` or `abort` during a run, so whatever would
 * wait for them (a pause without a duration, autoPromote: false,
 * onInconclusive: pause) is refused.
 */
import type * as zod from 'zod';
import { analysisSchema, parseDurationSeconds, parsePercent } from '../config/analysis.js';
import { VERSION_RE } from '../config/schema.js';
import { zodIssues } from '../config/fields.js';
import * as z from '../config/zod.js';
import { readDocument } from '../config/load.js';
import { USER_HEADER } from './probes.js';
import { BUILTIN_DEFAULTS, STRATEGY_TYPES, type ResolvedStrategy, type StrategyInput } from '../core/strategy.js';
import { intOrPercentSchema, loadStrategy, replacementPolicySchema } from '../config/strategy.js';
import { ValidationError, type FieldIssue } from '../errors.js';

const msg = (what: string) => ({ error: (i: { input?: unknown }) => `must be ${what}, got ${JSON.stringify(i.input)}` });
const number = (min: number, max: number, what = 'a number') => z.number(msg(`${what} from ${min} to ${max}`)).min(min, msg(`${what} from ${min} to ${max}`)).max(max, msg(`${what} from ${min} to ${max}`));
const integer = (min: number, max: number) => number(min, max, 'an integer').int(msg(`an integer from ${min} to ${max}`));
/** One value, or a list of values: a dimension of the matrix. */
const oneOrMany = <T extends zod.ZodType>(t: T) => z.union([t, z.array(t).min(1, 'must list at least one value').max(12, 'must list at most 12 values')]);

/** A mapping of analysis settings (validated with the fleet file's analysis schema once the layers are merged). */
const analysisBlock = z.record(z.string(), z.unknown(), msg('a mapping of analysis settings (interval, minRequests, maxErrorRate, ...)'));

/**
 * What a canary sticks on in an experiment: the probes send a rotating user
 * id in USER_HEADER, and every probe comes from the same client address, so
 * the fleet file's default key (remote_addr) would send all traffic to one side.
 */
export const EXPERIMENT_STICKY_KEY = `header:${USER_HEADER}`;

/** The strategy types of an experiment: the fleet file's, and the two hand-made controls it compares them with. */
const EXPERIMENT_TYPES = [...STRATEGY_TYPES, 'naive', 'script'] as const;

/**
 * One strategy of the matrix. Its fleet-file settings (maxSurge,
 * maxUnavailable, replacementPolicy) are the fleet schema's own fields, and
 * its blueGreen and canary blocks become a fleet file's strategy, checked by
 * config/strategy.ts like any fleet's (resolveFor); the blocks here only add
 * what an experiment cannot run (a preview, a manual promote, more than a
 * short run allows).
 */
const strategySchema = z
  .object({
    /** Shown in tables and charts; default derived from the settings ("1/0", "Recreate", "naive", "script b=2", "BlueGreen", "Canary 25%", "+ analysis"). */
    name: z.string(msg('a short label')).min(1, 'must not be empty').max(40, 'must be at most 40 characters').optional(),
    type: z
      .enum(EXPERIMENT_TYPES, msg(`${EXPERIMENT_TYPES.slice(0, -1).map((t) => JSON.stringify(t)).join(', ')} or ${JSON.stringify(EXPERIMENT_TYPES[EXPERIMENT_TYPES.length - 1])}`))
      .default('RollingUpdate'),
    /** RollingUpdate, and Canary's final rolling update. */
    maxSurge: intOrPercentSchema.optional(),
    maxUnavailable: intOrPercentSchema.optional(),
    /** RollingUpdate and Canary (its final rolling update): the fleet file's replacementPolicy; unset leaves the fleet's default. */
    replacementPolicy: replacementPolicySchema.optional(),
    /** naive only: pause between two replaced instances (the article's `sleep 3`). */
    intervalSeconds: number(0, 60).optional(),
    /** script only (required): instances the hand-written script replaces at once. */
    batch: integer(1, 20).optional(),
    /** script only: seconds between two readiness polls of a new instance (the script's `sleep 1`); default 1. */
    pollSeconds: number(0.1, 60).optional(),
    /** BlueGreen only: the fleet file's strategy.blueGreen (no preview, no manual promote in an experiment). */
    blueGreen: z
      .object(
        {
          scaleDownDelaySeconds: number(0, 600).optional(),
          // Refused with a reason (see strategyIssues), rather than as unknown fields.
          preview: z.unknown().optional(),
          previewUpstream: z.unknown().optional(),
          autoPromote: z.unknown().optional(),
        },
        msg('a mapping: { scaleDownDelaySeconds }'),
      )
      .strict()
      .optional(),
    /** Canary only (required): the fleet file's strategy.canary, its steps checked as the fleet file's are; the sticky key is the probes' X-User header. */
    canary: z
      .object(
        {
          canaryReplicas: integer(1, 20).optional(),
          stickyKey: z.unknown().optional(),
          steps: z.array(z.unknown(), msg('a list of steps like [{ setWeight: 25 }, { analysis: {} }]')).max(50, 'must list at most 50 steps').optional(),
        },
        msg('a mapping: { steps, canaryReplicas }'),
      )
      .strict()
      .optional(),
    /**
     * The analysis gate for this strategy: settings merged over the spec's
     * `analysis:` (field by field; true is {}: the spec's as they are), or
     * false for no gate. RollingUpdate: after its first wave; BlueGreen: after
     * the switch; Canary: at its analysis steps.
     */
    analysis: z.union([z.boolean(), analysisBlock], msg("a mapping of analysis settings, true (the spec's analysis) or false (no analysis gate)")).optional(),
    /** The command exits 1 when any run of this strategy had a failed request (with badVersion: one the bad version did not answer itself). */
    expectZeroFailures: z.boolean(msg('true or false')).optional(),
    /** true: the command exits 1 unless the analysis stopped the new version in every run (fleet back on `from`); false: unless every deploy completed. */
    expectStopped: z.boolean(msg('true or false')).optional(),
  })
  .strict();

/** A share from 0 to 1: "20%" or 0.2 (1 = every API request). */
const share = z.union([z.number(), z.string()], msg('a share like "20%" or 0.2')).transform((v, ctx) => {
  const f = parsePercent(v);
  if (f === undefined || f < 0 || f > 1) {
    ctx.addIssue({ code: 'custom', message: `must be a share from 0 to 1 like "20%" or 0.2, got ${JSON.stringify(v)}`, input: v });
    return z.NEVER;
  }
  return f;
});

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
        /** Distinct users the probes cycle through, one per request, in the X-User header (what a canary sticks on). */
        users: integer(1, 100_000).default(1000),
      })
      .strict()
      .prefault({}),
    strategies: z.array(strategySchema, msg('a list of strategies')).min(1, 'must list at least one strategy').max(20, 'must list at most 20 strategies'),
    /** The analysis gate for every strategy it applies to (RollingUpdate, BlueGreen, a Canary's analysis steps); a strategy may override fields or say false. */
    analysis: analysisBlock.optional(),
    /**
     * The new version (`to`) is subtly bad: the example app's BAD_ERROR_RATE
     * (a share of its /api/* answers are 500s) and BAD_LATENCY_MS (added to
     * each); readiness and the version probe are not affected. Either may be
     * a list: a dimension of the matrix, like the fleet and load settings.
     */
    badVersion: z
      .object({ errorRate: oneOrMany(share).optional(), latencyMs: oneOrMany(integer(0, 10_000)).optional() }, msg('a mapping: { errorRate: "20%", latencyMs: 0 }, each one value or a list'))
      .strict()
      .optional(),
    /** Formats for the per-request recordings. */
    records: z.array(z.enum(['ndjson', 'csv'], msg('"ndjson" or "csv"'))).min(1).max(2, 'must list at most 2 formats (ndjson, csv)').default(['ndjson']),
  })
  .strict();

export type ExperimentSpecInput = zod.input<typeof experimentSchema>;
export type ExperimentSpec = zod.output<typeof experimentSchema>;
export type StrategySpec = zod.output<typeof strategySchema>;

/** The dimensions a cell can vary along, in the order their values appear in labels. */
export const DIMENSIONS = ['replicas', 'drainSeconds', 'warmupSeconds', 'minReadySeconds', 'prestopSeconds', 'getPerSecond', 'postConcurrency', 'postDurationMs', 'keepAlive', 'badErrorRate', 'badLatencyMs'] as const;
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

const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);
const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The canary's steps as written, with their index; only well-formed ones (one key). */
function stepsOf(s: StrategySpec): { k: number; kind: string; value: unknown }[] {
  return (s.canary?.steps ?? []).flatMap((raw, k) => {
    if (!isMapping(raw)) return [];
    const keys = Object.keys(raw);
    return keys.length === 1 ? [{ k, kind: keys[0]!, value: raw[keys[0]!] }] : [];
  });
}

/**
 * Where the analysis gate judges this strategy's new version, or undefined
 * when it has none: RollingUpdate after its first wave and BlueGreen after
 * the switch (when the spec or the strategy gives analysis settings and the
 * strategy does not say false), a Canary at its analysis steps.
 */
export function gateOf(s: StrategySpec, specAnalysis: Record<string, unknown> | undefined): string | undefined {
  if (s.analysis === false) return undefined;
  const settings = specAnalysis !== undefined || s.analysis !== undefined;
  if (s.type === 'RollingUpdate') return settings ? 'after the first wave' : undefined;
  if (s.type === 'BlueGreen') return settings ? 'after the switch' : undefined;
  if (s.type === 'Canary') {
    const at = stepsOf(s).filter((x) => x.kind === 'analysis').map((x) => x.k + 1);
    return at.length === 0 ? undefined : `at canary step${at.length > 1 ? 's' : ''} ${at.join(', ')}`;
  }
  return undefined;
}

export function strategyName(s: StrategySpec, specAnalysis?: Record<string, unknown>): string {
  if (s.name) return s.name;
  const gated = gateOf(s, specAnalysis) !== undefined ? ' + analysis' : '';
  if (s.type === 'naive') return 'naive';
  if (s.type === 'Recreate') return 'Recreate';
  if (s.type === 'script') return `script b=${s.batch ?? '?'}`;
  if (s.type === 'BlueGreen') return `BlueGreen${gated}`;
  if (s.type === 'Canary') {
    const weights = stepsOf(s).filter((x) => x.kind === 'setWeight').map((x) => `${String(x.value)}%`);
    return `Canary${weights.length > 0 ? ` ${weights.join('→')}` : ''}${gated}`;
  }
  return `${s.maxSurge ?? '25%'}/${s.maxUnavailable ?? '25%'}${s.replacementPolicy ? ` ${s.replacementPolicy}` : ''}${gated}`;
}

// Trimmed after the cut, so a cut between two words leaves no dash to meet the run's "-r1".
const slug = (s: string) =>
  s
    .toLowerCase()
    .replace(/%/g, 'pct')
    .replace(/[^a-z0-9]+/g, '-')
    .slice(0, 40)
    .replace(/^-+|-+$/g, '') || 'x';

/** 0.2 → "20%": a share as labels and the report print it; the duplicate check compares these, so two listed values never share a label. */
export const percentText = (share: number) => `${+(share * 100).toFixed(4)}%`;

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
    case 'badErrorRate':
      return `bad ${percentText(Number(v))} 5xx`;
    case 'badLatencyMs':
      return `bad +${v} ms`;
  }
}

/** In an experiment an inconclusive analysis fails: nobody is there to resume. */
const EXPERIMENT_ANALYSIS_DEFAULTS = { onInconclusive: 'fail' } as const;

interface AnalysisLayer {
  /** Where it is written, e.g. "analysis", "strategies/2/analysis", "strategies/3/canary/steps/1/analysis". */
  path: string;
  block: Record<string, unknown>;
}

/**
 * The analysis settings of these layers merged (later ones win field by
 * field) over the experiment defaults, checked with the fleet file's
 * analysis schema; each problem is named at the layer that wrote the field
 * (a missing threshold at the innermost layer).
 */
function mergedAnalysis(layers: readonly AnalysisLayer[]): { block: Record<string, unknown>; issues: FieldIssue[] } {
  const block: Record<string, unknown> = { ...EXPERIMENT_ANALYSIS_DEFAULTS };
  for (const l of layers) Object.assign(block, l.block);
  const issues: FieldIssue[] = [];
  for (const l of layers) {
    if (l.block.onInconclusive === 'pause') {
      issues.push({ path: `${l.path}/onInconclusive`, message: 'must be "fail" (the default) in an experiment: nobody runs fleetroll resume, promote or abort during a run' });
    }
  }
  const r = analysisSchema.safeParse(block);
  if (!r.success) {
    for (const issue of zodIssues(r.error)) {
      const field = issue.path.split('/')[0] ?? '';
      const owner = [...layers].reverse().find((l) => field !== '' && field in l.block) ?? layers[layers.length - 1];
      if (field === 'onInconclusive' && block.onInconclusive === 'pause') continue;
      issues.push({ path: [owner?.path ?? 'analysis', issue.path].filter((x) => x !== '').join('/'), message: issue.message });
    }
  }
  return { block, issues };
}

/** The spec's and the strategy's analysis layers (those that exist). */
function analysisLayers(spec: ExperimentSpec, s: StrategySpec, i: number): AnalysisLayer[] {
  const layers: AnalysisLayer[] = [];
  if (spec.analysis) layers.push({ path: 'analysis', block: spec.analysis });
  if (isMapping(s.analysis)) layers.push({ path: `strategies/${i}/analysis`, block: s.analysis });
  return layers;
}

/**
 * What a BlueGreen or Canary strategy becomes in the fleet file, and the
 * fleet file's `analysis:` block of any gated strategy. A canary's analysis
 * steps get the spec's and the strategy's settings merged into their own
 * overrides (so each step stands on its own, and the experiment default
 * onInconclusive: fail reaches it).
 */
function fleetSettings(spec: ExperimentSpec, s: StrategySpec, i: number): { strategy?: StrategyInput; analysis?: Record<string, unknown>; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  const layers = analysisLayers(spec, s, i);
  if (s.type === 'Canary') {
    const steps = (s.canary?.steps ?? []).map((raw, k) => {
      if (!isMapping(raw) || Object.keys(raw).length !== 1 || !isMapping(raw.analysis)) return raw;
      const path = `strategies/${i}/canary/steps/${k}/analysis`;
      if (s.analysis === false) {
        issues.push({ path, message: `this strategy turns the analysis gate off (strategies/${i}/analysis: false); remove the step or the false` });
        return raw;
      }
      const merged = mergedAnalysis([...layers, { path, block: raw.analysis }]);
      issues.push(...merged.issues);
      return { analysis: merged.block };
    });
    const canary = { ...(s.canary?.canaryReplicas !== undefined ? { canaryReplicas: s.canary.canaryReplicas } : {}), stickyKey: EXPERIMENT_STICKY_KEY, ...(s.canary?.steps !== undefined ? { steps } : {}) };
    return { strategy: { type: 'Canary', canary: canary as StrategyInput['canary'] }, issues };
  }
  const gated = gateOf(s, spec.analysis) !== undefined;
  let analysis: Record<string, unknown> | undefined;
  if (gated && layers.length > 0) {
    const merged = mergedAnalysis(layers);
    issues.push(...merged.issues);
    analysis = merged.block;
  }
  if (s.type === 'BlueGreen') {
    const delay = s.blueGreen?.scaleDownDelaySeconds;
    return { strategy: { type: 'BlueGreen', blueGreen: delay !== undefined ? { scaleDownDelaySeconds: delay } : {} }, ...(analysis ? { analysis } : {}), issues };
  }
  return { ...(analysis ? { analysis } : {}), issues };
}

/** One strategy of the spec at `replicas`, checked and resolved as a fleet file's, with paths into the spec. */
function resolveFor(s: StrategySpec, i: number, replicas: number, fleetStrategy: StrategyInput | undefined): ResolvedStrategy | undefined {
  if (s.type === 'naive' || s.type === 'script') return undefined;
  if (s.type === 'Recreate') return loadStrategy({ replicas, strategy: { type: 'Recreate' } });
  const p = `strategies/${i}`;
  return loadStrategy({
    replicas,
    // BlueGreen takes no maxSurge / maxUnavailable (strategyIssues says so once).
    ...(s.type === 'BlueGreen' ? {} : { cli: { maxSurge: s.maxSurge, maxUnavailable: s.maxUnavailable } }),
    ...(fleetStrategy ? { strategy: fleetStrategy } : {}),
    paths: { strategy: p, cliMaxSurge: `${p}/maxSurge`, cliMaxUnavailable: `${p}/maxUnavailable` },
  });
}

/** Cross-field rules: strategy fields that only fit one type, duplicate names, the gate, and the fleet file's strategy rules (resolveFor). */
function strategyIssues(spec: ExperimentSpec): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const add = (issue: FieldIssue) => {
    if (!issues.some((x) => x.path === issue.path && x.message === issue.message)) issues.push(issue);
  };
  const names = new Map<string, number>();
  let specAnalysisUsed = false;
  spec.strategies.forEach((s, i) => {
    const p = `strategies/${i}`;
    if (s.type !== 'RollingUpdate' && s.type !== 'Canary') {
      for (const f of ['maxSurge', 'maxUnavailable', 'replacementPolicy'] as const) {
        if (s[f] !== undefined) add({ path: `${p}/${f}`, message: `only applies to types RollingUpdate and Canary (its final rolling update), not ${s.type}` });
      }
    }
    if (s.type !== 'naive' && s.intervalSeconds !== undefined) add({ path: `${p}/intervalSeconds`, message: 'only applies to type naive' });
    if (s.type === 'script' && s.batch === undefined) add({ path: `${p}/batch`, message: 'is required for type script: how many instances the script replaces at once (1 to 20)' });
    for (const f of ['batch', 'pollSeconds'] as const) {
      if (s.type !== 'script' && s[f] !== undefined) add({ path: `${p}/${f}`, message: `only applies to type script, not ${s.type}` });
    }
    if (s.blueGreen !== undefined && s.type !== 'BlueGreen') add({ path: `${p}/blueGreen`, message: `only applies to type BlueGreen, not ${s.type}` });
    if (s.canary !== undefined && s.type !== 'Canary') add({ path: `${p}/canary`, message: `only applies to type Canary, not ${s.type}` });
    if (s.blueGreen) {
      for (const f of ['preview', 'previewUpstream'] as const) {
        if (s.blueGreen[f] !== undefined) add({ path: `${p}/blueGreen/${f}`, message: 'is not available in an experiment: the nginx of a run serves one upstream, and no prePromotion hook runs' });
      }
      if (s.blueGreen.autoPromote !== undefined && s.blueGreen.autoPromote !== true) {
        add({ path: `${p}/blueGreen/autoPromote`, message: `must be true (the default) in an experiment: nobody runs fleetroll promote during a run, got ${JSON.stringify(s.blueGreen.autoPromote)}` });
      }
    }
    if (s.canary?.stickyKey !== undefined) {
      add({ path: `${p}/canary/stickyKey`, message: `is set by the experiment: ${EXPERIMENT_STICKY_KEY} (the probes send one of load.users ids per request; they all come from one client address), remove it` });
    }
    if (s.type === 'Canary') {
      for (const { k, kind, value } of stepsOf(s)) {
        if (kind === 'pause' && isMapping(value) && value.duration === undefined) {
          add({ path: `${p}/canary/steps/${k}/pause`, message: 'needs a duration in an experiment (e.g. { duration: 5s }): nobody runs fleetroll promote or abort during a run' });
        }
      }
    }

    const gate = gateOf(s, spec.analysis);
    if (s.analysis === true && spec.analysis === undefined) {
      add({ path: `${p}/analysis`, message: 'true takes the spec\'s analysis settings, but the spec has no analysis: give the settings here (e.g. { interval: 4s, maxErrorRate: "5%" }) or in the spec' });
    }
    if (s.analysis !== undefined && s.analysis !== false) {
      if (s.type === 'Canary' && gate === undefined) {
        add({ path: `${p}/analysis`, message: 'a canary is judged only at its analysis steps: add { analysis: {} } to canary/steps' });
      } else if (s.type !== 'RollingUpdate' && s.type !== 'BlueGreen' && s.type !== 'Canary') {
        add({ path: `${p}/analysis`, message: `only applies to types RollingUpdate (after the first wave), BlueGreen (after the switch) and Canary (its analysis steps), not ${s.type}` });
      }
    }
    if (gate !== undefined && spec.analysis !== undefined && s.analysis !== false) specAnalysisUsed = true;
    if (s.expectStopped !== undefined) {
      if (s.type === 'naive' || s.type === 'script') add({ path: `${p}/expectStopped`, message: `only applies to fleetroll's strategies (the analysis gate), not ${s.type}` });
      else if (s.expectStopped && gate === undefined) add({ path: `${p}/expectStopped`, message: 'this strategy has no analysis gate, so nothing can stop its deploy: give it analysis settings (here or in the spec\'s analysis) or an analysis step' });
    }

    const fleet = fleetSettings(spec, s, i);
    for (const issue of fleet.issues) add(issue);
    if (s.type === 'BlueGreen' && fleet.analysis) {
      // The gate can only switch back while the old set waits out scaleDownDelaySeconds.
      const interval = parseDurationSeconds(fleet.analysis.interval ?? 10);
      const limit = typeof fleet.analysis.failureLimit === 'number' ? fleet.analysis.failureLimit : 0;
      const delay = s.blueGreen?.scaleDownDelaySeconds ?? BUILTIN_DEFAULTS.scaleDownDelaySeconds;
      if (interval !== undefined && delay <= interval * (limit + 1)) {
        add({
          path: `${p}/blueGreen/scaleDownDelaySeconds`,
          message: `must be longer than the analysis takes to fail (interval ${interval} s × (failureLimit ${limit} + 1) = ${interval * (limit + 1)} s): the gate switches back only while the old set waits; got ${delay}${s.blueGreen?.scaleDownDelaySeconds === undefined ? ' (the default)' : ''}`,
        });
      }
    }

    const name = strategyName(s, spec.analysis);
    const seen = names.get(name);
    if (seen !== undefined) add({ path: `${p}/name`, message: `duplicate strategy name ${JSON.stringify(name)} (also strategies/${seen}); give each a distinct name` });
    names.set(name, i);
    if (s.type === 'RollingUpdate' || s.type === 'BlueGreen' || s.type === 'Canary') {
      for (const replicas of list(spec.fleet.replicas)) {
        try {
          resolveFor(s, i, replicas, fleet.strategy);
        } catch (err) {
          if (!(err instanceof ValidationError)) throw err;
          for (const issue of err.issues) add(issue);
        }
      }
    }
  });
  if (spec.analysis !== undefined && !specAnalysisUsed) {
    add({ path: 'analysis', message: 'no strategy uses it: it gates RollingUpdate (after the first wave), BlueGreen (after the switch) and a Canary\'s analysis steps, unless the strategy says analysis: false' });
  }
  return issues;
}

/**
 * badVersion must make the new version bad in every cell: no combination of
 * errorRate 0 and latencyMs 0 (that cell would run a good version, which is
 * what leaving badVersion out is for, and its expectStopped would mean
 * something else). A 0 in one list is fine when the other field is above 0
 * everywhere. A value listed twice ("20%" and 0.2) would make two cells with
 * one label, which the charts would merge.
 */
function badVersionIssues(b: ExperimentSpec['badVersion']): FieldIssue[] {
  if (b === undefined) return [];
  const issues: FieldIssue[] = [];
  const field = (name: 'errorRate' | 'latencyMs', value: number | number[] | undefined, text: (v: number) => string) => ({ name, value, zero: value === undefined ? 0 : list(value).indexOf(0), text });
  const rate = field('errorRate', b.errorRate, percentText);
  const latency = field('latencyMs', b.latencyMs, (ms) => `${ms} ms`);
  for (const { name, value, text } of [rate, latency]) {
    if (!Array.isArray(value)) continue;
    value.forEach((v, k) => {
      const first = value.findIndex((w) => text(w) === text(v));
      if (first < k) issues.push({ path: `badVersion/${name}/${k}`, message: `repeats ${text(v)} (badVersion/${name}/${first}): each value is a configuration of its own, list it once` });
    });
  }
  if (rate.zero < 0 || latency.zero < 0) return issues;
  if (!Array.isArray(rate.value) && !Array.isArray(latency.value)) {
    issues.push({ path: 'badVersion', message: 'must make the new version bad: errorRate above 0 (e.g. "20%") and/or latencyMs above 0' });
    return issues;
  }
  // Named at the list that holds the 0 (errorRate when both do): there a value goes, or the other field changes.
  const [mine, other] = Array.isArray(rate.value) ? [rate, latency] : [latency, rate];
  const otherText = other.value === undefined ? `${other.name} unset (0)` : Array.isArray(other.value) ? `${other.name} 0 (badVersion/${other.name}/${other.zero})` : `${other.name} 0`;
  issues.push({
    path: `badVersion/${mine.name}/${mine.zero}`,
    message: `0 with ${otherText} would run a good version: every combination must make it bad (errorRate above 0 and/or latencyMs above 0), so ${mine.name} may list 0 only when every ${other.name} is above 0`,
  });
  return issues;
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
 * zod reports a value that fits neither "one value" nor "a list" as a bare
 * "Invalid input"; say what is wrong with it instead: for a list, the first
 * bad element (with its index), otherwise the single value.
 */
function issuesOf(error: zod.ZodError, raw: unknown): FieldIssue[] {
  const at = (path: readonly PropertyKey[]) => path.reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined), raw);
  const flat: zod.core.$ZodIssue[] = [];
  for (const issue of error.issues) {
    // Only fleet, load and badVersion settings are "one value or a list".
    if (issue.code === 'invalid_union' && issue.errors.length === 2 && (issue.path[0] === 'fleet' || issue.path[0] === 'load' || issue.path[0] === 'badVersion')) {
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
  const factors = [...values, count(m.strategies, 'strategy', 'strategies'), `${count(m.repetitions, 'repetition')}${repetitionsFrom ? ` (${repetitionsFrom})` : ''}`];
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

/** Validates a parsed document; throws ValidationError listing every problem. */
export function parseExperimentSpec(raw: unknown, source: string): ExperimentSpec {
  const parsed = experimentSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(issuesOf(parsed.error, raw), { source });
  // First, by arithmetic: the checks below are bounded by the list caps, but nothing may expand an oversized matrix.
  const matrix = matrixIssue(parsed.data);
  const issues = [...(matrix ? [matrix] : []), ...strategyIssues(parsed.data), ...badVersionIssues(parsed.data.badVersion)];
  if (issues.length > 0) throw new ValidationError(issues, { source });
  return parsed.data;
}

export async function loadExperimentSpec(file: string): Promise<ExperimentSpec> {
  return parseExperimentSpec(await readDocument(file, 'experiment spec'), file);
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
