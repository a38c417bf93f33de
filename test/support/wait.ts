/** Waiting for conditions in tests, shared by the unit and integration suites. */

/**
 * Polls `check` until it holds, and returns the ms it took. A test waits for
 * the condition it needs this way instead of sleeping for a guessed time;
 * when the deadline passes the error names what was awaited. A check that
 * throws counts as "not yet" (a server that is not listening yet).
 */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 10_000, everyMs = 50): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await Promise.resolve().then(check).catch(() => false)) return Date.now() - start;
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
