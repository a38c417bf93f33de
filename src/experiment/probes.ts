/**
 * Load probes: the traffic an experiment sends through nginx while a deploy
 * runs, recording every request so "zero failed requests" is a measured fact.
 *
 * Two shapes of traffic, as in the article the project grew from:
 *  - GETs on a fixed schedule (open loop). The next GET goes out on time even
 *    when the previous one has not come back, so a stalled backend shows up
 *    as timeouts and latency instead of quietly lowering the request rate;
 *  - POST loops (closed loop) that send the next POST as soon as the previous
 *    one finished, so some request is almost always in flight on a backend
 *    when it gets drained and stopped, which is where graceful shutdown bugs
 *    hide.
 * Nothing is retried, with one exception that real clients make too: with
 * keep-alive on, a request whose REUSED connection fails before any byte of a
 * response arrived is sent once more on a fresh connection (browsers and Go's
 * http.Transport do the same; POSTs carry an Idempotency-Key header, which is
 * what Go requires before it resends one). nginx closes the idle client
 * connections of its old workers on every reload, and a request written on
 * one at that instant meets a reset instead of an answer. Such a request is
 * recorded with `retried: true` and counted separately in every summary, so
 * a retry never hides a failure: its final outcome is what counts.
 */
import http from 'node:http';
import { isIPv4 } from 'node:net';
import { performance } from 'node:perf_hooks';
import { fieldError } from '../errors.js';
import { isOkByDefault, type RequestRecord } from './metrics.js';

export interface LoadProfile {
  getPerSecond: number;
  getPath: string;
  postConcurrency: number;
  postPath: string;
  timeoutMs: number;
  keepAlive: boolean;
  /**
   * With keepAlive: resend once a request that met a reset on a reused
   * connection with no byte of an answer, as browsers do (counted as
   * retried). false: a strict client, as an API client posting an order may
   * be: that request fails.
   */
  resend: boolean;
  /**
   * Users the requests come from, in turn (request n is `user-<n mod users>`
   * in the USER_HEADER header); 0: no such header. Every probe comes from one
   * client address, so a canary sticks on this header instead.
   */
  users: number;
}

/** The header that names the user a probe request comes from (see LoadProfile.users). */
export const USER_HEADER = 'X-User';

const DEFAULT_LOAD: LoadProfile = {
  getPerSecond: 10,
  getPath: '/api/books',
  postConcurrency: 1,
  postPath: '/api/orders',
  timeoutMs: 5000,
  // A new connection per request, like the curl probes of the article this
  // project grew from. With keep-alive, every nginx reload closes the idle
  // client connections of the old workers, and a request sent on one at that
  // instant gets ECONNRESET; keep-alive probes then resend it once, as
  // browsers do, and record that they did (RequestRecord.retried).
  keepAlive: false,
  resend: true,
  users: 0,
};

export interface LoadRun {
  /** Stops sending, waits for in-flight requests (bounded by timeoutMs), resolves with every record sorted by t. */
  stop(): Promise<RequestRecord[]>;
  /** Records so far (live view), in the order the requests finished. */
  snapshot(): readonly RequestRecord[];
  /** ms since the probes started, on the clock of RequestRecord.t: to timestamp other events alongside the requests. */
  elapsed(): number;
}

export interface LoadOptions {
  /** Clock for timestamps and latencies, in ms; scheduling always uses real timers. */
  now?: () => number;
  /** Called once per finished request (e.g. to stream records to a file); if it throws, stop() rejects with that error. */
  onRecord?: (r: RequestRecord) => void;
}

/** After a failed POST, wait this long so a dead backend does not turn the loop into a hot spin. */
const POST_FAILURE_PAUSE_MS = 50;
/** After a long event-loop stall, send at most this many overdue GETs at once. */
const MAX_GET_CATCH_UP_MS = 1000;
/** Slack on top of timeoutMs for stop(); every request has its own timer, this only guards against a stuck one. */
const STOP_SLACK_MS = 500;

/**
 * Load probes generate real traffic; pointing them at anything but this
 * machine could load-test someone else's service. Only loopback hosts pass,
 * which covers an nginx published on a local port, the way experiments run.
 */
function assertLoopbackUrl(baseUrl: string): URL {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw fieldError('baseUrl', `not a valid URL: ${JSON.stringify(baseUrl)}`);
  }
  if (url.protocol !== 'http:') {
    throw fieldError('baseUrl', `load probes speak plain http only, got ${url.protocol}//`);
  }
  const host = url.hostname;
  const loopback = host === 'localhost' || host === '[::1]' || (isIPv4(host) && host.split('.')[0] === '127');
  if (!loopback) {
    throw fieldError('baseUrl', `load probes only target loopback addresses (127.0.0.0/8, localhost or [::1]), got ${host}`);
  }
  return url;
}

