/**
 * Rollout strategy: parsing of maxSurge / maxUnavailable, their resolution to
 * instance counts, and the layering of where each value comes from.
 *
 * The arithmetic is the Kubernetes Deployment controller's
 * (pkg/controller/deployment/util: ResolveFenceposts, MaxUnavailable):
 *
 *   replicas=4,  maxSurge=25%, maxUnavailable=25%  -> surge ceil(1.0)=1, unavailable floor(1.0)=1
 *   replicas=3,  maxSurge=25%, maxUnavailable=25%  -> surge ceil(0.75)=1, unavailable floor(0.75)=0
 *   replicas=10, maxSurge=25%, maxUnavailable=25%  -> surge ceil(2.5)=3,  unavailable floor(2.5)=2
 *   replicas=3,  maxSurge=0%,  maxUnavailable=10%  -> both 0, so unavailable becomes 1 (a rollout must be able to move)
 *   replicas=3,  maxUnavailable=5                  -> 5 is clamped to replicas: 3
 *
 * Besides RollingUpdate and Recreate, two progressive strategies (issue 13),
 * resolved here and explained by `plan`; the engine does not carry them out yet:
 *
 *   BlueGreen  the whole new set starts out of traffic beside the old one, then
 *              one rewrite + reload of every upstream switches all traffic;
 *              the old set is kept scaleDownDelaySeconds for a one-reload undo.
 *   Canary     steps (setWeight / pause / analysis) send a sticky, weighted
 *              share of traffic to a few new instances; after the last step a
 *              rolling update (strategy.rollingUpdate) replaces the stable set.
 *
 * PURE: no I/O, no clock. Errors are thrown as ValidationError with a path.
 */
import type { AnalysisSpec } from './gate.js';
import { ValidationError, type FieldIssue } from '../errors.js';
import { canaryWeights, parseForceKey, parseStickyKey, UPSTREAM_NAME_RE, type ForceKey, type StickyKey } from './upstream.js';

export type IntOrPercent = number | string;

export type StrategyType = 'RollingUpdate' | 'Recreate' | 'BlueGreen' | 'Canary';
export const STRATEGY_TYPES: readonly StrategyType[] = ['RollingUpdate', 'Recreate', 'BlueGreen', 'Canary'];
const TYPES_ALLOWED = '"RollingUpdate", "Recreate", "BlueGreen" or "Canary"';

/**
 * When a terminating instance stops counting toward replicas + maxSurge:
 * TerminationStarted (Kubernetes' RollingUpdate today) as soon as it is
 * marked down, so its replacement starts at once and more containers than
 * replicas + maxSurge may be alive while some drain; TerminationComplete
 * only once its container is gone, so the containers alive never exceed
 * replicas + maxSurge (for a VM without memory to spare), at the price of
 * waiting out every drain and stop before the replacement starts.
 */
export type ReplacementPolicy = 'TerminationStarted' | 'TerminationComplete';
const REPLACEMENT_POLICIES: readonly ReplacementPolicy[] = ['TerminationStarted', 'TerminationComplete'];

export interface RollingUpdateInput {
  maxSurge?: IntOrPercent | undefined;
  maxUnavailable?: IntOrPercent | undefined;
}

/** `strategy.blueGreen` as written (validated here, whatever checked it before). */
export interface BlueGreenInput {
  /** How long the old set stays, out of traffic, after the switch: undo inside it is one reload. 0..86400, default 30. */
  scaleDownDelaySeconds?: number | undefined;
  /** An nginx upstream the new set is written to before the switch (for a prePromotion hook to test). */
  previewUpstream?: string | undefined;
  /** false: wait for `fleetroll promote` before the switch. Default true. */
  autoPromote?: boolean | undefined;
}

/** One canary step as written: exactly one of its keys. */
export interface CanaryStepInput {
  /** Percent of requests for the new revision, 0..100. */
  setWeight?: number | undefined;
  /** `{ duration: 60 }`, `{ duration: "5m" }`; `{}` waits for `fleetroll promote` (or `abort`). */
  pause?: { duration?: number | string | undefined } | undefined;
  /**
   * Overrides of the top-level `analysis:` settings for this check, validated
   * together with them by the fleet loader (config/load.ts).
   */
  analysis?: Record<string, unknown> | undefined;
}

/** `strategy.canary` as written. */
export interface CanaryInput {
  /** A fixed number of canary instances; default: as many as the current weight needs. */
  canaryReplicas?: number | undefined;
  /** "remote_addr" (default), "cookie:NAME" or "header:NAME". */
  stickyKey?: string | undefined;
  /** "header:NAME" or "cookie:NAME": its value `always` forces the canary, `never` stable (for testers). */
  force?: string | undefined;
  steps?: readonly CanaryStepInput[] | undefined;
}

