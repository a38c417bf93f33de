/**
 * Traffic figures from access log records (src/core/logStats.ts): nearest-rank
 * percentiles on known data, attribution of retried requests, connection
 * failures told from the app's own 5xx, intervals, and the deploy window's
 * numbers (5xx, dropped, 499, mixed-version window, first new instance).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { AccessRecord } from '../../src/core/accessLog.js';
import {
  deployHealth,
  instanceStats,
  percentile,
  revisionStats,
  statsByInterval,
  summarizeLatency,
  type DeployHealth,
  type RevisionOf,
  type TrafficStats,
} from '../../src/core/logStats.js';

// The fleet: two instances of 1.0.0, one of 1.1.0.
const OLD_A = '10.0.0.2:8080';
const OLD_B = '10.0.0.3:8080';
const NEW_A = '10.0.0.4:8080';
const revisions: Record<string, string> = { [OLD_A]: '1.0.0', [OLD_B]: '1.0.0', [NEW_A]: '1.1.0' };
const revisionOf: RevisionOf = (a) => revisions[a];

/**
 * One record as the parser returns it. `attempts` lists each upstream attempt
 * as "address status" with status "-" for none; a trailing "!" marks an
 * attempt whose server sent no header (nginx's own 502/504).
 */
function rec(timeMs: number, status: number, attempts: string[], requestTimeMs = 5): AccessRecord {
  const parts = attempts.map((a) => {
    const [address, s] = a.split(' ') as [string, string];
    const noHeader = s.endsWith('!') || s === '-';
    const code = s.replace('!', '');
    return { address, status: code === '-' ? null : Number(code), header: noHeader ? null : 1 };
  });
  return {
    timeMs,
    status,
    method: 'GET',
    uri: '/api/books',
    requestTimeMs,
    upstreamAddr: parts.map((p) => p.address),
    upstreamStatus: parts.map((p) => p.status),
    upstreamTimeMs: parts.map(() => 1),
    upstreamHeaderTimeMs: parts.map((p) => p.header),
  };
}

const ok = (t: number, addr: string, ms = 5) => rec(t, 200, [`${addr} 200`], ms);

/** The counting fields of TrafficStats, for compact expectations. */
type Counts = Pick<TrafficStats, 'requests' | 'errors5xx' | 'clientClosed' | 'connectionFailures' | 'retriedFailures' | 'attempts' | 'errors' | 'errorRate'>;
const counts = (s: TrafficStats | undefined): Counts | undefined =>
  s && {
    requests: s.requests,
    errors5xx: s.errors5xx,
    clientClosed: s.clientClosed,
    connectionFailures: s.connectionFailures,
    retriedFailures: s.retriedFailures,
    attempts: s.attempts,
    errors: s.errors,
    errorRate: s.errorRate,
  };
const zero: Counts = { requests: 0, errors5xx: 0, clientClosed: 0, connectionFailures: 0, retriedFailures: 0, attempts: 0, errors: 0, errorRate: 0 };

