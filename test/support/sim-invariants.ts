/**
 * The invariant checks of a simulated rollout (src/sim), checked after every
 * event of the simulated world: the ones every strategy keeps (`invariants`),
 * and each strategy driver's own (`rollingChecks`, `blueGreenChecks`,
 * `canaryChecks`). test/unit/controller.test.ts runs every strategy shape and
 * failure under `invariants`; test/unit/drivers.test.ts runs each driver's
 * table of scenarios under both.
 */
import { isTerminating } from '../../src/core/decide.js';
import { canaryInstancesFor, type ResolvedStrategy } from '../../src/core/strategy.js';
import { parseUpstreamServers } from '../../src/core/upstream.js';
import type { ControllerView } from '../../src/engine/context.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { LABELS } from '../../src/ports.js';
import type { SimRouter, SimWorld } from '../../src/sim/ports.js';
import { simulateRollout, type SimulationSetup, type SimulationTimings } from '../../src/sim/simulate.js';

export const T: SimulationTimings = { startupMs: 3000, drainMs: 2000, stopMs: 1000, minReadyMs: 0, jitter: 0, seed: 1 };

export interface Checked {
  violations: string[];
  events: number;
}

type TrafficWindow = NonNullable<SimulationSetup['trafficWindow']>;
type WorldHook = (w: SimWorld, clock: { now(): number }) => void;

/**
 * Hooks the invariant checks into a simulation:
 *  - available: servers up in nginx (running, ready) never fall below replicas - maxUnavailable once that held;
 *  - alive: non-terminating instances never exceed replicas + maxSurge (a driver's `maxTotal` if
 *    it has one; once within, or from the start when the fleet before the rollout was), and with
 *    TerminationComplete (or Recreate) no more containers than that are alive at all;
 *  - no container is stopped while any nginx still lists it up;
 *  - a container that was up in an nginx was marked down there at least drainMs before its stop
 *    (`minDrainMs` where a drain may end early: its requests done, the dynamic mode);
 *  - an upstream written never lists as up a container that is not ready, but for one nginx
 *    routed before the rollout and has listed up in every write since (found unready, it
 *    stays in traffic until it is ready again or marked down: it must not empty nginx);
 *  - no analysis window starts before the routing it judges is in force: at its start, every
 *    nginx has a reload in force that routes to the new revision (`gated` wraps the access logs).
 */
