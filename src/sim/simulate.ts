/**
 * `fleetroll simulate`: the real rollout engine (engine/rollout.ts and its
 * controller) run against simulated hosts, nginx and probes on a virtual
 * clock. There is no second model of the rollout: what simulate predicts is
 * what the engine does, given the timings.
 */
import type { Fleet } from '../config/load.js';
import { seededRandom } from '../core/random.js';
import type { TypicalCosts } from '../core/stepCosts.js';
import type { PlaceCosts } from '../core/placeCosts.js';
import type { ResolvedStrategy } from '../core/strategy.js';
import { renderUpstream, type UpstreamEntry } from '../core/upstream.js';
import { deploy, type DeployDeps, type DeployResult } from '../engine/rollout.js';
import { revisionOf } from '../engine/revision.js';
import { IDLE_POLL_MS } from '../engine/idleDrain.js';
import type { RolloutEvent } from '../engine/events.js';
import { LABELS } from '../ports.js';
import { VirtualClock } from './clock.js';
import { SimProber, SimRouter, SimWorld, type HostSimTimings, type LoadBalancerSimTimings, type SimFaults } from './ports.js';
import { SimRuntime } from './runtime.js';
import { OLD_REVISION, seedFleet, type FleetAtStart } from './fleetAtStart.js';

export interface SimulationTimings {
  /** From container start to readiness passing, ms. */
  startupMs: number;
  /** Time an instance stays marked down before it is stopped, ms. */
  drainMs: number;
  /** Time `docker stop` takes (graceful shutdown), ms. */
  stopMs: number;
  /** minReadySeconds in ms. */
  minReadyMs: number;
  /** 0..1: relative spread of startup and stop times. */
  jitter: number;
  seed: number;
  /** docker create + start, ms (default 0). */
  runMs?: number | undefined;
  /** Added to a create + start per other start in flight on its host, ms (default 0). */
  runQueuedMs?: number | undefined;
  /** An nginx reload until it is in force, ms (default 0). */
  reloadMs?: number | undefined;
  /** Upstream write + `nginx -t`, ms (default 0). */
  testMs?: number | undefined;
  /** Readiness probe period, ms (default 250, the fleet default). */
  periodMs?: number | undefined;
  /** What a deploy costs outside the controller (preflight, image checks, the final version check, the health report), added to the duration, ms (default 0). */
  fixedMs?: number | undefined;
  /**
   * The dynamic nginx mode (withNginxMode): changes are reload-free, and a
   * drain ends once the requests in flight on the drained instance are done,
   * this long after its mark-down is in force (drainMs at most). Undefined:
   * reload mode, every drain takes drainMs.
   */
  idleDrainMs?: number | undefined;
  /** Added to a warm-up per other instance warming up beside it on its host, ms (default 0). */
  startupQueuedMs?: number | undefined;
  /** Per host (by the fleet's names, SimulationSetup.hostNames): its own figures over the ones above. */
  hosts?: Record<string, HostSimTimings> | undefined;
  /** Per load balancer (SimulationSetup.loadBalancerNames): its own reload. */
  loadBalancers?: Record<string, LoadBalancerSimTimings> | undefined;
  /** Added to a reload for each create + start in flight anywhere when it begins, ms (default 0). */
  reloadQueuedMs?: number | undefined;
}

/**
 * A drain in the dynamic mode, when nothing better is known: what one took on
 * this machine under load (79-244 ms, ~200 GET/s and 40 ms POSTs, in the
 * dynamic-mode experiment). A fleet's recorded drains replace it
 * (calibratedTimings).
 */
export const NOMINAL_IDLE_DRAIN_MS = 200;

/** `t` for this fleet's nginx: with idleDrainMs when every load balancer is in the dynamic mode (a reload-mode one keeps each drain to drainMs). */
export function withNginxMode(t: SimulationTimings, fleet: Pick<Fleet, 'loadBalancers'> | undefined): SimulationTimings {
  const lbs = fleet?.loadBalancers ?? [];
  if (lbs.length === 0 || !lbs.every((lb) => lb.nginx.mode === 'dynamic')) return t;
  return { ...t, idleDrainMs: t.idleDrainMs ?? NOMINAL_IDLE_DRAIN_MS };
}

