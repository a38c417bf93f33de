/**
 * The instance-level face of the rolling algorithm: reduce what was observed
 * to the counts rolling.ts decides on, and pick which concrete instances to
 * stop. core/decide.ts uses both for every decision.
 *
 * PURE: no I/O, no clock.
 */
import type { FleetCounts } from './rolling.js';

/** One instance as observed now (from Docker labels plus readiness tracking). */
export interface ObservedInstance {
  /** Unique name, e.g. the container name. */
  id: string;
  /** Spec hash of the instance's revision. */
  revision: string;
  /** The container is running (not exited, not dead). */
  running: boolean;
  /** Readiness passes (and the instance is, or may be, in the upstream). */
  ready: boolean;
  /** Ready continuously for minReadySeconds. */
  available: boolean;
  /** Creation time in ms (any monotonic number); orders revisions oldest first. */
  created: number;
  /** The host it runs on, where there are several: stops even out the spread. */
  host?: string | undefined;
}

export interface Desired {
  revision: string;
  replicas: number;
}

/** Stop order within a revision: the least useful first (Kubernetes' ActivePods ranking, simplified). */
function stopRank(i: ObservedInstance): number {
  if (!i.running) return 0;
  if (!i.ready) return 1;
  if (!i.available) return 2;
  return 3;
}

/** The plain stop order within a revision (one host): least useful first. */
export function compareForStop(a: ObservedInstance, b: ObservedInstance): number {
  return stopRank(a) - stopRank(b) || b.created - a.created || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * The n instances to stop from one revision. Like Kubernetes' ranking, the
 * least useful go first (not running, not ready, not available); among equals,
 * the one on the host that has the most instances of this revision (counted
 * again after every pick, so stopping several evens out the spread), then the
 * newest.
 *
 * `wanted` (hosts with maxInstances): where the next new instances should go,
 * in order; the j-th pick prefers an equal-ranked instance on wanted[j], so
 * a full host gets room where the even spread needs it.
 */
export function pickForStop(candidates: readonly ObservedInstance[], n: number, wanted?: readonly string[]): ObservedInstance[] {
  const perHost = new Map<string, number>();
  for (const c of candidates) if (c.host !== undefined) perHost.set(c.host, (perHost.get(c.host) ?? 0) + 1);
  // One host (or none known): the plain ranking, one sort (simulate runs 10,000-instance fleets).
  if (perHost.size <= 1) return [...candidates].sort(compareForStop).slice(0, n);
  const left = [...candidates];
  const picked: ObservedInstance[] = [];
  const colocated = (i: ObservedInstance) => (i.host === undefined ? 0 : (perHost.get(i.host) ?? 0));
  while (picked.length < n && left.length > 0) {
    const want = wanted?.[picked.length];
    const notWanted = (i: ObservedInstance) => (want !== undefined && i.host !== want ? 1 : 0);
    left.sort((a, b) => stopRank(a) - stopRank(b) || notWanted(a) - notWanted(b) || colocated(b) - colocated(a) || compareForStop(a, b));
    const next = left.shift()!;
    picked.push(next);
    if (next.host !== undefined) perHost.set(next.host, colocated(next) - 1);
  }
  return picked;
}

/** What counting needs of an instance. */
export interface CountedInstance {
  revision: string;
  created: number;
  available: boolean;
  /** Being terminated: in no revision's count (see FleetCounts.terminating). */
  terminating?: boolean | undefined;
}

/**
 * The counts the rolling algorithm decides on: instances per revision (the
 * desired one, the others oldest first), and the terminating ones, which
 * are kept in `terminating` only when the policy counts them (holdTerminating).
 */
export function countFleet(desired: Desired, instances: Iterable<CountedInstance>, holdTerminating = false): FleetCounts {
  const current = { revision: desired.revision, total: 0, available: 0 };
  const old = new Map<string, { revision: string; total: number; available: number; oldest: number }>();
  let terminating = 0;
  for (const i of instances) {
    if (i.terminating) {
      terminating++;
      continue;
    }
    if (i.revision === desired.revision) {
      current.total++;
      if (i.available) current.available++;
    } else {
      const r = old.get(i.revision) ?? { revision: i.revision, total: 0, available: 0, oldest: i.created };
      r.total++;
      if (i.available) r.available++;
      r.oldest = Math.min(r.oldest, i.created);
      old.set(i.revision, r);
    }
  }
  const sorted = [...old.values()].sort((a, b) => a.oldest - b.oldest || (a.revision < b.revision ? -1 : 1));
  return {
    replicas: desired.replicas,
    current,
    old: sorted.map(({ revision, total, available }) => ({ revision, total, available })),
    ...(holdTerminating ? { terminating } : {}),
  };
}
