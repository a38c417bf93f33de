/**
 * Traffic figures per revision from access log records: what the analysis
 * gate compares (canary vs stable, interval by interval) and the three
 * numbers every deploy reports (failed/dropped requests in the deploy window,
 * the mixed-version window as users saw it, the first new instance's error
 * rate).
 *
 * The log knows addresses, fleetroll knows which instance address runs which
 * revision: the caller passes that mapping in (`RevisionOf`); whatever label it
 * returns ("1.1.0", "rev 4", a hash) is what the figures and messages show.
 *
 * Definitions (every figure below follows them):
 *
 * - Time. A record belongs to the interval holding its `timeMs`, i.e. when the
 *   response ENDED ($msec): that is when a user saw the outcome. Intervals are
 *   half-open [startMs, endMs); the deploy window is closed [startMs, endMs].
 *
 * - Attribution. A request belongs to the revision of its LAST upstream
 *   attempt, the server that gave (or failed to give) the final answer. When
 *   nginx retried (`upstream_addr "A, B"`, `upstream_status "502, 200"`), each
 *   earlier attempt that failed is a connection failure of ITS server's
 *   revision (`retriedFailures`), though the request itself counts for B's.
 *   So a canary that refuses connections cannot hide behind nginx's retries:
 *   its failed attempts are in its error rate (below) even when stable
 *   instances answered the users. Requests nginx answered without an upstream,
 *   or whose last address the mapping does not know (an upstream group name
 *   = "no live upstreams", a server not in the fleet), are `unattributed`.
 *
 * - Per revision:
 *     requests           final answers attributed to the revision
 *     errors5xx          of those, status >= 500 as the client got it (the app's own
 *                        5xx and nginx's 502/504 after the last attempt failed)
 *     clientClosed       of those, status 499 (the client gave up; not an error here)
 *     connectionFailures attempts on the revision's servers that got no response
 *                        and that nginx logged as 502/504 (refused, reset, timed out),
 *                        the final attempt's included
 *     retriedFailures    the connection failures that nginx then retried elsewhere
 *     attempts           requests + retriedFailures
 *     errors             errors5xx + retriedFailures
 *     errorRate          errors / attempts (0 when there were none): the share of
 *                        the attempts sent to the revision that failed
 *     latencyMs          p50/p95/p99/max of $request_time over `requests`, failed
 *                        ones included (a request that hung is latency a user saw)
 *
 * - Percentiles: nearest rank, as in src/experiment/metrics.ts: the p-th
 *   percentile of n sorted values is the value at rank ceil(p/100 × n)
 *   (1-based), so it is always a latency that was observed, never an
 *   interpolation. With fewer than 100 requests p99 is the maximum.
 *   Example: [1,2,...,100] ms → p50 = 50, p95 = 95, p99 = 99.
 *
 * PURE: no I/O, no clock.
 */
import { attemptsOf, type AccessRecord } from './accessLog.js';

/** The revision label of an instance address ("10.0.0.2:8080"), or undefined when it is not one of the fleet's. */
export type RevisionOf = (address: string) => string | undefined;

export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/** The figures of one group of traffic (a revision, or one instance's address) over one time range. */
export interface TrafficStats {
  /** The revision label (or the address, for instanceStats; '' for unattributed traffic). */
  label: string;
  startMs: number;
  endMs: number;
  requests: number;
  errors5xx: number;
  clientClosed: number;
  connectionFailures: number;
  retriedFailures: number;
  attempts: number;
  errors: number;
  errorRate: number;
  latencyMs: LatencySummary;
}

export interface WindowStats {
  startMs: number;
  endMs: number;
  /** Keyed by revision label; a revision appears once it had an attempt in the window. */
  byRevision: Record<string, TrafficStats>;
  /** Requests no revision can be named for (no upstream, no live upstream, an unknown server). */
  unattributed: TrafficStats;
}

/** Nearest-rank percentile of an ascending array (see the module comment); 0 for none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

/** p50/p95/p99/max of latencies in any order (nearest rank). */
export function summarizeLatency(latencies: readonly number[]): LatencySummary {
  const s = [...latencies].sort((a, b) => a - b);
  return { p50: percentile(s, 50), p95: percentile(s, 95), p99: percentile(s, 99), max: s.length === 0 ? 0 : s[s.length - 1]! };
}

/** Collects one group's figures; `finish` computes the rates and percentiles. */
class Tally {
  requests = 0;
  errors5xx = 0;
  clientClosed = 0;
  connectionFailures = 0;
  retriedFailures = 0;
  latencies: number[] = [];

  request(r: AccessRecord, lastFailed: boolean): void {
    this.requests++;
    if (r.status >= 500) this.errors5xx++;
    if (r.status === 499) this.clientClosed++;
    if (lastFailed) this.connectionFailures++;
    this.latencies.push(r.requestTimeMs);
  }

  retried(): void {
    this.connectionFailures++;
    this.retriedFailures++;
  }