export function invariants(
  s: ResolvedStrategy,
  t: SimulationTimings,
  opts: { readyChecks?: boolean; maxTotal?: DriverChecks['maxTotal']; minDrainMs?: number } = {},
): { setup: Pick<SimulationSetup, 'world' | 'inspect'>; checked: Checked; gated: (w: TrafficWindow) => TrafficWindow } {
  const checked: Checked = { violations: [], events: 0 };
  /** Per nginx, each reload's time and how many servers of the new revision it put in force. */
  const newInForce = new Map<string, { at: number; n: number }[]>();
  const gated =
    (inner: TrafficWindow): TrafficWindow =>
    async (from, to) => {
      for (const [lb, reloads] of newInForce) {
        const last = reloads.filter((r) => r.at <= from).at(-1);
        if (!last || last.n === 0)
          checked.violations.push(
            `an analysis window starts at t=${from}, before ${lb} routed to the new revision (${reloads.find((r) => r.n > 0)?.at ?? 'never'})`,
          );
      }
      return inner(from, to);
    };
  let controller: ControllerView | undefined;
  let availableHeld = false;
  let aliveHeld = false;
  const everUp = new Map<string, Set<string>>();
  /** Per nginx, what it routed before the rollout and has listed up in every write since. */
  const upSinceStart = new Map<string, Set<string>>();
  const world = (w: SimWorld, clock: { now(): number }) => {
    for (const r of w.routers) upSinceStart.set(r.name, new Set(r.up));
    const complete = s.type === 'Recreate' || s.replacementPolicy === 'TerminationComplete';
    // A fleet within the bounds before the rollout must stay so from its first event on (a
    // first wave that starts one too many is the first event the checks see).
    aliveHeld = w.alive() <= s.maxTotal;
    w.onEvent = (e) => {
      checked.events++;
      const now = clock.now();
      const fail = (m: string) => checked.violations.push(`t=${now}: ${m}`);
      if (e.kind === 'written') {
        const kept = upSinceStart.get(e.lb.name);
        const up = new Set(e.up());
        if (kept) for (const a of kept) if (!up.has(a)) kept.delete(a);
      }
      if (e.kind === 'written' && opts.readyChecks !== false) {
        for (const a of e.up()) {
          const c = w.byAddress(a);
          if (upSinceStart.get(e.lb.name)?.has(a) && c?.state === 'running') continue;
          if (!c || c.state !== 'running' || c.readyAt > now) fail(`${e.lb.name} written with ${c?.name ?? a} up while it is not ready`);
        }
      }
      if (e.kind === 'reloaded') for (const a of e.lb.up) (everUp.get(e.lb.name) ?? everUp.set(e.lb.name, new Set()).get(e.lb.name)!).add(a);
      if (e.kind === 'reloaded') {
        const n = [...e.lb.up].filter((a) => w.byAddress(a)?.labels[LABELS.version] === 'new').length;
        (newInForce.get(e.lb.name) ?? newInForce.set(e.lb.name, []).get(e.lb.name)!).push({ at: now, n });
      }
      if (e.kind === 'stopping' || (e.kind === 'exited' && !e.c.stopping && controller?.instances().find((i) => i.id === e.c.name)?.phase === 'stopping')) {
        for (const r of w.routers) {
          if (r.up.has(e.c.address)) fail(`${e.c.name} stopped while ${r.name} still routes to it`);
          const wasUp = everUp.get(r.name)?.has(e.c.address) ?? false;
          const since = r.downSince.get(e.c.address);
          const drain = opts.minDrainMs ?? t.drainMs;
          if (wasUp && (since === undefined || now - since < drain))
            fail(
              `${e.c.name} stopped ${since === undefined ? 'without being marked down' : `${now - since} ms after being marked down`} in ${r.name} (drain ${drain} ms)`,
            );
        }
      }
      // Capacity as users see it, per nginx (they reload one after another): up, running and ready.
      if (w.routers.length > 0) {
        const capacities = w.routers.map((r) => {
          let n = 0;
          for (const a of r.up) {
            const c = w.byAddress(a);
            if (c && c.state === 'running' && c.readyAt <= now) n++;
          }
          return n;
        });
        const capacity = Math.min(...capacities);
        if (capacity >= s.minAvailable) availableHeld = true;
        else if (availableHeld && e.kind === 'reloaded') fail(`${capacity} servers in service < minAvailable ${s.minAvailable}`);
      }
      if (controller) {
        const counted = controller.instances().filter((i) => !isTerminating(i.phase) && !i.stopFailed).length;
        const limit = opts.maxTotal?.(counted) ?? s.maxTotal;
        if (counted <= limit && (!complete || w.alive() <= limit)) aliveHeld = true;
        else if (aliveHeld) {
          if (counted > limit) fail(`${counted} instances counted > ${opts.maxTotal ? 'what the driver allows now' : 'replicas + maxSurge'} ${limit}`);
          if (complete && w.alive() > limit) fail(`${w.alive()} containers alive > ${limit} with ${s.replacementPolicy}`);
        }
      }
    };
  };
  return { setup: { world, inspect: (c) => (controller = c) }, checked, gated };
}

/** The setup with its access logs (if any) behind the invariant check of analysis windows. */
export function gatedSetup(setup: Partial<SimulationSetup>, gated: ReturnType<typeof invariants>['gated']): Partial<SimulationSetup> {
  return setup.trafficWindow ? { ...setup, trafficWindow: gated(setup.trafficWindow) } : setup;
}

/** The version label of every running container of the simulated world. */
export function runningVersions(world: SimWorld): (string | undefined)[] {
  return [...world.containers.values()].filter((c) => c.state === 'running').map((c) => c.labels[LABELS.version]);
}

/** An analysis spec as the gate reads it: 10 s intervals, at most 5% errors, one measurement decides. */
export const ANALYSIS = {
  interval: 10,
  minRequests: 20,
  maxErrorRate: 0.05,
  failureLimit: 0,
  onInconclusive: 'pause' as const,
  latencyFloorMs: 10,
  inconclusiveLimit: 0,
  successCount: 1,
};

