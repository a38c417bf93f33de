/**
 * Strategy input, checked in one place. A strategy is resolved from layers
 * (the command-line flags, the service's `strategy:` and `replacementPolicy`,
 * the shared defaults inline or in a file, an experiment's strategies) and
 * every layer is checked here, by the same zod schema and the same rules,
 * each problem named at its own path; only then does core/strategy's
 * resolveStrategy layer the values and resolve them to counts.
 *
 *   - The schema's refinements hold what one layer must satisfy on its own:
 *     the format of a percentage or a pause, one kind per canary step, which
 *     blocks a type takes, canaryReplicas against replicas.
 *   - checkStrategyLayers adds what only the layers together show: a flag
 *     against the type it would change, and replicas itself (for callers
 *     without a fleet file, the CLI's plan and the library).
 *
 * The fleet schema (config/schema.ts) only carries `strategy` and
 * `replacementPolicy`; they are checked here because a shared defaults
 * file's problems are named by that file (`/abs/team.yaml: strategy/...`).
 */
import * as z from './zod.js';
import { int, pattern, seconds, zodIssues } from './fields.js';
import { ValidationError, type FieldIssue } from '../errors.js';
import {
  MAX_DELAY_SECONDS,
  REPLACEMENT_POLICIES,
  STRATEGY_TYPES,
  parseIntOrPercent,
  parsePauseDuration,
  resolveStrategy,
  strategyPaths,
  type ResolvedStrategy,
  type StrategyInput,
  type StrategyLayers,
  type StrategyType,
} from '../core/strategy.js';
import { parseForceKey, parseStickyKey, UPSTREAM_NAME_RE } from '../core/upstream.js';

const got = (v: unknown) => `got ${JSON.stringify(v)}`;
const quoted = (xs: readonly string[]) =>
  `${xs
    .slice(0, -1)
    .map((x) => JSON.stringify(x))
    .join(', ')} or ${JSON.stringify(xs[xs.length - 1])}`;

/** A refinement by one of core's parsers, whose message is the rule's. */
const parsedBy =
  <T>(parse: (v: T) => unknown) =>
  (v: T, ctx: { addIssue(issue: { code: 'custom'; message: string; input: unknown }): void }) => {
    const r = parse(v);
    if (typeof r === 'object' && r !== null && 'error' in r) ctx.addIssue({ code: 'custom', message: String(r.error), input: v });
  };

/**
 * The refinements of an object run once its fields have their types and no
 * unknown field was written: a misspelt or mistyped field is one problem,
 * not also every rule it would break.
 */
const fieldsParsed = {
  when: (payload: { issues: readonly { code?: string; continue?: boolean }[] }) =>
    payload.issues.every((i) => i.continue === true && i.code !== 'unrecognized_keys'),
};

/** maxSurge / maxUnavailable as a type: a number or a string (the experiment spec checks the format per strategy, in resolveFor). */
export const intOrPercentSchema = z.union([z.number(), z.string()], { error: (i) => `must be an integer or a percentage string like "25%", ${got(i.input)}` });
/** maxSurge: an integer or a percentage of replicas, any size. */
const maxSurgeSchema = intOrPercentSchema.superRefine(parsedBy((v) => parseIntOrPercent(v)));
/** maxUnavailable: the same, at most 100%. */
const maxUnavailableSchema = intOrPercentSchema.superRefine(parsedBy((v) => parseIntOrPercent(v, { maxPercent: 100 })));
export const replacementPolicySchema = z.enum(REPLACEMENT_POLICIES, { error: (i) => `must be ${quoted(REPLACEMENT_POLICIES)}, ${got(i.input)}` });
const UPSTREAM_NAME = 'an nginx upstream name: letters, digits and "_", starting with a letter or "_"';

/** strategy.blueGreen: the new set starts whole beside the old one; one reload switches traffic. */
const blueGreenSchema = z
  .object(
    {
      /** The old set stays (out of traffic) this long after the switch; undo inside it is one reload. */
      scaleDownDelaySeconds: seconds(0, MAX_DELAY_SECONDS).optional(),
      /** An upstream the new set is written to before the switch, for a prePromotion hook to test it. */
      previewUpstream: pattern(UPSTREAM_NAME_RE, UPSTREAM_NAME).optional(),
      /** The same, spelled as a block: `preview: { upstream: NAME }`. */
      preview: z
        .object(
          { upstream: pattern(UPSTREAM_NAME_RE, UPSTREAM_NAME) },
          { error: 'must be a mapping: { upstream: NAME }, the upstream the new set is written to before the switch' },
        )
        .strict()
        .optional(),
      /** false: the switch waits for `fleetroll promote`. */
      autoPromote: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional(),
    },
    { error: 'must be a mapping: { scaleDownDelaySeconds, preview: { upstream }, autoPromote }' },
  )
  .strict()
  // One resolved name, whichever spelling the file used (the block wins when both are given).
  .transform(({ preview, ...rest }) => (preview ? { ...rest, previewUpstream: preview.upstream } : rest));

const STEP_KINDS = ['setWeight', 'pause', 'analysis'] as const;