export interface SimulationResult {
  /** The strategy simulated (its type decides what peakInstances is made of). */
  strategyType: ResolvedStrategy['type'];
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  replacementPolicy: string;
  durationMs: number;
  /** Decisions that started or terminated instances. */
  waves: number;
  /** Most containers alive at once (terminating ones included). */
  peakInstances: number;
  /** Fewest servers up in nginx at any time. */
  lowestCapacity: number;
  mixedVersionWindowMs: number;
  reloads: number;
  timings: SimulationTimings;
}

export interface SimulationSetup {
  /** Hosts to spread the fleet over (default 1). */
  hosts?: number | undefined;
  /** The hosts by name, in the fleet's order (instead of `hosts`): a fleet's own, so each is priced with its own costs (SimulationTimings.hosts). */
  hostNames?: readonly string[] | undefined;
  /** The load balancers by name (instead of `loadBalancers`), for SimulationTimings.loadBalancers. */
  loadBalancerNames?: readonly string[] | undefined;
  /** maxInstances of each host, in order (default none). */
  maxInstances?: readonly (number | undefined)[] | undefined;
  /** Load balancers (default 1). */
  loadBalancers?: number | undefined;
  faults?: SimFaults | undefined;
  /** Every event of the engine, with the virtual time. */
  events?: ((e: RolloutEvent, at: number) => void) | undefined;
  /** The simulated world, before the rollout starts: tests hook invariant checks here. */
  world?: ((w: SimWorld, clock: VirtualClock) => void) | undefined;
  progressDeadlineSeconds?: number | undefined;
  /** The monitor window (default minReadySeconds, at least 5 s) and how many crashes in it are replaced. */
  monitorSeconds?: number | undefined;
  maxFailures?: number | undefined;
  hooks?: Fleet['hooks'];
  /** What a failed rollout does (default pause). */
  onFailure?: Fleet['onFailure'];
  /** The fleet's analysis: block (RollingUpdate: the gate after the first wave). */
  analysis?: Fleet['analysis'];
  /** BlueGreen: answers fleetroll undo's question during scaleDownDelaySeconds. */
  switchBack?: () => Promise<boolean>;
  /** BlueGreen with autoPromote false: answers whether fleetroll promote was run. */
  promoted?: () => Promise<boolean>;
  /** Canary: answers whether fleetroll abort was run. */
  aborted?: () => Promise<boolean>;
  /** Says when the fleet state was written (DeployDeps.stateWrites): the questions above are asked at once. */
  stateWrites?: DeployDeps['stateWrites'];
  /** The controller's poll intervals, for tests (default DEFAULT_TIMING, with exits looked for rarely). */
  timing?: Partial<import('../engine/context.js').ControllerTiming> | undefined;
  /** What the access logs would say per revision for [from, to) (the analysis gate reads it); default: the new version as healthy as the old; null: no access log. */
  trafficWindow?: DeployDeps['trafficWindow'] | null;
  signal?: AbortSignal | undefined;
  paused?: (() => Promise<boolean>) | undefined;
  inspect?: ((c: import('../engine/context.js').ControllerView) => void) | undefined;
  /** Replicas running before the rollout (default: the strategy's replicas). */
  initialReplicas?: number | undefined;
  /**
   * The dynamic nginx mode: every simulated nginx counts the requests in
   * flight on a server marked down, this many after it has been down for
   * `downForMs` (Router.inFlight), so a drain can end when they do.
   */
  inFlight?: ((address: string, downForMs: number) => number) | undefined;
  /** The dynamic nginx mode: every simulated nginx's changes are reload-free (Router.reloadFree). */
  reloadFree?: boolean | undefined;
  /** The fleet found at the start, instance by instance (sim/fleetAtStart.ts); default: initialReplicas of the old revision, ready and in nginx. */
  start?: FleetAtStart | undefined;
  /** Run the controller as `fleetroll watch` heals (DeployOptions.heal), knowing the current and the old revision as the fleet's. */
  heal?: boolean | undefined;
  /** With `heal`: instances (container names) the watch found stuck, to replace (DeployOptions.replace). */
  replace?: readonly string[] | undefined;
}

