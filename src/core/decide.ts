/**
 * The controller's decision: given every instance as observed now, what may
 * happen now. The engine (engine/controller.ts) calls it after every event;
 * simulate runs the same engine on a virtual clock; plan uses the same
 * arithmetic (rolling.ts) wave by wave.
 *
 * An instance's phase:
 *
 *   starting → unready → ready → available          (a new instance coming up)
 *   draining → stopping → (gone)                    (an instance being terminated)
 *   failed                                          (its container exited)
 *
 * A terminating instance is `draining` from the moment it is chosen: it is
 * out of every revision's count and never available again. It is marked down
 * in every nginx; once no nginx routes to it any more the engine sets its
 * `stopAt` (now + drainSeconds when it was routed, now when it never was), and
 * at `stopAt` this function says to stop it.
 *
 * Counting, as the Kubernetes deployment controller does (rolling.ts):
 *  - starts while  counted < replicas + maxSurge  and  new < replicas, where
 *    `counted` holds every non-terminating instance, plus the terminating ones
 *    under replacementPolicy TerminationComplete (and always with Recreate);
 *  - terminations while  available - terminated >= replicas - maxUnavailable,
 *    with unready new instances counted against the budget and not-available
 *    old instances chosen first.
 *
 * Worked examples (replicas 6, all old and available at first):
 *
 *   maxSurge 0, maxUnavailable 2, TerminationStarted, t = 0:
 *     terminate 2 old (6 - 2 = 4 >= minAvailable 4); they no longer count, so
 *     counted = 4 < 6: start 2 at once. Decision: terminate 2, start 2.
 *   Same with TerminationComplete:
 *     terminate 2 old; counted = 4 + 2 terminating = 6: start nothing yet.
 *     When both are gone (after drain and stop), counted = 4: start 2.
 *   maxSurge 1, maxUnavailable 0, one new instance ready but not available
 *   (minReadySeconds not yet passed):
 *     counted = 7 = maxTotal: no start; available = 6 old, budget
 *     6 - 6 = 0: no termination. Decision: nothing; wait for `available`.
 *   Recreate:
 *     terminate all 6 at once; start none until no old instance is alive.
 *
 * A hold narrows the decision without changing the arithmetic: `all` (pause,
 * interrupt, a running postWave hook) allows no new start or termination;
 * `{ maxNew, minOld }` (a postWave boundary not yet passed) allows at most
 * maxNew non-terminating new instances and at least minOld old ones.
 *
 * PURE: no I/O, no clock (the time is an input), no randomness.
 */
import { compareForStop, countFleet, pickForStop, type ObservedInstance } from './fleet.js';
import { placeMany, type HostLoad, type HostSlot } from './placement.js';
import { isComplete, planWave, type FleetCounts } from './rolling.js';
import type { ResolvedStrategy } from './strategy.js';

export type Phase = 'starting' | 'unready' | 'ready' | 'available' | 'failed' | 'draining' | 'stopping';

export interface InstanceView {
  id: string;
  host: string;
  revision: string;
  /** Creation time in ms: orders revisions, oldest first. */
  created: number;
  phase: Phase;
  /** Some nginx may send it traffic: it is listed up in a config in force or being written. */
  routed: boolean;
  /** Draining: when it may be stopped; undefined while an nginx may still route to it. */
  stopAt?: number | undefined;
}

export type Hold = 'all' | { maxNew: number; minOld: number };

export interface DecideContext {
  /** The desired revision. */
  revision: string;
  replicas: number;
  strategy: ResolvedStrategy;
  now: number;
  hosts: readonly HostSlot[];
  hold?: Hold | undefined;
}

export interface Decision {
  /** One host per new instance to start now. */
  start: string[];
  /** Instances to begin terminating (mark down), least useful first. */
  terminate: string[];
  /** Draining instances no nginx routes to whose drain is over: stop them now. */
  stop: string[];
  /** The earliest future `stopAt`: when to decide again if nothing else happens. */
  wakeAt?: number | undefined;
  /** New instances the strategy allows now but no host has room for (maxInstances). */
  unplaced: number;
  /** Every instance is of the new revision and available, and none is terminating. */
  complete: boolean;
  /** The counts the decision was made on (for events and tests). */
  counts: FleetCounts;
}

