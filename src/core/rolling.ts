/**
 * The rolling-update algorithm: the one implementation that deploy, plan and
 * simulate all call.
 *
 * It is the Kubernetes Deployment controller's (pkg/controller/deployment:
 * rolling.go, recreate.go), restated for a fleet whose "ReplicaSets" are the
 * sets of instances sharing a revision hash:
 *
 *  - scale up:   start new instances while  total < replicas + maxSurge  (and new < replicas);
 *  - scale down: stop old instances while   available - stopped >= replicas - maxUnavailable,
 *                where unready new instances count against the budget
 *                (maxScaledDown = total - minAvailable - newUnavailable), and old instances
 *                that are not available are cleaned up first, oldest revision first.
 *
 * A step does one of these (scale up first, as the controller does); a wave
 * applies steps until the algorithm allows nothing more. Everything is
 * level-triggered: the input is whatever state is observed now (half-done
 * rollouts, extra or missing instances, several old revisions), and the
 * output moves it toward the desired state.
 *
 * PURE: no I/O, no clock, no randomness.
 */
import type { ResolvedStrategy } from './strategy.js';

/** Instance counts of one revision. */
export interface RevisionCount {
  revision: string;
  total: number;
  available: number;
}

/** The observed fleet reduced to counts, which is all the algorithm decides on. */
export interface FleetCounts {
  replicas: number;
  /** The desired (new) revision. */
  current: RevisionCount;
  /** Every other revision, oldest first. */
  old: RevisionCount[];
  /**
   * Instances being terminated (marked down, draining or stopping) that still
   * count toward replicas + maxSurge: with replacementPolicy
   * TerminationComplete, and always with Recreate. They are in no revision's
   * count, so they are never chosen to stop again and are not available.
   * Omitted (0) under TerminationStarted: a terminating instance no longer
   * counts, and its replacement may start at once (Kubernetes' behaviour).
   */
  terminating?: number;
}

export type Step =
  | { kind: 'scaleUp'; count: number }
  /** Stop `count` instances of each listed old revision; not-available ones first. */
  | { kind: 'scaleDownOld'; byRevision: { revision: string; count: number }[] }
  /** More new instances than replicas (replicas were lowered): stop the excess. */
  | { kind: 'scaleDownNew'; count: number }
  | { kind: 'none' };

const sum = (xs: readonly RevisionCount[], f: (r: RevisionCount) => number) => xs.reduce((a, r) => a + f(r), 0);

export function totalOf(c: FleetCounts): number {
  return c.current.total + sum(c.old, (r) => r.total);
}

export function availableOf(c: FleetCounts): number {
  return c.current.available + sum(c.old, (r) => r.available);
}

export function isComplete(c: FleetCounts): boolean {
  return c.current.total === c.replicas && c.current.available === c.replicas && c.old.every((r) => r.total === 0);
}

/** Decides the next single step, as one sync of the Kubernetes controller would. */
export function decideStep(c: FleetCounts, s: ResolvedStrategy): Step {
  const oldTotal = sum(c.old, (r) => r.total);

  if (s.type === 'Recreate') {
    // recreate.go: scale every old set to 0, and only when none is left start the new ones.
    if (oldTotal > 0) {
      return { kind: 'scaleDownOld', byRevision: c.old.filter((r) => r.total > 0).map((r) => ({ revision: r.revision, count: r.total })) };
    }
    // Not a single new instance while an old one is still alive.
    if ((c.terminating ?? 0) > 0) return { kind: 'none' };
    if (c.current.total < c.replicas) return { kind: 'scaleUp', count: c.replicas - c.current.total };
    if (c.current.total > c.replicas) return { kind: 'scaleDownNew', count: c.current.total - c.replicas };
    return { kind: 'none' };
  }

  // NewRSNewReplicas: scale up within replicas + maxSurge.
  const total = c.current.total + oldTotal;
  const maxTotal = c.replicas + s.maxSurge;
  const alive = total + (c.terminating ?? 0);
  if (alive < maxTotal) {
    const up = Math.min(maxTotal - alive, c.replicas - c.current.total);
    if (up > 0) return { kind: 'scaleUp', count: up };
  }
  if (c.current.total > c.replicas) return { kind: 'scaleDownNew', count: c.current.total - c.replicas };

  // reconcileOldReplicaSets.
  if (oldTotal === 0) return { kind: 'none' };
  const minAvailable = c.replicas - Math.min(s.maxUnavailable, c.replicas);
  const newUnavailable = c.current.total - c.current.available;
  const maxScaledDown = total - minAvailable - newUnavailable;
  if (maxScaledDown <= 0) return { kind: 'none' };

  const remaining = new Map(c.old.map((r) => [r.revision, r.total]));
  const taken = new Map<string, number>();
  const take = (rev: string, n: number) => {
    remaining.set(rev, (remaining.get(rev) ?? 0) - n);
    taken.set(rev, (taken.get(rev) ?? 0) + n);
  };

  // cleanupUnhealthyReplicas: unavailable old instances do not reduce
  // availability when stopped, so they go first, bounded by maxScaledDown.
  let cleaned = 0;
  for (const r of c.old) {
    if (cleaned >= maxScaledDown) break;
    const unhealthy = r.total - r.available;
    if (r.total === 0 || unhealthy <= 0) continue;
    const n = Math.min(maxScaledDown - cleaned, unhealthy);
    take(r.revision, n);
    cleaned += n;
  }

  // scaleDownOldReplicaSetsForRollingUpdate: then as many as availability allows.
  const available = availableOf(c);
  if (available > minAvailable) {
    const budget = available - minAvailable;
    let scaled = 0;
    for (const r of c.old) {
      if (scaled >= budget) break;
      const left = remaining.get(r.revision) ?? 0;
      if (left <= 0) continue;
      const n = Math.min(left, budget - scaled);
      take(r.revision, n);
      scaled += n;
    }
  }

  const byRevision = c.old.filter((r) => (taken.get(r.revision) ?? 0) > 0).map((r) => ({ revision: r.revision, count: taken.get(r.revision) ?? 0 }));
  return byRevision.length > 0 ? { kind: 'scaleDownOld', byRevision } : { kind: 'none' };
}

