// Example "bookstore" HTTP service used by fleetroll's demos and tests.
// Plain Node (no dependencies) so it runs with a bare `node` binary in a minimal image.
//
// Environment (all optional):
//   PORT                       listen port (default 8080)
//   APP_VERSION                version this build reports (default "0.0.0")
//   REPORT_VERSION             report this instead of APP_VERSION (simulates a mis-tagged build)
//   WARMUP_SECONDS             not ready for this long after start (default 0)
//   PRESTOP_SECONDS            after SIGTERM: keep serving, report not-ready, this long (default 2)
//   BROKEN_NEVER_READY=1       readiness never passes
//   READY_FILE                 readiness passes only while this path exists, checked on each
//                              readiness request (a gate a test opens by creating the file in a
//                              bind-mounted directory: a rollout that cannot finish until it does)
//   CRASH_AFTER_READY_SECONDS  exit 1 this many seconds after becoming ready
//   ORDER_DELAY_MS             POST /api/orders latency (default 200)
//
// A subtly bad version, for canary analysis and experiments: readiness still
// passes, /health/* and the version probe (/api/version) are never affected,
// only the API requests (every other /api/ path) are:
//   BAD_ERROR_RATE             share of API requests answered 500, from 0 to 1 (default 0).
//                              Deterministic, by a counter: the n-th API request fails when
//                              floor(n × rate) goes up, so failures are spread evenly and after
//                              n requests exactly floor(n × rate) have failed (rate rounded to a
//                              millionth). 0.1: requests 10, 20, 30, ...; 0.25: 4, 8, 12, ...
//   BAD_LATENCY_MS             milliseconds added to every API request (default 0)
//
// For checking what the container was given (fleetroll's container fields), without
// ever printing a value:
//   CONFIG_FILE                GET /api/config answers this file's content, read on each request
//                              (a bind-mounted config file); 500 naming the error code when unreadable
//   DATA_DIR                   at start, appends "<version> <hostname>" to DATA_DIR/instances.log
//                              (a named volume outliving instances); GET /api/data answers that file
//   GET /api/env-digest?name=X the sha256 (hex) of env variable X, 404 when unset: shows the app got
//                              a secret without the secret appearing anywhere
import { createHash } from 'node:crypto';
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { hostname } from 'node:os';
import { join } from 'node:path';

function num(name, def) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) {
    console.log(`invalid ${name}; using the default`);
    return def;
  }
  return n;
}

const PORT = num('PORT', 8080);
const APP_VERSION = process.env.APP_VERSION || '0.0.0';
const VERSION = process.env.REPORT_VERSION || APP_VERSION;
const WARMUP_SECONDS = num('WARMUP_SECONDS', 0);
const PRESTOP_SECONDS = num('PRESTOP_SECONDS', 2);
const BROKEN_NEVER_READY = process.env.BROKEN_NEVER_READY === '1';
const READY_FILE = process.env.READY_FILE || undefined;
const CRASH_AFTER_READY_SECONDS = process.env.CRASH_AFTER_READY_SECONDS ? num('CRASH_AFTER_READY_SECONDS', 0) : undefined;
const ORDER_DELAY_MS = num('ORDER_DELAY_MS', 200);
const BAD_ERROR_RATE = (() => {
  const r = num('BAD_ERROR_RATE', 0);
  if (r <= 1) return r;
  console.log('invalid BAD_ERROR_RATE (a share from 0 to 1); using 0');
  return 0;
})();
const BAD_LATENCY_MS = num('BAD_LATENCY_MS', 0);
const CONFIG_FILE = process.env.CONFIG_FILE || undefined;
const DATA_DIR = process.env.DATA_DIR || undefined;
// Integer arithmetic, so the share is exact whatever the float rounding of n × rate.
const BAD_PPM = Math.round(BAD_ERROR_RATE * 1_000_000);
const HARD_EXIT_MS = 25_000;

const log = (event, extra = '') => console.log(`${new Date().toISOString()} [bookstore ${VERSION}] ${event}${extra ? ' ' + extra : ''}`);

const BOOKS = [
  { id: 1, title: 'The Pragmatic Programmer', author: 'Hunt & Thomas' },
  { id: 2, title: 'Designing Data-Intensive Applications', author: 'Kleppmann' },
  { id: 3, title: 'Site Reliability Engineering', author: 'Beyer et al.' },
];

let warm = WARMUP_SECONDS === 0;
let terminating = false;
let draining = false;
let nextOrderId = 1;
let inFlight = 0;
let apiRequests = 0;

/** BAD_ERROR_RATE: the n-th API request fails when floor(n × rate) goes up. */
function injectFailure() {
  apiRequests++;
  if (BAD_PPM === 0) return false;
  return Math.floor((apiRequests * BAD_PPM) / 1_000_000) > Math.floor(((apiRequests - 1) * BAD_PPM) / 1_000_000);
}

const ready = () => warm && !terminating && !BROKEN_NEVER_READY && (READY_FILE === undefined || existsSync(READY_FILE));