export function isTerminating(p: Phase): boolean {
  return p === 'draining' || p === 'stopping';
}

/** Whether the policy keeps terminating instances in the surge count. */
export function holdsTerminating(s: ResolvedStrategy): boolean {
  return s.type === 'Recreate' || s.replacementPolicy === 'TerminationComplete';
}

function observed(i: InstanceView): ObservedInstance {
  const ready = i.phase === 'ready' || i.phase === 'available';
  return {
    id: i.id,
    revision: i.revision,
    running: i.phase !== 'failed' && i.phase !== 'starting',
    ready,
    available: i.phase === 'available',
    created: i.created,
    host: i.host,
  };
}

/**
 * The fleet as decide() reads it. `listSnapshot` computes each answer from a
 * list (tests, small fleets); the engine keeps the same answers up to date as
 * phases change (engine/fleetView.ts), so a decision costs no pass over a
 * 10,000-instance fleet.
 */
export interface FleetSnapshot {
  /** The counts of rolling.ts: non-terminating instances per revision, plus the terminating ones when `hold`. */
  counts(revision: string, replicas: number, hold: boolean): FleetCounts;
  /** Instances being terminated (draining or stopping). */
  terminating(): Iterable<InstanceView>;
  /**
   * Optional: how many are terminating, and the draining ones alone, in the
   * order `terminating()` gives them. A stop waits its turn in the host's
   * queue (8 at a time), so in a large rollout most terminating instances
   * are stopping for long, and a pass over all of them on every decision
   * cost 13 million visits in a 10,000-replica simulate, 88% of them stopping.
   */
  terminatingCount?(): number;
  draining?(): ReadonlySet<InstanceView>;
  /** Non-terminating instances of a revision: the candidates to terminate. */
  candidates(revision: string): Iterable<InstanceView>;
  /** Per host: containers alive (any revision, terminating included), the terminating ones, and non-terminating instances of `revision`. */
  loads(revision: string): Map<string, HostLoad>;
  /**
   * Optional: the first n candidates of a revision in pickForStop's order
   * when that is the plain order (compareViewsForStop: the revision is on one
   * host), kept sorted so a termination costs no sort of the fleet;
   * undefined otherwise.
   */
  leastUseful?(revision: string, n: number): InstanceView[] | undefined;
}

/** pickForStop's plain order (one host) for instances as decide() sees them. */
export function compareViewsForStop(a: InstanceView, b: InstanceView): number {
  return compareForStop(observed(a), observed(b));
}

export function listSnapshot(instances: readonly InstanceView[]): FleetSnapshot {
  return {
    counts: (revision, replicas, hold) =>
      countFleet(
        { revision, replicas },
        instances.map((i) => ({ revision: i.revision, created: i.created, available: i.phase === 'available', terminating: isTerminating(i.phase) })),
        hold,
      ),
    terminating: () => instances.filter((i) => isTerminating(i.phase)),
    candidates: (revision) => instances.filter((i) => i.revision === revision && !isTerminating(i.phase)),
    loads: (revision) => {
      const load = new Map<string, HostLoad>();
      for (const i of instances) {
        const l = load.get(i.host) ?? { total: 0, fresh: 0, terminating: 0 };
        l.total++;
        if (isTerminating(i.phase)) l.terminating = (l.terminating ?? 0) + 1;
        else if (i.revision === revision) l.fresh++;
        load.set(i.host, l);
      }
      return load;
    },
  };
}

