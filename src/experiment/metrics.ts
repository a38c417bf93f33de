/**
 * Numbers from the records that load probes collect during a deploy: how many
 * requests failed and how, latency percentiles, the mixed-version window and
 * a per-second breakdown for charts.
 *
 * PURE: no I/O, no clock, no randomness. Every function takes the records
 * and returns plain data, so an experiment report can be recomputed from a
 * saved record file and each number checked by hand.
 */

export interface RequestRecord {
  /** ms since the probe run started, when the request was sent */
  t: number;
  method: 'GET' | 'POST';
  path: string;
  /** HTTP status, or undefined when the request failed without one */
  status?: number;
  /** e.g. 'timeout', 'ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'socket hang up' */
  error?: string;
  latencyMs: number;
  /** X-App-Version of the response, when there was one */
  version?: string;
  /**
   * Keep-alive probes only: the first attempt went out on a reused
   * connection that failed before any byte of a response arrived (nginx
   * closed it in a reload), and the request was sent once more on a fresh
   * connection, as browsers and Go's http.Transport do. status/error/version
   * are the second attempt's; latencyMs covers both.
   */
  retried?: true;
  /** The first attempt's error when retried, e.g. 'ECONNRESET'. */
  retryError?: string;
}

export interface MethodSummary {
  total: number;
  ok: number;
  failed: number;
  /** Requests sent twice because a reused keep-alive connection failed (see RequestRecord.retried); counted in ok/failed by their final outcome. */
  retried: number;
  /** "200": n, "502": n, "error:ECONNRESET": n, ... */
  byStatus: Record<string, number>;
}

export interface RequestSummary {
  total: number;
  ok: number;
  failed: number;
  /** Never hidden: how many of `total` needed a second attempt (keep-alive probes only). */
  retried: number;
  byMethod: Record<string, MethodSummary>;
  latencyMs: { p50: number; p95: number; p99: number; max: number };
}

export interface MixedVersionWindow {
  startMs: number;
  endMs: number;
  windowMs: number;
}

export interface SecondBucket {
  /** Start of the bucket, ms since the probe run started. */
  t: number;
  /** Successful responses per answering version ('unknown' when the header was missing). */
  byVersion: Record<string, number>;
  failed: number;
}

/**
 * A request counts as successful when the backend answered with a 2xx/3xx and
 * the whole response arrived. A record can carry both a status and an error
 * when the connection died mid-body; the client got a broken response then,
 * which is exactly what a zero-downtime deploy must not produce.
 */
export function isOkByDefault(r: RequestRecord): boolean {
  return r.status !== undefined && r.status >= 200 && r.status < 400 && r.error === undefined;
}

/**
 * The byStatus key: the error wins over the status, so a truncated 200 is not
 * hidden among the good ones; a failure with neither is still counted.
 */
export function outcomeKey(r: RequestRecord): string {
  if (r.error !== undefined) return `error:${r.error}`;
  if (r.status !== undefined) return String(r.status);
  return 'error:unknown';
}

/** Nearest-rank percentile of an ascending array: the smallest value with at least p% at or below it. */
function nearestRank(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return 0;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[rank - 1]!;
}

export function summarizeRequests(records: readonly RequestRecord[], isOk: (r: RequestRecord) => boolean = isOkByDefault): RequestSummary {
  const byMethod: Record<string, MethodSummary> = {};
  let ok = 0;
  let retried = 0;
  for (const r of records) {
    const m = (byMethod[r.method] ??= { total: 0, ok: 0, failed: 0, retried: 0, byStatus: {} });
    m.total++;
    if (r.retried) {
      m.retried++;
      retried++;
    }
    if (isOk(r)) {
      m.ok++;
      ok++;
    } else m.failed++;
    const key = outcomeKey(r);
    m.byStatus[key] = (m.byStatus[key] ?? 0) + 1;
  }
  // Failed requests stay in the latency figures: a request that hung for the
  // whole timeout is the latency a user saw, and dropping it would flatter p99.
  const lat = records.map((r) => r.latencyMs).sort((a, b) => a - b);
  return {
    total: records.length,
    ok,
    failed: records.length - ok,
    retried,
    byMethod,
    latencyMs: {
      p50: nearestRank(lat, 50),
      p95: nearestRank(lat, 95),
      p99: nearestRank(lat, 99),
      max: lat.length === 0 ? 0 : lat[lat.length - 1]!,
    },
  };
}

