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
 * PURE: no I/O, no clock. Errors are thrown as ValidationError with a path.
 */
import { ValidationError, type FieldIssue } from '../errors.js';

export type IntOrPercent = number | string;

export type StrategyType = 'RollingUpdate' | 'Recreate';

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

export interface StrategyInput {
  type?: StrategyType | undefined;
  rollingUpdate?: RollingUpdateInput | undefined;
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

export const BUILTIN_DEFAULTS = {
  maxSurge: '25%',
  maxUnavailable: '25%',
  minReadySeconds: 0,
  progressDeadlineSeconds: 600,
  revisionHistoryLimit: 10,
} as const;

/** A group (nodes that must move together) never loses a member before its replacement is up. */
const GROUP_OVERRIDE = { maxSurge: '100%', maxUnavailable: '0%' } as const;

export type RolloutMode = 'availability' | 'resource-aware' | 'balanced' | 'recreate';

export const MODE_DESCRIPTION: Record<RolloutMode, string> = {
  availability: 'availability: maxUnavailable 0, never below full capacity',
  'resource-aware': 'resource-aware: maxSurge 0, never above replicas',
  balanced: 'balanced: may surge above replicas and dip below them',
  recreate: 'recreate: every old instance stops before any new one starts (downtime)',
};

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

export interface ResolvedStrategy {
  type: StrategyType;
  replicas: number;
  /** Resolved counts. With Recreate: surge 0, unavailable = replicas. */
  maxSurge: number;
  maxUnavailable: number;
  /** replicas - maxUnavailable: the floor of available instances during a rolling update. */
  minAvailable: number;
  /** replicas + maxSurge: the ceiling of instances alive at once. */
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
  const layerValues = (s: StrategyInput | undefined, prefix: string) => {
    const surge = check(s?.rollingUpdate?.maxSurge, `${prefix}/rollingUpdate/maxSurge`, false);
    const unav = check(s?.rollingUpdate?.maxUnavailable, `${prefix}/rollingUpdate/maxUnavailable`, true);
    if (s?.type === 'Recreate' && s.rollingUpdate !== undefined) {
      issues.push({
        path: `${prefix}/rollingUpdate`,
        message: 'must not be set when type is Recreate (Recreate stops every instance before starting new ones)',
      });
    }
    if (s?.type !== undefined && s.type !== 'RollingUpdate' && s.type !== 'Recreate') {
      issues.push({ path: `${prefix}/type`, message: `must be "RollingUpdate" or "Recreate", got ${show(s.type)}` });
    }
    return { surge, unav };
  };
  const cliSurge = check(layers.cli?.maxSurge, p.cliMaxSurge, false);
  const cliUnav = check(layers.cli?.maxUnavailable, p.cliMaxUnavailable, true);
  const own = layerValues(layers.strategy, p.strategy);
  const shared = layerValues(layers.defaults, p.defaults);

  // The service's strategy replaces the shared defaults as a whole.
  const base = layers.strategy !== undefined ? { s: layers.strategy, v: own, src: 'strategy' as const, prefix: p.strategy }
    : layers.defaults !== undefined ? { s: layers.defaults, v: shared, src: 'defaults' as const, prefix: p.defaults }
    : undefined;

  let type: Effective<StrategyType> = base?.s.type !== undefined
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
    if (type.value === 'Recreate') {
      notes.push(`group: true forces a RollingUpdate; ignoring type Recreate from ${SOURCE_LABEL[type.source]} (${type.path})`);
    }
    type = { value: 'RollingUpdate', source: 'group', path: 'group' };
    surge = forced('maxSurge', surge);
    unav = forced('maxUnavailable', unav);
  } else if (type.value === 'Recreate') {
    for (const [flag, given] of [[p.cliMaxSurge, cliSurge], [p.cliMaxUnavailable, cliUnav]] as const) {
      if (given) {
        issues.push({ path: flag, message: `cannot be used with strategy type Recreate (set in ${type.path}); Recreate has no surge or unavailability limits` });
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

  if (type.value === 'RollingUpdate' && issues.length === 0 && isZero(surge.value) && isZero(unav.value)) {
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
  const mode: RolloutMode = maxUnavailable === 0 ? 'availability' : maxSurge === 0 ? 'resource-aware' : 'balanced';
  return {
    type: 'RollingUpdate',
    replicas,
    maxSurge,
    maxUnavailable,
    minAvailable: replicas - maxUnavailable,
    maxTotal: replicas + maxSurge,
    spec: { maxSurge: surge.value.raw, maxUnavailable: unav.value.raw },
    sources: { type: type.source, maxSurge: surge.source, maxUnavailable: unav.source, replacementPolicy: policy.source },
    replacementPolicy: policy.value,
    mode,
    notes,
  };
}
