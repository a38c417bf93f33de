/**
 * nginx's own access log as fleetroll's source of truth about traffic during a
 * rollout: which revision answered, with what status and how fast. No metrics
 * system is needed, only a `log_format` fleetroll ships (`fleetroll_json`,
 * below and in templates/fleetroll-log-format.conf) and the lines nginx writes
 * with it. This module and ./lineSplitter.ts turn bytes into typed records:
 *
 *   chunks (file reads, docker exec output, a log stream)
 *     → LineSplitter      complete lines; a partial last line waits for the next chunk
 *                         (./lineSplitter.ts)
 *     → parseAccessLine   one line → AccessRecord, or a reason why it is not one
 *     → AccessLogParser   the two together, counting garbage instead of throwing
 *
 * Worked example (a request nginx retried on a second server because the
 * first refused the connection; values straight from nginx 1.22):
 *
 *   {"fleetroll":1,"time":"1712345678.123","status":"200","method":"GET",
 *    "uri":"/api/books","request_time":"0.004",
 *    "upstream_addr":"10.0.0.2:8080, 10.0.0.3:8080","upstream_status":"502, 200",
 *    "upstream_response_time":"0.000, 0.003","upstream_header_time":"-, 0.003",
 *    "app_version":"1.1.0","key":"192.0.2.7"}
 *   → { timeMs: 1712345678123, status: 200, method: 'GET', uri: '/api/books',
 *       requestTimeMs: 4, upstreamAddr: ['10.0.0.2:8080', '10.0.0.3:8080'],
 *       upstreamStatus: [502, 200], upstreamTimeMs: [0, 3],
 *       upstreamHeaderTimeMs: [null, 3], appVersion: '1.1.0', key: '192.0.2.7' }
 *
 * nginx specifics this relies on (checked against the real binary):
 * - `escape=json` escapes `"`, `\` and control bytes, and writes a variable that
 *   is not set (no X-App-Version header, no upstream) as an empty string, not "-".
 * - The `$upstream_*` variables list one value per server tried, joined by ", ";
 *   an internal redirect to another upstream group adds " : " between groups.
 *   A value is "-" where that attempt has none (no status when the client
 *   closed first; no header time when the server never answered).
 * - With no server available ("no live upstreams") `$upstream_addr` holds the
 *   upstream group's NAME and `$upstream_status` 502.
 * - `$msec` is when the line was written, i.e. when the response ended.
 * - Every value is quoted in the format, even the numeric ones: `$status` can be
 *   "000" (a request that never got a status), which is not a JSON number.
 *
 * PURE: no I/O, no clock.
 */
import { FleetrollError } from '../errors.js';

/** The name of the log format, as `access_log ... fleetroll_json;` uses it. */
export const LOG_FORMAT_NAME = 'fleetroll_json';

/** The value of the marker field every fleetroll_json line starts with; bumped if the fields change incompatibly. */
export const LOG_FORMAT_VERSION = 1;

/** A sticky key nginx cannot name as a variable (validation refuses it first): E_UNSAFE_VALUE, exit 1. */
export class UnsafeStickyKeyError extends FleetrollError {
  constructor(message: string) {
    super('E_UNSAFE_VALUE', message);
  }
}

/**
 * The nginx variable for a sticky key as the fleet file spells it:
 *   undefined or "client"  → $remote_addr (the default key)
 *   "cookie:session"       → $cookie_session
 *   "header:X-User"        → $http_x_user
 * Names are restricted to what nginx can name as a variable, so nothing a
 * user writes can reach the config as syntax.
 */
export function stickyKeyVariable(key?: string): string {
  if (key === undefined || key === 'client') return '$remote_addr';
  const cookie = /^cookie:([A-Za-z0-9_]{1,64})$/.exec(key);
  if (cookie) return `$cookie_${cookie[1]}`;
  const header = /^header:([A-Za-z0-9][A-Za-z0-9-]{0,63})$/.exec(key);
  if (header) return `$http_${header[1]!.toLowerCase().replace(/-/g, '_')}`;
  throw new UnsafeStickyKeyError(
    `sticky key must be "client", "cookie:<name>" (letters, digits, "_") or "header:<name>" (letters, digits, "-"), got ${JSON.stringify(key)}`,
  );
}

