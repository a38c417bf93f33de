/**
 * A virtual clock for the engine: time moves only when everything that can
 * happen now has happened. `run` lets the microtasks of the engine settle
 * (one macrotask turn: no real I/O happens on simulated ports, so nothing
 * else can be pending), then jumps to the next timer and fires every timer
 * due at that instant, and repeats until the awaited promise settles.
 * A 10,000-instance rollout runs in well under a second of real time.
 */
import { FleetrollError } from '../errors.js';
import type { Clock } from '../ports.js';

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * The engine awaits something no timer will ever bring: a fleetroll bug, not
 * a fleet problem (the progress deadline always keeps a timer pending), and it
 * reaches `fleetroll simulate` and the library's simulate(), so it has a code.
 */
class StalledError extends FleetrollError {
  constructor(message: string) {
    super('E_INTERNAL', message);
  }
}

export class VirtualClock implements Clock {
  private t: number;
  private seq = 0;
  private readonly heap: Timer[] = [];

  constructor(start = 0) {
    this.t = start;
  }

  now(): number {
    return this.t;
  }

  timer(ms: number, fn: () => void): { cancel(): void } {
    const timer: Timer = { at: this.t + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.timer(ms, resolve));
  }

  /** Advances time until `p` settles; throws StalledError when nothing is scheduled and it has not. */
  async run<T>(p: Promise<T>, onAdvance?: (now: number) => void): Promise<T> {
    let settled = false;
    p.then(
      () => {
        settled = true;
      },
      () => {
        settled = true;
      },
    );
    for (;;) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (settled) return p;
      let next = this.heap[0];
      while (next?.cancelled) {
        this.pop();
        next = this.heap[0];
      }
      if (!next) throw new StalledError(`nothing is scheduled at ${this.t} ms and the run has not ended`);
      this.t = next.at;
      while (this.heap[0] && this.heap[0].at === this.t) {
        const timer = this.pop()!;
        if (!timer.cancelled) timer.fn();
      }
      onAdvance?.(this.t);
    }
  }

  private less(a: Timer, b: Timer): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private push(x: Timer): void {
    const h = this.heap;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[i], h[p]] = [h[p]!, h[i]!];
      i = p;
    }
  }

  private pop(): Timer | undefined {
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
}