const TEMPLATE = 'upstream {{upstream}} {\n{{servers}}\n}\n';

/** A fleet for the simulation: the strategy and timings given, nothing else that matters. */
function fleetOf(s: ResolvedStrategy, t: SimulationTimings, setup: SimulationSetup = {}): Fleet {
  const names = setup.hostNames ?? Array.from({ length: setup.hosts ?? 1 }, (_, i) => `h${i + 1}`);
  const hosts = names.map((name, i) => ({
    name,
    docker: 'unix:///simulated',
    ...(setup.maxInstances?.[i] !== undefined ? { maxInstances: setup.maxInstances[i] } : {}),
  }));
  const fleet = {
    service: 'simulated',
    image: 'simulated:new',
    version: 'new',
    replicas: s.replicas,
    port: 8080,
    env: {},
    hosts,
    probes: { readiness: { path: '/health/ready', periodMs: t.periodMs ?? 250, timeoutMs: 1000 }, version: { path: '/api/version' } },
    group: false,
    hooks: setup.hooks,
    analysis: setup.analysis,
    loadBalancers: [],
    minReadySeconds: t.minReadyMs / 1000,
    progressDeadlineSeconds: setup.progressDeadlineSeconds ?? 3600 * 24 * 365,
    ...(setup.monitorSeconds !== undefined ? { monitorSeconds: setup.monitorSeconds } : {}),
    ...(setup.maxFailures !== undefined ? { maxFailures: setup.maxFailures } : {}),
    drainSeconds: t.drainMs / 1000,
    terminationGracePeriodSeconds: 30,
    revisionHistoryLimit: 10,
    hostParallelism: 8,
    onFailure: setup.onFailure ?? 'pause',
    strategy: s,
    timingSources: {},
    source: { file: '(simulated)' },
  };
  return fleet as unknown as Fleet;
}

/**
 * What the access logs say in a simulation unless a test says otherwise: the
 * new version is as healthy as the old, with plenty of traffic. An analysis
 * then costs its measurements' time and passes (simulate predicts durations,
 * not verdicts).
 */
function healthyTraffic(revision: string): NonNullable<DeployDeps['trafficWindow']> {
  return async (startMs, endMs) => {
    const s = (label: string, requests: number) => ({
      label,
      startMs,
      endMs,
      requests,
      errors5xx: 0,
      clientClosed: 0,
      connectionFailures: 0,
      retriedFailures: 0,
      attempts: requests,
      errors: 0,
      errorRate: 0,
      latencyMs: { p50: 5, p95: 9, p99: 12, max: 15 },
    });
    return { startMs, endMs, byRevision: { [revision]: s(revision, 1_000_000), [OLD_REVISION]: s(OLD_REVISION, 1_000_000) }, unattributed: s('', 0) };
  };
}

/** A simulated world with a fleet in it, and the engine's ports over it, before any rollout (simulateRollout runs one; tests may drive the watch). */
export interface SimulatedFleet {
  clock: VirtualClock;
  world: SimWorld;
  fleet: Fleet;
  /** The revision the engine deploys or heals. */
  revision: string;
  /** Every revision of the simulated fleet's history: the current and the old one. */
  knownRevisions: readonly string[];
  /** The servers every nginx lists at the start. */
  servers: readonly UpstreamEntry[];
  /** Whatever the engine is handed: runtimes, routers, prober and clock over the world, and the setup's questions and hooks. */
  deps: DeployDeps;
}

