/** The engine's inputs and outputs: ports, options and results of a rollout. */
import type { Fleet } from '../config/load.js';
import type { DeployHealthReport } from '../core/deployHealth.js';
import type { CostSample } from '../core/stepCosts.js';
import type { WebhookPost } from '../core/notify.js';
import type { WindowStats } from '../core/logStats.js';
import type { AccessLogSource, Clock, FleetLockPort, Journal, Prober, RegistryCredentials, Runtime, StateStore } from '../ports.js';
import type { ControllerTiming, ControllerView } from './context.js';
import type { EventSink } from './events.js';
import type { Adopted } from './observe.js';
import type { LoadBalancer } from './traffic.js';

export interface DeployDeps {
  /** One runtime per fleet host, keyed by host name. */
  runtimes: ReadonlyMap<string, Runtime>;
  /** One per load balancer, in the fleet file's order. */
  routers: readonly LoadBalancer[];
  prober: Prober;
  clock?: Clock;
  events?: EventSink;
  /** Suffix for new container names; random in production, fixed in tests. */
  nameSuffix?: () => string;
  /** Records each step; never awaited in front of the step. */
  journal?: Journal;
  /** Asked now and then: true stops the rollout cleanly (exit 4). */
  paused?: () => Promise<boolean>;
  /** BlueGreen: asked during scaleDownDelaySeconds; true switches traffic back to the old set (fleetroll undo). */
  switchBack?: () => Promise<boolean>;
  /** BlueGreen with autoPromote false: asked while the new set waits; true switches (fleetroll promote). */
  promoted?: () => Promise<boolean>;
  /** Canary: asked during the steps; true takes the canary out and removes it (fleetroll abort). */
  aborted?: () => Promise<boolean>;
  /** Says when the fleet state was written (StateStore.watch): the four questions above are asked at once then. */
  stateWrites?: (listener: () => void) => () => void;
  /** The last rollout did not finish (a crash): reload once even if the files look current. */
  recovering?: boolean;
  /** Where to copy a missing image from besides the fleet's hosts: the local engine. */
  imageSource?: Runtime;
  /** Registry credentials for fleets without `registry:` (adapters/registryAuth.ts: docker login's config.json). */
  credentials?: RegistryCredentials;
  /** Containers taken over with `fleetroll adopt`: they carry no fleetroll labels. */
  adopted?: Adopted;
  /** The controller's own timings (simulate and the tests shorten or lengthen them). */
  timing?: Partial<ControllerTiming>;
  /** Told the controller once it exists (tests check invariants on its view after every event). */
  inspect?: (c: ControllerView) => void;
  /** Skip preflight and verification (simulate: its ports have nothing to check). */
  simulated?: boolean;
  /**
   * The access logs of the load balancers that name one (loadBalancers[].nginx.accessLog),
   * opened when the deploy starts to measure its health numbers (engine/health.ts).
   * Undefined: no numbers at all (simulate, rehearse, experiments); empty: the
   * numbers are reported unavailable, with a hint how to get them.
   */
  accessLogs?: readonly AccessLogOpener[];
  /** Per-revision figures from the access logs for [from, to) (set by deploy() from accessLogs; the analysis gate reads it). */
  trafficWindow?: (fromMs: number, toMs: number) => Promise<import('../core/logStats.js').WindowStats | undefined>;
  /**
   * What the fleet's state recorded of a revision (by hash) that its containers
   * do not say: container fields, secret references, the restart marker. A
   * rollback rebuilds the previous revision from it; without it (no state) the
   * rollback can only reuse the failed spec's container fields.
   */
  recordedSpec?: (revision: string) => RecordedSpec | undefined;
  /** Sends the fleet's webhook notifications (notify:, engine/notify.ts); without it managed rollouts notify nobody. */
  webhookPost?: WebhookPost;
}

export type RecordedSpec = Pick<Fleet, 'container' | 'envSources' | 'secretSources' | 'secretDigests' | 'restartedAt'>;

/** Opens one load balancer's access log; the source's first read() starts at the log's current end. */
export interface AccessLogOpener {
  /** For messages when opening fails, e.g. "access log /var/log/nginx/fleetroll.log in container web-nginx". */
  readonly name: string;
  open(): Promise<AccessLogSource>;
}

export interface DeployedInstance {
  name: string;
  host: string;
  address?: string | undefined;
  version: string;
}

export interface DeployResult {
  service: string;
  revision: string;
  version: string;
  /** The build the image was pinned to for this deploy (engine/pin.ts); absent where no host was asked (simulate). */
  digest?: string | undefined;
  durationMs: number;
  /** Decisions that started or terminated instances. */
  waves: number;
  reloads: number;
  instances: DeployedInstance[];
  /** What this rollout's steps cost (core/stepCosts.ts): recorded in the fleet's state, read by simulate and plan. */
  costs?: CostSample[] | undefined;
  /** Blue-green: when the switch's reload, which put the new set in, was in force in every nginx (ISO time), and when it was issued. */
  switchedAt?: string | undefined;
  switchIssuedAt?: string | undefined;
  /**
   * The deploy's health numbers from the load balancers' access logs
   * (core/deployHealth.ts DeployHealthReport): failed and dropped requests
   * in the deploy window, the mixed-version window, the first new
   * instance's error rate; or why they are unavailable. Absent when the
   * caller passed no accessLogs (simulate, rehearse, experiments).
   */
  health?: DeployHealthReport;
}

