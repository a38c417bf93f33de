/**
 * Docker API work across a fleet's hosts: parallel between hosts, bounded,
 * and in order on each host.
 *
 * Why in order per host: what the rollout asks of one engine starts in the
 * order it was asked (a stop queued before a start begins first). Where one
 * piece needs another finished (a start that needs the room a stop frees),
 * the engine queues it only once that piece is done; pieces that do not
 * depend on each other (the stops of one wave) run side by side, at most
 * `perHost` at once, because one engine stops three containers in the time
 * of one, and a wave should not pay for them one after another.
 * Why parallel between hosts: a slow or far-away engine must not make every
 * other host wait for it. Why bounded: every host at work holds API
 * connections (an ssh session, a TLS socket) and may stream image layers; a
 * 200-host fleet should not open 200 at once. At most `limit` hosts have work
 * in flight; the others wait their turn, in the order their work came.
 *
 * A failed piece rejects its own promise and does not hold up what is queued
 * after it on that host.
 */
/**
 * First in, first out, taken from a moving head: Array.shift copies the
 * whole array once it is large (no longer trimmed in place), and a
 * 20,000-replica simulate queues ~10,000 starts on its one host, so shifting
 * them one by one cost more than a second.
 */
class Fifo<T> {
  private items: (T | undefined)[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(x: T): void {
    this.items.push(x);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const x = this.items[this.head];
    this.items[this.head++] = undefined;
    // Drop the taken part once it is most of the array: each item is copied O(1) times on average.
    if (this.head >= 1024 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return x;
  }
}

export class HostWork {
  private readonly queues = new Map<string, Fifo<() => void>>();
  private readonly running = new Map<string, number>();
  private readonly waitingHosts: string[] = [];
  /** The most hosts seen working at once (for tests and the run summary). */
  peak = 0;

  constructor(
    readonly limit: number,
    readonly perHost = 8,
  ) {
    for (const [name, v] of [
      ['limit', limit],
      ['perHost', perHost],
    ] as const) {
      if (!Number.isInteger(v) || v < 1) throw new RangeError(`HostWork ${name} must be a positive integer, got ${v}`);
    }
  }

  /** Runs `work` on `host` once everything queued on that host before it has started, and the host has a turn. */
  run<T>(host: string, work: () => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queue = this.queues.get(host) ?? new Fifo();
      this.queues.set(host, queue);
      queue.push(() => {
        Promise.resolve()
          .then(work)
          .then(resolve, reject)
          .finally(() => {
            this.running.set(host, (this.running.get(host) ?? 1) - 1);
            this.pump(host);
          });
      });
      this.pump(host);
    });
  }

  private pump(host: string): void {
    const queue = this.queues.get(host) ?? new Fifo();
    const running = this.running.get(host) ?? 0;
    const active = this.running.has(host);
    if (!active && queue.length > 0) {
      // A host without work in flight needs a turn among the `limit`.
      if (this.running.size >= this.limit) {
        if (!this.waitingHosts.includes(host)) this.waitingHosts.push(host);
        return;
      }
      this.running.set(host, 0);
      this.peak = Math.max(this.peak, this.running.size);
    }
    let n = this.running.get(host) ?? running;
    while (n < this.perHost && queue.length > 0) {
      n++;
      this.running.set(host, n);
      queue.shift()!();
    }
    if (n === 0 && queue.length === 0 && this.running.has(host)) {
      // Done for now: hand the turn to the host that has waited longest.
      this.running.delete(host);
      this.queues.delete(host);
      const next = this.waitingHosts.shift();
      if (next !== undefined) this.pump(next);
    }
  }
}

/**
 * Maps over items with at most `limit` calls in flight, keeping the order of
 * results: for reads across hosts (listing containers) that must not queue
 * behind a host's long write (an image copy) but should not open a
 * connection to every host of a large fleet at once either.
 */
export async function mapBounded<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
