/**
 * fleetroll as a library: `import { deploy, plan, simulate, loadFleet, FleetrollError } from 'fleetroll'`.
 *
 * Two levels:
 *
 * - What the CLI does, on the same default wiring (Docker for each host, nginx
 *   for each load balancer, the fleet's probes, its state and lock on the first
 *   host: src/wiring.ts): `deploy`, `plan`, `simulate`, `validate`, `loadFleet`.
 *   They never print; progress comes as RolloutEvents to `onEvent`, failures as
 *   FleetrollError (subclasses below) with the CLI's `code` and `exitCode`.
 * - The engine on ports you bring (src/ports.ts): `deployWith(fleet, deps)` runs
 *   the rollout with your Runtime / Router / Prober / Clock; `runManaged` adds
 *   the lock, the revision history and the journal on your StateStore and
 *   FleetLockPort. `buildDeps`, `fleetHandles` and `accessLogOpeners` give the
 *   default ports, to replace only some of them.
 *
 * Everything is typed (dist/index.d.ts). The declarations name ports and plain
 * data only, never an adapter's class, so a consumer needs no @types package of
 * Docker or ssh.
 */
import { basename } from 'node:path';
import { fleetFromObject as loadFromObject, loadFleet, type CliOverrides, type Fleet, type VariableLookup } from './config/load.js';
import { fleetNotes } from './config/notes.js';
import { planStrategy, type StrategyPlan } from './core/plan.js';
import { MAX_REPLICAS, type ResolvedStrategy } from './core/strategy.js';
import { loadStrategy } from './config/strategy.js';
import type { EventSink, RolloutEvent } from './engine/events.js';
import { deploy as engineDeploy, type AccessLogOpener, type DeployDeps, type DeployOptions, type DeployResult } from './engine/rollout.js';
import { runManaged, type FleetHandles, type ManagedResult } from './engine/session.js';
import { ValidationError, type FieldIssue } from './errors.js';
import { simulateRollout, withNginxMode, type SimulationResult, type SimulationTimings } from './sim/simulate.js';
import * as wiring from './wiring.js';

export { loadFleet, runManaged };

export { ERROR_CODES, ExitCode, FleetrollError, InterruptedError, PausedError, RolloutFailedError, ValidationError } from './errors.js';
export type {
  ErrorCode,
  ErrorCodeInfo,
  ErrorDetails,
  ExitCodeValue,
  FailurePhase,
  FieldIssue,
  FleetrollErrorOptions,
  RolloutFailureDetails,
  VerifiedInstanceDetail,
} from './errors.js';

export { LABELS, systemClock } from './ports.js';
export type {
  AccessLogCounters,
  AccessLogSource,
  AdoptedInstance,
  Clock,
  ContainerHealth,
  FleetLockPort,
  FleetState,
  ImageInfo,
  InstanceInfo,
  InstanceSpec,
  Journal,
  JournalEntry,
  LockHolder,
  LockInfo,
  ProbeTarget,
  Prober,
  RegistryAuth,
  RegistryCredentials,
  RevisionRecord,
  RolloutOutcome,
  Router,
  Runtime,
  StateStore,
  SwitchTimes,
  UpstreamFile,
} from './ports.js';
export { healthOf } from './engine/health.js';
export type { AccessLogOpener, DeployDeps, DeployedInstance, DeployOptions, DeployResult, RecordedSpec } from './engine/types.js';
export type { LoadBalancer } from './engine/traffic.js';
export type { EventSink, RolloutEvent } from './engine/events.js';
export type { FleetHandles, ManagedOptions, ManagedResult } from './engine/session.js';
export type { CliOverrides, Fleet, VariableLookup } from './config/load.js';
export type { SecretRef } from './config/secrets.js';
export type { BlueGreenPlan, CanaryPlan, Plan, PlannedStep, PlannedWave, StrategyPlan } from './core/plan.js';
export type { ResolvedStrategy } from './core/strategy.js';
export type { ContainerConfig } from './core/container.js';
export type { DeployHealthReport } from './core/deployHealth.js';
export type { UpstreamEntry } from './core/upstream.js';
export type { SimulationResult, SimulationTimings } from './sim/simulate.js';
/** A fleet's recorded step costs (FleetState.costs) as simulate's timings: `simulate(f, { timings: calibratedTimings(base, typicalCosts(readCosts(state.costs))) })`. */
export { calibratedTimings } from './sim/simulate.js';
export { readCosts, typicalCosts, type StepCosts, type TypicalCosts } from './core/stepCosts.js';