const stats = (label: string, requests: number, errors: number) => ({
  label,
  startMs: 0,
  endMs: 0,
  requests,
  errors5xx: errors,
  clientClosed: 0,
  connectionFailures: 0,
  retriedFailures: 0,
  attempts: requests,
  errors,
  errorRate: requests ? errors / requests : 0,
  latencyMs: { p50: 5, p95: 9, p99: 12, max: 15 },
});

/** Access-log figures as the gate reads them: the new revision with `errors` of 100 requests, the old one clean. */
export function logsSaying(errors: number): { trafficWindow: TrafficWindow; asked: number[]; world: (w: SimWorld) => void } {
  let world: SimWorld | undefined;
  const asked: number[] = [];
  const trafficWindow = async (from: number, to: number) => {
    asked.push(to - from);
    const fresh = [...world!.containers.values()].find((c) => c.labels[LABELS.version] === 'new')?.labels[LABELS.revision] ?? 'none';
    const at = (x: ReturnType<typeof stats>) => ({ ...x, startMs: from, endMs: to });
    return {
      startMs: from,
      endMs: to,
      byRevision: { [fresh]: at(stats(fresh, 100, errors)), old: at(stats('old', 300, 0)) },
      unattributed: at(stats('', 0, 0)),
    };
  };
  return { trafficWindow, asked, world: (w: SimWorld) => (world = w) };
}

/**
 * A driver's own invariants, beside `invariants`: it chains the world's
 * onEvent (`world`), may read the engine's events (`events`) and wrap the
 * access logs an analysis reads (`gated`), and says what broke.
 */
export interface DriverChecks {
  world: WorldHook;
  events?: (e: RolloutEvent, at: number) => void;
  gated?: (w: TrafficWindow) => TrafficWindow;
  /** The most instances (not terminating) the driver may count now, given how many it counts, in place of replicas + maxSurge. */
  maxTotal?: (counted: number) => number;
  violations: string[];
}

/** Chains `f` after the world's current onEvent. */
function after(w: SimWorld, f: NonNullable<SimWorld['onEvent']>): void {
  const before = w.onEvent;
  w.onEvent = (e) => {
    before?.(e);
    f(e);
  };
}

/** The simulated nginx's main upstream (simulate names them simulated_1, simulated_2, … after nginx 1, 2, …). */
function mainUpstream(lb: SimRouter): string {
  return `simulated_${lb.name.replace(/^nginx /, '')}`;
}

/** The servers up in a file's main upstream, by version, with the canary's share of the weights (%). */
function mainUp(w: SimWorld, lb: SimRouter, text: string | undefined): { old: number; new: number; share: number } {
  const up = parseUpstreamServers(text ?? '', mainUpstream(lb)).filter((x) => !x.down);
  let old = 0;
  let fresh = 0;
  let freshWeight = 0;
  let total = 0;
  for (const x of up) {
    const isNew = w.byAddress(x.address)?.labels[LABELS.version] === 'new';
    const weight = x.weight ?? 1;
    total += weight;
    if (isNew) {
      fresh++;
      freshWeight += weight;
    } else old++;
  }
  return { old, new: fresh, share: total === 0 ? 0 : (100 * freshWeight) / total };
}

/**
 * RollingUpdate and Recreate. Their bounds (never fewer than replicas -
 * maxUnavailable in service, never more than replicas + maxSurge counted)
 * are `invariants`' own; beside them: Recreate never runs an old and a new
 * container at once, and with an analysis gate after the first wave no new
 * container beyond that wave starts before the gate has read its window.
 */