/**
 * The `log_format fleetroll_json` directive (http context). `stickyKey` picks
 * the variable logged as "key" (see stickyKeyVariable): the canary split's
 * key, so a test or a human can check that one key stayed on one revision.
 *
 * Each field and why analysis needs it:
 *   fleetroll               marker: tells our lines from any other JSON on the same stream
 *   time ($msec)            when the response ended: puts the line in an interval / deploy window
 *   status                  what the client got (5xx rate, 499 = client gave up)
 *   method, uri             which requests failed, for a human reading the figures
 *   request_time            the latency the client saw (p50/p95/p99)
 *   upstream_addr           which instance(s) nginx tried: mapped to a revision by the caller
 *   upstream_status         per attempt: a 502/504 there is a failed connection attempt
 *   upstream_response_time  per attempt, for the record
 *   upstream_header_time    per attempt: "-" = that server never sent a response header,
 *                           which tells nginx's own 502/504 from one the app returned
 *   app_version             X-App-Version of the answer when the app sends one (optional)
 *   key                     the sticky key, when the canary split uses one
 *
 * A cookie used as the key is logged in clear: if it is a session secret,
 * key on something else or keep the log private.
 */
export function renderLogFormat(stickyKey?: string): string {
  const fields: [string, string][] = [
    ['time', '$msec'],
    ['status', '$status'],
    ['method', '$request_method'],
    ['uri', '$request_uri'],
    ['request_time', '$request_time'],
    ['upstream_addr', '$upstream_addr'],
    ['upstream_status', '$upstream_status'],
    ['upstream_response_time', '$upstream_response_time'],
    ['upstream_header_time', '$upstream_header_time'],
    ['app_version', '$upstream_http_x_app_version'],
    ['key', stickyKeyVariable(stickyKey)],
  ];
  const parts = [`{"fleetroll":${LOG_FORMAT_VERSION}`, ...fields.map(([k, v]) => `"${k}":"${v}"`)];
  // Three fields per line keep the directive readable; nginx concatenates the quoted pieces.
  const lines: string[] = [];
  for (let i = 0; i < parts.length; i += 3) lines.push(`    '${parts.slice(i, i + 3).join(',')}${i + 3 < parts.length ? ',' : '}'}'`);
  return `log_format ${LOG_FORMAT_NAME} escape=json\n${lines.join('\n')};\n`;
}

/**
 * The format as shipped in templates/fleetroll-log-format.conf (sticky key =
 * the client address). Use it in nginx.conf's http block:
 *
 *   include /etc/nginx/fleetroll-log-format.conf;
 *   access_log /var/log/nginx/access.log fleetroll_json;
 */
export const LOG_FORMAT = renderLogFormat();

/** One line of the access log, typed. Times are integer milliseconds. */
export interface AccessRecord {
  /** When nginx wrote the line (the response had ended), ms since the epoch. */
  timeMs: number;
  /** The status the client got; 499 = the client closed the connection first. */
  status: number;
  method: string;
  uri: string;
  /** The latency the client saw ($request_time). */
  requestTimeMs: number;
  /**
   * Every upstream server nginx tried, in order; the last one gave the final
   * answer. Empty when nginx answered without an upstream. A value that is not
   * an address (no port) is an upstream group with no live server.
   */
  upstreamAddr: string[];
  /** Per attempt; null where nginx logged "-" (no status: the client left first). */
  upstreamStatus: (number | null)[];
  /** Per attempt ($upstream_response_time); null for "-". */
  upstreamTimeMs: (number | null)[];
  /** Per attempt ($upstream_header_time); null = no response header came from that server. */
  upstreamHeaderTimeMs: (number | null)[];
  /** X-App-Version of the final answer, when the app sent one. */
  appVersion?: string;
  /** The sticky key, when it was set. */
  key?: string;
}