/**
 * Validates a fleet given as an object exactly as a fleet file would be
 * (`file` names it in messages and anchors its relative paths: templates,
 * env files, a defaults file). Throws ValidationError (exit code 2) listing
 * every problem with its field path.
 */
export function fleetFromObject(raw: unknown, file: string, overrides: CliOverrides = {}, lookup?: VariableLookup): Promise<Fleet> {
  return loadFromObject(raw, file, overrides, lookup);
}

/** The default ports for a fleet (what `deploy` uses): a Docker runtime per host, an nginx router per load balancer, the fleet's prober. */
export const buildDeps: (fleet: Fleet, events?: EventSink) => Promise<DeployDeps> = wiring.buildDeps;
/** The default state store and lock of a fleet: a volume and a lock container on its first host. */
export const fleetHandles: (fleet: Fleet, deps: Pick<DeployDeps, 'runtimes'>) => FleetHandles = wiring.fleetHandles;
/** The default readers of the access logs the fleet's load balancers name (`accessLog:`), for a deploy's health numbers. */
export const accessLogOpeners: (fleet: Fleet, deps: Pick<DeployDeps, 'runtimes'>) => AccessLogOpener[] = wiring.accessLogOpeners;
/** The built-in upstream template (templates/upstream.conf.tmpl), checked as deploy checks it. */
export const readDefaultTemplate: () => Promise<string> = wiring.readDefaultTemplate;

/**
 * The engine's rollout on the ports you pass: no lock, no revision history,
 * no journal (see runManaged for those). Progress goes to `deps.events`.
 */
export function deployWith(fleet: Fleet, deps: DeployDeps, options: DeployOptions = {}): Promise<DeployResult> {
  return engineDeploy(fleet, deps, options);
}

/** A fleet file's path, or a fleet from loadFleet / fleetFromObject. */
export type FleetSource = string | Fleet;

/** What plan and simulate take besides a fleet: a replica count and limits alone, as `fleetroll plan --replicas 4 --max-surge 1`. */
export interface StrategyFlags {
  replicas: number;
  /** e.g. 1 or "25%" (default 25%). */
  maxSurge?: number | string | undefined;
  /** e.g. 0 or "25%" (default 25%). */
  maxUnavailable?: number | string | undefined;
  /** "TerminationStarted" (default) or "TerminationComplete". */
  replacementPolicy?: string | undefined;
}

export interface DeployFleetOptions {
  /** What the CLI's flags override (`--image`, `--max-surge`, ...), for a fleet file's path only; errors name them as those flags. */
  overrides?: Omit<CliOverrides, 'replicas'> | undefined;
  /** Every event of the rollout, as it happens; called synchronously; what it throws is ignored (a listener must not stop a rollout halfway). */
  onEvent?: ((e: RolloutEvent) => void) | undefined;
  /** Aborting it stops the rollout the way Ctrl-C stops `fleetroll deploy`: the step in progress finishes or is undone (InterruptedError). */
  signal?: AbortSignal | undefined;
  /** Recorded on the new instances and in the history (default: `command`). */
  changeCause?: string | undefined;
  /** On failure, roll back to the previous revision (`--auto-rollback`). */
  autoRollback?: boolean | undefined;
  /** Wait this long (ms) for another rollout of the fleet to finish; 0 (default) fails at once (exit code 3). */
  lockWaitMs?: number | undefined;
  /** Copy the image to hosts that lack it (default true; `--no-image-copy`). */
  copyImages?: boolean | undefined;
  /** Recorded with the lock, for `fleetroll lock` to show (default: this process's command line). */
  command?: string | undefined;
}

/**
 * `fleetroll deploy`: the fleet rolled to its spec on the default wiring,
 * under the fleet's lock, recorded as a revision in its history, with the
 * health numbers of its access logs. Resolves with the result once every
 * instance reports the new version; rejects with RolloutFailedError (exit
 * code 1), PausedError (4), InterruptedError (130), or FleetrollError with
 * code E_LOCK_HELD (3, another rollout holds the fleet), ValidationError (2);
 * every code and its exit code: ERROR_CODES, docs/errors.md.
 */
