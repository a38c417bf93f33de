/** Waiting for conditions in tests, shared by the unit and integration suites. */

/**
 * How much slower than usual this run may be: the test files run
 * TEST_CONCURRENCY at a time (scripts/run-tests.mjs, default 4), and on two
 * cores twice the files take about twice as long each. Hang guards (a test's
 * timeout, a waitFor deadline) are multiplied by it; they are there to end a
 * hang, not to measure speed (benchmarks do that).
 */
export const LOAD_SCALE = Math.max(1, Number(process.env.TEST_CONCURRENCY ?? 5) / 5 || 1);

/** A hang guard of `ms` on a run of the default concurrency, scaled to this run's. */
export function guard(ms: number): number {
  return Math.round(ms * LOAD_SCALE);
}

/**
 * Polls `check` until it holds, and returns the ms it took. A test waits for
 * the condition it needs this way instead of sleeping for a guessed time;
 * when the deadline passes the error names what was awaited. A check that
 * throws counts as "not yet" (a server that is not listening yet).
 */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 50): Promise<number> {
  const start = Date.now();
  const limit = guard(timeoutMs);
  for (;;) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return Date.now() - start;
    if (Date.now() - start > limit) throw new Error(`timed out after ${limit} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
