/**
 * Docker API work across a fleet's hosts: parallel between hosts, bounded,
 * and in order on each host.
 *
 * Why ordered per host: a stop and a start on one engine that race can leave
 * that host over its maxInstances for a moment, and an engine answers its own
 * requests one after another anyway. Why parallel between hosts: a slow or
 * far-away engine must not make every other host wait for it. Why bounded:
 * every host at work holds an API connection (an ssh session, a TLS socket)
 * and streams image layers; a 200-host fleet should not open 200 at once.
 *
 * Work is queued per host in submission order; at most `limit` hosts run a
 * piece of work at the same time. A failed piece rejects its own promise and
 * does not hold up what is queued after it on that host.
 */
export class HostWork {
  private readonly tails = new Map<string, Promise<unknown>>();
  private running = 0;
  private readonly waiting: (() => void)[] = [];
  /** The most hosts seen working at once (for tests and the run summary). */
  peak = 0;

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`HostWork limit must be a positive integer, got ${limit}`);
  }

  /** Runs `work` on `host` after every piece queued on that host before it, when a slot is free. */
  run<T>(host: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(host) ?? Promise.resolve();
    const result = before.then(async () => {
      await this.acquire();
      try {
        return await work();
      } finally {
        this.release();
      }
    });
    // The next piece on this host waits for this one to settle, not to succeed.
    const tail = result.then(
      () => undefined,
      () => undefined,
    );
    this.tails.set(host, tail);
    void tail.then(() => {
      if (this.tails.get(host) === tail) this.tails.delete(host);
    });
    return result;
  }

  private acquire(): Promise<void> {
    if (this.running < this.limit) {
      this.running++;
      this.peak = Math.max(this.peak, this.running);
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  private release(): void {
    const next = this.waiting.shift();
    // Hand the slot straight to the next waiter: running stays the same.
    if (next) next();
    else this.running--;
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
