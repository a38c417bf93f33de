/**
 * The experiment spec's schema (zod): the fields, their ranges and defaults,
 * and the types every other part of the spec reads. What a field means and
 * why its limits are what they are is said here; the rules between fields
 * are in specChecks.ts (see spec.ts for the whole spec).
 */
import type * as zod from 'zod';
import { parsePercent } from '../config/analysis.js';
import { VERSION_RE } from '../config/schema.js';
import { intOrPercentSchema, replacementPolicySchema } from '../config/strategy.js';
import * as z from '../config/zod.js';
import { STRATEGY_TYPES } from '../core/strategy.js';

const msg = (what: string) => ({ error: (i: { input?: unknown }) => `must be ${what}, got ${JSON.stringify(i.input)}` });
const number = (min: number, max: number, what = 'a number') =>
  z
    .number(msg(`${what} from ${min} to ${max}`))
    .min(min, msg(`${what} from ${min} to ${max}`))
    .max(max, msg(`${what} from ${min} to ${max}`));
const integer = (min: number, max: number) => number(min, max, 'an integer').int(msg(`an integer from ${min} to ${max}`));
/** One value, or a list of values: a dimension of the matrix. */
const oneOrMany = <T extends zod.ZodType>(t: T) => z.union([t, z.array(t).min(1, 'must list at least one value').max(12, 'must list at most 12 values')]);

/** A mapping of analysis settings (validated with the fleet file's analysis schema once the layers are merged). */
const analysisBlock = z.record(z.string(), z.unknown(), msg('a mapping of analysis settings (interval, minRequests, maxErrorRate, ...)'));

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
      .enum(
        EXPERIMENT_TYPES,
        msg(
          `${EXPERIMENT_TYPES.slice(0, -1)
            .map((t) => JSON.stringify(t))
            .join(', ')} or ${JSON.stringify(EXPERIMENT_TYPES[EXPERIMENT_TYPES.length - 1])}`,
        ),
      )
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
        /** The nginx's mode (loadBalancers[].nginx.mode): reload, dynamic (fleetroll's Lua balancer), or both as a dimension. */
        nginxMode: oneOrMany(z.enum(['reload', 'dynamic'], msg('reload or dynamic'))).default('reload'),
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
        /** With keepAlive: false makes the probes a strict client (an API client): a reset on a reused connection is a failure, not resent. */
        resend: z.boolean(msg('true or false')).default(true),
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
      .object(
        { errorRate: oneOrMany(share).optional(), latencyMs: oneOrMany(integer(0, 10_000)).optional() },
        msg('a mapping: { errorRate: "20%", latencyMs: 0 }, each one value or a list'),
      )
      .strict()
      .optional(),
    /**
     * One unmeasured run of the first configuration of each nginx mode before
     * its measured runs, whose step costs price the calibrated predictions:
     * without it the first run is priced only by the deploy that started its
     * fleet (every instance at once, so no start or warm-up alone).
     */
    calibrationRun: z.boolean(msg('true or false')).default(true),
    /** Formats for the per-request recordings. */
    records: z
      .array(z.enum(['ndjson', 'csv'], msg('"ndjson" or "csv"')))
      .min(1)
      .max(2, 'must list at most 2 formats (ndjson, csv)')
      .default(['ndjson']),
  })
  .strict();

export type ExperimentSpecInput = zod.input<typeof experimentSchema>;
export type ExperimentSpec = zod.output<typeof experimentSchema>;
export type StrategySpec = zod.output<typeof strategySchema>;

/** A setting given as one value or a list (oneOrMany), as the list of its values. */
export const list = <T>(v: T | T[]): T[] => (Array.isArray(v) ? v : [v]);