export interface StrategyInput {
  type?: StrategyType | undefined;
  rollingUpdate?: RollingUpdateInput | undefined;
  blueGreen?: BlueGreenInput | undefined;
  canary?: CanaryInput | undefined;
}

/** Where an effective value came from, highest priority first. */
export type ValueSource = 'group' | 'cli' | 'strategy' | 'defaults' | 'builtin';

export const SOURCE_LABEL: Record<ValueSource, string> = {
  group: 'group override (group: true)',
  cli: 'command-line flag',
  strategy: "service's strategy",
  defaults: 'shared defaults',
  builtin: 'built-in default',
};

/**
 * Most replicas a fleet (the file's `replicas`, and plan's and simulate's
 * --replicas) may have: where the engine is measured to stay tractable.
 * simulate compresses a rollout's events into CPU time, and its cost per
 * event grows with the fleet (every reload renders the whole upstream), so
 * above this a 1/0 rollout would not finish in reasonable time.
 */
export const MAX_REPLICAS = 10_000;

export const BUILTIN_DEFAULTS = {
  maxSurge: '25%',
  maxUnavailable: '25%',
  minReadySeconds: 0,
  progressDeadlineSeconds: 600,
  revisionHistoryLimit: 10,
  scaleDownDelaySeconds: 30,
  autoPromote: true,
  stickyKey: 'remote_addr',
} as const;

/** Longest pause a canary step may name, and the longest scaleDownDelaySeconds. */
export const MAX_DELAY_SECONDS = 86400;

/** A group (nodes that must move together) never loses a member before its replacement is up. */
const GROUP_OVERRIDE = { maxSurge: '100%', maxUnavailable: '0%' } as const;

export type RolloutMode = 'availability' | 'resource-aware' | 'balanced' | 'recreate' | 'blue-green' | 'canary';

export const MODE_DESCRIPTION: Record<RolloutMode, string> = {
  availability: 'availability: maxUnavailable 0, never below full capacity',
  'resource-aware': 'resource-aware: maxSurge 0, never above replicas',
  balanced: 'balanced: may surge above replicas and dip below them',
  recreate: 'recreate: every old instance stops before any new one starts (downtime)',
  'blue-green': 'blue-green: the whole new set starts out of traffic beside the old one (2 × replicas alive), then one reload switches all traffic',
  canary: 'canary: a few new instances take a sticky, weighted share of traffic step by step; then a rolling update replaces the rest',
};

/** The mode of a rolling update with these resolved counts. */
export function rollingMode(maxSurge: number, maxUnavailable: number): RolloutMode {
  return maxUnavailable === 0 ? 'availability' : maxSurge === 0 ? 'resource-aware' : 'balanced';
}

export interface ParsedIntOrPercent {
  kind: 'int' | 'percent';
  value: number;
  /** The value as the user wrote it, for messages. */
  raw: IntOrPercent;
}

const INT_RE = /^[0-9]+$/;
const PERCENT_RE = /^[0-9]+%$/;
const ALLOWED = 'a non-negative integer (e.g. 1) or a percentage of replicas (e.g. "25%")';

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

/**
 * Parses one maxSurge / maxUnavailable value. Returns the problem instead of
 * throwing so that callers can collect every problem of a file at once.
 */
export function parseIntOrPercent(
  raw: unknown,
  opts: { maxPercent?: number } = {},
): ParsedIntOrPercent | { error: string } {
  let parsed: ParsedIntOrPercent;
  if (typeof raw === 'number') {
    if (!Number.isFinite(raw) || !Number.isInteger(raw)) return { error: `must be a whole number: ${ALLOWED}, got ${show(raw)}` };
    if (raw < 0) return { error: `must not be negative: ${ALLOWED}, got ${show(raw)}` };
    if (!Number.isSafeInteger(raw)) return { error: `is too large, got ${show(raw)}` };
    parsed = { kind: 'int', value: raw, raw };
  } else if (typeof raw === 'string') {
    if (INT_RE.test(raw)) parsed = { kind: 'int', value: Number(raw), raw };
    else if (PERCENT_RE.test(raw)) parsed = { kind: 'percent', value: Number(raw.slice(0, -1)), raw };
    else if (/^-[0-9]+%?$/.test(raw)) return { error: `must not be negative: ${ALLOWED}, got ${show(raw)}` };
    else if (/^-?[0-9]*\.[0-9]+%?$/.test(raw)) return { error: `must be a whole number: ${ALLOWED}, got ${show(raw)}` };
    else return { error: `must be ${ALLOWED}, got ${show(raw)}` };
    if (!Number.isSafeInteger(parsed.value)) return { error: `is too large, got ${show(raw)}` };
  } else {
    return { error: `must be ${ALLOWED}, got ${raw === null ? 'null' : typeof raw}` };
  }
  if (parsed.kind === 'percent' && opts.maxPercent !== undefined && parsed.value > opts.maxPercent) {
    return { error: `must not be greater than ${opts.maxPercent}%, got ${show(raw)}` };
  }
  return parsed;
}

