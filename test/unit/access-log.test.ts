/**
 * The access log parser (src/core/accessLog.ts, src/core/lineSplitter.ts): the shipped log format, the
 * line splitter (partial lines, UTF-8 split across chunks, oversized lines),
 * the line parser on what nginx really writes (retries, no live upstreams,
 * a client that left, no upstream at all) and garbage counted, not thrown.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  AccessLogParser,
  LOG_FORMAT,
  attemptsOf,
  isServerAddress,
  parseAccessLine,
  renderLogFormat,
  stickyKeyVariable,
  UnsafeStickyKeyError,
  type AccessRecord,
  type UpstreamAttempt,
} from '../../src/core/accessLog.js';
import { LineSplitter } from '../../src/core/lineSplitter.js';
import { line } from '../support/access-log-lines.js';

describe('the shipped log format', () => {
  it('templates/fleetroll-log-format.conf holds exactly LOG_FORMAT (comments aside)', () => {
    const file = readFileSync(new URL('../../templates/fleetroll-log-format.conf', import.meta.url), 'utf8');
    const directive = file
      .split('\n')
      .filter((l) => !l.startsWith('#'))
      .join('\n');
    assert.equal(directive.trim(), LOG_FORMAT.trim());
  });

  it('names every field the analysis reads, each value quoted', () => {
    for (const v of [
      '$msec',
      '$status',
      '$request_method',
      '$request_uri',
      '$request_time',
      '$upstream_addr',
      '$upstream_status',
      '$upstream_response_time',
      '$upstream_header_time',
      '$upstream_http_x_app_version',
      '$remote_addr',
    ]) {
      assert.ok(LOG_FORMAT.includes(`"${v}"`), `${v} quoted in the format`);
    }
    assert.match(LOG_FORMAT, /^log_format fleetroll_json escape=json\n/);
  });

  const keys: { name: string; key: string | undefined; want: string }[] = [
    { name: 'default: the client address', key: undefined, want: '$remote_addr' },
    { name: 'client, spelled out', key: 'client', want: '$remote_addr' },
    { name: 'a cookie', key: 'cookie:session', want: '$cookie_session' },
    { name: 'a header: lowercase, dashes to underscores', key: 'header:X-User-Id', want: '$http_x_user_id' },
  ];
  for (const row of keys) {
    it(`sticky key: ${row.name}`, () => {
      assert.equal(stickyKeyVariable(row.key), row.want);
      assert.ok(renderLogFormat(row.key).includes(`"key":"${row.want}"`));
    });
  }

  const unsafe: { name: string; key: string }[] = [
    { name: 'a quote in a cookie name', key: "cookie:a'b" },
    { name: 'a semicolon in a header name', key: 'header:X;include' },
    { name: 'a brace', key: 'header:X}' },
    { name: 'an unknown kind', key: 'arg:user' },
    { name: 'an empty name', key: 'cookie:' },
  ];
  for (const row of unsafe) {
    it(`refuses a sticky key with ${row.name}`, () => assert.throws(() => renderLogFormat(row.key), UnsafeStickyKeyError));
  }
});

describe('LineSplitter', () => {
  const rows: { name: string; chunks: (string | Uint8Array)[]; want: string[][]; pending?: number }[] = [
    { name: 'whole lines in one chunk', chunks: ['a\nb\n'], want: [['a', 'b']] },
    { name: 'a partial last line waits for the next chunk', chunks: ['a\nb', 'c\n'], want: [['a'], ['bc']] },
    { name: 'a line spread over three chunks', chunks: ['{"a"', ':', '1}\n'], want: [[], [], ['{"a":1}']] },
    { name: 'a chunk that is only the newline', chunks: ['abc', '\n'], want: [[], ['abc']] },
    { name: 'CRLF line ends lose the CR', chunks: ['a\r\nb\r', '\n'], want: [['a'], ['b']] },
    { name: 'empty lines are lines', chunks: ['\n\na\n'], want: [['', '', 'a']] },
    { name: 'nothing after the last newline is held', chunks: ['a\nrest'], want: [['a']], pending: 4 },
    {
      name: 'a UTF-8 character split between two Buffers',
      // "é" is 0xC3 0xA9
      chunks: [Buffer.from([0x2f, 0xc3]), Buffer.from([0xa9, 0x0a])],
      want: [[], ['/é']],
    },
    { name: 'strings and Buffers mixed', chunks: ['ab', Buffer.from('c\nd'), 'e\n'], want: [[], ['abc'], ['de']] },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const s = new LineSplitter();
      assert.deepEqual(
        row.chunks.map((c) => s.push(c)),
        row.want,
      );
      assert.equal(s.pendingBytes, row.pending ?? 0);
    });
  }

  it("does not keep a reference to the caller's buffer", () => {
    const s = new LineSplitter();
    const buf = Buffer.from('abc');
    s.push(buf);
    buf.fill(0x7a);
    assert.deepEqual(s.push('\n'), ['abc']);
  });

  it('flush returns the held partial line once (a rotated file that will not grow)', () => {
    const s = new LineSplitter();
    s.push('a\nhalf');
    assert.deepEqual(s.flush(), ['half']);
    assert.deepEqual(s.flush(), []);
  });

  it('reset drops the held partial line (its file was truncated)', () => {
    const s = new LineSplitter();
    s.push('half');
    assert.equal(s.reset(), 4);
    assert.deepEqual(s.push('new\n'), ['new']);
  });

  const oversized: { name: string; chunks: string[]; want: string[][]; count: number }[] = [
    { name: 'a too-long line inside one chunk is dropped', chunks: ['ok\n0123456789\nok2\n'], want: [['ok', 'ok2']], count: 1 },
    { name: 'a too-long partial line is dropped up to its newline', chunks: ['0123456789', 'abc', 'def\nok\n'], want: [[], [], ['ok']], count: 1 },
    { name: 'a line growing past the limit across chunks', chunks: ['01234', '56789\nok\n'], want: [[], ['ok']], count: 1 },
    { name: 'exactly the limit is kept', chunks: ['01234567\n'], want: [['01234567']], count: 0 },
  ];
  for (const row of oversized) {
    it(`maxLineBytes: ${row.name}`, () => {
      const s = new LineSplitter(8);
      assert.deepEqual(
        row.chunks.map((c) => s.push(c)),
        row.want,
      );
      assert.equal(s.oversized, row.count);
    });
  }
});

describe('parseAccessLine', () => {
  const base: AccessRecord = {
    timeMs: 1712345678123,
    status: 200,
    method: 'GET',
    uri: '/api/books',
    requestTimeMs: 4,
    upstreamAddr: ['10.0.0.2:8080'],
    upstreamStatus: [200],
    upstreamTimeMs: [3],
    upstreamHeaderTimeMs: [2],
    appVersion: '1.0.0',
    key: '192.0.2.7',
  };
  const rows: { name: string; line: string; want: AccessRecord }[] = [
    { name: 'a plain proxied request', line: line(), want: base },
    {
      name: 'a request nginx retried on a second server',
      line: line({
        upstream_addr: '10.0.0.2:8080, 10.0.0.3:8080',
        upstream_status: '502, 200',
        upstream_response_time: '0.000, 0.003',
        upstream_header_time: '-, 0.003',
      }),
      want: { ...base, upstreamAddr: ['10.0.0.2:8080', '10.0.0.3:8080'], upstreamStatus: [502, 200], upstreamTimeMs: [0, 3], upstreamHeaderTimeMs: [null, 3] },
    },
    {
      name: 'an internal redirect to a second upstream group (" : ")',
      line: line({
        upstream_addr: '10.0.0.2:8080 : 10.0.0.9:8080',
        upstream_status: '404 : 200',
        upstream_response_time: '0.001 : 0.002',
        upstream_header_time: '0.001 : 0.002',
      }),
      want: { ...base, upstreamAddr: ['10.0.0.2:8080', '10.0.0.9:8080'], upstreamStatus: [404, 200], upstreamTimeMs: [1, 2], upstreamHeaderTimeMs: [1, 2] },
    },
    {
      name: 'no live upstreams: the group name as the address',
      line: line({
        status: '502',
        upstream_addr: 'bookstore_api',
        upstream_status: '502',
        upstream_response_time: '0.000',
        upstream_header_time: '-',
        app_version: '',
      }),
      want: {
        ...base,
        status: 502,
        upstreamAddr: ['bookstore_api'],
        upstreamStatus: [502],
        upstreamTimeMs: [0],
        upstreamHeaderTimeMs: [null],
        appVersion: undefined as never,
      },
    },
    {
      name: 'the client closed first (499, upstream status "-")',
      line: line({ status: '499', upstream_status: '-', upstream_response_time: '0.082', upstream_header_time: '-', app_version: '', request_time: '0.082' }),
      want: {
        ...base,
        status: 499,
        requestTimeMs: 82,
        upstreamStatus: [null],
        upstreamTimeMs: [82],
        upstreamHeaderTimeMs: [null],
        appVersion: undefined as never,
      },
    },
    {
      name: 'answered by nginx itself: every upstream field empty',
      line: line({ status: '204', upstream_addr: '', upstream_status: '', upstream_response_time: '', upstream_header_time: '', app_version: '' }),
      want: { ...base, status: 204, upstreamAddr: [], upstreamStatus: [], upstreamTimeMs: [], upstreamHeaderTimeMs: [], appVersion: undefined as never },
    },
    {
      name: 'a "-" address (a format without escape=json): no upstream',
      line: line({ status: '204', upstream_addr: '-', upstream_status: '', upstream_response_time: '', upstream_header_time: '', app_version: '' }),
      want: { ...base, status: 204, upstreamAddr: [], upstreamStatus: [], upstreamTimeMs: [], upstreamHeaderTimeMs: [], appVersion: undefined as never },
    },
    {
      name: 'no X-App-Version and no key: both left out',
      line: line({ app_version: '', key: '' }),
      want: { ...base, appVersion: undefined as never, key: undefined as never },
    },
    {
      name: 'numbers instead of strings are accepted (a hand-written format)',
      line: line({ fleetroll: '1', time: 1712345678.123, status: 200, request_time: 0.004 }),
      want: base,
    },
    {
      name: 'an older line without upstream_header_time',
      line: line({ upstream_header_time: undefined }),
      want: { ...base, upstreamHeaderTimeMs: [] },
    },
    {
      name: 'a JSON-escaped URI',
      line: line({ uri: '/x?q="a\\b' }),
      want: { ...base, uri: '/x?q="a\\b' },
    },
    { name: 'status "000" (no status was ever set)', line: line({ status: '000' }), want: { ...base, status: 0 } },
    { name: 'surrounding whitespace and a CR', line: ` ${line()}\r`, want: base },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const p = parseAccessLine(row.line);
      assert.ok(p.ok, p.ok ? '' : p.reason);
      const want = Object.fromEntries(Object.entries(row.want).filter(([, v]) => v !== undefined));
      assert.deepEqual(p.record, want);
    });
  }

  const garbage: { name: string; line: string; reason: RegExp }[] = [
    { name: 'an empty line', line: '', reason: /empty/ },
    { name: 'a combined-format line', line: '127.0.0.1 - - [01/Dec/2026:04:33:43 +0000] "GET / HTTP/1.1" 200 2 "-" "curl/8"', reason: /not a JSON object/ },
    { name: 'half a JSON line', line: line().slice(0, 40), reason: /not valid JSON/ },
    { name: 'a JSON array', line: '[1,2]', reason: /not a JSON object/ },
    { name: 'JSON from another format (no marker)', line: JSON.stringify({ time: '1', status: '200' }), reason: /marker/ },
    { name: 'a later format version', line: line({ fleetroll: 2 }), reason: /marker/ },
    { name: 'a time that is not $msec', line: line({ time: '01/Dec/2026' }), reason: /time/ },
    { name: 'a status that is not a number', line: line({ status: 'OK' }), reason: /status/ },
    { name: 'a negative request time', line: line({ request_time: '-1' }), reason: /request_time/ },
    { name: 'a missing uri', line: line({ uri: undefined }), reason: /uri/ },
    { name: 'a word in upstream_status', line: line({ upstream_status: '200, oops' }), reason: /upstream_status/ },
    { name: 'a "-" address', line: line({ upstream_addr: '10.0.0.2:8080, -' }), reason: /upstream_addr/ },
  ];
  for (const row of garbage) {
    it(`garbage: ${row.name}`, () => {
      const p = parseAccessLine(row.line);
      assert.equal(p.ok, false);
      if (!p.ok) assert.match(p.reason, row.reason);
    });
  }
});

describe('attemptsOf', () => {
  const rec = (over: Record<string, unknown>): AccessRecord => {
    const p = parseAccessLine(line(over));
    assert.ok(p.ok);
    return p.record;
  };
  const rows: { name: string; record: AccessRecord; want: Pick<UpstreamAttempt, 'address' | 'outcome'>[] }[] = [
    { name: 'one answered attempt', record: rec({}), want: [{ address: '10.0.0.2:8080', outcome: 'answered' }] },
    {
      name: 'a failed connection retried on another server',
      record: rec({
        upstream_addr: '10.0.0.2:8080, 10.0.0.3:8080',
        upstream_status: '502, 200',
        upstream_response_time: '0.000, 0.003',
        upstream_header_time: '-, 0.003',
      }),
      want: [
        { address: '10.0.0.2:8080', outcome: 'failed' },
        { address: '10.0.0.3:8080', outcome: 'answered' },
      ],
    },
    {
      name: 'a 502 the app itself returned (it sent a header) is an answer',
      record: rec({ status: '502', upstream_status: '502', upstream_header_time: '0.010' }),
      want: [{ address: '10.0.0.2:8080', outcome: 'answered' }],
    },
    {
      name: 'an upstream timeout (504, no header) failed',
      record: rec({ status: '504', upstream_status: '504', upstream_header_time: '-' }),
      want: [{ address: '10.0.0.2:8080', outcome: 'failed' }],
    },
    {
      name: "without header times a 502 is taken as nginx's",
      record: rec({ status: '502', upstream_status: '502', upstream_header_time: undefined }),
      want: [{ address: '10.0.0.2:8080', outcome: 'failed' }],
    },
    {
      name: 'the client left before the answer',
      record: rec({ status: '499', upstream_status: '-', upstream_header_time: '-' }),
      want: [{ address: '10.0.0.2:8080', outcome: 'abandoned' }],
    },
    { name: 'no upstream tried', record: rec({ upstream_addr: '', upstream_status: '', upstream_response_time: '', upstream_header_time: '' }), want: [] },
  ];
  for (const row of rows) {
    it(row.name, () =>
      assert.deepEqual(
        attemptsOf(row.record).map((a) => ({ address: a.address, outcome: a.outcome })),
        row.want,
      ),
    );
  }

  const addresses: [string, boolean][] = [
    ['10.0.0.2:8080', true],
    ['[fd00::2]:8080', true],
    ['unix:/run/app.sock', true],
    ['bookstore_api', false],
  ];
  for (const [address, want] of addresses) it(`isServerAddress(${address}) is ${want}`, () => assert.equal(isServerAddress(address), want));
});

describe('AccessLogParser', () => {
  it('counts garbage and blank lines, skips them and keeps the last garbage with its reason', () => {
    const p = new AccessLogParser();
    const records = p.parse([line(), 'nginx: [warn] something', '', line({ status: '500' }), '{"half":', line({ fleetroll: 7 })]);
    assert.deepEqual(
      records.map((r) => r.status),
      [200, 500],
    );
    assert.deepEqual(p.counts, { lines: 6, records: 2, garbage: 3, blank: 1 });
    assert.match(p.lastGarbage?.reason ?? '', /marker/);
  });

  it('cuts a long garbage line in lastGarbage', () => {
    const p = new AccessLogParser();
    p.parse(['x'.repeat(1000)]);
    assert.equal(p.lastGarbage?.line.length, 201);
  });

  it('never throws, whatever the line (fuzz with every prefix of a real line)', () => {
    const p = new AccessLogParser();
    const full = line({ upstream_addr: '10.0.0.2:8080, 10.0.0.3:8080', upstream_status: '502, 200' });
    const prefixes = Array.from({ length: full.length }, (_, i) => full.slice(0, i));
    assert.doesNotThrow(() => p.parse(prefixes));
    assert.equal(p.counts.records, 0);
    assert.equal(p.counts.garbage + p.counts.blank, full.length);
  });
});