/** One upstream attempt of a request: the i-th entries of the record's upstream lists. */
export interface UpstreamAttempt {
  address: string;
  status: number | null;
  timeMs: number | null;
  headerTimeMs: number | null;
  /**
   * What happened on this attempt:
   *   answered   the server sent a response header (any status, 5xx included)
   *   failed     no response: connection refused/reset/timed out, or no live
   *              server; nginx logged 502 or 504 for it ("connection failure")
   *   abandoned  no status at all: the client closed before the server answered
   */
  outcome: 'answered' | 'failed' | 'abandoned';
}

/** The record's attempts, oldest first; the last one is the final answer's. */
export function attemptsOf(r: AccessRecord): UpstreamAttempt[] {
  return r.upstreamAddr.map((address, i) => {
    const status = r.upstreamStatus[i] ?? null;
    const headerTimeMs = r.upstreamHeaderTimeMs[i] ?? null;
    // Without header times (an older line), a 502/504 in upstream_status is taken as nginx's own.
    const knowsHeader = r.upstreamHeaderTimeMs.length === r.upstreamAddr.length;
    let outcome: UpstreamAttempt['outcome'];
    if (status === null) outcome = 'abandoned';
    else if (knowsHeader ? headerTimeMs === null && (status === 502 || status === 504) : status === 502 || status === 504) outcome = 'failed';
    else outcome = 'answered';
    return { address, status, timeMs: r.upstreamTimeMs[i] ?? null, headerTimeMs, outcome };
  });
}

/** "10.0.0.2:8080", "[fd00::2]:8080" or "unix:/run/app.sock"; false for an upstream group name. */
export function isServerAddress(address: string): boolean {
  return /:[0-9]{1,5}$/.test(address) || address.startsWith('unix:');
}

export type ParsedLine = { ok: true; record: AccessRecord } | { ok: false; reason: string };

const NUMBER_RE = /^[0-9]+(?:\.[0-9]+)?$/;
/** Separators inside $upstream_* values: ", " between servers of one group, " : " between groups. */
const LIST_SEPARATOR = /\s*,\s*|\s+:\s+/;

function num(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) && v >= 0 ? v : undefined;
  if (typeof v === 'string' && NUMBER_RE.test(v)) return Number(v);
  return undefined;
}

function seconds(v: unknown): number | undefined {
  const n = num(v);
  return n === undefined ? undefined : Math.round(n * 1000);
}

/**
 * A $upstream_* list: "" (no upstream) → []; a "-" entry → null (so "-" alone
 * is one attempt without that value). Undefined when an entry is malformed.
 */
function list<T>(v: unknown, each: (s: string) => T | undefined): (T | null)[] | undefined {
  if (v === undefined || v === '') return [];
  if (typeof v === 'number') v = String(v);
  if (typeof v !== 'string') return undefined;
  const out: (T | null)[] = [];
  for (const s of v.trim().split(LIST_SEPARATOR)) {
    if (s === '-') {
      out.push(null);
      continue;
    }
    const x = each(s);
    if (x === undefined) return undefined;
    out.push(x);
  }
  return out;
}

const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * One line → a record, or why it is not one (never throws). A line is a
 * fleetroll_json line when it is a JSON object with the marker field and the
 * required fields in shape; `app_version`, `key` and `upstream_header_time`
 * may be missing or empty.
 */