export interface DeployOptions {
  /** Why this rollout happens; recorded on the new instances. */
  changeCause?: string | undefined;
  /** Roll back to the previous revision on failure, whatever the fleet's onFailure says. */
  autoRollback?: boolean | undefined;
  /** Aborted on SIGINT/SIGTERM: the rollout finishes or undoes its steps in flight and stops cleanly. */
  signal?: AbortSignal | undefined;
  /** Copy the image to hosts that lack it (default true). */
  copyImages?: boolean | undefined;
  /** Preflight has run and the fleet's image is pinned (`prepare` in rollout.ts): the deploy skips both. */
  prepared?: boolean | undefined;
  /** How long that took (ms): counted in the result's durationMs, which covers preflight as it always did. */
  preparedMs?: number | undefined;
  /**
   * When the deploy began for whoever asked for it, on the deploy's clock
   * (Date.now() for a real one: runManaged's start, a runner's call): the step cost `prepare` runs from it to the
   * first decision, so a prediction prices everything before the first wave
   * (the lock, the state, the health watch, preflight, the instances found),
   * not preflight alone. Default: deploy()'s own start (a simulated deploy
   * records no prepare unless given one).
   */
  startedAtMs?: number | undefined;
  /** A health watch started before preflight by the caller (runManaged), so the deploy window covers preflight too. */
  healthWatch?: DeployWatch | undefined;
  /**
   * `fleetroll watch` healing the current revision, not a deploy: an instance
   * found unready is taken out of nginx at once (a deploy keeps one nginx
   * routes to until it is ready or replaced), and the user's deploy hooks do
   * not run.
   */
  heal?: boolean | undefined;
  /**
   * With `heal`: the revisions of the fleet's history. An instance of any
   * other (someone else's, or a state restored from an older backup) is left
   * alone, not replaced as an old one: the watch reports it.
   */
  knownRevisions?: readonly string[] | undefined;
  /**
   * With `heal`: instances of the current revision to replace (the watch
   * found them unready for progressDeadlineSeconds: stuck). Each still
   * unready when the heal begins is terminated like an unready instance a
   * deploy replaces (it is not available, so maxUnavailable does not hold it
   * back), and its replacement starts under maxSurge and maxInstances; one
   * that answers by then is kept.
   */
  replace?: readonly string[] | undefined;
}

/** What deploy() needs of a health watch (engine/health.ts HealthWatch), as a shape, so this module need not import it. */
export interface DeployWatch {
  retarget(revision: string): void;
  events(sink: EventSink | undefined): EventSink;
  window(fromMs: number, toMs: number): Promise<WindowStats | undefined>;
  finish(): Promise<DeployHealthReport>;
}

/** A fleet's state and lock (on its first host), for the managed commands. */
export interface FleetHandles {
  store: StateStore;
  lock: FleetLockPort;
  /** "user@host", recorded with each revision. */
  who: string;
  /** Blue-green: undo's quick way to a rollout waiting out scaleDownDelaySeconds (engine/switchBack.ts). */
  asks?: SwitchBackAsks | undefined;
  /** A deploy's ask that a heal of `fleetroll watch` holding the lock end now (adapters/switchAsks.ts YieldAskContainer). */
  yieldAsks?: YieldAsks | undefined;
}

/**
 * How a deploy (undo, restart, resume) that finds a heal of `fleetroll
 * watch` holding the rollout lock asks it to end: the heal stops as at
 * Ctrl-C (the step in progress finished or undone), releases the lock, and
 * the watch yields to the deploy. An ask is honoured for ASK_FRESH_MS only,
 * so one a killed deploy left stops no heal for good.
 */
export interface YieldAsks {
  ask(): Promise<void>;
  /** An ask made in the last ASK_FRESH_MS. */
  asked(): Promise<boolean>;
  withdraw(): Promise<void>;
  /** Wakes `listener` soon after an ask; returns a function that stops. */
  onAsk(listener: () => void): () => void;
}

/**
 * How `fleetroll undo` asks a blue-green rollout waiting out
 * scaleDownDelaySeconds to switch back, kept out of the state's files (see
 * adapters/switchAsks.ts): the rollout offers, undo asks, the rollout hears it.
 */
export interface SwitchBackAsks {
  /** The rollout (its journal id) waits with the old set and would switch back. */
  offer(rollout: string): Promise<void>;
  /** Offer and ask gone: the rollout ended, or a stale pair before the next one. */
  withdraw(): Promise<void>;
  /** The rollout that offers, if its holder still holds the fleet's lock. */
  offered(): Promise<{ rollout: string; image: string } | undefined>;
  /** `image`: the offer's (any image present on the host will do; it never runs); the lock's when absent. */
  ask(rollout: string, image?: string): Promise<void>;
  asked(rollout: string): Promise<boolean>;
  /** Undo's ask taken back (its rollout ended first, or never answered). */
  unask(): Promise<void>;
  /** Wakes `listener` soon after an ask; returns a function that stops. */
  onAsk(listener: () => void): () => void;
}