export function rollingChecks(s: ResolvedStrategy, firstWave?: number): DriverChecks {
  const violations: string[] = [];
  let gatePassed = false;
  let started = 0;
  return {
    violations,
    world: (w, clock) =>
      after(w, (e) => {
        if (e.kind !== 'started' || e.c.labels[LABELS.version] !== 'new') return;
        started++;
        const at = `t=${clock.now()}: ${e.c.name} started`;
        if (s.type === 'Recreate') {
          const old = [...w.containers.values()].filter((c) => c.state === 'running' && c.labels[LABELS.version] === 'old');
          if (old.length > 0) violations.push(`${at} while ${old.length} old container(s) still run (Recreate)`);
        }
        if (firstWave !== undefined && !gatePassed && started > firstWave)
          violations.push(`${at}: new container ${started} before the gate after the first wave (${firstWave}) passed`);
      }),
    // The gate decides on the window it reads (one measurement, successCount 1): read, it has passed or failed the rollout.
    gated: (inner) => async (from, to) => {
      const r = await inner(from, to);
      gatePassed = true;
      return r;
    },
  };
}

/**
 * BlueGreen: no new instance is written into the main upstream before the
 * switch; every reload has the main upstream all old or all new, never both;
 * the first that routes to the new set puts the whole of it in (one reload
 * switches); the old set stays whole, in service and running, until the
 * switch is in force in every nginx; and the reload after a switch back
 * routes to the whole old set and no new instance.
 */
export function blueGreenChecks(s: ResolvedStrategy, oldAtStart = s.replicas): DriverChecks {
  const violations: string[] = [];
  let switchDecided = false;
  let backRequested = false;
  const switchedIn = new Set<string>();
  const backIn = new Set<string>();
  return {
    violations,
    events: (e) => {
      if (e.type === 'switch') switchDecided = true;
      if (e.type === 'switchingBack') backRequested = true;
    },
    world: (w, clock) =>
      after(w, (e) => {
        const at = `t=${clock.now()}`;
        if (e.kind === 'written' && !switchDecided) {
          const n = mainUp(w, e.lb, e.lb.file).new;
          if (n > 0) violations.push(`${at}: ${e.lb.name} written with ${n} new instance(s) in the main upstream before the switch`);
        }
        if (e.kind === 'reloaded') {
          const up = mainUp(w, e.lb, e.lb.inForce);
          if (up.old > 0 && up.new > 0) violations.push(`${at}: ${e.lb.name} routes to ${up.old} old and ${up.new} new instance(s) at once`);
          if (up.new > 0 && !switchedIn.has(e.lb.name)) {
            switchedIn.add(e.lb.name);
            if (up.new !== s.replicas || up.old !== 0)
              violations.push(
                `${at}: ${e.lb.name}'s first reload with the new set has ${up.new} of ${s.replicas} new and ${up.old} old up: not one reload switching`,
              );
          }
          if (switchedIn.size === 0 && up.old !== oldAtStart)
            violations.push(`${at}: ${e.lb.name} routes to ${up.old} of the ${oldAtStart} old instances before the switch`);
          if (backRequested && !backIn.has(e.lb.name)) {
            backIn.add(e.lb.name);
            if (up.new !== 0 || up.old !== oldAtStart)
              violations.push(`${at}: ${e.lb.name}'s first reload after the switch back has ${up.old} of ${oldAtStart} old and ${up.new} new up`);
          }
        }
        if ((e.kind === 'stopping' || e.kind === 'exited') && e.c.labels[LABELS.version] === 'old' && switchedIn.size < w.routers.length) {
          violations.push(`${at}: old ${e.c.name} ${e.kind} before the switch was in force in every nginx`);
        }
      }),
  };
}

/**
 * Canary: no more instances than replicas and the canaries of the step's
 * weight, and after the steps never more than replicas + maxSurge or the
 * fewest counted since; the share of the weights nginx serves the canary never exceeds
 * the weight of the step in force when that file was written (the rolling
 * update after the steps aside); while the steps run below 100%, the stable
 * set stays whole in the main upstream; after an abort no file routes to a
 * canary; and no analysis window starts before the routing it judges (the
 * step's weight, with a canary up) is in force in every nginx.
 */