describe('percentile (nearest rank)', () => {
  const oneToHundred = Array.from({ length: 100 }, (_, i) => i + 1);
  const rows: { name: string; sorted: number[]; p: number; want: number }[] = [
    { name: '1..100: p50 is 50', sorted: oneToHundred, p: 50, want: 50 },
    { name: '1..100: p95 is 95', sorted: oneToHundred, p: 95, want: 95 },
    { name: '1..100: p99 is 99', sorted: oneToHundred, p: 99, want: 99 },
    { name: '1..100: p100 is the maximum', sorted: oneToHundred, p: 100, want: 100 },
    { name: 'four values: p50 is the 2nd (rank ceil(2))', sorted: [10, 20, 30, 40], p: 50, want: 20 },
    { name: 'four values: p51 is the 3rd (rank ceil(2.04))', sorted: [10, 20, 30, 40], p: 51, want: 30 },
    { name: 'ten values: p99 is the maximum (fewer than 100)', sorted: [1, 1, 1, 1, 1, 1, 1, 1, 1, 900], p: 99, want: 900 },
    { name: 'ten values: p50 is the 5th', sorted: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], p: 50, want: 5 },
    { name: 'one value: every percentile is it', sorted: [7], p: 1, want: 7 },
    { name: 'p0 is the minimum (rank at least 1)', sorted: [3, 4], p: 0, want: 3 },
    { name: 'no values: 0', sorted: [], p: 99, want: 0 },
  ];
  for (const row of rows) it(row.name, () => assert.equal(percentile(row.sorted, row.p), row.want));

  it('summarizeLatency sorts its input', () => assert.deepEqual(summarizeLatency([30, 10, 20]), { p50: 20, p95: 30, p99: 30, max: 30 }));
  it('summarizeLatency of 1000 values: 1..1000 ms', () => {
    const lat = Array.from({ length: 1000 }, (_, i) => 1000 - i);
    assert.deepEqual(summarizeLatency(lat), { p50: 500, p95: 950, p99: 990, max: 1000 });
  });
});

describe('revisionStats', () => {
  const rows: { name: string; records: AccessRecord[]; want: Record<string, Counts>; unattributed?: Counts }[] = [
    {
      name: 'requests split by the revision of the answering address',
      records: [ok(0, OLD_A), ok(1, OLD_B), ok(2, NEW_A)],
      want: { '1.0.0': { ...zero, requests: 2, attempts: 2 }, '1.1.0': { ...zero, requests: 1, attempts: 1 } },
    },
    {
      name: 'an app 500 is a 5xx of its revision, not a connection failure',
      records: [rec(0, 500, [`${NEW_A} 500`]), ok(1, NEW_A), ok(2, NEW_A), ok(3, NEW_A)],
      want: { '1.1.0': { ...zero, requests: 4, errors5xx: 1, attempts: 4, errors: 1, errorRate: 0.25 } },
    },
    {
      name: 'a 502 the app returned itself (header received) is a 5xx, not a connection failure',
      records: [rec(0, 502, [`${NEW_A} 502`])],
      want: { '1.1.0': { ...zero, requests: 1, errors5xx: 1, attempts: 1, errors: 1, errorRate: 1 } },
    },
    {
      name: "retried request: counts for the revision that answered; the failed attempt is a connection failure of the first server's revision",
      records: [rec(0, 200, [`${NEW_A} 502!`, `${OLD_A} 200`])],
      want: {
        '1.0.0': { ...zero, requests: 1, attempts: 1 },
        '1.1.0': { ...zero, connectionFailures: 1, retriedFailures: 1, attempts: 1, errors: 1, errorRate: 1 },
      },
    },
    {
      name: 'retried twice (timeout, then refused), then answered',
      records: [rec(0, 200, [`${NEW_A} 504!`, `${OLD_B} 502!`, `${OLD_A} 200`])],
      want: {
        '1.0.0': { ...zero, requests: 1, connectionFailures: 1, retriedFailures: 1, attempts: 2, errors: 1, errorRate: 0.5 },
        '1.1.0': { ...zero, connectionFailures: 1, retriedFailures: 1, attempts: 1, errors: 1, errorRate: 1 },
      },
    },
    {
      name: "every attempt failed: the last server's revision gets the request, its 5xx and a connection failure",
      records: [rec(0, 502, [`${OLD_A} 502!`, `${NEW_A} 502!`])],
      want: {
        '1.0.0': { ...zero, connectionFailures: 1, retriedFailures: 1, attempts: 1, errors: 1, errorRate: 1 },
        '1.1.0': { ...zero, requests: 1, errors5xx: 1, connectionFailures: 1, attempts: 1, errors: 1, errorRate: 1 },
      },
    },
    {
      name: 'a 499 counts as a request and clientClosed, not as an error',
      records: [rec(0, 499, [`${NEW_A} -`], 3000), ok(1, NEW_A)],
      want: { '1.1.0': { ...zero, requests: 2, clientClosed: 1, attempts: 2 } },
    },
    {
      name: 'no upstream, no live upstreams and an unknown server are unattributed',
      records: [rec(0, 204, []), rec(1, 502, ['bookstore_api 502!']), ok(2, '10.9.9.9:8080'), ok(3, OLD_A)],
      want: { '1.0.0': { ...zero, requests: 1, attempts: 1 } },
      unattributed: { ...zero, requests: 3, errors5xx: 1, connectionFailures: 1, attempts: 3, errors: 1, errorRate: 1 / 3 },
    },
    {
      name: 'the window is half-open: a record at endMs is left out, one at startMs kept',
      records: [ok(999, OLD_A), ok(1000, OLD_A), ok(1999, OLD_A), ok(2000, OLD_A)],
      want: { '1.0.0': { ...zero, requests: 2, attempts: 2 } },
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const start = row.name.startsWith('the window') ? 1000 : 0;
      const s = revisionStats(row.records, revisionOf, start, start + 1000);
      assert.deepEqual(Object.fromEntries(Object.entries(s.byRevision).map(([k, v]) => [k, counts(v)])), row.want);
      assert.deepEqual(counts(s.unattributed), row.unattributed ?? zero);
    });
  }

  it('latency percentiles per revision, failed requests included', () => {
    const records = [
      ...Array.from({ length: 99 }, (_, i) => ok(i, OLD_A, 10)),
      rec(99, 504, [`${OLD_A} 504!`], 1000),
      ...Array.from({ length: 20 }, (_, i) => ok(i, NEW_A, i + 1)),
    ];
    const s = revisionStats(records, revisionOf, 0, 1000);
    assert.deepEqual(s.byRevision['1.0.0']?.latencyMs, { p50: 10, p95: 10, p99: 10, max: 1000 });
    assert.deepEqual(s.byRevision['1.1.0']?.latencyMs, { p50: 10, p95: 19, p99: 20, max: 20 });
  });

  it('labels, startMs and endMs are carried for messages', () => {
    const s = revisionStats([ok(5, NEW_A)], revisionOf, 0, 10_000);
    assert.equal(s.byRevision['1.1.0']?.label, '1.1.0');
    assert.equal(s.byRevision['1.1.0']?.startMs, 0);
    assert.equal(s.byRevision['1.1.0']?.endMs, 10_000);
  });
});

