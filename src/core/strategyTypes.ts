/**
 * The vocabulary of rollout strategies: what a user may write (the input
 * layers), what it resolves to (ResolvedStrategy), the built-in defaults
 * and the words `plan` and `validate` explain them with. Kept apart from the
 * arithmetic (core/strategy.ts) and from the checks (config/strategy.ts), which
 * both speak it.
 *
 * PURE: types and constants only.
 */
import type { AnalysisSpec } from './gate.js';
import type { ForceKey, StickyKey } from './upstream.js';
export type IntOrPercent = number | string;

export type StrategyType = 'RollingUpdate' | 'Recreate' | 'BlueGreen' | 'Canary';
export const STRATEGY_TYPES = ['RollingUpdate', 'Recreate', 'BlueGreen', 'Canary'] as const satisfies readonly StrategyType[];

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
export const REPLACEMENT_POLICIES = ['TerminationStarted', 'TerminationComplete'] as const satisfies readonly ReplacementPolicy[];

export interface RollingUpdateInput {
  maxSurge?: IntOrPercent | undefined;
  maxUnavailable?: IntOrPercent | undefined;
}

/** `strategy.blueGreen` as written (checked by config/strategy.ts). */
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

export type RolloutMode = 'availability' | 'resource-aware' | 'balanced' | 'recreate' | 'blue-green' | 'canary';

export const MODE_DESCRIPTION: Record<RolloutMode, string> = {
  availability: 'availability: maxUnavailable 0, never below full capacity',
  'resource-aware': 'resource-aware: maxSurge 0, never above replicas',
  balanced: 'balanced: may surge above replicas and dip below them',
  recreate: 'recreate: every old instance stops before any new one starts (downtime)',
  'blue-green': 'blue-green: the whole new set starts out of traffic beside the old one (2 × replicas alive), then one reload switches all traffic',
  canary: 'canary: a few new instances take a sticky, weighted share of traffic step by step; then a rolling update replaces the rest',
};

export interface ParsedIntOrPercent {
  kind: 'int' | 'percent';
  value: number;
  /** The value as the user wrote it, for messages. */
  raw: IntOrPercent;
}

/**
 * The layers a strategy is resolved from (see README "Where settings come
 * from"). resolveStrategy trusts their values: input from a user goes through
 * config/strategy.ts (loadStrategy) first, which checks every layer.
 */
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