function validateProfile(p: LoadProfile): void {
  const bad = (path: string, message: string) => {
    throw fieldError(path, message);
  };
  if (!(p.getPerSecond >= 0) || !Number.isFinite(p.getPerSecond)) bad('getPerSecond', 'must be a number >= 0');
  if (!Number.isInteger(p.postConcurrency) || p.postConcurrency < 0) bad('postConcurrency', 'must be an integer >= 0');
  if (!(p.timeoutMs > 0) || !Number.isFinite(p.timeoutMs)) bad('timeoutMs', 'must be a number > 0');
  if (!Number.isInteger(p.users) || p.users < 0) bad('users', 'must be an integer >= 0');
  // Checked here because http.request throws synchronously on such a path,
  // and one clear error beats every request failing.
  if (!/^\/\S*$/.test(p.getPath)) bad('getPath', 'must start with / and contain no whitespace');
  if (!/^\/\S*$/.test(p.postPath)) bad('postPath', 'must start with / and contain no whitespace');
}

/** Microsecond resolution is plenty and keeps saved records readable. */
const micros = (ms: number) => Math.round(ms * 1000) / 1000;

interface InFlight {
  /** Resolves with the request's record once it is settled; never rejects. */
  done: Promise<RequestRecord>;
  /** Give up on the request now, recording it as failed with this error. */
  abort(error: string): void;
}

