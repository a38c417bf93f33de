import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  answeredBy,
  mixedVersionSpans,
  mixedVersionWindow,
  newVersionFigures,
  perSecond,
  versionSpans,
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

/** `n` GETs every `everyMs` from `from`, answered by `version` (5 ms each). */
const series = (from: number, n: number, everyMs: number, version: string, status = 200) =>
  Array.from({ length: n }, (_, i) => get(from + i * everyMs, status, version));

describe('answeredBy', () => {
  const rows: { name: string; r: RequestRecord; want: string | undefined }[] = [
    { name: 'a 200 with its header', r: get(0, 200, '1.1.0'), want: '1.1.0' },
    { name: "the app's own 500 is its answer", r: get(0, 500, '1.1.0'), want: '1.1.0' },
    { name: "nginx's 502 carries no version", r: get(0, 502), want: undefined },
    { name: "a body cut off is nobody's answer", r: get(0, 200, '1.0.0', 5, 'ECONNRESET'), want: undefined },
    { name: 'a timeout', r: get(0, undefined, undefined, 5000, 'timeout'), want: undefined },
  ];
  for (const row of rows) it(row.name, () => assert.equal(answeredBy(row.r), row.want));
});

describe('versionSpans', () => {
  const rows: { name: string; records: RequestRecord[]; want: { startMs: number; endMs: number }[] }[] = [
    { name: 'no answer, no span', records: [get(0, 200, '1.0.0')], want: [] },
    { name: 'one answer is a span of length 0', records: [get(100, 200, '1.1.0')], want: [{ startMs: 105, endMs: 105 }] },
    { name: 'steady answers are one span, first to last arrival', records: series(0, 11, 100, '1.1.0'), want: [{ startMs: 5, endMs: 1005 }] },
    {
      name: 'a gap above max(1 s, 5 × the median gap) ends a span (a switch and a switch back)',
      records: [...series(0, 10, 100, '1.1.0'), ...series(3000, 10, 100, '1.1.0')],
      want: [
        { startMs: 5, endMs: 905 },
        { startMs: 3005, endMs: 3905 },
      ],
    },
    {
      name: 'a sparse version (an answer every 400 ms) is not cut at 1.5 s gaps: the threshold is 5 × its median gap',
      records: [...series(0, 5, 400, '1.1.0'), ...series(3100, 5, 400, '1.1.0')],
      want: [{ startMs: 5, endMs: 4705 }],
    },
    {
      name: "its 500s count as answers; others' answers and failures do not",
      records: [get(0, 500, '1.1.0'), get(50, 502), get(100, 200, '1.0.0'), get(200, 200, '1.1.0')],
      want: [{ startMs: 5, endMs: 205 }],
    },
  ];
  for (const row of rows) it(row.name, () => assert.deepEqual(versionSpans(row.records, '1.1.0'), row.want));
});

describe('mixedVersionSpans: the time both versions were answering', () => {
  const rows: { name: string; records: RequestRecord[]; want: ReturnType<typeof mixedVersionSpans> }[] = [
    {
      name: 'a rolling update: from the first new answer to the last old one (as mixedVersionWindow)',
      records: [...series(0, 30, 100, '1.0.0'), ...series(1000, 40, 100, '1.1.0')],
      want: { spans: [{ startMs: 1005, endMs: 2905 }], windowMs: 1900 },
    },
    {
      name: 'a canary taken out: the time it answered beside stable, not until the end',
      records: [...series(0, 100, 50, '1.0.0'), ...series(1000, 20, 200, '1.1.0')],
      want: { spans: [{ startMs: 1005, endMs: 4805 }], windowMs: 3800 },
    },
    {
      name: 'blue-green switched and switched back: the two switches, not the time only the new set answered',
      records: [
        ...series(0, 20, 50, '1.0.0'),
        get(1000, 201, '1.0.0', 40),
        ...series(1010, 60, 50, '1.1.0'),
        get(3990, 200, '1.1.0', 30),
        ...series(4000, 20, 50, '1.0.0'),
      ],
      want: {
        spans: [
          { startMs: 1015, endMs: 1040 },
          { startMs: 4005, endMs: 4020 },
        ],
        windowMs: 40,
      },
    },
    { name: 'recreate: no overlap, 0', records: [...series(0, 10, 100, '1.0.0'), ...series(2000, 10, 100, '1.1.0')], want: { spans: [], windowMs: 0 } },
    { name: 'the new version never answered: undefined', records: series(0, 10, 100, '1.0.0'), want: undefined },
  ];
  for (const row of rows) it(row.name, () => assert.deepEqual(mixedVersionSpans(row.records, '1.0.0', '1.1.0'), row.want));
});

describe('newVersionFigures: its traffic, its own failures and the rest', () => {
  const records = [
    get(0, 200, '1.0.0'),
    get(1000, 200, '1.1.0'),
    get(1100, 500, '1.1.0', 20),
    get(1200, 502),
    get(1300, 200, '1.0.0', 5, 'ECONNRESET'),
    get(1400, 503, '1.0.0'),
    post(2000, 201, '1.1.0'),
    get(5000, 500, '1.1.0'),
  ];
  const f = newVersionFigures(records, '1.1.0', { startMs: 500, endMs: 3000 });
  it('answered: over the whole recording; in the deploy: by send time', () => {
    assert.deepEqual([f.answered, f.answeredInDeploy, f.sentInDeploy], [4, 3, 6]);
  });
  it("its own failures (the 500s with its header) apart from every other (502, a reset, the old version's 503)", () => {
    assert.deepEqual([f.ownFailures, f.otherFailures], [2, 3]);
  });
  it('first and last answer, first own failure, at arrival', () => {
    assert.deepEqual([f.firstAnswerMs, f.lastAnswerMs, f.firstOwnFailureMs], [1005, 5005, 1120]);
  });
  it('a new version that never answered: zeros and nulls', () => {
    assert.deepEqual(newVersionFigures([get(0, 200, '1.0.0'), get(10, 502)], '1.1.0', { startMs: 0, endMs: 100 }), {
      answered: 0,
      sentInDeploy: 2,
      answeredInDeploy: 0,
      ownFailures: 0,
      otherFailures: 1,
      firstAnswerMs: null,
      lastAnswerMs: null,
      firstOwnFailureMs: null,
    });
  });
});