  finish(label: string, startMs: number, endMs: number): TrafficStats {
    const attempts = this.requests + this.retriedFailures;
    const errors = this.errors5xx + this.retriedFailures;
    return {
      label,
      startMs,
      endMs,
      requests: this.requests,
      errors5xx: this.errors5xx,
      clientClosed: this.clientClosed,
      connectionFailures: this.connectionFailures,
      retriedFailures: this.retriedFailures,
      attempts,
      errors,
      errorRate: attempts === 0 ? 0 : errors / attempts,
      latencyMs: summarizeLatency(this.latencies),
    };
  }
}

/**
 * Adds one record to the tallies of `groupOf` (address → group, undefined =
 * not a group we track). The final attempt's group gets the request; each
 * earlier failed attempt is a retried connection failure of its own group.
 * Returns whether the record had a tracked final group.
 */
function addRecord(r: AccessRecord, groupOf: (address: string) => string | undefined, tally: (group: string) => Tally): boolean {
  const attempts = attemptsOf(r);
  const last = attempts[attempts.length - 1];
  for (const a of attempts.slice(0, -1)) {
    if (a.outcome !== 'failed') continue;
    const g = groupOf(a.address);
    if (g !== undefined) tally(g).retried();
  }
  const g = last === undefined ? undefined : groupOf(last.address);
  if (g === undefined) return false;
  tally(g).request(r, last!.outcome === 'failed');
  return true;
}

function collect(records: Iterable<AccessRecord>, revisionOf: RevisionOf, inWindow: (t: number) => boolean, startMs: number, endMs: number): WindowStats {
  const tallies = new Map<string, Tally>();
  const unattributed = new Tally();
  const tally = (g: string) => {
    let t = tallies.get(g);
    if (!t) tallies.set(g, (t = new Tally()));
    return t;
  };
  for (const r of records) {
    if (!inWindow(r.timeMs)) continue;
    if (!addRecord(r, revisionOf, tally)) {
      const last = attemptsOf(r).at(-1);
      unattributed.request(r, last?.outcome === 'failed');
    }
  }
  const byRevision: Record<string, TrafficStats> = {};
  for (const [label, t] of [...tallies].sort(([a], [b]) => a.localeCompare(b))) byRevision[label] = t.finish(label, startMs, endMs);
  return { startMs, endMs, byRevision, unattributed: unattributed.finish('', startMs, endMs) };
}

/** Per-revision figures for the records in [startMs, endMs). */
export function revisionStats(records: Iterable<AccessRecord>, revisionOf: RevisionOf, startMs: number, endMs: number): WindowStats {
  return collect(records, revisionOf, (t) => t >= startMs && t < endMs, startMs, endMs);
}

/**
 * Per-revision figures for consecutive intervals of `intervalMs` from
 * `startMs` up to `endMs` (exclusive; default: just past the last record).
 * Every interval is returned, an empty one too: a quiet interval is a fact the
 * gate has to see (it is inconclusive), not a gap.
 *
 *   statsByInterval(records, revisionOf, { startMs: 0, intervalMs: 10_000, endMs: 30_000 })
 *   → [ {startMs: 0, endMs: 10000, ...}, {10000–20000}, {20000–30000} ]
 */
export function statsByInterval(
  records: readonly AccessRecord[],
  revisionOf: RevisionOf,
  opts: { startMs: number; intervalMs: number; endMs?: number },
): WindowStats[] {
  const { startMs, intervalMs } = opts;
  if (!(intervalMs > 0) || !Number.isFinite(intervalMs)) throw new RangeError(`intervalMs must be a positive number, got ${intervalMs}`);
  let endMs = opts.endMs;
  if (endMs === undefined) {
    endMs = startMs;
    for (const r of records) if (r.timeMs >= endMs) endMs = r.timeMs + 1;
  }
  const n = Math.max(0, Math.ceil((endMs - startMs) / intervalMs));
  const buckets: AccessRecord[][] = Array.from({ length: n }, () => []);
  for (const r of records) {
    if (r.timeMs < startMs || r.timeMs >= endMs) continue;
    buckets[Math.floor((r.timeMs - startMs) / intervalMs)]!.push(r);
  }
  return buckets.map((b, i) => {
    const s = startMs + i * intervalMs;
    return revisionStats(b, revisionOf, s, Math.min(endMs, s + intervalMs));
  });
}

/**
 * One instance's figures by its address, over [startMs, endMs): same
 * definitions as a revision's, the label being the address.
 */
export function instanceStats(records: Iterable<AccessRecord>, address: string, startMs: number, endMs: number): TrafficStats {
  const t = new Tally();
  for (const r of records) {
    if (r.timeMs < startMs || r.timeMs >= endMs) continue;
    addRecord(
      r,
      (a) => (a === address ? address : undefined),
      () => t,
    );
  }
  return t.finish(address, startMs, endMs);
}

