/**
 * `fleetroll simulate`: runs the rolling algorithm (planWave, the same one
 * deploy uses) against a virtual clock and predicts how a rollout goes.
 *
 * The model mirrors the executor:
 *  - when idle, the executor observes the fleet and runs the next wave: the
 *    instances to stop are marked down (one reload), drained for `drain`, then
 *    stopped (taking `stop`); new instances that fit under maxTotal start at
 *    once, the rest once the stops are done;
 *  - each new instance becomes ready `startup` after it starts and is put in
 *    the upstream at that moment (a reload), and counts as available
 *    `minReady` later;
 *  - every upstream change at the same instant shares one reload.
 * Optional jitter scales each startup and stop time by a factor drawn
 * uniformly from [1 - jitter, 1 + jitter], from a seeded generator, so a run
 * is reproducible.
 *
 * PURE: the clock is a number in this file; randomness is a seeded PRNG.
 */
import { isComplete, planWave, type FleetCounts } from './rolling.js';
import type { ResolvedStrategy } from './strategy.js';

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
}

export interface SimulationResult {
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  durationMs: number;
  waves: number;
  peakInstances: number;
  lowestCapacity: number;
  mixedVersionWindowMs: number;
  reloads: number;
  timings: SimulationTimings;
}

/** mulberry32: a tiny, well-known seeded PRNG; enough to spread timings reproducibly. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type SimEvent =
  | { at: number; seq: number; kind: 'ready' }
  | { at: number; seq: number; kind: 'available' }
  | { at: number; seq: number; kind: 'stopsDone'; count: number; startAfter: number };

/** A binary min-heap on (at, seq): events at the same instant keep their order. */
class EventQueue {
  private heap: SimEvent[] = [];
  private seq = 0;
  get size(): number {
    return this.heap.length;
  }
  push(e: SimEvent extends infer E ? (E extends SimEvent ? Omit<E, 'seq'> : never) : never): void {
    const ev = { ...e, seq: this.seq++ } as SimEvent;
    const h = this.heap;
    h.push(ev);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }
  peek(): SimEvent | undefined {
    return this.heap[0];
  }
  pop(): SimEvent | undefined {
    const h = this.heap;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
  private less(a: SimEvent, b: SimEvent): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }
}

export class SimulationStalledError extends Error {}

export function simulateRollout(s: ResolvedStrategy, t: SimulationTimings): SimulationResult {
  const rand = seededRandom(t.seed);
  const spread = (ms: number) => (t.jitter > 0 ? Math.round(ms * (1 + t.jitter * (2 * rand() - 1))) : ms);
  const q = new EventQueue();

  let now = 0;
  // Old instances: all available at the start; the sim only needs counts.
  let oldAlive = s.replicas; // containers not yet stopped
  let oldCounted = s.replicas; // not yet chosen by a wave (what the algorithm sees)
  let oldInService = s.replicas;
  let newStarted = 0;
  let newInService = 0;
  let newAvailable = 0;

  let busy = false;
  let waves = 0;
  let reloads = 0;
  let lastReloadAt = -1;
  let peak = oldAlive;
  let lowest = oldInService;
  let firstNewInService = -1;
  let lastOldOutOfService = -1;

  const reload = () => {
    if (lastReloadAt !== now) {
      reloads++;
      lastReloadAt = now;
    }
  };
  const track = () => {
    peak = Math.max(peak, oldAlive + newStarted);
    lowest = Math.min(lowest, oldInService + newInService);
  };
  const startNew = (n: number) => {
    for (let i = 0; i < n; i++) q.push({ at: now + spread(t.startupMs), kind: 'ready' });
    newStarted += n;
    track();
  };
  const counts = (): FleetCounts => ({
    replicas: s.replicas,
    current: { revision: 'new', total: newStarted, available: newAvailable },
    old: [{ revision: 'old', total: oldCounted, available: oldCounted }],
  });

  const act = () => {
    if (busy) return;
    const w = planWave(counts(), s);
    if (w.steps.length === 0) return;
    waves++;
    const stop = w.stopOld.reduce((a, b) => a + b.count, 0);
    if (stop > 0) {
      oldCounted -= stop;
      oldInService -= stop;
      reload();
      if (oldInService === 0) lastOldOutOfService = now;
      let longest = 0;
      for (let i = 0; i < stop; i++) longest = Math.max(longest, spread(t.stopMs));
      busy = true;
      q.push({ at: now + t.drainMs + longest, kind: 'stopsDone', count: stop, startAfter: w.start - w.startBeforeStops });
      startNew(w.startBeforeStops);
    } else {
      startNew(w.start);
    }
    track();
  };

  act();
  while (!isComplete(counts()) || busy) {
    const e = q.pop();
    if (!e) throw new SimulationStalledError(`the rollout stalled at ${now} ms with ${oldCounted} old and ${newStarted} new instances`);
    now = e.at;
    if (e.kind === 'ready') {
      newInService++;
      reload();
      if (firstNewInService < 0) firstNewInService = now;
      if (t.minReadyMs > 0) q.push({ at: now + t.minReadyMs, kind: 'available' });
      else newAvailable++;
    } else if (e.kind === 'available') {
      newAvailable++;
    } else {
      oldAlive -= e.count;
      busy = false;
      startNew(e.startAfter);
    }
    track();
    // Decide once every event of this instant has been applied.
    if (q.peek()?.at !== now) act();
  }

  return {
    replicas: s.replicas,
    maxSurge: s.maxSurge,
    maxUnavailable: s.maxUnavailable,
    durationMs: now,
    waves,
    peakInstances: peak,
    lowestCapacity: lowest,
    mixedVersionWindowMs: firstNewInService >= 0 && lastOldOutOfService > firstNewInService ? lastOldOutOfService - firstNewInService : 0,
    reloads,
    timings: t,
  };
}
