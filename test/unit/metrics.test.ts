import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  mixedVersionWindow,
  perSecond,
  summarizeRequests,
  type RequestRecord,
  type RequestSummary,
} from '../../src/experiment/metrics.js';

// Small builders so each row reads like a line of probe output.
const get = (t: number, status: number | undefined, version?: string, latencyMs = 5, error?: string): RequestRecord => ({
  t,
  method: 'GET',
  path: '/api/books',
  latencyMs,
  ...(status === undefined ? {} : { status }),
  ...(version === undefined ? {} : { version }),
  ...(error === undefined ? {} : { error }),
});
const post = (t: number, status: number | undefined, version?: string, latencyMs = 200, error?: string): RequestRecord => ({
  ...get(t, status, version, latencyMs, error),
  method: 'POST',
  path: '/api/orders',
});

describe('summarizeRequests', () => {
  const rows: { name: string; records: RequestRecord[]; isOk?: (r: RequestRecord) => boolean; want: RequestSummary }[] = [
    {
      name: 'empty input gives zeros',
      records: [],
      want: { total: 0, ok: 0, failed: 0, retried: 0, byMethod: {}, latencyMs: { p50: 0, p95: 0, p99: 0, max: 0 } },
    },
    {
      name: 'one request: every percentile is its latency',
      records: [get(0, 200, '1.0.0', 7)],
      want: {
        total: 1,
        ok: 1,
        failed: 0,
        retried: 0,
        byMethod: { GET: { total: 1, ok: 1, failed: 0, retried: 0, byStatus: { '200': 1 } } },
        latencyMs: { p50: 7, p95: 7, p99: 7, max: 7 },
      },
    },
    {
      name: 'mixed outcomes: 2xx/3xx ok, 4xx/5xx and errors failed, keyed by status or error',
      records: [
        get(0, 200, '1.0.0', 1),
        get(100, 304, '1.0.0', 2),
        get(200, 502, undefined, 3),
        get(300, undefined, undefined, 4, 'ECONNREFUSED'),
        get(400, 404, '1.0.0', 5),
        post(0, 201, '1.0.0', 200),
        post(200, undefined, undefined, 5000, 'timeout'),
        post(5200, undefined, undefined, 10, 'ECONNRESET'),
      ],
      want: {
        total: 8,
        ok: 3,
        failed: 5,
        retried: 0,
        byMethod: {
          GET: { total: 5, ok: 2, failed: 3, retried: 0, byStatus: { '200': 1, '304': 1, '502': 1, 'error:ECONNREFUSED': 1, '404': 1 } },
          POST: { total: 3, ok: 1, failed: 2, retried: 0, byStatus: { '201': 1, 'error:timeout': 1, 'error:ECONNRESET': 1 } },
        },
        // sorted latencies: 1 2 3 4 5 10 200 5000; nearest rank: p50 = 4th, p95 = p99 = 8th
        latencyMs: { p50: 4, p95: 5000, p99: 5000, max: 5000 },
      },
    },
    {
      name: 'a 200 whose body was cut off is a failure, keyed by its error',
      records: [get(0, 200, '1.0.0', 3, 'ECONNRESET'), get(100, 200, '1.0.0', 3)],
      want: {
        total: 2,
        ok: 1,
        failed: 1,
        retried: 0,
        byMethod: { GET: { total: 2, ok: 1, failed: 1, retried: 0, byStatus: { 'error:ECONNRESET': 1, '200': 1 } } },
        latencyMs: { p50: 3, p95: 3, p99: 3, max: 3 },
      },
    },
    {
      name: 'retried requests (keep-alive resends) are counted apart, and as ok or failed by their final outcome',
      records: [
        { ...get(0, 200, '1.0.0', 30), retried: true, retryError: 'ECONNRESET' },
        { ...post(10, undefined, undefined, 3, 'ECONNRESET'), retried: true, retryError: 'ECONNRESET' },
        get(20, 200, '1.0.0', 2),
      ],
      want: {
        total: 3,
        ok: 2,
        failed: 1,
        retried: 2,
        byMethod: {
          GET: { total: 2, ok: 2, failed: 0, retried: 1, byStatus: { '200': 2 } },
          POST: { total: 1, ok: 0, failed: 1, retried: 1, byStatus: { 'error:ECONNRESET': 1 } },
        },
        latencyMs: { p50: 3, p95: 30, p99: 30, max: 30 },
      },
    },
    {
      name: 'no status and no error still counts as a failure',
      records: [get(0, undefined, undefined, 1)],
      want: {
        total: 1,
        ok: 0,
        failed: 1,
        retried: 0,
        byMethod: { GET: { total: 1, ok: 0, failed: 1, retried: 0, byStatus: { 'error:unknown': 1 } } },
        latencyMs: { p50: 1, p95: 1, p99: 1, max: 1 },
      },
    },
    {
      name: 'nearest-rank percentiles over 100 latencies 1..100 (given out of order)',
      records: Array.from({ length: 100 }, (_, i) => get(i * 10, 200, '1.0.0', 100 - i)),
      want: {
        total: 100,
        ok: 100,
        failed: 0,
        retried: 0,
        byMethod: { GET: { total: 100, ok: 100, failed: 0, retried: 0, byStatus: { '200': 100 } } },
        latencyMs: { p50: 50, p95: 95, p99: 99, max: 100 },
      },
    },
    {
      name: 'a custom isOk (only 201 counts) changes ok/failed but not byStatus',
      records: [post(0, 201, '1.0.0'), post(200, 200, '1.0.0')],
      isOk: (r) => r.status === 201,
      want: {
        total: 2,
        ok: 1,
        failed: 1,
        retried: 0,
        byMethod: { POST: { total: 2, ok: 1, failed: 1, retried: 0, byStatus: { '201': 1, '200': 1 } } },
        latencyMs: { p50: 200, p95: 200, p99: 200, max: 200 },
      },
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(summarizeRequests(row.records, row.isOk), row.want);
    });
  }
});