/**
 * The stretch of time during which a client could get either version: from
 * the first successful answer by `newVersion` to the last successful answer
 * by `oldVersion`. Times are when the answer arrived (t + latencyMs), since
 * that is when a client sees which version served it; a 200 ms POST sent just
 * before the switch was still served by the old version 200 ms later.
 *
 * A recreate-style deploy (old gone before new starts) has end < start and
 * gets windowMs 0 rather than a negative number. Undefined when one of the
 * versions never answered successfully: there was no mix to measure.
 */
export function mixedVersionWindow(
  records: readonly RequestRecord[],
  oldVersion: string,
  newVersion: string,
  isOk: (r: RequestRecord) => boolean = isOkByDefault,
): MixedVersionWindow | undefined {
  let firstNew = Infinity;
  let lastOld = -Infinity;
  for (const r of records) {
    if (r.version === undefined || !isOk(r)) continue;
    const answeredAt = r.t + r.latencyMs;
    if (r.version === newVersion && answeredAt < firstNew) firstNew = answeredAt;
    if (r.version === oldVersion && answeredAt > lastOld) lastOld = answeredAt;
  }
  if (firstNew === Infinity || lastOld === -Infinity) return undefined;
  return { startMs: firstNew, endMs: lastOld, windowMs: Math.max(0, lastOld - firstNew) };
}

/**
 * Counts per time bucket for charts. A request lands in the bucket it was
 * SENT in, not the one it finished in: a request that timed out after 5 s
 * belongs to the moment the backend went away, which is what a chart of a
 * deploy should show. Buckets run contiguously from 0 to the last request, so
 * a quiet second shows up as an empty bucket instead of vanishing.
 */
export function perSecond(records: readonly RequestRecord[], bucketMs = 1000, isOk: (r: RequestRecord) => boolean = isOkByDefault): SecondBucket[] {
  if (!(bucketMs > 0) || !Number.isFinite(bucketMs)) {
    throw new RangeError(`bucketMs must be a positive number, got ${bucketMs}`);
  }
  if (records.length === 0) return [];
  let last = 0;
  for (const r of records) last = Math.max(last, Math.floor(Math.max(0, r.t) / bucketMs));
  const buckets: SecondBucket[] = Array.from({ length: last + 1 }, (_, i) => ({
    t: i * bucketMs,
    byVersion: {},
    failed: 0,
  }));
  for (const r of records) {
    const b = buckets[Math.floor(Math.max(0, r.t) / bucketMs)]!;
    if (isOk(r)) {
      const v = r.version ?? 'unknown';
      b.byVersion[v] = (b.byVersion[v] ?? 0) + 1;
    } else b.failed++;
  }
  return buckets;
}

/**
 * The version that answered a request, when the app answered it: a whole
 * response (any status) carrying X-App-Version. A 500 the app sent is its
 * answer; nginx's own 502/504, a reset or a timeout is nobody's.
 */
export function answeredBy(r: RequestRecord): string | undefined {
  return r.status !== undefined && r.error === undefined ? r.version : undefined;
}

export interface Span {
  startMs: number;
  endMs: number;
}

/** What ends a span of a version's answers: a gap longer than max(minGapMs, gapFactor × the median gap between them). */
export interface SpanOptions {
  minGapMs: number;
  gapFactor: number;
}

export const SPAN_DEFAULTS: SpanOptions = { minGapMs: 1000, gapFactor: 5 };

/**
 * When `version` was answering: its answers (answeredBy; at the moment each
 * arrived, t + latencyMs) in spans. A gap between two answers longer than
 * max(minGapMs, gapFactor × the median gap between its answers) ends a span:
 * the version was out of traffic there (a blue-green switch and back, a
 * canary taken out and a later one). The threshold scales with the version's
 * own rate, so a canary at a few percent is not cut into pieces. One answer
 * is a span of length 0; no answer, no span.
 */