/** Percentages of replicas round up for surge and down for unavailable. */
function scaleValue(v: ParsedIntOrPercent, replicas: number, roundUp: boolean): number {
  if (v.kind === 'int') return v.value;
  const scaled = (v.value * replicas) / 100;
  return roundUp ? Math.ceil(scaled) : Math.floor(scaled);
}

const DURATION_RE = /^([0-9]{1,6})(s|m|h)$/;

/**
 * A canary pause: seconds as a number (fractions allowed), or a string "30s",
 * "5m", "1h"; more than 0 and at most a day. Returns the problem instead of throwing.
 */
export function parsePauseDuration(raw: unknown): number | { error: string } {
  const allowed = `seconds (e.g. 30) or a duration string like "30s", "5m" or "1h", more than 0 and at most ${MAX_DELAY_SECONDS} s (leave duration out to wait for \`fleetroll promote\` or \`abort\`)`;
  let seconds: number;
  if (typeof raw === 'number' && Number.isFinite(raw)) seconds = raw;
  else if (typeof raw === 'string' && DURATION_RE.test(raw)) {
    const m = DURATION_RE.exec(raw)!;
    seconds = Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
  } else return { error: `must be ${allowed}, got ${raw === null ? 'null' : typeof raw === 'string' ? JSON.stringify(raw) : String(raw)}` };
  if (seconds <= 0 || seconds > MAX_DELAY_SECONDS) return { error: `must be ${allowed}, got ${show(raw)}` };
  return seconds;
}

/**
 * Canary instances at a weight: the fixed canaryReplicas when set, else as
 * many as the weight's share of replicas needs, rounded up, and never fewer
 * than one (the canary set exists from the first step on), never more than
 * replicas. At 100% the canary takes every request, so it is the whole set
 * whatever canaryReplicas says: fewer would serve the fleet's traffic below
 * its capacity.
 *
 *   replicas 10, weight 5%  → 1        replicas 10, weight 50% → 5
 *   replicas 3,  weight 34% → 2        replicas 10, weight 0%  → 1
 *   replicas 10, weight 100%, canaryReplicas 2 → 10
 */
export function canaryInstancesFor(weightPercent: number, replicas: number, fixed?: number): number {
  if (replicas <= 0) return 0;
  if (weightPercent >= 100) return replicas;
  if (fixed !== undefined) return Math.min(fixed, replicas);
  return Math.min(replicas, Math.max(1, Math.ceil((weightPercent * replicas) / 100)));
}

function isZero(v: ParsedIntOrPercent): boolean {
  return v.value === 0;
}

/** The layers a strategy is resolved from (see README "Where settings come from"). */
export interface StrategyLayers {
  replicas: number;
  /** `group: true` in the fleet file. */
  group?: boolean | undefined;
  /** `--max-surge` / `--max-unavailable`. */
  cli?: RollingUpdateInput | undefined;
  /** The service's own `strategy:`. When present, it replaces `defaults` as a whole. */
  strategy?: StrategyInput | undefined;
  /** The `strategy:` of the shared defaults (inline `defaults:` or a defaults file). */
  defaults?: StrategyInput | undefined;
  /** replacementPolicy from each layer: `--replacement-policy`, the service's own, the shared defaults. */
  replacementPolicy?: { cli?: string | undefined; own?: string | undefined; defaults?: string | undefined } | undefined;
  /** Path prefixes for messages; the fleet loader passes file-relative paths. */
  paths?: Partial<Record<'strategy' | 'defaults' | 'cliMaxSurge' | 'cliMaxUnavailable', string>>;
}

interface Effective<T> {
  value: T;
  source: ValueSource;
  path: string;
}

/** Blue-green settings, resolved. */
export interface ResolvedBlueGreen {
  /** Seconds the old set stays, out of traffic, after the switch; `fleetroll undo` inside it is one reload. */
  scaleDownDelaySeconds: number;
  /** The upstream the new set is written to before the switch; undefined: none. */
  previewUpstream: string | undefined;
  /** false: the switch waits for `fleetroll promote`. */
  autoPromote: boolean;
  sources: { scaleDownDelaySeconds: ValueSource; previewUpstream: ValueSource; autoPromote: ValueSource };
}

/** A canary step, resolved; `path` is where it is written (for messages). */
export type CanaryStep =
  | { kind: 'setWeight'; /** percent of requests for the new revision */ weight: number; path: string }
  | { kind: 'pause'; /** undefined: until `fleetroll promote` (or `abort`) */ seconds: number | undefined; path: string }
  | {
      kind: 'analysis';
      /** The top-level analysis settings with this step's overrides, validated (filled in by the fleet loader). */
      spec?: AnalysisSpec | undefined;
      /** Overrides of the top-level analysis settings, as written. */
      overrides: Record<string, unknown>;
      path: string;
    };