/** One canary step: exactly one of setWeight, pause, analysis. */
const canaryStepSchema = z
  .object(
    {
      setWeight: int(0, 100, 'a whole percent').optional(),
      pause: z
        .object(
          {
            duration: z
              .union([z.number(), z.string()], { error: (i) => `must be seconds or a duration string like "30s", "5m" or "1h", ${got(i.input)}` })
              .superRefine(parsedBy(parsePauseDuration))
              .optional(),
          },
          { error: (i) => `must be a mapping: { duration: 30s } or {} (wait for \`fleetroll promote\` or \`abort\`), ${got(i.input)}` },
        )
        .strict()
        .optional(),
      // Any mapping here: merged with the top-level analysis: block, the overrides
      // are validated as one block by the analysis schema (config/load.ts analysisStepIssues).
      analysis: z.record(z.string(), z.unknown(), { error: (i) => `must be a mapping of analysis settings (may be empty: {}), ${got(i.input)}` }).optional(),
    },
    { error: (i) => `must be a step: { setWeight: N }, { pause: { duration: 30s } }, { pause: {} } or { analysis: {} }, ${got(i.input)}` },
  )
  .strict()
  .superRefine((step, ctx) => {
    const kinds = STEP_KINDS.filter((k) => step[k] !== undefined);
    if (kinds.length === 1) return;
    const what = kinds.length === 0 ? 'an empty mapping' : kinds.map((k) => JSON.stringify(k)).join(' and ');
    ctx.addIssue({ code: 'custom', message: `must be exactly one of setWeight, pause or analysis (e.g. { setWeight: 20 }), got ${what}`, input: step });
  }, fieldsParsed);

/** strategy.canary: weighted, sticky steps, then a rolling update (strategy.rollingUpdate) replaces the stable set. */
const canarySchema = (replicas: number | undefined) =>
  z
    .object(
      {
        /** A fixed canary instance count; default: ceil(weight% × replicas), at least 1. */
        canaryReplicas: int(1, 10000)
          .superRefine(
            (n, ctx) => {
              if (replicas !== undefined && n > replicas)
                ctx.addIssue({ code: 'custom', message: `must be at most replicas (${replicas}), got ${n}`, input: n });
            },
            // Only a count within its range is compared with replicas: one problem at a time.
            { when: (payload) => payload.issues.length === 0 },
          )
          .optional(),
        /** "remote_addr" (default), "cookie:NAME" or "header:NAME". */
        stickyKey: z
          .string({ error: (i) => `must be "remote_addr", "cookie:NAME" or "header:NAME", ${got(i.input)}` })
          .superRefine(parsedBy(parseStickyKey))
          .optional(),
        /** "header:NAME" or "cookie:NAME" whose value always / never forces the canary / stable. */
        force: z
          .string({ error: (i) => `must be "header:NAME" or "cookie:NAME", ${got(i.input)}` })
          .superRefine(parsedBy(parseForceKey))
          .optional(),
        steps: z
          .array(canaryStepSchema, { error: 'must be a list of steps like [{ setWeight: 10 }, { pause: { duration: 5m } }]' })
          .min(1, { error: 'must be a non-empty list of steps: { setWeight: N }, { pause: { duration: 30s } }, { pause: {} } or { analysis: {} }' })
          .optional(),
      },
      { error: 'must be a mapping: { steps, stickyKey, force, canaryReplicas }' },
    )
    .strict();

/** Which strategy blocks a type allows, for messages. */
function allowedBlocks(type: StrategyType): string {
  switch (type) {
    case 'RollingUpdate':
      return 'rollingUpdate';
    case 'Recreate':
      return 'no block (type only)';
    case 'BlueGreen':
      return 'blueGreen';
    case 'Canary':
      return 'canary and rollingUpdate (for the rolling update after the last step)';
  }
}

/**
 * One layer's `strategy:`. `replicas` (when known and valid) bounds
 * canaryReplicas. A layer without a type is a RollingUpdate: the layer
 * replaces the ones below it as a whole, so its blocks must fit that.
 */
export function strategySchema(replicas?: number) {
  return z
    .object({
      type: z.enum(STRATEGY_TYPES, { error: (i) => `must be ${quoted(STRATEGY_TYPES)}, ${got(i.input)}` }).optional(),
      rollingUpdate: z.object({ maxSurge: maxSurgeSchema.optional(), maxUnavailable: maxUnavailableSchema.optional() }).strict().optional(),
      blueGreen: blueGreenSchema.optional(),
      canary: canarySchema(replicas).optional(),
    })
    .strict()
    .superRefine((s, ctx) => {
      const type = s.type ?? 'RollingUpdate';
      const add = (path: string[], message: string) => ctx.addIssue({ code: 'custom', path, message, input: s });
      const mismatch = (field: string, owner: StrategyType) => {
        const said = s.type === undefined ? `this strategy has no type, so it is a RollingUpdate (add type: ${owner})` : `type is ${type}`;
        add([field], `applies only to type ${owner}, but ${said}; with ${type}, allowed: ${allowedBlocks(type)}`);
      };
      if (s.rollingUpdate !== undefined && type === 'Recreate')
        add(['rollingUpdate'], 'must not be set when type is Recreate (Recreate stops every instance before starting new ones)');
      if (s.rollingUpdate !== undefined && type === 'BlueGreen') {
        add(
          ['rollingUpdate'],
          'must not be set when type is BlueGreen (the whole new set starts beside the old one and one reload switches traffic; set blueGreen instead)',
        );
      }
      if (s.blueGreen !== undefined && type !== 'BlueGreen') mismatch('blueGreen', 'BlueGreen');
      if (s.canary !== undefined && type !== 'Canary') mismatch('canary', 'Canary');
      if (type === 'Canary' && s.canary?.steps === undefined) {
        add(
          ['canary', 'steps'],
          'is required with type Canary: a list of steps such as [{ setWeight: 10 }, { pause: { duration: 5m } }, { setWeight: 50 }, { pause: {} }]',
        );
      }
    }, fieldsParsed);
}