export function parseAccessLine(line: string): ParsedLine {
  const text = line.trim();
  if (text === '') return { ok: false, reason: 'empty line' };
  if (!text.startsWith('{')) return { ok: false, reason: 'not a JSON object' };
  let o: unknown;
  try {
    o = JSON.parse(text);
  } catch {
    return { ok: false, reason: 'not valid JSON' };
  }
  if (typeof o !== 'object' || o === null || Array.isArray(o)) return { ok: false, reason: 'not a JSON object' };
  const j = o as Record<string, unknown>;
  if (num(j.fleetroll) !== LOG_FORMAT_VERSION) return { ok: false, reason: `no "fleetroll":${LOG_FORMAT_VERSION} marker (not the ${LOG_FORMAT_NAME} format)` };
  const timeMs = seconds(j.time);
  if (timeMs === undefined) return { ok: false, reason: `time must be $msec, got ${JSON.stringify(j.time)}` };
  const status = num(j.status);
  if (status === undefined || !Number.isInteger(status) || status > 999)
    return { ok: false, reason: `status must be an HTTP status, got ${JSON.stringify(j.status)}` };
  const requestTimeMs = seconds(j.request_time);
  if (requestTimeMs === undefined) return { ok: false, reason: `request_time must be seconds, got ${JSON.stringify(j.request_time)}` };
  const method = str(j.method);
  const uri = str(j.uri);
  if (method === undefined || uri === undefined) return { ok: false, reason: 'method and uri must be strings' };
  // "-" for the address is how a format without escape=json spells "no upstream".
  const upstreamAddr = j.upstream_addr === '-' ? [] : list(j.upstream_addr, (s) => (s === '' ? undefined : s));
  if (upstreamAddr === undefined || upstreamAddr.includes(null))
    return { ok: false, reason: `upstream_addr must list addresses, got ${JSON.stringify(j.upstream_addr)}` };
  const upstreamStatus = list(j.upstream_status, (s) => (/^[0-9]{1,3}$/.test(s) ? Number(s) : undefined));
  if (upstreamStatus === undefined) return { ok: false, reason: `upstream_status must list statuses, got ${JSON.stringify(j.upstream_status)}` };
  const upstreamTimeMs = list(j.upstream_response_time, seconds);
  if (upstreamTimeMs === undefined) return { ok: false, reason: `upstream_response_time must list seconds, got ${JSON.stringify(j.upstream_response_time)}` };
  const upstreamHeaderTimeMs = list(j.upstream_header_time, seconds);
  if (upstreamHeaderTimeMs === undefined) return { ok: false, reason: `upstream_header_time must list seconds, got ${JSON.stringify(j.upstream_header_time)}` };
  const record: AccessRecord = {
    timeMs,
    status,
    method,
    uri,
    requestTimeMs,
    upstreamAddr: upstreamAddr as string[],
    upstreamStatus,
    upstreamTimeMs,
    upstreamHeaderTimeMs,
  };
  const appVersion = str(j.app_version);
  if (appVersion) record.appVersion = appVersion;
  const key = str(j.key);
  if (key) record.key = key;
  return { ok: true, record };
}

export interface ParseCounts {
  /** Lines seen, blank ones included. */
  lines: number;
  records: number;
  /** Lines that were not fleetroll_json (not JSON, wrong shape): skipped. */
  garbage: number;
  /** Empty lines: skipped, not garbage. */
  blank: number;
}

/**
 * Lines → records, counting instead of throwing: a log file can hold lines
 * from before fleetroll's format was installed, a stdout stream interleaves
 * nginx's startup notices, a crashed writer leaves half a line. Each such
 * line is counted in `counts.garbage` and skipped; the last one is kept (cut
 * to 200 characters) with its reason, for a message.
 */
export class AccessLogParser {
  readonly counts: ParseCounts = { lines: 0, records: 0, garbage: 0, blank: 0 };
  lastGarbage: { line: string; reason: string } | undefined;

  parse(lines: Iterable<string>): AccessRecord[] {
    const out: AccessRecord[] = [];
    for (const line of lines) {
      this.counts.lines++;
      if (line.trim() === '') {
        this.counts.blank++;
        continue;
      }
      const p = parseAccessLine(line);
      if (p.ok) {
        this.counts.records++;
        out.push(p.record);
      } else {
        this.counts.garbage++;
        this.lastGarbage = { line: line.length > 200 ? `${line.slice(0, 200)}…` : line, reason: p.reason };
      }
    }
    return out;
  }
}