export interface MixedVersionWindow {
  /** When the new revision served its first response in the window, or null. */
  firstNewMs: number | null;
  /** The old revisions' last response in the window, or null. */
  lastOldMs: number | null;
  /** When the new revision served its last response in the window, or null. */
  lastNewMs: number | null;
  /** min(lastOldMs, lastNewMs) − firstNewMs when both revisions served and overlapped; else 0. */
  windowMs: number;
}

export interface DeployHealth {
  startMs: number;
  endMs: number;
  /** Every request that ended in the window. */
  requests: number;
  /** Requests whose client got a 5xx, whoever produced it (dropped ones included). */
  errors5xx: number;
  /**
   * Requests no instance answered: nginx itself sent 502 or 504 because the
   * last attempt got no response (refused, reset, timed out) or because no
   * server was live ("no live upstreams"). A subset of errors5xx. These are
   * the requests a zero-downtime deploy must not lose.
   */
  dropped: number;
  /**
   * 499s: the client closed the connection before the answer. Reported, but
   * neither an error nor dropped: clients give up in steady state too (health
   * checkers, impatient browsers), so counting them would make a clean deploy
   * look lossy. A deploy that stalls requests shows up in their latency, and
   * a jump in this number next to a normal baseline is worth a look.
   */
  clientClosed: number;
  /** Requests no revision could be named for (see the module comment); their errors are in the totals above. */
  unattributed: number;
  /** The mixed-version window as users saw it; see deployHealth. */
  mixedVersion: MixedVersionWindow;
  /** The first new instance's figures over the window (the free canary), when its address was given. */
  firstNewInstance: TrafficStats | null;
}

export interface DeployWindow {
  startMs: number;
  endMs: number;
  revisionOf: RevisionOf;
  /** The label revisionOf gives the new revision's instances; every other label is "old". */
  newRevision: string;
  /** Address of the first new instance that took traffic. */
  firstNewAddress?: string | undefined;
}

/**
 * The numbers every deploy ends with, over the closed window [startMs, endMs].
 *
 * Mixed-version window: from the first response served by the new revision to
 * the last response served by any other (old) revision, both by the time the
 * response ended; or, when the new revision stopped serving before the old did
 * (a rollout rolled back, a canary aborted, a blue-green switch back), to the
 * new revision's last response: the time users could get either version,
 * not the time the old one went on alone. "Served" = the final attempt got a response from the app
 * (any status: a 404 from the old version is still the old version); nginx's
 * own 502/504 and 499s serve no version. windowMs is 0 when the two did not
 * overlap (recreate: the old stopped before the new started; blue-green: one
 * reload apart, up to requests in flight) or when either never served.
 *
 *   old answers at 100, 150, 400 ms; new answers at 300, 500 ms
 *   → firstNewMs 300, lastOldMs 400, windowMs 100
 *   old answers at 100, 900 ms; new answers at 300, 450 ms (then rolled back)
 *   → firstNewMs 300, lastNewMs 450, lastOldMs 900, windowMs 150
 */
export function deployHealth(records: Iterable<AccessRecord>, w: DeployWindow): DeployHealth {
  let requests = 0;
  let errors5xx = 0;
  let dropped = 0;
  let clientClosed = 0;
  let unattributed = 0;
  let firstNew = Infinity;
  let lastNew = -Infinity;
  let lastOld = -Infinity;
  const inWindow: AccessRecord[] = [];
  for (const r of records) {
    if (r.timeMs < w.startMs || r.timeMs > w.endMs) continue;
    inWindow.push(r);
    requests++;
    if (r.status >= 500) errors5xx++;
    if (r.status === 499) clientClosed++;
    const last = attemptsOf(r).at(-1);
    if ((r.status === 502 || r.status === 504) && last !== undefined && last.outcome === 'failed') dropped++;
    const rev = last === undefined ? undefined : w.revisionOf(last.address);
    if (rev === undefined) {
      unattributed++;
      continue;
    }
    if (last!.outcome !== 'answered') continue;
    if (rev === w.newRevision) {
      firstNew = Math.min(firstNew, r.timeMs);
      lastNew = Math.max(lastNew, r.timeMs);
    } else lastOld = Math.max(lastOld, r.timeMs);
  }
  const firstNewMs = firstNew === Infinity ? null : firstNew;
  const lastOldMs = lastOld === -Infinity ? null : lastOld;
  const lastNewMs = lastNew === -Infinity ? null : lastNew;
  return {
    startMs: w.startMs,
    endMs: w.endMs,
    requests,
    errors5xx,
    dropped,
    clientClosed,
    unattributed,
    mixedVersion: {
      firstNewMs,
      lastOldMs,
      lastNewMs,
      windowMs: firstNewMs !== null && lastOldMs !== null && lastNewMs !== null ? Math.max(0, Math.min(lastOldMs, lastNewMs) - firstNewMs) : 0,
    },
    // endMs + 1: instanceStats is half-open, the deploy window closed.
    firstNewInstance: w.firstNewAddress === undefined ? null : { ...instanceStats(inWindow, w.firstNewAddress, w.startMs, w.endMs + 1), endMs: w.endMs },
  };
}
