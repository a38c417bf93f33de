/**
 * `fleetroll plan`: the waves of a rollout from a fleet entirely on the old
 * revision to one entirely on the new, assuming every new instance becomes
 * ready together at the end of each wave.
 *
 * PURE.
 */
import { availableOf, isComplete, planWave, totalOf, type FleetCounts } from './rolling.js';
import type { ResolvedStrategy } from './strategy.js';

export interface PlannedWave {
  /** 1-based wave number. */
  index: number;
  started: number;
  stopped: number;
  /** Instances per revision after the wave: [old, new]. */
  after: [number, number];
  /** Available instances (in service) at the wave's lowest and highest point. */
  capacity: { min: number; max: number };
  /**
   * Containers alive at the wave's peak, under the strategy's
   * replacementPolicy. TerminationComplete: starts wait for stops, so never
   * above maxTotal. TerminationStarted: the wave's starts begin while the
   * instances it replaces (and, at worst, the previous wave's) still drain.
   */
  peakAlive: number;
}

export interface Plan {
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  minAvailable: number;
  maxTotal: number;
  replacementPolicy: ResolvedStrategy['replacementPolicy'];
  /** [old, new] instance counts: the start, then one entry after each wave. */
  waves: [number, number][];
  details: PlannedWave[];
}

const OLD = 'old';
const NEW = 'new';

export function planRollout(s: ResolvedStrategy): Plan {
  let c: FleetCounts = {
    replicas: s.replicas,
    current: { revision: NEW, total: 0, available: 0 },
    old: [{ revision: OLD, total: s.replicas, available: s.replicas }],
  };
  const pair = (x: FleetCounts): [number, number] => [x.old[0]?.total ?? 0, x.current.total];
  const waves: [number, number][] = [pair(c)];
  const details: PlannedWave[] = [];
  // A valid strategy finishes in at most 2 * replicas + 2 waves (each wave
  // either starts or stops at least one instance); the bound only guards a bug.
  const limit = 2 * s.replicas + 4;
  let prevStopped = 0;
  while (!isComplete(c) && details.length < limit) {
    const w = planWave(c, s);
    if (w.steps.length === 0) break;
    const before = availableOf(c);
    const totalBefore = totalOf(c);
    const stopped = w.stopOld.reduce((a, b) => a + b.count, 0) + w.stopNew;
    c = w.after;
    // The new instances of this wave all become ready (and available) at its end.
    const ready: FleetCounts = { ...c, current: { ...c.current, available: c.current.total } };
    details.push({
      index: details.length + 1,
      started: w.start,
      stopped,
      after: pair(c),
      capacity: { min: w.minAvailableDuring, max: Math.max(before, availableOf(ready)) },
      peakAlive:
        s.replacementPolicy === 'TerminationStarted'
          ? Math.max(totalOf(ready), totalBefore + w.start + prevStopped)
          : Math.max(w.peakTotal, totalOf(ready)),
    });
    prevStopped = stopped;
    waves.push(pair(c));
    c = ready;
  }
  return {
    replicas: s.replicas,
    maxSurge: s.maxSurge,
    maxUnavailable: s.maxUnavailable,
    minAvailable: s.minAvailable,
    maxTotal: s.maxTotal,
    replacementPolicy: s.replacementPolicy,
    waves,
    details,
  };
}

export { placement } from './placement.js';