/** Builds the world as it is before the rollout (setup.start, else the old fleet) and the deps over it; setup.world is not called. */
export function simulatedFleet(s: ResolvedStrategy, t: SimulationTimings, setup: SimulationSetup = {}): SimulatedFleet {
  const clock = new VirtualClock();
  const world = new SimWorld(
    clock,
    {
      startupMs: t.startupMs,
      stopMs: t.stopMs,
      runMs: t.runMs ?? 0,
      runQueuedMs: t.runQueuedMs ?? 0,
      reloadMs: t.reloadMs ?? 0,
      testMs: t.testMs ?? 0,
      jitter: t.jitter,
      startupQueuedMs: t.startupQueuedMs,
      hosts: t.hosts,
      loadBalancers: t.loadBalancers,
      reloadQueuedMs: t.reloadQueuedMs,
    },
    seededRandom(t.seed),
    setup.faults ?? {},
  );
  const fleet = fleetOf(s, t, setup);
  const revision = revisionOf(fleet);
  const runtimes = new Map(fleet.hosts.map((h) => [h.name, new SimRuntime(h.name, world)] as const));
  const servers = seedFleet(world, fleet, revision, setup.start, setup.initialReplicas ?? s.replicas, setup.faults?.oldUnreadyUntilMs);
  const routers = Array.from({ length: setup.loadBalancerNames?.length ?? setup.loadBalancers ?? 1 }, (_, i) => {
    const upstream = `simulated_${i + 1}`;
    const content = renderUpstream(TEMPLATE, { service: fleet.service, upstream, servers });
    // The dynamic mode: a request in flight on each drained server until idleDrainMs after its mark-down (unless a test counts).
    const idle = t.idleDrainMs;
    const count = setup.inFlight ?? (idle !== undefined ? (_: string, downForMs: number) => (downForMs < idle ? 1 : 0) : undefined);
    const router = new SimRouter(setup.loadBalancerNames?.[i] ?? `nginx ${i + 1}`, world, content, {
      reloadFree: setup.reloadFree === true || idle !== undefined,
      inFlight: count,
    });
    return { router, template: TEMPLATE, upstream };
  });
  const deps: DeployDeps = {
    runtimes,
    routers,
    prober: new SimProber(world),
    clock,
    events: setup.events ? (e) => setup.events?.(e, clock.now()) : undefined,
    nameSuffix: (() => {
      let n = 0;
      return () => String(++n).padStart(5, '0');
    })(),
    simulated: true,
    paused: setup.paused,
    ...(setup.switchBack ? { switchBack: setup.switchBack } : {}),
    ...(setup.promoted ? { promoted: setup.promoted } : {}),
    ...(setup.aborted ? { aborted: setup.aborted } : {}),
    ...(setup.stateWrites ? { stateWrites: setup.stateWrites } : {}),
    ...(setup.trafficWindow !== null ? { trafficWindow: setup.trafficWindow ?? healthyTraffic(revision) } : {}),
    ...(setup.inspect ? { inspect: setup.inspect } : {}),
    // Nothing crashes unless a test says so: look for exits now and then only. A look lists
    // the whole fleet, and a 1/0 rollout lasts in proportion to it: so the larger the fleet,
    // the rarer (a look finds nothing without faults, so it changes no result).
    timing: { observeMs: setup.faults ? 500 : Math.max(60_000, 60 * s.replicas), ...setup.timing },
  };
  return { clock, world, fleet, revision, knownRevisions: [OLD_REVISION, revision], servers, deps };
}