function send(req, res, status, body, type = 'application/json') {
  const payload = typeof body === 'string' ? body : JSON.stringify(body);
  const headers = {
    'Content-Type': type === 'text' ? 'text/plain; charset=utf-8' : 'application/json',
    'Content-Length': Buffer.byteLength(payload),
    'X-App-Version': VERSION,
    'Cache-Control': 'no-store',
  };
  if (draining) headers.Connection = 'close';
  res.writeHead(status, headers);
  res.end(req.method === 'HEAD' ? undefined : payload);
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (c) => {
      size += c.length;
      if (size > 1_000_000) {
        reject(new Error('body too large'));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const path = url.pathname;
  const method = req.method === 'HEAD' ? 'GET' : req.method;

  if (method === 'GET' && path === '/api/version') return send(req, res, 200, VERSION, 'text');
  if (method === 'GET' && path === '/health/live') return send(req, res, 200, 'live', 'text');
  if (method === 'GET' && path === '/health/ready') {
    return ready() ? send(req, res, 200, 'ready', 'text') : send(req, res, 503, 'not ready', 'text');
  }
  if (path.startsWith('/api/') && path !== '/api/version') {
    // Everything below is an API request: the bad version's switches apply.
    if (BAD_LATENCY_MS > 0) await new Promise((r) => setTimeout(r, BAD_LATENCY_MS));
    if (injectFailure()) return send(req, res, 500, { error: 'injected failure (BAD_ERROR_RATE)' });
  }
  if (method === 'GET' && path === '/api/books') return send(req, res, 200, BOOKS);
  if (method === 'GET' && path === '/api/env-digest') {
    const value = process.env[url.searchParams.get('name') ?? ''];
    if (value === undefined) return send(req, res, 404, { error: 'not set' });
    return send(req, res, 200, createHash('sha256').update(value).digest('hex'), 'text');
  }
  if (method === 'GET' && (path === '/api/config' || path === '/api/data')) {
    const file = path === '/api/config' ? CONFIG_FILE : DATA_DIR && join(DATA_DIR, 'instances.log');
    if (!file) return send(req, res, 404, { error: `${path === '/api/config' ? 'CONFIG_FILE' : 'DATA_DIR'} not set` });
    try {
      return send(req, res, 200, readFileSync(file, 'utf8'), 'text');
    } catch (err) {
      return send(req, res, 500, { error: `cannot read it: ${err.code ?? 'error'}` });
    }
  }
  if (req.method === 'POST' && path === '/api/orders') {
    let order = {};
    try {
      const raw = await readBody(req);
      order = raw ? JSON.parse(raw) : {};
    } catch {
      return send(req, res, 400, { error: 'invalid JSON body' });
    }
    await new Promise((r) => setTimeout(r, ORDER_DELAY_MS));
    const bookId = typeof order === 'object' && order !== null ? (order.bookId ?? null) : null;
    return send(req, res, 201, { id: nextOrderId++, bookId, status: 'created', version: VERSION });
  }
  if (path === '/api/orders' || path === '/api/books' || path === '/api/version') {
    return send(req, res, 405, { error: 'method not allowed' });
  }
  return send(req, res, 404, { error: 'not found' });
}

const server = http.createServer((req, res) => {
  inFlight++;
  res.on('close', () => {
    inFlight--;
    if (draining) maybeExit();
  });
  handle(req, res).catch((err) => {
    log('request error', String(err && err.message));
    if (!res.headersSent) send(req, res, 500, { error: 'internal error' });
    else res.destroy();
  });
});
server.keepAliveTimeout = 5_000;

let exiting = false;
let serverClosed = false;
function maybeExit() {
  if (exiting || !serverClosed || inFlight > 0) return;
  exiting = true;
  log('stopped', 'exit 0');
  process.exit(0);
}

function shutdown(signal) {
  if (terminating) {
    log('signal again, still draining', signal);
    return;
  }
  terminating = true;
  log('terminating', `signal=${signal}, not ready, serving until drain`);
  setTimeout(() => {
    log('hard exit', `after ${HARD_EXIT_MS}ms with ${inFlight} request(s) in flight`);
    process.exit(1);
  }, HARD_EXIT_MS).unref();
  setTimeout(() => {
    draining = true;
    log('draining', `in-flight=${inFlight}`);
    server.close(() => {
      serverClosed = true;
      maybeExit();
    });
    server.closeIdleConnections();
    // Idle keep-alive sockets that become idle later are closed by `Connection: close`
    // on their last response; poll once more in case some were mid-parse.
    const t = setInterval(() => server.closeIdleConnections(), 250);
    t.unref();
  }, PRESTOP_SECONDS * 1000);
}

process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));

if (DATA_DIR) {
  try {
    appendFileSync(join(DATA_DIR, 'instances.log'), `${VERSION} ${hostname()}\n`);
  } catch (err) {
    log('cannot write to DATA_DIR', err.code ?? 'error');
  }
}

server.listen(PORT, () => {
  // The port actually bound (PORT=0 picks a free one).
  log('listening', `port=${server.address().port}`);
  if (BROKEN_NEVER_READY) log('readiness disabled (BROKEN_NEVER_READY)');
  if (READY_FILE) log('readiness waits for READY_FILE', READY_FILE);
  if (BAD_PPM > 0 || BAD_LATENCY_MS > 0) log('bad version', `500 for a share of ${BAD_PPM / 1_000_000} of API requests, +${BAD_LATENCY_MS} ms each`);
  const becomeReady = () => {
    warm = true;
    if (BROKEN_NEVER_READY) return;
    log('ready');
    if (CRASH_AFTER_READY_SECONDS !== undefined) {
      setTimeout(() => {
        log('crashing', 'exit 1 (CRASH_AFTER_READY_SECONDS)');
        process.exit(1);
      }, CRASH_AFTER_READY_SECONDS * 1000);
    }
  };
  if (warm) becomeReady();
  else {
    log('warming up');
    setTimeout(becomeReady, WARMUP_SECONDS * 1000);
  }
});
