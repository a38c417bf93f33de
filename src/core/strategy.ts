/**
 * Rollout strategy: the resolution of maxSurge / maxUnavailable to instance
 * counts, and the layering of where each value comes from.
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
 * Besides RollingUpdate and Recreate, two progressive strategies:
 *
 *   BlueGreen  the whole new set starts out of traffic beside the old one, then
 *              one rewrite + reload of every upstream switches all traffic;
 *              the old set is kept scaleDownDelaySeconds for a one-reload undo.
 *   Canary     steps (setWeight / pause / analysis) send a sticky, weighted
 *              share of traffic to a few new instances; after the last step a
 *              rolling update (strategy.rollingUpdate) replaces the stable set.
 *
 * resolveStrategy only layers and resolves: the input is checked before, by
 * config/strategy.ts (the zod schema and the rules across layers), which is
 * what every caller with user input goes through. The one problem left here is
 * one only the layering shows: maxSurge and maxUnavailable both 0.
 *
 * The vocabulary (input and resolved types, built-in defaults) is in
 * core/strategyTypes.ts and re-exported from here.
 *
 * PURE: no I/O, no clock.
 */
import { ValidationError } from '../errors.js';
import { canaryWeights, type ForceKey, type StickyKey } from './upstream.js';
import {
  BUILTIN_DEFAULTS,
  MAX_DELAY_SECONDS,
  SOURCE_LABEL,
  type CanaryStep,
  type CanaryStepInput,
  type CanaryStrategy,
  type IntOrPercent,
  type ParsedIntOrPercent,
  type ReplacementPolicy,
  type ResolvedStrategy,
  type RollingStrategy,
  type RolloutMode,
  type StrategyLayers,
  type StrategyType,
  type ValueSource,
} from './strategyTypes.js';

export * from './strategyTypes.js';

/** The mode of a rolling update with these resolved counts. */
export function rollingMode(maxSurge: number, maxUnavailable: number): RolloutMode {
  return maxUnavailable === 0 ? 'availability' : maxSurge === 0 ? 'resource-aware' : 'balanced';
}

const INT_RE = /^[0-9]+$/;
const PERCENT_RE = /^[0-9]+%$/;
const ALLOWED = 'a non-negative integer (e.g. 1) or a percentage of replicas (e.g. "25%")';

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

/**
 * Parses one maxSurge / maxUnavailable value: the rule for its format, which
 * the strategy schema (config/strategy.ts) applies and resolveStrategy relies
 * on. Returns the problem instead of throwing.
 */
