/**
 * A rollout's step costs (core/stepCosts.ts), read off the events it emits:
 * create + start and stop from `started` / `stopped`, a load-balancer change
 * from `upstream`, and start to ready from the time between an instance's
 * `started` and `ready` on the rollout's clock, with the most instances
 * warming up at once on its host meanwhile (they share its cores, so a
 * warm-up beside others takes longer). The rollout adds its fixed costs
 * (prepare, verify) itself.
 */
import { FLEET, Overlaps, type CostSample, type Overlap } from '../core/stepCosts.js';
import type { Clock } from '../ports.js';
import type { EventSink, RolloutEvent } from './events.js';

export class StepCostRecorder {
  readonly samples: CostSample[] = [];
  private readonly startedAt = new Map<string, { at: number; host: string; warming: Overlap }>();
  private readonly warmups = new Overlaps();

  constructor(private readonly clock: Clock) {}

  see(e: RolloutEvent): void {
    switch (e.type) {
      case 'started':
        if (e.ms !== undefined) this.samples.push({ kind: 'run', place: e.host, ms: e.ms, ...(e.inFlight !== undefined ? { inFlight: e.inFlight } : {}) });
        this.warmedUp(e.name);
        this.startedAt.set(e.name, { at: this.clock.now(), host: e.host, warming: this.warmups.begin(e.host) });
        break;
      case 'ready': {
        const s = this.startedAt.get(e.name);
        // Only the first readiness after a start: one seen again later (after a failed probe) is not a warm-up.
        if (s) this.samples.push({ kind: 'ready', place: s.host, ms: this.clock.now() - s.at, inFlight: s.warming.max });
        this.warmedUp(e.name);
        break;
      }
      case 'stopped':
        this.warmedUp(e.name);
        if (e.ms !== undefined) this.samples.push({ kind: 'stop', place: e.host, ms: e.ms });
        break;
      case 'drained':
        // Only drains that ended on idle say how long requests take to finish; one cut at drainSeconds says nothing new.
        if (e.reason === 'idle') this.samples.push({ kind: 'drain', place: FLEET, ms: e.ms });
        break;
      case 'upstream':
        for (const [lb, ms] of Object.entries(e.balancers ?? {}))
          this.samples.push({ kind: 'change', place: lb, ms, ...(e.beside !== undefined ? { inFlight: e.beside + 1 } : {}) });
        break;
      default:
        break;
    }
  }

  /** `name` no longer warms up: ready, or stopped before it was. */
  private warmedUp(name: string): void {
    const s = this.startedAt.get(name);
    if (s) this.warmups.end(s.host, s.warming);
    this.startedAt.delete(name);
  }

  /** The events go on to `next`, seen here first. */
  sink(next: EventSink | undefined): EventSink {
    return (e) => {
      this.see(e);
      next?.(e);
    };
  }

  fixed(kind: 'prepare' | 'verify' | 'report', ms: number): void {
    this.samples.push(fixedCost(kind, ms));
  }

  /** `work`, timed as a fixed cost of the deploy. */
  async timed<T>(kind: 'verify', work: () => Promise<T>): Promise<T> {
    const from = this.clock.now();
    const out = await work();
    this.fixed(kind, this.clock.now() - from);
    return out;
  }
}

/** A cost of the deploy as a whole (core/stepCosts.ts FLEET). */
export function fixedCost(kind: 'prepare' | 'verify' | 'report', ms: number): CostSample {
  return { kind, place: FLEET, ms };
}