/** Canary settings, resolved. The final rolling update uses the strategy's maxSurge / maxUnavailable. */
export interface ResolvedCanary {
  /** Fixed canary instance count; undefined: canaryInstancesFor(weight, replicas) at each step. */
  canaryReplicas: number | undefined;
  /** What requests stick on (nginx `hash <key> consistent`). */
  stickyKey: StickyKey;
  /** The header or cookie that forces a side (undefined: none); nginx.conf then proxies to `$fleetroll_<upstream>_route`. */
  force: ForceKey | undefined;
  steps: CanaryStep[];
  /** The mode of the rolling update that follows the last step. */
  rollingMode: RolloutMode;
  sources: { canaryReplicas: ValueSource; stickyKey: ValueSource; force: ValueSource; steps: ValueSource };
}

interface ResolvedStrategyBase {
  replicas: number;
  /**
   * Resolved counts. Recreate: surge 0, unavailable = replicas. BlueGreen:
   * surge = replicas, unavailable 0 (the whole new set beside the old one).
   * Canary: those of the rolling update after the last step.
   */
  maxSurge: number;
  maxUnavailable: number;
  /** replicas - maxUnavailable: the floor of available instances during a rolling update. */
  minAvailable: number;
  /** replicas + maxSurge: the ceiling of instances alive at once (canary steps add their canaries to replicas instead). */
  maxTotal: number;
  /** The effective values as written (e.g. "25%"), before scaling. */
  spec: { maxSurge: IntOrPercent; maxUnavailable: IntOrPercent };
  sources: { type: ValueSource; maxSurge: ValueSource; maxUnavailable: ValueSource; replacementPolicy: ValueSource };
  /** Recreate always waits for terminations to complete. */
  replacementPolicy: ReplacementPolicy;
  mode: RolloutMode;
  /** Things worth telling the user: overrides, the 0/0 fencepost, clamping. */
  notes: string[];
}

export type RollingStrategy = ResolvedStrategyBase & { type: 'RollingUpdate' | 'Recreate'; blueGreen?: undefined; canary?: undefined };
export type BlueGreenStrategy = ResolvedStrategyBase & { type: 'BlueGreen'; blueGreen: ResolvedBlueGreen; canary?: undefined };
export type CanaryStrategy = ResolvedStrategyBase & { type: 'Canary'; canary: ResolvedCanary; blueGreen?: undefined };

/** The effective strategy; `blueGreen` / `canary` are present exactly for their type. */
export type ResolvedStrategy = RollingStrategy | BlueGreenStrategy | CanaryStrategy;

/** The rolling update a canary ends with (after its last step), as the rolling algorithm takes it. */
export function finalRollingUpdate(s: CanaryStrategy): RollingStrategy {
  const { canary, blueGreen: _b, ...base } = s;
  return { ...base, type: 'RollingUpdate', mode: canary.rollingMode, notes: [] };
}

/** Per layer: what the layer says, validated; undefined where it said nothing valid. */
interface LayerValues {
  surge: ParsedIntOrPercent | undefined;
  unav: ParsedIntOrPercent | undefined;
  blueGreen: { scaleDownDelaySeconds?: number; previewUpstream?: string; autoPromote?: boolean };
  canary: { canaryReplicas?: number; stickyKey?: StickyKey; force?: ForceKey; steps?: CanaryStep[] };
}

const STEP_KINDS = ['setWeight', 'pause', 'analysis'] as const;