export async function simulateRollout(
  s: ResolvedStrategy,
  t: SimulationTimings,
  setup: SimulationSetup = {},
): Promise<SimulationResult & { deploy: DeployResult }> {
  const { clock, world, fleet, revision, knownRevisions, servers, deps } = simulatedFleet(s, t, setup);

  // What users see: servers up in nginx, and when each version served.
  let lowest = Number.POSITIVE_INFINITY;
  let firstNewUp: number | undefined;
  let oldGoneAt: number | undefined;
  const watch = (setupWorld: SimWorld) => {
    const user = setupWorld.onEvent;
    setupWorld.onEvent = (e) => {
      user?.(e);
      if (e.kind !== 'reloaded') return;
      const up = e.lb.up;
      lowest = Math.min(lowest, up.size);
      // Names sort old before new in the upstream, so both answers come early; stop as soon as they are known.
      let anyOld = false;
      let anyNew = firstNewUp !== undefined;
      for (const a of up) {
        if (anyOld && anyNew) break;
        const c = world.byAddress(a);
        if (!c) continue;
        if (c.labels[LABELS.revision] === revision) anyNew = true;
        else anyOld = true;
      }
      if (anyNew && firstNewUp === undefined) firstNewUp = clock.now();
      if (!anyOld && oldGoneAt === undefined) oldGoneAt = clock.now();
    };
  };
  setup.world?.(world, clock);
  watch(world);
  lowest = Math.min(lowest, servers.length);

  // A heal: the controller of a deploy, told which revisions are the fleet's (it leaves the others alone).
  const result = await clock.run(deploy(fleet, deps, { signal: setup.signal, ...(setup.heal ? { heal: true, knownRevisions, replace: setup.replace } : {}) }));
  // From the first new server in nginx to the reload that took the last old one out.
  const mixed = firstNewUp === undefined || oldGoneAt === undefined ? 0 : Math.max(0, oldGoneAt - firstNewUp);
  return {
    strategyType: s.type,
    replicas: s.replicas,
    maxSurge: s.maxSurge,
    maxUnavailable: s.maxUnavailable,
    replacementPolicy: s.replacementPolicy,
    durationMs: clock.now() + (t.fixedMs ?? 0),
    waves: result.waves,
    peakInstances: world.peakAlive,
    lowestCapacity: lowest === Number.POSITIVE_INFINITY ? 0 : lowest,
    mixedVersionWindowMs: mixed,
    reloads: world.routers.reduce((a, r) => a + r.reloads, 0),
    timings: t,
    deploy: result,
  };
}

/**
 * Timings priced with a fleet's recorded step costs (core/stepCosts.ts)
 * where it has them, `base` elsewhere. The measured start to ready includes
 * the wait for the next probe, which the simulated probe loop adds itself:
 * half a period is taken off. A load-balancer change is priced whole as the
 * reload (its write and `nginx -t` included). With `places`, each host and
 * load balancer is priced with its own figures.
 */
export function calibratedTimings(base: SimulationTimings, c: TypicalCosts, places?: PlaceCosts): SimulationTimings {
  const period = base.periodMs ?? 250;
  const warmUp = (readyMs: number | undefined) => (readyMs !== undefined ? { startupMs: Math.max(0, readyMs - Math.round(period / 2)) } : {});
  const defined = <T extends object>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
  const byPlace = places
    ? {
        hosts: Object.fromEntries(
          Object.entries(places.hosts).map(([h, x]) => [
            h,
            defined({ runMs: x.runMs, runQueuedMs: x.runQueuedMs, ...warmUp(x.readyMs), startupQueuedMs: x.readyQueuedMs, stopMs: x.stopMs }),
          ]),
        ),
        loadBalancers: Object.fromEntries(
          Object.entries(places.loadBalancers).flatMap(([lb, x]) =>
            x.changeMs !== undefined ? [[lb, { reloadMs: x.changeMs, ...(x.changeQueuedMs !== undefined ? { reloadQueuedMs: x.changeQueuedMs } : {}) }]] : [],
          ),
        ),
      }
    : {};
  return {
    ...base,
    ...(c.runMs !== undefined ? { runMs: c.runMs } : {}),
    ...(c.runQueuedMs !== undefined ? { runQueuedMs: c.runQueuedMs } : {}),
    ...warmUp(c.readyMs),
    ...(c.readyQueuedMs !== undefined ? { startupQueuedMs: c.readyQueuedMs } : {}),
    ...(c.stopMs !== undefined ? { stopMs: c.stopMs } : {}),
    ...(c.changeMs !== undefined ? { reloadMs: c.changeMs, testMs: 0 } : {}),
    ...(c.changeQueuedMs !== undefined ? { reloadQueuedMs: c.changeQueuedMs } : {}),
    ...(c.prepareMs !== undefined || c.verifyMs !== undefined || c.reportMs !== undefined
      ? { fixedMs: (c.prepareMs ?? 0) + (c.verifyMs ?? 0) + (c.reportMs ?? 0) }
      : {}),
    // A recorded idle drain includes the wait for the next count, which the simulated poll adds itself: half a poll is taken off.
    ...(c.drainMs !== undefined && base.idleDrainMs !== undefined ? { idleDrainMs: Math.max(0, c.drainMs - Math.round(IDLE_POLL_MS / 2)) } : {}),
    ...byPlace,
  };
}