describe('statsByInterval', () => {
  const records = [ok(100, OLD_A), ok(9_999, NEW_A), ok(10_000, NEW_A), rec(25_000, 500, [`${NEW_A} 500`])];
  const rows: {
    name: string;
    opts: { startMs: number; intervalMs: number; endMs?: number };
    want: { startMs: number; endMs: number; requests: Record<string, number> }[];
  }[] = [
    {
      name: 'consecutive intervals; a record on a boundary goes to the later one; a quiet interval is kept',
      opts: { startMs: 0, intervalMs: 10_000, endMs: 40_000 },
      want: [
        { startMs: 0, endMs: 10_000, requests: { '1.0.0': 1, '1.1.0': 1 } },
        { startMs: 10_000, endMs: 20_000, requests: { '1.1.0': 1 } },
        { startMs: 20_000, endMs: 30_000, requests: { '1.1.0': 1 } },
        { startMs: 30_000, endMs: 40_000, requests: {} },
      ],
    },
    {
      name: 'default end: just past the last record; the last interval is cut there',
      opts: { startMs: 0, intervalMs: 10_000 },
      want: [
        { startMs: 0, endMs: 10_000, requests: { '1.0.0': 1, '1.1.0': 1 } },
        { startMs: 10_000, endMs: 20_000, requests: { '1.1.0': 1 } },
        { startMs: 20_000, endMs: 25_001, requests: { '1.1.0': 1 } },
      ],
    },
    {
      name: 'records before startMs are left out',
      opts: { startMs: 5_000, intervalMs: 10_000, endMs: 15_000 },
      want: [{ startMs: 5_000, endMs: 15_000, requests: { '1.1.0': 2 } }],
    },
    { name: 'an empty range has no intervals', opts: { startMs: 0, intervalMs: 10_000, endMs: 0 }, want: [] },
  ];
  for (const row of rows) {
    it(row.name, () =>
      assert.deepEqual(
        statsByInterval(records, revisionOf, row.opts).map((w) => ({
          startMs: w.startMs,
          endMs: w.endMs,
          requests: Object.fromEntries(Object.entries(w.byRevision).map(([k, v]) => [k, v.requests])),
        })),
        row.want,
      ),
    );
  }

  it('refuses a zero interval', () => assert.throws(() => statsByInterval(records, revisionOf, { startMs: 0, intervalMs: 0 }), RangeError));
});