export function canaryChecks(s: ResolvedStrategy): DriverChecks {
  const violations: string[] = [];
  // canaryWeights finds weights within half a percent of the weight asked.
  const TOLERANCE = 0.5;
  let weight = 0;
  let final = false;
  let aborted = false;
  /** Per nginx, the weight allowed by the file written last and the one in force; -1: no limit (the rolling update). */
  const writtenAllows = new Map<string, number>();
  const reloads = new Map<string, { at: number; share: number; canaries: number }[]>();
  let world: SimWorld | undefined;
  let lowestSinceFinal = Number.POSITIVE_INFINITY;
  return {
    violations,
    // The steps surge by the canaries their weight needs, beside every stable instance; the rolling
    // update after them starts nothing while that leaves it above replicas + maxSurge.
    maxTotal: (counted) => {
      if (!final) return s.replicas + canaryInstancesFor(weight, s.replicas, s.type === 'Canary' ? s.canary.canaryReplicas : undefined);
      lowestSinceFinal = Math.min(lowestSinceFinal, counted);
      return Math.max(s.maxTotal, lowestSinceFinal);
    },
    events: (e) => {
      if (e.type === 'canaryStep' && e.kind === 'setWeight') weight = e.weight;
      if (e.type === 'canaryDone') final = true;
      if (e.type === 'canaryAborted') aborted = true;
    },
    gated: (inner) => async (from, to) => {
      for (const lb of world?.routers ?? []) {
        const last = (reloads.get(lb.name) ?? []).filter((r) => r.at <= from).at(-1);
        if (!last || last.canaries === 0 || Math.abs(last.share - weight) > TOLERANCE) {
          violations.push(
            `an analysis window starts at t=${from} while ${lb.name} serves ${last ? `${last.share.toFixed(1)}% to ${last.canaries} canary instance(s)` : 'the old config'}, not the step's ${weight}%`,
          );
        }
      }
      return inner(from, to);
    },
    world: (w, clock) => {
      world = w;
      after(w, (e) => {
        const at = `t=${clock.now()}`;
        if (e.kind === 'written') writtenAllows.set(e.lb.name, aborted ? 0 : final ? -1 : weight);
        if (e.kind !== 'reloaded') return;
        const allowed = writtenAllows.get(e.lb.name) ?? 0;
        const up = mainUp(w, e.lb, e.lb.inForce);
        (reloads.get(e.lb.name) ?? reloads.set(e.lb.name, []).get(e.lb.name)!).push({ at: clock.now(), share: up.share, canaries: up.new });
        if (allowed < 0) return;
        if (up.share > allowed + TOLERANCE)
          violations.push(`${at}: ${e.lb.name} serves the canary ${up.share.toFixed(1)}%, its step allows ${allowed}%${aborted ? ' (aborted)' : ''}`);
        if (allowed < 100 && up.old !== s.replicas)
          violations.push(`${at}: ${e.lb.name} routes to ${up.old} of the ${s.replicas} stable instances while the steps run at ${allowed}%`);
      });
    },
  };
}

/**
 * One rollout on the simulated ports with `invariants` and the driver's
 * checks after every event; `more` adds to the setup and may read the
 * virtual clock (to abort or undo at a time). Returns the outcome (the
 * result, or what it threw), the world, every violation and the events seen.
 */
export async function checkedRun(s: ResolvedStrategy, t: SimulationTimings, more: (now: () => number) => Partial<SimulationSetup>, driver?: DriverChecks) {
  let clock: { now(): number } | undefined;
  let world: SimWorld | undefined;
  const setup = more(() => clock!.now());
  const inv = invariants(s, t, { readyChecks: !setup.faults?.crashAfterReadyMs, maxTotal: driver?.maxTotal });
  const traffic = setup.trafficWindow ? inv.gated(driver?.gated ? driver.gated(setup.trafficWindow) : setup.trafficWindow) : setup.trafficWindow;
  const outcome = await simulateRollout(s, t, {
    ...setup,
    ...inv.setup,
    ...(traffic !== undefined ? { trafficWindow: traffic } : {}),
    ...(driver?.events || setup.events
      ? {
          events: (e: RolloutEvent, at: number) => {
            driver?.events?.(e, at);
            setup.events?.(e, at);
          },
        }
      : {}),
    world: (w, c) => {
      inv.setup.world?.(w, c);
      driver?.world(w, c);
      clock = c;
      world = w;
      setup.world?.(w, c);
    },
  }).then(
    (x) => x,
    (e: unknown) => e,
  );
  return { outcome, world: world!, violations: [...inv.checked.violations, ...(driver?.violations ?? [])], events: inv.checked.events };
}