export function versionSpans(records: readonly RequestRecord[], version: string, o: SpanOptions = SPAN_DEFAULTS): Span[] {
  const times = records
    .filter((r) => answeredBy(r) === version)
    .map((r) => r.t + r.latencyMs)
    .sort((a, b) => a - b);
  if (times.length === 0) return [];
  const gaps = times
    .slice(1)
    .map((t, i) => t - times[i]!)
    .sort((a, b) => a - b);
  const median = gaps.length === 0 ? 0 : gaps.length % 2 === 1 ? gaps[gaps.length >> 1]! : (gaps[gaps.length / 2 - 1]! + gaps[gaps.length / 2]!) / 2;
  const maxGap = Math.max(o.minGapMs, o.gapFactor * median);
  const spans: Span[] = [{ startMs: times[0]!, endMs: times[0]! }];
  for (const t of times.slice(1)) {
    const last = spans[spans.length - 1]!;
    if (t - last.endMs > maxGap) spans.push({ startMs: t, endMs: t });
    else last.endMs = t;
  }
  return spans;
}

export interface MixedVersionSpans {
  /** Where both versions were answering. */
  spans: Span[];
  /** Their total length. */
  windowMs: number;
}

/**
 * The mixed-version window as the overlap of the two versions' spans
 * (versionSpans): the time during which a client could get either version.
 * For a deploy that moves forward once it is mixedVersionWindow (from the
 * first answer by the new version to the last by the old one); it also holds
 * when the new version is taken out again: a canary removed by its analysis
 * (the time it answered beside stable), a blue-green switch and switch back
 * (the two switches, each about one reload, not the time in between, when
 * only the new set answered). Undefined when one of the versions never
 * answered.
 */
export function mixedVersionSpans(
  records: readonly RequestRecord[],
  oldVersion: string,
  newVersion: string,
  o: SpanOptions = SPAN_DEFAULTS,
): MixedVersionSpans | undefined {
  const olds = versionSpans(records, oldVersion, o);
  const news = versionSpans(records, newVersion, o);
  if (olds.length === 0 || news.length === 0) return undefined;
  const spans: Span[] = [];
  for (const a of olds) {
    for (const b of news) {
      const startMs = Math.max(a.startMs, b.startMs);
      const endMs = Math.min(a.endMs, b.endMs);
      if (endMs > startMs) spans.push({ startMs, endMs });
    }
  }
  spans.sort((a, b) => a.startMs - b.startMs);
  return { spans, windowMs: spans.reduce((n, s) => n + (s.endMs - s.startMs), 0) };
}

/** What the new version did, from the probes' records (see newVersionFigures). */
export interface NewVersionFigures {
  /** Requests it answered (answeredBy), over the whole recording. */
  answered: number;
  /** Requests sent between the deploy's start and end, and how many of them it answered. */
  sentInDeploy: number;
  answeredInDeploy: number;
  /** Failed requests it answered itself (e.g. the bad version's 500s). */
  ownFailures: number;
  /** Every other failed request: resets, refused connections, timeouts, nginx's 502/504, the old version's errors. */
  otherFailures: number;
  /** When its first and last answers arrived (ms on the probes' clock); null when it answered none. */
  firstAnswerMs: number | null;
  lastAnswerMs: number | null;
  /** When the first failed answer it gave arrived; null when none. */
  firstOwnFailureMs: number | null;
}

/**
 * How much traffic the new version took and how its failures split from the
 * rest; `deploy` is the deploy window (requests by send time).
 */
export function newVersionFigures(
  records: readonly RequestRecord[],
  newVersion: string,
  deploy: { startMs: number; endMs: number },
  isOk: (r: RequestRecord) => boolean = isOkByDefault,
): NewVersionFigures {
  const f: NewVersionFigures = {
    answered: 0,
    sentInDeploy: 0,
    answeredInDeploy: 0,
    ownFailures: 0,
    otherFailures: 0,
    firstAnswerMs: null,
    lastAnswerMs: null,
    firstOwnFailureMs: null,
  };
  for (const r of records) {
    const mine = answeredBy(r) === newVersion;
    const inDeploy = r.t >= deploy.startMs && r.t <= deploy.endMs;
    if (inDeploy) f.sentInDeploy++;
    const ok = isOk(r);
    if (!ok && !mine) f.otherFailures++;
    if (!mine) continue;
    const at = r.t + r.latencyMs;
    f.answered++;
    if (inDeploy) f.answeredInDeploy++;
    f.firstAnswerMs = f.firstAnswerMs === null ? at : Math.min(f.firstAnswerMs, at);
    f.lastAnswerMs = f.lastAnswerMs === null ? at : Math.max(f.lastAnswerMs, at);
    if (!ok) {
      f.ownFailures++;
      f.firstOwnFailureMs = f.firstOwnFailureMs === null ? at : Math.min(f.firstOwnFailureMs, at);
    }
  }
  return f;
}