describe('instanceStats', () => {
  it('one address, retried attempts included', () => {
    const records = [ok(0, NEW_A), rec(1, 500, [`${NEW_A} 500`]), rec(2, 200, [`${NEW_A} 502!`, `${OLD_A} 200`]), ok(3, OLD_A)];
    assert.deepEqual(counts(instanceStats(records, NEW_A, 0, 10)), {
      requests: 2,
      errors5xx: 1,
      clientClosed: 0,
      connectionFailures: 1,
      retriedFailures: 1,
      attempts: 3,
      errors: 2,
      errorRate: 2 / 3,
    });
  });
});

describe('deployHealth', () => {
  type Want = Omit<DeployHealth, 'firstNewInstance' | 'startMs' | 'endMs'> & { firstNew?: Counts | null };
  const rows: { name: string; records: AccessRecord[]; window?: { startMs: number; endMs: number }; firstNewAddress?: string; want: Want }[] = [
    {
      name: 'a clean rolling deploy: old until 400 ms, new from 300 ms → 100 ms mixed',
      records: [ok(100, OLD_A), ok(150, OLD_B), ok(300, NEW_A), ok(400, OLD_A), ok(500, NEW_A)],
      firstNewAddress: NEW_A,
      want: {
        requests: 5,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: 300, lastOldMs: 400, lastNewMs: 500, windowMs: 100 },
        firstNew: { ...zero, requests: 2, attempts: 2 },
      },
    },
    {
      name: "dropped = nginx's own 502/504 after the last attempt failed, or no live upstreams; app 5xx and 499 are not dropped",
      records: [
        rec(100, 502, [`${OLD_A} 502!`]), // refused, nothing left to try: dropped
        rec(110, 504, [`${OLD_B} 504!`]), // timed out: dropped
        rec(120, 502, ['bookstore_api 502!']), // no live upstreams: dropped, unattributed
        rec(130, 500, [`${NEW_A} 500`]), // the app's 500: a 5xx, not dropped
        rec(140, 502, [`${NEW_A} 502`]), // the app's own 502 (header received): not dropped
        rec(150, 499, [`${OLD_A} -`]), // client gave up: neither
        rec(160, 200, [`${OLD_A} 502!`, `${NEW_A} 200`]), // retried and answered: fine for the user
      ],
      firstNewAddress: NEW_A,
      want: {
        requests: 7,
        errors5xx: 5,
        dropped: 3,
        clientClosed: 1,
        unattributed: 1,
        mixedVersion: { firstNewMs: 130, lastOldMs: null, lastNewMs: 160, windowMs: 0 },
        firstNew: { ...zero, requests: 3, errors5xx: 2, attempts: 3, errors: 2, errorRate: 2 / 3 },
      },
    },
    {
      name: "stopped (rolled back, canary aborted, switched back): the window ends with the new revision's last answer, not the old one's",
      records: [ok(100, OLD_A), ok(300, NEW_A), ok(350, OLD_B), ok(450, NEW_A), ok(900, OLD_A), ok(1200, OLD_B)],
      want: {
        requests: 6,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: 300, lastOldMs: 1200, lastNewMs: 450, windowMs: 150 },
        firstNew: null,
      },
    },
    {
      name: 'no overlap (recreate): old ends before new begins → 0',
      records: [ok(100, OLD_A), ok(200, OLD_A), ok(900, NEW_A)],
      want: {
        requests: 3,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: 900, lastOldMs: 200, lastNewMs: 900, windowMs: 0 },
        firstNew: null,
      },
    },
    {
      name: 'only the old revision answered → 0, firstNewMs null',
      records: [ok(100, OLD_A)],
      want: {
        requests: 1,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: null, lastOldMs: 100, lastNewMs: null, windowMs: 0 },
        firstNew: null,
      },
    },
    {
      name: "an old server's failed attempt or 499 is not an old response (the user saw no old version)",
      records: [ok(100, NEW_A), rec(300, 502, [`${OLD_A} 502!`]), rec(400, 499, [`${OLD_A} -`]), rec(500, 200, [`${OLD_B} 502!`, `${NEW_A} 200`])],
      want: {
        requests: 4,
        errors5xx: 1,
        dropped: 1,
        clientClosed: 1,
        unattributed: 0,
        mixedVersion: { firstNewMs: 100, lastOldMs: null, lastNewMs: 500, windowMs: 0 },
        firstNew: null,
      },
    },
    {
      name: "an old version's 404 is still the old version",
      records: [ok(100, NEW_A), rec(250, 404, [`${OLD_A} 404`]), ok(300, NEW_A)],
      want: {
        requests: 3,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: 100, lastOldMs: 250, lastNewMs: 300, windowMs: 150 },
        firstNew: null,
      },
    },
    {
      name: 'the window is closed: records at startMs and endMs count, outside do not',
      records: [ok(99, OLD_A), ok(100, OLD_A), ok(1000, NEW_A), ok(1001, OLD_A)],
      window: { startMs: 100, endMs: 1000 },
      firstNewAddress: NEW_A,
      want: {
        requests: 2,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: 1000, lastOldMs: 100, lastNewMs: 1000, windowMs: 0 },
        firstNew: { ...zero, requests: 1, attempts: 1 },
      },
    },
    {
      name: 'the first new instance: an instance that crashes is seen through its retried attempts',
      records: [rec(100, 200, [`${NEW_A} 502!`, `${OLD_A} 200`]), rec(200, 200, [`${NEW_A} 502!`, `${OLD_B} 200`]), ok(300, NEW_A), ok(400, NEW_A)],
      firstNewAddress: NEW_A,
      want: {
        requests: 4,
        errors5xx: 0,
        dropped: 0,
        clientClosed: 0,
        unattributed: 0,
        mixedVersion: { firstNewMs: 300, lastOldMs: 200, lastNewMs: 400, windowMs: 0 },
        firstNew: { ...zero, requests: 2, connectionFailures: 2, retriedFailures: 2, attempts: 4, errors: 2, errorRate: 0.5 },
      },
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const window = row.window ?? { startMs: 0, endMs: 10_000 };
      const h = deployHealth(row.records, { ...window, revisionOf, newRevision: '1.1.0', firstNewAddress: row.firstNewAddress });
      const { firstNewInstance, startMs, endMs, ...rest } = h;
      assert.deepEqual({ startMs, endMs }, window);
      const { firstNew, ...want } = row.want;
      assert.deepEqual(rest, want);
      assert.deepEqual(counts(firstNewInstance ?? undefined) ?? null, firstNew ?? null);
      if (firstNewInstance)
        assert.deepEqual([firstNewInstance.label, firstNewInstance.startMs, firstNewInstance.endMs], [row.firstNewAddress, window.startMs, window.endMs]);
    });
  }
});