export function startLoad(baseUrl: string, profile: Partial<LoadProfile> = {}, opts: LoadOptions = {}): LoadRun {
  const url = assertLoopbackUrl(baseUrl);
  const p: LoadProfile = { ...DEFAULT_LOAD, ...profile };
  validateProfile(p);

  const now = opts.now ?? (() => performance.now());
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const port = url.port === '' ? 80 : Number(url.port);
  // A base URL with a path (nginx serving the app under a prefix) keeps it.
  const prefix = url.pathname.replace(/\/+$/, '');
  // One agent per run: its sockets belong to this run and die with it, and
  // keep-alive behaves like a browser or API client would against nginx.
  const agent = new http.Agent({ keepAlive: p.keepAlive });
  // A resend goes out on a connection of its own (never another idle one
  // that the same reload may have closed too).
  const retryAgent = new http.Agent({ keepAlive: false });
  const postBody = JSON.stringify({ bookId: 1, quantity: 1 });
  let postSeq = 0;
  let userSeq = 0;

  const t0 = now();
  const records: RequestRecord[] = [];
  const inFlight = new Set<InFlight>();
  let running = true;
  let callbackError: unknown;

  const record = (r: RequestRecord) => {
    records.push(r);
    if (opts.onRecord && callbackError === undefined) {
      // A throwing callback must not kill the probe from inside a socket
      // event handler; stop() rejects with it instead.
      try {
        opts.onRecord(r);
      } catch (err) {
        callbackError = err;
      }
    }
  };

  function send(method: 'GET' | 'POST', path: string): InFlight {
    const sentAt = now();
    let settle!: (r: RequestRecord) => void;
    const done = new Promise<RequestRecord>((resolve) => (settle = resolve));
    let finished = false;
    let req: http.ClientRequest | undefined;
    let timer: NodeJS.Timeout | undefined;
    // Kept so a response that times out mid-body still reports who answered.
    let status: number | undefined;
    let version: string | undefined;
    let retryError: string | undefined;

    const entry: InFlight = {
      done,
      abort(error) {
        finish({ status, version, error });
        req?.destroy();
      },
    };
    inFlight.add(entry);

    function finish(outcome: { status?: number; error?: string; version?: string }) {
      if (finished) return;
      finished = true;
      if (timer) clearTimeout(timer);
      inFlight.delete(entry);
      const r: RequestRecord = { t: micros(sentAt - t0), method, path, latencyMs: micros(now() - sentAt) };
      if (outcome.status !== undefined) r.status = outcome.status;
      if (outcome.error !== undefined) r.error = outcome.error;
      if (outcome.version !== undefined) r.version = outcome.version;
      if (retryError !== undefined) {
        r.retried = true;
        r.retryError = retryError;
      }
      record(r);
      settle(r);
    }

    const headers: http.OutgoingHttpHeaders = { Accept: 'application/json' };
    if (p.users > 0) headers[USER_HEADER] = `user-${userSeq++ % p.users}`;
    if (method === 'POST') {
      headers['Content-Type'] = 'application/json';
      headers['Content-Length'] = Buffer.byteLength(postBody);
      if (p.keepAlive) headers['Idempotency-Key'] = `probe-${process.pid}-${Math.round(t0)}-${++postSeq}`;
    }

    const attempt = (first: boolean) => {
      const r = http.request({ agent: first ? agent : retryAgent, method, hostname, port, path: prefix + path, headers });
      req = r;
      let bytesAtStart: number | undefined;
      let answered = false;
      r.on('socket', (socket) => {
        bytesAtStart = socket.bytesRead;
      });
      r.on('error', (err: NodeJS.ErrnoException) => {
        if (finished) return;
        const code = err.code ?? err.message;
        // Resend once, only what a browser would: the connection was reused
        // from the keep-alive pool and not one byte of a response came back,
        // so the server cannot have answered this request.
        const silent = !answered && (r.socket == null || bytesAtStart === undefined || r.socket.bytesRead === bytesAtStart);
        if (first && p.keepAlive && p.resend && r.reusedSocket && silent) {
          retryError = code;
          attempt(false);
          return;
        }
        finish({ error: code });
      });
      r.on('response', (res) => {
        answered = true;
        const header = res.headers['x-app-version'];
        version = Array.isArray(header) ? header[0] : header;
        status = res.statusCode;
        // The body is read to the end so the keep-alive socket can be reused,
        // and so a connection cut mid-body counts as a failure.
        res.resume();
        res.on('end', () => finish({ status, version }));
        res.on('error', (err: NodeJS.ErrnoException) => finish({ status, version, error: err.code ?? err.message }));
        res.on('close', () => {
          if (!res.complete) finish({ status, version, error: 'aborted' });
        });
      });
      r.end(method === 'POST' ? postBody : undefined);
    };
    // The timeout covers the whole exchange, body and any resend included;
    // the socket `timeout` option only notices idleness and would let a
    // trickling response run forever.
    timer = setTimeout(() => entry.abort('timeout'), p.timeoutMs);
    attempt(true);
    return entry;
  }

  // GETs: the k-th goes out at start + k * interval, computed from the start
  // rather than from the previous timer, so timer lateness does not
  // accumulate into a lower rate.
  let getTimer: NodeJS.Timeout | undefined;
  if (p.getPerSecond > 0) {
    const interval = 1000 / p.getPerSecond;
    const maxBurst = Math.max(1, Math.ceil(MAX_GET_CATCH_UP_MS / interval));
    const start = performance.now();
    let sent = 0;
    const tick = () => {
      if (!running) return;
      const elapsed = performance.now() - start;
      const due = Math.floor(elapsed / interval) + 1;
      // After a long stall (a suspended laptop, a debugger) send a bounded
      // burst instead of thousands of overdue requests.
      if (due - sent > maxBurst) sent = due - maxBurst;
      while (sent < due) {
        send('GET', p.getPath);
        sent++;
      }
      getTimer = setTimeout(tick, Math.max(0, sent * interval - (performance.now() - start)));
    };
    tick();
  }

  // POST loops: wakers let stop() cut a post-failure pause short.
  const wakers = new Set<() => void>();
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(t);
        wakers.delete(wake);
        resolve();
      };
      const t = setTimeout(wake, ms);
      wakers.add(wake);
    });
  const postLoops: Promise<void>[] = [];
  for (let i = 0; i < p.postConcurrency; i++) {
    postLoops.push(
      (async () => {
        while (running) {
          const r = await send('POST', p.postPath).done;
          if (running && !isOkByDefault(r)) await pause(POST_FAILURE_PAUSE_MS);
        }
      })(),
    );
  }

  let stopping: Promise<RequestRecord[]> | undefined;
  return {
    snapshot: () => records,
    elapsed: () => now() - t0,
    stop() {
      stopping ??= (async () => {
        running = false;
        if (getTimer) clearTimeout(getTimer);
        for (const wake of [...wakers]) wake();
        const pending = Promise.all([...[...inFlight].map((f) => f.done), ...postLoops]);
        let guard: NodeJS.Timeout | undefined;
        await Promise.race([pending, new Promise<void>((resolve) => (guard = setTimeout(resolve, p.timeoutMs + STOP_SLACK_MS)))]);
        clearTimeout(guard);
        for (const f of [...inFlight]) f.abort('timeout');
        agent.destroy();
        retryAgent.destroy();
        if (callbackError !== undefined) throw callbackError;
        // Array.prototype.sort is stable, so requests sent in the same
        // millisecond keep their completion order.
        return [...records].sort((a, b) => a.t - b.t);
      })();
      return stopping;
    },
  };
}