export function parseIntOrPercent(raw: unknown, opts: { maxPercent?: number } = {}): ParsedIntOrPercent | { error: string } {
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
 * "5m", "1h"; more than 0 and at most a day. Like parseIntOrPercent, the
 * schema's rule and the resolver's parser. Returns the problem instead of throwing.
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

/** The rolling update a canary ends with (after its last step), as the rolling algorithm takes it. */
export function finalRollingUpdate(s: CanaryStrategy): RollingStrategy {
  const { canary, blueGreen: _b, ...base } = s;
  return { ...base, type: 'RollingUpdate', mode: canary.rollingMode, notes: [] };
}

/** A group (nodes that must move together) never loses a member before its replacement is up. */
const GROUP_OVERRIDE = { maxSurge: '100%', maxUnavailable: '0%' } as const;

/** The path prefixes messages name each layer by, with their defaults (shared with config/strategy.ts). */
export function strategyPaths(paths: StrategyLayers['paths']): Record<'strategy' | 'defaults' | 'cliMaxSurge' | 'cliMaxUnavailable', string> {
  return {
    strategy: paths?.strategy ?? 'strategy',
    defaults: paths?.defaults ?? 'defaults/strategy',
    cliMaxSurge: paths?.cliMaxSurge ?? '--max-surge',
    cliMaxUnavailable: paths?.cliMaxUnavailable ?? '--max-unavailable',
  };
}

interface Effective<T> {
  value: T;
  source: ValueSource;
  path: string;
}

/** A value resolveStrategy was promised is valid; a caller that skipped the checks learns it here. */
function trusted<T>(r: T | { error: string }, path: string): T {
  if (typeof r === 'object' && r !== null && 'error' in r)
    throw new Error(`resolveStrategy: ${path} ${r.error} (check strategy input with config/strategy.ts loadStrategy first)`);
  return r as T;
}

function isZero(v: ParsedIntOrPercent): boolean {
  return v.value === 0;
}

/** A canary's steps as written, resolved to kinds (a pause's duration to seconds); `prefix` is the canary block's path. */
function canarySteps(steps: readonly CanaryStepInput[], prefix: string): CanaryStep[] {
  return steps.map((step, i): CanaryStep => {
    const path = `${prefix}/steps/${i}`;
    if (step.setWeight !== undefined) return { kind: 'setWeight', weight: step.setWeight, path };
    if (step.pause !== undefined) {
      const d = step.pause.duration;
      return { kind: 'pause', seconds: d === undefined ? undefined : trusted(parsePauseDuration(d), `${path}/pause/duration`), path };
    }
    return { kind: 'analysis', overrides: { ...step.analysis }, path };
  });
}

/**
 * Resolves the effective strategy from its layers: group > command-line
 * flags > the service's strategy > the shared defaults > built in, field by
 * field for maxSurge / maxUnavailable (the service's strategy replaces the
 * defaults as a whole). The layers must be checked already (see the header);
 * throws ValidationError only when maxSurge and maxUnavailable are both 0.
 */
export function resolveStrategy(layers: StrategyLayers): ResolvedStrategy {
  const { replicas } = layers;
  const notes: string[] = [];
  const p = strategyPaths(layers.paths);

  // The service's strategy replaces the shared defaults as a whole.
  const base =
    layers.strategy !== undefined
      ? { s: layers.strategy, src: 'strategy' as const, prefix: p.strategy }
      : layers.defaults !== undefined
        ? { s: layers.defaults, src: 'defaults' as const, prefix: p.defaults }
        : undefined;

  let type: Effective<StrategyType> =
    base?.s.type !== undefined
      ? { value: base.s.type, source: base.src, path: `${base.prefix}/type` }
      : { value: 'RollingUpdate', source: 'builtin', path: 'strategy/type' };

  const parsed = (raw: IntOrPercent | undefined, path: string) => (raw === undefined ? undefined : trusted(parseIntOrPercent(raw), path));
  const pick = (field: 'maxSurge' | 'maxUnavailable', cliPath: string): Effective<ParsedIntOrPercent> => {
    const flag = parsed(layers.cli?.[field], cliPath);
    if (flag) return { value: flag, source: 'cli', path: cliPath };
    const own = base && parsed(base.s.rollingUpdate?.[field], `${base.prefix}/rollingUpdate/${field}`);
    if (own && base) return { value: own, source: base.src, path: `${base.prefix}/rollingUpdate/${field}` };
    const raw = BUILTIN_DEFAULTS[field];
    return { value: { kind: 'percent', value: Number.parseInt(raw, 10), raw }, source: 'builtin', path: `strategy/rollingUpdate/${field}` };
  };
  let surge = pick('maxSurge', p.cliMaxSurge);
  let unav = pick('maxUnavailable', p.cliMaxUnavailable);

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
  }

  let policy: Effective<ReplacementPolicy> = { value: 'TerminationStarted', source: 'builtin', path: 'replacementPolicy' };
  const rp = layers.replacementPolicy;
  for (const [raw, source, path] of [
    [rp?.defaults, 'defaults', p.defaults.replace(/strategy$/, 'replacementPolicy')],
    [rp?.own, 'strategy', 'replacementPolicy'],
    [rp?.cli, 'cli', '--replacement-policy'],
  ] as const) {
    if (raw !== undefined) policy = { value: raw as ReplacementPolicy, source, path };
  }
  if (type.value === 'Recreate' && policy.value === 'TerminationStarted' && policy.source !== 'builtin') {
    notes.push(
      `Recreate always waits for old instances to be gone (TerminationComplete); ignoring replacementPolicy TerminationStarted from ${SOURCE_LABEL[policy.source]} (${policy.path})`,
    );
  }

  if ((type.value === 'RollingUpdate' || type.value === 'Canary') && isZero(surge.value) && isZero(unav.value)) {
    throw new ValidationError([
      {
        path: unav.path === surge.path ? unav.path : `${surge.path} and ${unav.path}`,
        message: 'maxSurge and maxUnavailable may not both be 0: the rollout could never replace an instance. Allow at least one, e.g. maxSurge 1',
      },
    ]);
  }

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
    const bg = base.s.blueGreen ?? {};
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
    const c = base.s.canary ?? {};
    const fixed = from<number | undefined>(c.canaryReplicas, undefined);
    const key = from<StickyKey>(c.stickyKey as StickyKey | undefined, BUILTIN_DEFAULTS.stickyKey);
    const force = from<ForceKey | undefined>(c.force as ForceKey | undefined, undefined);
    // The checks guarantee steps on a Canary base layer.
    const steps = from<CanaryStep[]>(c.steps && canarySteps(c.steps, `${base.prefix}/canary`), []);
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
      notes.push(
        `${s.path}: setWeight ${s.weight} sends ${s.weight}% of requests to ${fixed} canary instance(s) (canaryReplicas), where ${canaryInstancesFor(s.weight, replicas)} would carry that share of ${replicas} replicas`,
      );
    }
    if (s.weight < 100) {
      const w = canaryWeights(replicas, canaries, s.weight);
      if (Math.abs(w.sharePercent - s.weight) > 1) {
        notes.push(
          `${s.path}: with ${canaries} canary and ${replicas} stable instance(s), nginx weights (1 to 1000) can give the canary ${w.sharePercent.toFixed(1)}% of requests, not ${s.weight}%`,
        );
      }
    }
  }
  return notes;
}