describe('mixedVersionWindow', () => {
  // Times are when the answer arrived: t + latencyMs (GETs here take 5 ms).
  const rows: { name: string; records: RequestRecord[]; want: ReturnType<typeof mixedVersionWindow> }[] = [
    {
      name: 'overlapping versions: first new answer to last old answer',
      records: [
        get(0, 200, '1.0.0'),
        get(1000, 200, '1.0.0'),
        get(1100, 200, '1.1.0'),
        get(1200, 200, '1.0.0'),
        get(2000, 200, '1.0.0'),
        get(2100, 200, '1.1.0'),
        get(3000, 200, '1.1.0'),
      ],
      want: { startMs: 1105, endMs: 2005, windowMs: 900 },
    },
    {
      name: 'a slow POST answered by the old version extends the window to its answer',
      records: [get(0, 200, '1.0.0'), get(1000, 200, '1.1.0'), post(900, 201, '1.0.0', 200), get(2000, 200, '1.1.0')],
      want: { startMs: 1005, endMs: 1100, windowMs: 95 },
    },
    {
      name: 'no overlap (recreate-like): old gone before new answers, window 0',
      records: [
        get(0, 200, '1.0.0'),
        get(500, 200, '1.0.0'),
        get(600, 502),
        get(700, undefined, undefined, 1, 'ECONNREFUSED'),
        get(2000, 200, '1.1.0'),
        get(2500, 200, '1.1.0'),
      ],
      want: { startMs: 2005, endMs: 505, windowMs: 0 },
    },
    {
      name: 'only the old version answered: undefined',
      records: [get(0, 200, '1.0.0'), get(100, 200, '1.0.0')],
      want: undefined,
    },
    {
      name: 'only the new version answered: undefined',
      records: [get(0, 200, '1.1.0'), get(100, 200, '1.1.0')],
      want: undefined,
    },
    {
      name: 'no records: undefined',
      records: [],
      want: undefined,
    },
    {
      name: 'failed requests are ignored, even when they carry a version header',
      records: [
        get(0, 200, '1.0.0'),
        get(100, 500, '1.1.0'), // the new version answered, but with an error
        get(200, 200, '1.1.0'),
        get(300, 503, '1.0.0'), // the old version refusing work while terminating
        get(400, 200, '1.0.0', 5, 'ECONNRESET'), // cut off mid-body
        get(500, 200, '1.1.0'),
      ],
      want: { startMs: 205, endMs: 5, windowMs: 0 },
    },
    {
      name: 'failures of the only new-version answers leave nothing to measure: undefined',
      records: [get(0, 200, '1.0.0'), get(100, 502, '1.1.0')],
      want: undefined,
    },
    {
      name: 'other versions (a third, or none) do not count',
      records: [get(0, 200, '1.0.0'), get(100, 200, '0.9.0'), get(200, 200), get(300, 200, '1.1.0'), get(400, 200, '1.0.0')],
      want: { startMs: 305, endMs: 405, windowMs: 100 },
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(mixedVersionWindow(row.records, '1.0.0', '1.1.0'), row.want);
    });
  }
});

describe('perSecond', () => {
  const rows: { name: string; records: RequestRecord[]; bucketMs?: number; want: ReturnType<typeof perSecond> }[] = [
    { name: 'no records: no buckets', records: [], want: [] },
    {
      name: 'counts per version and failures, bucketed by send time',
      records: [
        get(0, 200, '1.0.0'),
        get(100, 200, '1.0.0'),
        get(999, 200, '1.1.0'),
        get(1000, 200, '1.1.0'),
        get(1500, 502),
        post(1800, undefined, undefined, 5000, 'timeout'), // sent in second 1, fails 5 s later
        get(1900, 200, '1.0.0'),
      ],
      want: [
        { t: 0, byVersion: { '1.0.0': 2, '1.1.0': 1 }, failed: 0 },
        { t: 1000, byVersion: { '1.1.0': 1, '1.0.0': 1 }, failed: 2 },
      ],
    },
    {
      name: 'quiet seconds become empty buckets; records need not be sorted',
      records: [get(3200, 200, '1.1.0'), get(0, 200, '1.0.0')],
      want: [
        { t: 0, byVersion: { '1.0.0': 1 }, failed: 0 },
        { t: 1000, byVersion: {}, failed: 0 },
        { t: 2000, byVersion: {}, failed: 0 },
        { t: 3000, byVersion: { '1.1.0': 1 }, failed: 0 },
      ],
    },
    {
      name: 'a success without a version header is counted as unknown',
      records: [get(10, 200)],
      want: [{ t: 0, byVersion: { unknown: 1 }, failed: 0 }],
    },
    {
      name: 'custom bucket size (250 ms)',
      records: [get(0, 200, '1.0.0'), get(249, 200, '1.0.0'), get(250, 200, '1.1.0'), get(600, undefined, undefined, 1, 'EPIPE')],
      bucketMs: 250,
      want: [
        { t: 0, byVersion: { '1.0.0': 2 }, failed: 0 },
        { t: 250, byVersion: { '1.1.0': 1 }, failed: 0 },
        { t: 500, byVersion: {}, failed: 1 },
      ],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(perSecond(row.records, row.bucketMs), row.want);
    });
  }

  it('rejects a bucket size that is not positive', () => {
    assert.throws(() => perSecond([get(0, 200)], 0), RangeError);
    assert.throws(() => perSecond([get(0, 200)], -1), RangeError);
    assert.throws(() => perSecond([get(0, 200)], Number.NaN), RangeError);
  });
});