/** StrategyLayers as a caller holds them: the values not yet checked. */
export interface UncheckedStrategyLayers extends Pick<StrategyLayers, 'replicas' | 'group' | 'paths'> {
  cli?: { maxSurge?: unknown; maxUnavailable?: unknown } | undefined;
  strategy?: unknown;
  defaults?: unknown;
  replacementPolicy?: { cli?: unknown; own?: unknown; defaults?: unknown } | undefined;
}

/**
 * Checks every layer, even the ones a higher layer shadows (a typo in a
 * shared defaults file should not lie dormant). Returns every problem, in
 * the order the layers are read (replicas, flags, the service's, the
 * defaults, replacementPolicy), and the layers as parsed for resolveStrategy.
 */
export function checkStrategyLayers(layers: UncheckedStrategyLayers): { issues: FieldIssue[]; layers: StrategyLayers } {
  const { replicas } = layers;
  const issues: FieldIssue[] = [];
  const p = strategyPaths(layers.paths);
  const validReplicas = Number.isInteger(replicas) && replicas >= 0;
  if (!validReplicas)
    issues.push({
      path: 'replicas',
      message: `must be a non-negative integer, got ${typeof replicas === 'string' ? JSON.stringify(replicas) : String(replicas)}`,
    });

  const check = <T>(
    schema: { safeParse(v: unknown): { success: true; data: T } | { success: false; error: z.ZodError } },
    raw: unknown,
    path: string,
  ): T | undefined => {
    if (raw === undefined) return undefined;
    const r = schema.safeParse(raw);
    if (r.success) return r.data;
    issues.push(...zodIssues(r.error, path));
    return undefined;
  };
  const cli = {
    maxSurge: check(maxSurgeSchema, layers.cli?.maxSurge, p.cliMaxSurge),
    maxUnavailable: check(maxUnavailableSchema, layers.cli?.maxUnavailable, p.cliMaxUnavailable),
  };
  const layer = strategySchema(validReplicas ? replicas : undefined);
  const strategy = check<StrategyInput>(layer, layers.strategy, p.strategy);
  const defaults = check<StrategyInput>(layer, layers.defaults, p.defaults);

  // A flag that the effective type has no use for. group: true makes any strategy a rolling update.
  const base =
    layers.strategy !== undefined
      ? { s: layers.strategy, prefix: p.strategy }
      : layers.defaults !== undefined
        ? { s: layers.defaults, prefix: p.defaults }
        : undefined;
  const written = (base?.s as { type?: unknown } | null | undefined)?.type;
  const type =
    typeof written === 'string' && (STRATEGY_TYPES as readonly string[]).includes(written)
      ? { value: written, path: `${base!.prefix}/type` }
      : { value: 'RollingUpdate', path: 'strategy/type' };
  if (!layers.group && (type.value === 'Recreate' || type.value === 'BlueGreen')) {
    const why =
      type.value === 'Recreate'
        ? 'Recreate has no surge or unavailability limits'
        : 'BlueGreen starts the whole new set beside the old one (surge 100%) and takes no old instance out of service before the switch';
    for (const [flag, given] of [
      [p.cliMaxSurge, cli.maxSurge],
      [p.cliMaxUnavailable, cli.maxUnavailable],
    ] as const) {
      if (given !== undefined) issues.push({ path: flag, message: `cannot be used with strategy type ${type.value} (set in ${type.path}); ${why}` });
    }
  }

  const rp = layers.replacementPolicy;
  const replacementPolicy = {
    defaults: check(replacementPolicySchema, rp?.defaults, p.defaults.replace(/strategy$/, 'replacementPolicy')),
    own: check(replacementPolicySchema, rp?.own, 'replacementPolicy'),
    cli: check(replacementPolicySchema, rp?.cli, '--replacement-policy'),
  };

  return { issues, layers: { replicas, group: layers.group, cli, strategy, defaults, replacementPolicy, paths: layers.paths } };
}

/** The strategy these layers resolve to; throws ValidationError (exit 2) listing every problem of every layer. */
export function loadStrategy(layers: UncheckedStrategyLayers): ResolvedStrategy {
  const checked = checkStrategyLayers(layers);
  if (checked.issues.length > 0) throw new ValidationError(checked.issues);
  return resolveStrategy(checked.layers);
}