export async function deploy(source: FleetSource, options: DeployFleetOptions = {}): Promise<ManagedResult> {
  const issues: FieldIssue[] = [];
  if ((options.overrides as CliOverrides | undefined)?.replicas !== undefined)
    issues.push({ path: 'overrides/replicas', message: 'is for plan and simulate only (a what-if); set replicas in the fleet file' });
  if (options.lockWaitMs !== undefined && !(Number.isFinite(options.lockWaitMs) && options.lockWaitMs >= 0))
    issues.push({ path: 'lockWaitMs', message: `must be a number of milliseconds, 0 or more, got ${String(options.lockWaitMs)}` });
  if (issues.length > 0) throw new ValidationError(issues);
  const fleet = await fleetOf(source, options.overrides);
  const listener = options.onEvent;
  const events: EventSink | undefined = listener
    ? (e) => {
        try {
          listener(e);
        } catch {
          // The listener's own failure: the rollout goes on.
        }
      }
    : undefined;
  const deps = await wiring.buildDeps(fleet, events);
  const command = options.command ?? `${[basename(process.argv0), ...process.argv.slice(1)].join(' ')} (fleetroll library)`;
  return runManaged(fleet, { ...deps, accessLogs: wiring.accessLogOpeners(fleet, deps) }, wiring.fleetHandles(fleet, deps), {
    command,
    changeCause: options.changeCause,
    autoRollback: options.autoRollback,
    signal: options.signal,
    lockWaitMs: options.lockWaitMs,
    copyImages: options.copyImages !== false,
  });
}

export interface PlanFleetOptions {
  /** For a fleet file's path: what the CLI's flags override (`--replicas`, `--max-surge`, ...). */
  overrides?: CliOverrides | undefined;
}

export interface PlanFleetResult {
  /** The strategy resolved, with where each value came from (`sources`) and what was overridden (`notes`). */
  strategy: ResolvedStrategy;
  /** The waves (RollingUpdate, Recreate), or the steps (BlueGreen, Canary) of the rollout. */
  plan: StrategyPlan;
}

/** `fleetroll plan`: the waves or steps a rollout will take, computed without reaching any host. */
export async function plan(source: FleetSource | StrategyFlags, options: PlanFleetOptions = {}): Promise<PlanFleetResult> {
  const { strategy, fleet } = await strategyOf(source, options.overrides);
  return { strategy, plan: planStrategy(strategy, { prePromotion: fleet?.hooks?.prePromotion !== undefined }) };
}

export interface SimulateFleetOptions {
  /** For a fleet file's path: what the CLI's flags override (`--replicas`, `--max-surge`, ...). */
  overrides?: CliOverrides | undefined;
  /**
   * The simulated durations, ms. Defaults as `fleetroll simulate --costs
   * nominal`: startup 3000, stop 1000, drain and minReady from the fleet
   * (else 2000 and 0), jitter 0, seed 1. The library does not read the
   * fleet's recorded step costs (that needs its first host); pass them here
   * (calibratedTimings with typicalCosts of FleetState.costs) to price with them.
   */
  timings?: Partial<SimulationTimings> | undefined;
  /** Every event of the simulated rollout, with its virtual time (ms from the start). */
  onEvent?: ((e: RolloutEvent, atMs: number) => void) | undefined;
}

/**
 * `fleetroll simulate`: the real engine run on simulated hosts, nginx and
 * probes on a virtual clock. Predicts the duration, waves, peak instances,
 * lowest capacity and mixed-version window; `deploy` is the engine's own result.
 */
export async function simulate(source: FleetSource | StrategyFlags, options: SimulateFleetOptions = {}): Promise<SimulationResult & { deploy: DeployResult }> {
  const { strategy, fleet } = await strategyOf(source, options.overrides);
  const t = options.timings ?? {};
  const timings: SimulationTimings = {
    ...t,
    startupMs: t.startupMs ?? 3000,
    drainMs: t.drainMs ?? Math.round((fleet?.drainSeconds ?? 2) * 1000),
    stopMs: t.stopMs ?? 1000,
    minReadyMs: t.minReadyMs ?? Math.round((fleet?.minReadySeconds ?? 0) * 1000),
    jitter: t.jitter ?? 0,
    seed: t.seed ?? 1,
    // The fleet's own probe period, as the CLI simulates it.
    ...(t.periodMs === undefined && fleet ? { periodMs: fleet.probes.readiness.periodMs } : {}),
  };
  const issues = timingIssues(timings);
  if (issues.length > 0) throw new ValidationError(issues);
  return simulateRollout(strategy, withNginxMode(timings, fleet), options.onEvent ? { events: options.onEvent } : {});
}

