/**
 * What a run's events say about the fleet over time: the servers in service
 * and the containers alive (capacity), and the per-step costs the engine's
 * events measure (start to ready, drain to stopped, decision to reload ...).
 *
 * PURE: no I/O, no clock, no randomness.
 */
import { byTime, type TimedEvent } from './phases.js';

export interface CapacityPoint {
  t: number;
  /** Servers in service in the nginx upstream (listed up and still running). */
  up: number;
  /** Instances (containers) alive. */
  alive: number;
}

/**
 * Capacity over time from the events: which servers nginx sends traffic to,
 * and how many containers exist. It starts from `initial` (the fleet in
 * service before the deploy), then
 *   - an engine `upstream` event adds its `up` servers and removes its `down` ones;
 *   - a runner `reload` event is a snapshot of the upstream after a reload, and
 *     replaces the set (the naive control writes nginx without engine events);
 *   - `stopped` removes the instance: a stopped container serves nothing, even
 *     while nginx still lists it (which is what the naive control does);
 *   - `started` adds a container to `alive`, `stopped` takes it away.
 * One point per event that changed something, plus the starting point.
 */
export function capacityTimeline(events: readonly TimedEvent[], initial: readonly string[], startMs = 0): CapacityPoint[] {
  const up = new Set(initial);
  const alive = new Set(initial);
  const out: CapacityPoint[] = [{ t: startMs, up: up.size, alive: alive.size }];
  for (const { t, event: e } of byTime(events)) {
    switch (e.type) {
      case 'upstream':
        if (e.action === 'restore') continue;
        for (const n of e.down) up.delete(n);
        for (const n of e.up) if (alive.has(n)) up.add(n);
        break;
      case 'reload':
        up.clear();
        for (const n of e.up) if (alive.has(n)) up.add(n);
        break;
      case 'stopped':
        up.delete(e.name);
        alive.delete(e.name);
        break;
      case 'started':
        alive.add(e.name);
        break;
      default:
        continue;
    }
    const last = out[out.length - 1]!;
    if (last.up === up.size && last.alive === alive.size) continue;
    if (last.t === t) out[out.length - 1] = { t, up: up.size, alive: alive.size };
    else out.push({ t, up: up.size, alive: alive.size });
  }
  return out;
}

/** The lowest and highest value of a step function over [fromMs, toMs]: its value at fromMs and every step inside. */
export function rangeOver(points: readonly CapacityPoint[], key: 'up' | 'alive', fromMs: number, toMs: number): { min: number; max: number } {
  let current: number | undefined;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (const p of points) {
    if (p.t <= fromMs) current = p[key];
    else if (p.t <= toMs) {
      min = Math.min(min, p[key]);
      max = Math.max(max, p[key]);
    }
  }
  if (current !== undefined) {
    min = Math.min(min, current);
    max = Math.max(max, current);
  }
  if (min === Number.POSITIVE_INFINITY) return { min: 0, max: 0 };
  return { min, max };
}

export interface MeasuredTimings {
  startToReadyMs: number[];
  stopMs: number[];
  /** From the decision to replace an instance to the reload that marked it down being in force. */
  decisionToReloadMs: number[];
  /** From an instance passing readiness to the reload that put it in nginx being in force. */
  readyToInNginxMs: number[];
  /** From a container stopped and removed to the next container started (what a start waiting for room costs). */
  removedToStartedMs: number[];
}

/**
 * The per-step costs read off the engine's events: start to ready, drain end
 * to stopped, decision to mark-down in force, ready to in nginx, and removed
 * to the next start.
 */
export function measuredTimings(events: readonly TimedEvent[]): MeasuredTimings {
  const startedAt = new Map<string, number>();
  const stopFrom = new Map<string, number>();
  const decidedAt = new Map<string, number>();
  const readyAt = new Map<string, number>();
  const removed: number[] = [];
  const out: MeasuredTimings = { startToReadyMs: [], stopMs: [], decisionToReloadMs: [], readyToInNginxMs: [], removedToStartedMs: [] };
  const { startToReadyMs, stopMs } = out;
  for (const { t, event: e } of byTime(events)) {
    switch (e.type) {
      case 'started':
        startedAt.set(e.name, t);
        for (const r of removed.splice(0)) out.removedToStartedMs.push(t - r);
        break;
      case 'ready': {
        const s = startedAt.get(e.name);
        if (s !== undefined) startToReadyMs.push(t - s);
        startedAt.delete(e.name);
        readyAt.set(e.name, t);
        break;
      }
      case 'upstream':
        for (const n of e.down) {
          const d = decidedAt.get(n);
          if (d !== undefined) out.decisionToReloadMs.push(t - d);
          decidedAt.delete(n);
        }
        for (const n of e.up) {
          const r = readyAt.get(n);
          if (r !== undefined) out.readyToInNginxMs.push(t - r);
          readyAt.delete(n);
        }
        break;
      case 'wave':
        for (const n of e.stop) {
          stopFrom.set(n, t);
          decidedAt.set(n, t);
        }
        break;
      case 'draining':
        for (const n of e.names) stopFrom.set(n, t + e.seconds * 1000);
        break;
      case 'stopped': {
        const s = stopFrom.get(e.name);
        if (s !== undefined) stopMs.push(Math.max(0, t - s));
        stopFrom.delete(e.name);
        removed.push(t);
        break;
      }
      default:
        break;
    }
  }
  return out;
}