/** Removes `n` instances from a revision, not-available ones first (what the executor stops). */
function removeFrom(r: RevisionCount, n: number): RevisionCount {
  const unavailable = r.total - r.available;
  const fromAvailable = Math.max(0, n - unavailable);
  return { revision: r.revision, total: r.total - n, available: r.available - fromAvailable };
}

/**
 * The counts after a step takes effect. New instances start unavailable;
 * stopped instances are gone. (Becoming ready is the world's doing, not a step.)
 */
function applyStep(c: FleetCounts, step: Step, holdTerminating = false): FleetCounts {
  const held = (n: number) => (holdTerminating ? { terminating: (c.terminating ?? 0) + n } : {});
  switch (step.kind) {
    case 'none':
      return c;
    case 'scaleUp':
      return { ...c, current: { ...c.current, total: c.current.total + step.count } };
    case 'scaleDownNew':
      return { ...c, current: removeFrom(c.current, step.count), ...held(step.count) };
    case 'scaleDownOld': {
      const counts = new Map(step.byRevision.map((b) => [b.revision, b.count]));
      return { ...c, old: c.old.map((r) => removeFrom(r, counts.get(r.revision) ?? 0)), ...held(step.byRevision.reduce((a, b) => a + b.count, 0)) };
    }
  }
}

/** Everything one wave does: the steps in order, and their sums. */
export interface Wave {
  steps: Exclude<Step, { kind: 'none' }>[];
  /** New instances to start. */
  start: number;
  /** How many of `start` fit under maxTotal before any stop completes. */
  startBeforeStops: number;
  /** Old instances to stop, per revision (not-available first). */
  stopOld: { revision: string; count: number }[];
  /** Excess new instances to stop. */
  stopNew: number;
  /** Counts once the wave's actions are done (before anything new becomes ready). */
  after: FleetCounts;
  /** Lowest number of available instances while the wave runs. */
  minAvailableDuring: number;
  /** Most instances alive at once while the wave runs, if starts wait for stops as needed. */
  peakTotal: number;
}

/**
 * Applies steps until the algorithm allows nothing more. With holdTerminating,
 * what a step stops stays in `terminating` (TerminationComplete: it still
 * counts until its container is gone), so the wave holds only what may start
 * now; without it, stops are taken as done (plan's waves). The executor carries
 * out a wave as: stop `stopOld`/`stopNew` (drain first), start
 * `startBeforeStops` meanwhile, and the rest of `start` once the stops are done.
 * Doing it in that order never exceeds maxTotal nor drops below minAvailable,
 * because starts never change availability and stops never add instances.
 */
export function planWave(initial: FleetCounts, s: ResolvedStrategy, opts: { holdTerminating?: boolean } = {}): Wave {
  let c = initial;
  const steps: Wave['steps'] = [];
  const stopOld = new Map<string, number>();
  let start = 0;
  let stopNew = 0;
  // Each step strictly changes the counts and the counts are bounded, so this
  // terminates; the cap is a guard against a future bug, not a tuning knob.
  for (let i = 0; i < 10_000; i++) {
    const step = decideStep(c, s);
    if (step.kind === 'none') break;
    steps.push(step);
    if (step.kind === 'scaleUp') start += step.count;
    else if (step.kind === 'scaleDownNew') stopNew += step.count;
    else for (const b of step.byRevision) stopOld.set(b.revision, (stopOld.get(b.revision) ?? 0) + b.count);
    c = applyStep(c, step, opts.holdTerminating === true);
  }
  const initialTotal = totalOf(initial) + (initial.terminating ?? 0);
  const maxTotal = s.type === 'Recreate' ? s.replicas : s.replicas + s.maxSurge;
  // Recreate never overlaps old and new, by definition.
  const startBeforeStops = s.type === 'Recreate' && initial.old.some((r) => r.total > 0) ? 0 : Math.max(0, Math.min(start, maxTotal - initialTotal));
  return {
    steps,
    start,
    startBeforeStops,
    stopOld: initial.old.filter((r) => stopOld.has(r.revision)).map((r) => ({ revision: r.revision, count: stopOld.get(r.revision) ?? 0 })),
    stopNew,
    after: c,
    minAvailableDuring: Math.min(availableOf(initial), availableOf(c)),
    peakTotal: Math.max(initialTotal, initialTotal + startBeforeStops, totalOf(c) + (c.terminating ?? 0)),
  };
}