function isMapping(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Resolves the effective strategy from its layers. Throws ValidationError
 * listing every invalid value (each with its path) and impossible combinations.
 */
export function resolveStrategy(layers: StrategyLayers): ResolvedStrategy {
  const { replicas } = layers;
  const issues: FieldIssue[] = [];
  const notes: string[] = [];
  const p = {
    strategy: layers.paths?.strategy ?? 'strategy',
    defaults: layers.paths?.defaults ?? 'defaults/strategy',
    cliMaxSurge: layers.paths?.cliMaxSurge ?? '--max-surge',
    cliMaxUnavailable: layers.paths?.cliMaxUnavailable ?? '--max-unavailable',
  };

  if (!Number.isInteger(replicas) || replicas < 0) {
    issues.push({ path: 'replicas', message: `must be a non-negative integer, got ${show(replicas)}` });
  }

  // Validate every value the user gave, in every layer, even the ones a higher
  // layer shadows: a typo in a shared defaults file should not lie dormant.
  const check = (raw: IntOrPercent | undefined, path: string, unavailable: boolean): ParsedIntOrPercent | undefined => {
    if (raw === undefined) return undefined;
    const r = parseIntOrPercent(raw, unavailable ? { maxPercent: 100 } : {});
    if ('error' in r) {
      issues.push({ path, message: r.error });
      return undefined;
    }
    return r;
  };
  const layerValues = (s: StrategyInput | undefined, prefix: string): LayerValues => {
    const surge = check(s?.rollingUpdate?.maxSurge, `${prefix}/rollingUpdate/maxSurge`, false);
    const unav = check(s?.rollingUpdate?.maxUnavailable, `${prefix}/rollingUpdate/maxUnavailable`, true);
    const out: LayerValues = { surge, unav, blueGreen: {}, canary: {} };
    if (s === undefined) return out;
    if (s.type !== undefined && !(STRATEGY_TYPES as readonly string[]).includes(s.type)) {
      issues.push({ path: `${prefix}/type`, message: `must be ${TYPES_ALLOWED}, got ${show(s.type)}` });
      return out;
    }
    // A layer without a type is a RollingUpdate: the layer replaces the ones below it as a whole.
    const type = s.type ?? 'RollingUpdate';
    const mismatch = (field: string, owner: StrategyType) => {
      const said = s.type === undefined ? `this strategy has no type, so it is a RollingUpdate (add type: ${owner})` : `type is ${type}`;
      issues.push({ path: `${prefix}/${field}`, message: `applies only to type ${owner}, but ${said}; with ${type}, allowed: ${allowedBlocks(type)}` });
    };
    if (s.rollingUpdate !== undefined && type === 'Recreate') {
      issues.push({ path: `${prefix}/rollingUpdate`, message: 'must not be set when type is Recreate (Recreate stops every instance before starting new ones)' });
    }
    if (s.rollingUpdate !== undefined && type === 'BlueGreen') {
      issues.push({
        path: `${prefix}/rollingUpdate`,
        message: 'must not be set when type is BlueGreen (the whole new set starts beside the old one and one reload switches traffic; set blueGreen instead)',
      });
    }
    if (s.blueGreen !== undefined && type !== 'BlueGreen') mismatch('blueGreen', 'BlueGreen');
    if (s.canary !== undefined && type !== 'Canary') mismatch('canary', 'Canary');
    if (s.blueGreen !== undefined) out.blueGreen = blueGreenValues(s.blueGreen, `${prefix}/blueGreen`);
    if (s.canary !== undefined) out.canary = canaryValues(s.canary, `${prefix}/canary`);
    if (type === 'Canary' && out.canary.steps === undefined && !issues.some((i) => i.path.startsWith(`${prefix}/canary/steps`))) {
      issues.push({
        path: `${prefix}/canary/steps`,
        message: 'is required with type Canary: a list of steps such as [{ setWeight: 10 }, { pause: { duration: 5m } }, { setWeight: 50 }, { pause: {} }]',
      });
    }
    return out;
  };
  const blueGreenValues = (bg: BlueGreenInput, prefix: string): LayerValues['blueGreen'] => {
    const out: LayerValues['blueGreen'] = {};
    if (!isMapping(bg)) {
      issues.push({ path: prefix, message: 'must be a mapping: { scaleDownDelaySeconds, previewUpstream, autoPromote }' });
      return out;
    }
    const d = bg.scaleDownDelaySeconds;
    if (d !== undefined) {
      if (typeof d !== 'number' || !Number.isFinite(d) || d < 0 || d > MAX_DELAY_SECONDS) {
        issues.push({ path: `${prefix}/scaleDownDelaySeconds`, message: `must be a number of seconds from 0 to ${MAX_DELAY_SECONDS}, got ${show(d)}` });
      } else out.scaleDownDelaySeconds = d;
    }
    if (bg.previewUpstream !== undefined) {
      if (typeof bg.previewUpstream !== 'string' || !UPSTREAM_NAME_RE.test(bg.previewUpstream)) {
        issues.push({ path: `${prefix}/previewUpstream`, message: `must be an nginx upstream name: letters, digits and "_", starting with a letter or "_", got ${show(bg.previewUpstream)}` });
      } else out.previewUpstream = bg.previewUpstream;
    }
    if (bg.autoPromote !== undefined) {
      if (typeof bg.autoPromote !== 'boolean') issues.push({ path: `${prefix}/autoPromote`, message: `must be true or false, got ${show(bg.autoPromote)}` });
      else out.autoPromote = bg.autoPromote;
    }
    return out;
  };
  const canaryValues = (c: CanaryInput, prefix: string): LayerValues['canary'] => {
    const out: LayerValues['canary'] = {};
    if (!isMapping(c)) {
      issues.push({ path: prefix, message: 'must be a mapping: { steps, stickyKey, force, canaryReplicas }' });
      return out;
    }
    const n = c.canaryReplicas;
    if (n !== undefined) {
      if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10000) {
        issues.push({ path: `${prefix}/canaryReplicas`, message: `must be an integer from 1 to 10000, got ${show(n)}` });
      } else if (Number.isInteger(replicas) && replicas >= 0 && n > replicas) {
        issues.push({ path: `${prefix}/canaryReplicas`, message: `must be at most replicas (${replicas}), got ${n}` });
      } else out.canaryReplicas = n;
    }
    if (c.stickyKey !== undefined) {
      const k = parseStickyKey(c.stickyKey);
      if ('error' in k) issues.push({ path: `${prefix}/stickyKey`, message: k.error });
      else out.stickyKey = c.stickyKey as StickyKey;
    }
    if (c.force !== undefined) {
      const k = parseForceKey(c.force);
      if ('error' in k) issues.push({ path: `${prefix}/force`, message: k.error });
      else out.force = c.force as ForceKey;
    }
    if (c.steps !== undefined) {
      if (!Array.isArray(c.steps) || c.steps.length === 0) {
        issues.push({ path: `${prefix}/steps`, message: 'must be a non-empty list of steps: { setWeight: N }, { pause: { duration: 30s } }, { pause: {} } or { analysis: {} }' });
        return out;
      }
      const steps: CanaryStep[] = [];
      c.steps.forEach((raw: unknown, i) => {
        const sp = `${prefix}/steps/${i}`;
        const keys = isMapping(raw) ? Object.keys(raw).filter((k) => raw[k] !== undefined) : [];
        if (!isMapping(raw) || keys.length !== 1 || !(STEP_KINDS as readonly string[]).includes(keys[0]!)) {
          const got = !isMapping(raw) ? (raw === null ? 'null' : Array.isArray(raw) ? 'a list' : show(raw)) : keys.length === 0 ? 'an empty mapping' : keys.map((k) => JSON.stringify(k)).join(' and ');
          issues.push({ path: sp, message: `must be exactly one of setWeight, pause or analysis (e.g. { setWeight: 20 }), got ${got}` });
          return;
        }
        const kind = keys[0] as (typeof STEP_KINDS)[number];
        const v = raw[kind];
        if (kind === 'setWeight') {
          if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 100) {
            issues.push({ path: `${sp}/setWeight`, message: `must be a whole percent from 0 to 100, got ${show(v)}` });
          } else steps.push({ kind, weight: v, path: sp });
        } else if (kind === 'pause') {
          if (!isMapping(v)) {
            issues.push({ path: `${sp}/pause`, message: `must be a mapping: { duration: 30s } or {} (wait for \`fleetroll promote\` or \`abort\`), got ${v === null ? 'null' : show(v)}` });
            return;
          }
          const extra = Object.keys(v).filter((k) => k !== 'duration');
          if (extra.length > 0) issues.push({ path: `${sp}/pause`, message: `unknown field${extra.length > 1 ? 's' : ''} ${extra.map((k) => JSON.stringify(k)).join(', ')}; only duration is allowed` });
          if (v.duration === undefined) steps.push({ kind, seconds: undefined, path: sp });
          else {
            const d = parsePauseDuration(v.duration);
            if (typeof d === 'number') steps.push({ kind, seconds: d, path: sp });
            else issues.push({ path: `${sp}/pause/duration`, message: d.error });
          }
        } else if (!isMapping(v)) {
          issues.push({ path: `${sp}/analysis`, message: `must be a mapping of analysis settings (may be empty: {}), got ${v === null ? 'null' : show(v)}` });
        } else {
          steps.push({ kind, overrides: { ...v }, path: sp });
        }
      });
      if (steps.length === c.steps.length) out.steps = steps;
    }
    return out;
  };
  const cliSurge = check(layers.cli?.maxSurge, p.cliMaxSurge, false);
  const cliUnav = check(layers.cli?.maxUnavailable, p.cliMaxUnavailable, true);
  const own = layerValues(layers.strategy, p.strategy);
  const shared = layerValues(layers.defaults, p.defaults);

  // The service's strategy replaces the shared defaults as a whole.
  const base = layers.strategy !== undefined ? { s: layers.strategy, v: own, src: 'strategy' as const, prefix: p.strategy }
    : layers.defaults !== undefined ? { s: layers.defaults, v: shared, src: 'defaults' as const, prefix: p.defaults }
    : undefined;

  let type: Effective<StrategyType> = base?.s.type !== undefined && (STRATEGY_TYPES as readonly string[]).includes(base.s.type)
    ? { value: base.s.type, source: base.src, path: `${base.prefix}/type` }
    : { value: 'RollingUpdate', source: 'builtin', path: 'strategy/type' };

  const pick = (
    field: 'maxSurge' | 'maxUnavailable',
    cliParsed: ParsedIntOrPercent | undefined,
    baseParsed: ParsedIntOrPercent | undefined,
  ): Effective<ParsedIntOrPercent> => {
    if (cliParsed) return { value: cliParsed, source: 'cli', path: field === 'maxSurge' ? p.cliMaxSurge : p.cliMaxUnavailable };
    if (baseParsed && base) return { value: baseParsed, source: base.src, path: `${base.prefix}/rollingUpdate/${field}` };
    const raw = BUILTIN_DEFAULTS[field];
    return { value: { kind: 'percent', value: Number.parseInt(raw, 10), raw }, source: 'builtin', path: `strategy/rollingUpdate/${field}` };
  };
  let surge = pick('maxSurge', cliSurge, base?.v.surge);
  let unav = pick('maxUnavailable', cliUnav, base?.v.unav);

  if (layers.group) {
    const forced = (field: 'maxSurge' | 'maxUnavailable', current: Effective<ParsedIntOrPercent>) => {
      const raw = GROUP_OVERRIDE[field];
      const value: ParsedIntOrPercent = { kind: 'percent', value: Number.parseInt(raw, 10), raw };
      if (current.source !== 'builtin' && String(current.value.raw) !== raw) {
        notes.push(`group: true forces ${field} ${raw}; ignoring ${show(current.value.raw)} from ${SOURCE_LABEL[current.source]} (${current.path})`);
      }
      return { value, source: 'group' as const, path: 'group' };
    };
    if (type.value !== 'RollingUpdate') {
      notes.push(`group: true forces a RollingUpdate; ignoring type ${type.value} from ${SOURCE_LABEL[type.source]} (${type.path})`);
    }
    type = { value: 'RollingUpdate', source: 'group', path: 'group' };
    surge = forced('maxSurge', surge);
    unav = forced('maxUnavailable', unav);
  } else if (type.value === 'Recreate' || type.value === 'BlueGreen') {
    const why = type.value === 'Recreate'
      ? 'Recreate has no surge or unavailability limits'
      : 'BlueGreen starts the whole new set beside the old one (surge 100%) and takes no old instance out of service before the switch';
    for (const [flag, given] of [[p.cliMaxSurge, cliSurge], [p.cliMaxUnavailable, cliUnav]] as const) {
      if (given) {
        issues.push({ path: flag, message: `cannot be used with strategy type ${type.value} (set in ${type.path}); ${why}` });
      }
    }
  }

  let policy: Effective<ReplacementPolicy> = { value: 'TerminationStarted', source: 'builtin', path: 'replacementPolicy' };
  const rp = layers.replacementPolicy;
  for (const [raw, source, path] of [
    [rp?.defaults, 'defaults', p.defaults.replace(/strategy$/, 'replacementPolicy')],
    [rp?.own, 'strategy', 'replacementPolicy'],
    [rp?.cli, 'cli', '--replacement-policy'],
  ] as const) {
    if (raw === undefined) continue;
    if (!(REPLACEMENT_POLICIES as readonly string[]).includes(raw)) {
      issues.push({ path, message: `must be "TerminationStarted" or "TerminationComplete", got ${show(raw)}` });
      continue;
    }
    policy = { value: raw as ReplacementPolicy, source, path };
  }
  if (type.value === 'Recreate' && policy.value === 'TerminationStarted' && policy.source !== 'builtin') {
    notes.push(`Recreate always waits for old instances to be gone (TerminationComplete); ignoring replacementPolicy TerminationStarted from ${SOURCE_LABEL[policy.source]} (${policy.path})`);
  }

  if ((type.value === 'RollingUpdate' || type.value === 'Canary') && issues.length === 0 && isZero(surge.value) && isZero(unav.value)) {
    issues.push({
      path: unav.path === surge.path ? unav.path : `${surge.path} and ${unav.path}`,
      message: 'maxSurge and maxUnavailable may not both be 0: the rollout could never replace an instance. Allow at least one, e.g. maxSurge 1',
    });
  }

  if (issues.length > 0) throw new ValidationError(issues);

  if (type.value === 'Recreate') {
    return {
      type: 'Recreate',
      replicas,
      maxSurge: 0,
      maxUnavailable: replicas,
      minAvailable: 0,
      maxTotal: replicas,
      spec: { maxSurge: 0, maxUnavailable: '100%' },
      sources: { type: type.source, maxSurge: type.source, maxUnavailable: type.source, replacementPolicy: type.source },
      replacementPolicy: 'TerminationComplete',
      mode: 'recreate',
      notes,
    };
  }

  // Settings of a strategy block come from the layer the strategy came from, field by field, else built in.
  const from = <T>(value: T | undefined, dflt: T): { value: T; source: ValueSource } =>
    value !== undefined && base ? { value, source: base.src } : { value: dflt, source: 'builtin' };

  if (type.value === 'BlueGreen' && base) {
    const bg = base.v.blueGreen;
    const delay = from(bg.scaleDownDelaySeconds, BUILTIN_DEFAULTS.scaleDownDelaySeconds);
    const preview = from<string | undefined>(bg.previewUpstream, undefined);
    const auto = from<boolean>(bg.autoPromote, BUILTIN_DEFAULTS.autoPromote);
    return {
      type: 'BlueGreen',
      replicas,
      maxSurge: replicas,
      maxUnavailable: 0,
      minAvailable: replicas,
      maxTotal: 2 * replicas,
      spec: { maxSurge: '100%', maxUnavailable: 0 },
      sources: { type: type.source, maxSurge: type.source, maxUnavailable: type.source, replacementPolicy: policy.source },
      replacementPolicy: policy.value,
      mode: 'blue-green',
      notes,
      blueGreen: {
        scaleDownDelaySeconds: delay.value,
        previewUpstream: preview.value,
        autoPromote: auto.value,
        sources: { scaleDownDelaySeconds: delay.source, previewUpstream: preview.source, autoPromote: auto.source },
      },
    };
  }

  const maxSurge = scaleValue(surge.value, replicas, true);
  let maxUnavailable = scaleValue(unav.value, replicas, false);
  if (maxSurge === 0 && maxUnavailable === 0) {
    maxUnavailable = 1;
    notes.push(
      `maxSurge ${show(surge.value.raw)} and maxUnavailable ${show(unav.value.raw)} both come to 0 for ${replicas} replicas; maxUnavailable is raised to 1 so the rollout can move`,
    );
  }
  if (maxUnavailable > replicas) {
    notes.push(`maxUnavailable ${maxUnavailable} is more than replicas; using ${replicas}`);
    maxUnavailable = replicas;
  }
  const rolling = {
    replicas,
    maxSurge,
    maxUnavailable,
    minAvailable: replicas - maxUnavailable,
    maxTotal: replicas + maxSurge,
    spec: { maxSurge: surge.value.raw, maxUnavailable: unav.value.raw },
    sources: { type: type.source, maxSurge: surge.source, maxUnavailable: unav.source, replacementPolicy: policy.source },
    replacementPolicy: policy.value,
    notes,
  };

  if (type.value === 'Canary' && base) {
    const c = base.v.canary;
    const fixed = from<number | undefined>(c.canaryReplicas, undefined);
    const key = from<StickyKey>(c.stickyKey, BUILTIN_DEFAULTS.stickyKey);
    const force = from<ForceKey | undefined>(c.force, undefined);
    // Validation above guarantees steps on a Canary base layer.
    const steps = from<CanaryStep[]>(c.steps, []);
    notes.push(...canaryNotes(steps.value, replicas, fixed.value));
    return {
      ...rolling,
      type: 'Canary',
      mode: 'canary',
      canary: {
        canaryReplicas: fixed.value,
        stickyKey: key.value,
        force: force.value,
        steps: steps.value,
        rollingMode: rollingMode(maxSurge, maxUnavailable),
        sources: { canaryReplicas: fixed.source, stickyKey: key.source, force: force.source, steps: steps.source },
      },
    };
  }

  return { ...rolling, type: 'RollingUpdate', mode: rollingMode(maxSurge, maxUnavailable) };
}

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

