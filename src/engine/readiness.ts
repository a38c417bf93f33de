/**
 * Readiness as events: every instance that is not yet available is probed
 * once per period (one ticker for all of them, at most one probe in flight
 * per instance), and minReadySeconds timers turn "ready" into "available".
 * The ticker stops when nothing is being watched, so a settled fleet costs
 * no timers (and a simulated clock can run out of events).
 */
import type { Clock, Prober, ProbeTarget } from '../ports.js';

export interface Watched {
  /** The instance's name (unique on its host). */
  readonly id: string;
  readonly host: string;
  /** Docker's id once the container exists; the probe reaches it by this when known. */
  readonly dockerId?: string | undefined;
  readonly address?: string | undefined;
}

export interface ReadinessOptions {
  prober: Prober;
  clock: Clock;
  periodMs: number;
  /** A probe answered; `ok` is readiness passing. */
  result: (w: Watched, ok: boolean, detail: string) => void;
}

/**
 * A watched instance with what each of its probes needs, made once per watch
 * rather than per probe: a 10,000-replica simulate probes ~120,000 times, and
 * a target and two answer closures per probe were a tenth of what it
 * allocated.
 */
interface Probing {
  w: Watched;
  target: ProbeTarget;
  ok: (ok: boolean) => void;
  error: (err: unknown) => void;
}

export class Readiness {
  private readonly watched = new Map<string, Probing>();
  private readonly inFlight = new Set<string>();
  private ticker: { cancel(): void } | undefined;
  private stopped = false;

  constructor(private readonly o: ReadinessOptions) {}

  /** Probe this instance from the next tick on. */
  watch(w: Watched): void {
    if (this.stopped) return;
    this.watched.set(w.id, {
      w,
      target: targetOf(w),
      ok: (ok) => this.answer(w, ok, ok ? 'ready' : 'readiness probe failing'),
      error: (err) => this.answer(w, false, `readiness probe error: ${(err as Error).message}`),
    });
    this.arm();
  }

  unwatch(id: string): void {
    this.watched.delete(id);
  }

  /** Stops probing for good (the rollout is over). */
  stop(): void {
    this.stopped = true;
    this.watched.clear();
    this.ticker?.cancel();
    this.ticker = undefined;
  }

  private arm(): void {
    if (this.ticker || this.stopped || this.watched.size === 0) return;
    this.ticker = this.o.clock.timer(this.o.periodMs, () => {
      this.ticker = undefined;
      this.tick();
      this.arm();
    });
  }

  private tick(): void {
    for (const p of this.watched.values()) {
      const w = p.w;
      if (this.inFlight.has(w.id)) continue;
      this.inFlight.add(w.id);
      // The container's id and address are read at each probe: they may come after the watch began.
      if (p.target.id !== (w.dockerId ?? w.id) || p.target.host !== w.host || p.target.address !== w.address) p.target = targetOf(w);
      // Whether an instance without an address can be probed is the prober's call (a healthcheck or exec needs none).
      this.o.prober.ready(p.target).then(p.ok, p.error);
    }
  }

  private answer(w: Watched, ok: boolean, detail: string): void {
    this.inFlight.delete(w.id);
    // Unwatched while the probe ran (stopped, or no longer of interest): drop the answer.
    if (this.stopped || this.watched.get(w.id)?.w !== w) return;
    this.o.result(w, ok, detail);
  }
}

function targetOf(w: Watched): ProbeTarget {
  return { id: w.dockerId ?? w.id, host: w.host, address: w.address };
}