export function decide(fleet: FleetSnapshot | readonly InstanceView[], ctx: DecideContext): Decision {
  const view = Array.isArray(fleet) ? listSnapshot(fleet as readonly InstanceView[]) : (fleet as FleetSnapshot);
  const s = ctx.strategy;
  const hold = holdsTerminating(s);
  const counts = view.counts(ctx.revision, ctx.replicas, hold);
  let terminatingNow = 0;
  const stop: string[] = [];
  let wakeAt: number | undefined;
  const look = (i: InstanceView) => {
    if (i.phase !== 'draining' || i.routed || i.stopAt === undefined) return;
    if (i.stopAt <= ctx.now) stop.push(i.id);
    else if (wakeAt === undefined || i.stopAt < wakeAt) wakeAt = i.stopAt;
  };
  const draining = view.draining?.();
  if (draining) {
    // forEach, not for-of: the set reaches here through the interface, and for-of over it allocated an iterator result per instance (17 MiB a 10,000-replica simulate).
    draining.forEach(look);
    terminatingNow = view.terminatingCount?.() ?? draining.size;
  } else {
    for (const i of view.terminating()) {
      terminatingNow++;
      look(i);
    }
  }
  const complete = terminatingNow === 0 && isComplete(counts);
  const none: Decision = { start: [], terminate: [], stop, wakeAt, unplaced: 0, complete, counts };
  if (complete || ctx.hold === 'all') return none;

  const wave = planWave(counts, s, { holdTerminating: hold });
  let stopNew = wave.stopNew;
  const stopOld = new Map(wave.stopOld.map((b) => [b.revision, b.count]));
  let start = wave.start;

  if (ctx.hold !== undefined) {
    // A boundary not yet passed: terminate no old below minOld, start no new above maxNew.
    const oldAlive = counts.old.reduce((a, r) => a + r.total, 0);
    let oldAllowed = Math.max(0, oldAlive - ctx.hold.minOld);
    for (const r of counts.old) {
      const n = Math.min(stopOld.get(r.revision) ?? 0, oldAllowed);
      stopOld.set(r.revision, n);
      oldAllowed -= n;
    }
    const oldStopped = [...stopOld.values()].reduce((x, y) => x + y, 0);
    const newAfter = counts.current.total - stopNew;
    const oldAfter = oldAlive - oldStopped;
    const terminatingAfter = (counts.terminating ?? 0) + oldStopped + stopNew;
    const counted = newAfter + oldAfter + (hold ? terminatingAfter : 0);
    start =
      s.type === 'Recreate' && (oldAfter > 0 || terminatingAfter > 0)
        ? 0
        : Math.max(0, Math.min(ctx.replicas + s.maxSurge - counted, ctx.replicas - newAfter, ctx.hold.maxNew - newAfter));
  }

  // Which instances: the least useful of each revision (fleet.ts pickForStop).
  const terminate: string[] = [];
  // With host limits, make room where the even spread wants the next new instances (see pickForStop).
  const oldStops = [...stopOld.values()].reduce((a, b) => a + b, 0);
  let wanted: string[] | undefined;
  if (oldStops > 0 && ctx.hosts.some((h) => h.maxInstances !== undefined)) {
    const load = view.loads(ctx.revision);
    for (const h of ctx.hosts) if (!load.has(h.name)) load.set(h.name, { total: 0, fresh: 0 });
    wanted = placeMany(
      start + oldStops,
      ctx.hosts.map((h) => ({ name: h.name })),
      load,
    ).slice(start);
  }
  const pick = (revision: string, n: number, prefer?: string[]) => {
    if (n <= 0) return;
    const picked = view.leastUseful?.(revision, n) ?? pickForStop(Array.from(view.candidates(revision), observed), n, prefer);
    terminate.push(...picked.map((o) => o.id));
    prefer?.splice(0, picked.length);
  };
  // Indexed, not for-of: counts.old is an empty array (another elements kind) once the old
  // revision is gone, and a for-of over it sent the optimized decide() into a deopt loop
  // (~1,400 deopts in a 10,000-replica simulate, decide() left running unoptimized).
  for (let k = 0; k < counts.old.length; k++) pick(counts.old[k]!.revision, stopOld.get(counts.old[k]!.revision) ?? 0, wanted);
  pick(ctx.revision, stopNew);

  let hosts: string[] = [];
  if (start > 0) {
    // Terminating containers still occupy their host; failed ones do too until removed.
    const load = view.loads(ctx.revision);
    for (const h of ctx.hosts) if (!load.has(h.name)) load.set(h.name, { total: 0, fresh: 0 });
    // New instances terminated by this decision no longer count toward the spread.
    if (stopNew > 0) {
      const gone = new Set(terminate);
      for (const i of view.candidates(ctx.revision)) {
        const l = load.get(i.host);
        if (gone.has(i.id) && l) load.set(i.host, { ...l, fresh: l.fresh - 1 });
      }
    }
    hosts = placeMany(start, ctx.hosts, load);
  }
  return { start: hosts, terminate, stop, wakeAt, unplaced: start - hosts.length, complete, counts };
}