/** What a canary's steps cannot do as written: weights a fixed count cannot carry, splits nginx weights cannot make. */
function canaryNotes(steps: readonly CanaryStep[], replicas: number, fixed: number | undefined): string[] {
  const notes: string[] = [];
  if (replicas === 0) return notes;
  if (!steps.some((s) => s.kind === 'setWeight' && s.weight > 0)) {
    notes.push('no canary step sets a weight above 0: the canary takes no traffic before the rolling update that follows the last step');
  }
  for (const s of steps) {
    if (s.kind !== 'setWeight' || s.weight === 0) continue;
    const canaries = canaryInstancesFor(s.weight, replicas, fixed);
    if (fixed !== undefined && canaryInstancesFor(s.weight, replicas) > fixed) {
      notes.push(`${s.path}: setWeight ${s.weight} sends ${s.weight}% of requests to ${fixed} canary instance(s) (canaryReplicas), where ${canaryInstancesFor(s.weight, replicas)} would carry that share of ${replicas} replicas`);
    }
    if (s.weight < 100) {
      const w = canaryWeights(replicas, canaries, s.weight);
      if (Math.abs(w.sharePercent - s.weight) > 1) {
        notes.push(`${s.path}: with ${canaries} canary and ${replicas} stable instance(s), nginx weights (1 to 1000) can give the canary ${w.sharePercent.toFixed(1)}% of requests, not ${s.weight}%`);
      }
    }
  }
  return notes;
}
