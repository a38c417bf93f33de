/**
 * Readiness as events: every instance that is not yet available is probed
 * once per period (one ticker for all of them, at most one probe in flight
 * per instance), and minReadySeconds timers turn "ready" into "available".
 * The ticker stops when nothing is being watched, so a settled fleet costs
 * no timers (and a simulated clock can run out of events).
 */
import type { Clock, Prober } from '../ports.js';

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

export class Readiness {
  private readonly watched = new Map<string, Watched>();
  private readonly inFlight = new Set<string>();
  private ticker: { cancel(): void } | undefined;
  private stopped = false;

  constructor(private readonly o: ReadinessOptions) {}

  /** Probe this instance from the next tick on. */
  watch(w: Watched): void {
    if (this.stopped) return;
    this.watched.set(w.id, w);
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
    for (const w of this.watched.values()) {
      if (this.inFlight.has(w.id)) continue;
      this.inFlight.add(w.id);
      // Whether an instance without an address can be probed is the prober's call (a healthcheck or exec needs none).
      this.o.prober.ready({ id: w.dockerId ?? w.id, host: w.host, address: w.address }).then(
        (ok) => this.answer(w, ok, ok ? 'ready' : 'readiness probe failing'),
        (err: unknown) => this.answer(w, false, `readiness probe error: ${(err as Error).message}`),
      );
    }
  }

  private answer(w: Watched, ok: boolean, detail: string): void {
    this.inFlight.delete(w.id);
    // Unwatched while the probe ran (stopped, or no longer of interest): drop the answer.
    if (this.stopped || this.watched.get(w.id) !== w) return;
    this.o.result(w, ok, detail);
  }
}