export interface ValidateFleetResult {
  fleet: Fleet;
  /** What `fleetroll validate` says beyond the schema: what fleetroll writes into each nginx, where the access logs are. */
  notes: string[];
  /** What it warns of: a template's own load-balancing method under a canary, a header nginx would drop, an analysis with no access log. */
  warnings: string[];
}

/**
 * `fleetroll validate`: the fleet file checked without touching anything.
 * Throws ValidationError (exit code 2) listing every problem with its field
 * path; resolves with the fleet and what validate would print of it.
 */
export async function validate(source: FleetSource, options: { overrides?: CliOverrides | undefined } = {}): Promise<ValidateFleetResult> {
  const fleet = await fleetOf(source, options.overrides);
  const { lines, warnings } = await fleetNotes(fleet);
  return { fleet, notes: lines, warnings };
}

function isFleet(x: unknown): x is Fleet {
  return typeof x === 'object' && x !== null && 'service' in x && 'strategy' in x && 'hosts' in x && 'source' in x;
}

async function fleetOf(source: FleetSource, overrides: CliOverrides | undefined): Promise<Fleet> {
  if (typeof source === 'string') return loadFleet(source, overrides ?? {});
  if (!isFleet(source)) throw new ValidationError([{ path: 'fleet', message: "must be a fleet file's path or a fleet from loadFleet / fleetFromObject" }]);
  if (overrides !== undefined && Object.values(overrides).some((v) => v !== undefined)) {
    throw new ValidationError([
      { path: 'overrides', message: "apply to a fleet file's path only; pass them to loadFleet(file, overrides) for a fleet already loaded" },
    ]);
  }
  return source;
}

/** The strategy plan and simulate work on: from a fleet (file), or from flags alone as the CLI without -f. */
async function strategyOf(source: FleetSource | StrategyFlags, overrides: CliOverrides | undefined): Promise<{ strategy: ResolvedStrategy; fleet?: Fleet }> {
  if (typeof source === 'string' || isFleet(source)) {
    const fleet = await fleetOf(source, overrides);
    return { strategy: fleet.strategy, fleet };
  }
  if (typeof source !== 'object' || source === null || !('replicas' in source)) {
    throw new ValidationError([{ path: 'fleet', message: "must be a fleet file's path, a fleet from loadFleet, or { replicas, maxSurge?, maxUnavailable? }" }]);
  }
  if (overrides !== undefined)
    throw new ValidationError([{ path: 'overrides', message: "apply to a fleet file's path only; give replicas and limits in the first argument" }]);
  const { replicas } = source;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0 || replicas > MAX_REPLICAS) {
    throw new ValidationError([{ path: 'replicas', message: `must be a whole number from 0 to ${MAX_REPLICAS}, got ${JSON.stringify(replicas)}` }]);
  }
  return {
    strategy: loadStrategy({
      replicas,
      cli: { maxSurge: source.maxSurge, maxUnavailable: source.maxUnavailable },
      replacementPolicy: { cli: source.replacementPolicy },
      paths: { cliMaxSurge: 'maxSurge', cliMaxUnavailable: 'maxUnavailable' },
    }),
  };
}

/** The timings `simulate` checks, as its CLI flags are checked: durations 0 or more, jitter a fraction, seed a whole number. */
function timingIssues(t: SimulationTimings): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const durations = ['startupMs', 'drainMs', 'stopMs', 'minReadyMs', 'runMs', 'reloadMs', 'testMs'] as const;
  for (const k of durations) {
    const v = t[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v >= 0))
      issues.push({ path: `timings/${k}`, message: `must be a number of milliseconds, 0 or more, got ${JSON.stringify(v)}` });
  }
  if (t.periodMs !== undefined && !(typeof t.periodMs === 'number' && Number.isFinite(t.periodMs) && t.periodMs > 0))
    issues.push({ path: 'timings/periodMs', message: `must be a number of milliseconds above 0, got ${JSON.stringify(t.periodMs)}` });
  if (!(typeof t.jitter === 'number' && t.jitter >= 0 && t.jitter <= 1))
    issues.push({ path: 'timings/jitter', message: `must be a fraction from 0 to 1, got ${JSON.stringify(t.jitter)}` });
  if (!(Number.isInteger(t.seed) && t.seed >= 0 && t.seed <= 2 ** 31))
    issues.push({ path: 'timings/seed', message: `must be a whole number from 0 to ${2 ** 31}, got ${JSON.stringify(t.seed)}` });
  return issues;
}
