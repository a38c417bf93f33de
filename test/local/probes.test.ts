/**
 * startLoad against a real HTTP server on 127.0.0.1 that imitates the example
 * app (X-App-Version on every response, POST /api/orders slower than GETs).
 * No Docker, no nginx: this checks the probe itself, rates, failure recording
 * and shutdown, so the deploy experiments can trust its numbers.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { summarizeRequests, type RequestRecord } from '../../src/experiment/metrics.js';
import { startLoad as startProbeLoad } from '../../src/experiment/probes.js';
import { waitFor } from '../support/wait.js';

/** Every load a test starts is stopped when the file ends, so a failed assertion cannot leave timers running. */
const loads = new Set<ReturnType<typeof startProbeLoad>>();
function startLoad(...args: Parameters<typeof startProbeLoad>): ReturnType<typeof startProbeLoad> {
  const load = startProbeLoad(...args);
  loads.add(load);
  return load;
}
after(async () => {
  await Promise.all([...loads].map((l) => l.stop().catch(() => [])));
});

const ORDER_DELAY_MS = 50;
/** When > 0, the server kills the connection of every n-th request instead of answering it. */
let destroyEvery = 0;
let seen = 0;

/** Requests served per connection, for the keep-alive paths below. */
const perSocket = new WeakMap<object, number>();
const idempotencyKeys: string[] = [];
/** The X-User header of every request, in arrival order ('' when absent). */
const users: string[] = [];

const server = http.createServer((req, res) => {
  seen++;
  const onThisSocket = (perSocket.get(req.socket) ?? 0) + 1;
  perSocket.set(req.socket, onThisSocket);
  users.push(String(req.headers['x-user'] ?? ''));
  const key = req.headers['idempotency-key'];
  if (typeof key === 'string') idempotencyKeys.push(key);
  // What nginx does to an idle keep-alive connection in a reload: close it
  // as the next request arrives on it, before answering anything.
  if (req.url === '/reset-reused' && onThisSocket > 1) {
    req.socket.destroy();
    return;
  }
  // As above, but part of a response went out before the connection died:
  // the server may have acted on the request, so it must not be resent.
  if (req.url === '/partial-reused' && onThisSocket > 1) {
    req.socket.write('HTTP/1.1 200 OK\r\nX-App-Vers', () => setTimeout(() => req.socket.destroy(), 20));
    return;
  }
  if (req.url === '/reset-always') {
    req.socket.destroy();
    return;
  }
  if (req.url === '/reset-reused' || req.url === '/partial-reused') {
    req.resume();
    res.writeHead(200, { 'Content-Length': 2, 'X-App-Version': '1.0.0' });
    res.end('ok');
    return;
  }
  if (destroyEvery > 0 && seen % destroyEvery === 0) {
    req.socket.destroy();
    return;
  }
  const reply = (status: number, body: unknown) => {
    const payload = JSON.stringify(body);
    res.writeHead(status, {
      'Content-Type': 'application/json',
      'Content-Length': Buffer.byteLength(payload),
      'X-App-Version': '1.0.0',
    });
    res.end(payload);
  };
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    if (req.method === 'GET' && req.url === '/api/books') return reply(200, [{ id: 1 }]);
    if (req.method === 'POST' && req.url === '/api/orders') {
      const order = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { bookId?: number };
      setTimeout(() => reply(201, { id: seen, bookId: order.bookId ?? null }), ORDER_DELAY_MS);
      return;
    }
    if (req.url === '/slow') return; // never answers: the probe's timeout has to end it
    if (req.url === '/truncated') {
      // Promise 100 bytes, send 10, hang up: a 200 the client never fully got.
      res.writeHead(200, { 'Content-Length': 100, 'X-App-Version': '1.0.0' });
      res.write('0123456789', () => setTimeout(() => res.destroy(), 20));
      return;
    }
    reply(404, { error: 'not found' });
  });
});

let base = '';
before(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const count = (rs: readonly RequestRecord[], method: 'GET' | 'POST') => rs.filter((r) => r.method === method).length;

describe('startLoad against a local server', () => {
  it('keeps the GET rate and runs POSTs back to back, all ok', async () => {
    destroyEvery = 0;
    let streamed = 0;
    const run = startLoad(base, { getPerSecond: 20, postConcurrency: 2 }, { onRecord: () => streamed++ });
    // A rate is measured over time: this sleep is the measured window, not a wait for a condition.
    await sleep(1500);
    const live = run.snapshot().length;
    // The rate is checked against the window the load itself measured, not
    // against the sleep: on a busy machine the sleep overruns, and the load
    // catches up on late timers rather than losing the requests.
    const seconds = run.elapsed() / 1000;
    const records = await run.stop();

    const gets = count(records, 'GET');
    const posts = records.filter((r) => r.method === 'POST');
    const expected = 20 * seconds;
    assert.ok(
      Math.abs(gets - expected) <= Math.max(3, 0.15 * expected),
      `expected about ${expected.toFixed(1)} GETs (20/s over the load's ${seconds.toFixed(2)} s), got ${gets}`,
    );
    // Back to back: the two loops were waiting on an answer most of the window.
    const busy = posts.reduce((sum, r) => sum + r.latencyMs, 0) / (2 * seconds * 1000);
    // At least one POST per loop, not a count: at load 30 the server answered 3 in 1.7 s (each loop still waiting 143% of the window).
    assert.ok(
      posts.length >= 2 && busy > 0.5,
      `2 POST loops of ~${ORDER_DELAY_MS} ms: ${posts.length} POSTs, waiting ${(busy * 100).toFixed(0)}% of ${seconds.toFixed(2)} s`,
    );
    assert.ok(live > 0 && live <= records.length, 'snapshot is a live view of the records so far');
    assert.equal(streamed, records.length, 'onRecord sees every record once');

    const s = summarizeRequests(records);
    assert.equal(s.failed, 0, JSON.stringify(s.byMethod));
    assert.deepEqual(Object.keys(s.byMethod.GET?.byStatus ?? {}), ['200']);
    assert.deepEqual(Object.keys(s.byMethod.POST?.byStatus ?? {}), ['201']);
    for (const r of records) assert.equal(r.version, '1.0.0');
    for (const r of records.filter((x) => x.method === 'POST')) {
      assert.ok(r.latencyMs >= ORDER_DELAY_MS - 1, `POST latency ${r.latencyMs} below the server's delay`);
    }
    for (let i = 1; i < records.length; i++) assert.ok(records[i - 1]!.t <= records[i]!.t, 'sorted by t');
    // In-flight requests were waited for: nothing arrives after stop() (an absence, so watched for a while).
    await sleep(100);
    assert.equal(run.snapshot().length, records.length);
    assert.equal(await run.stop(), await run.stop(), 'stop() is idempotent');
  });

  it('records dropped connections as failures with an error code and never retries', async () => {
    seen = 0;
    destroyEvery = 5;
    try {
      const run = startLoad(base, { getPerSecond: 20, postConcurrency: 2 });
      await waitFor('20 requests', () => run.snapshot().length >= 20);
      const records = await run.stop();
      const failed = records.filter((r) => r.error !== undefined);
      assert.ok(failed.length > 0, 'some requests failed');
      for (const r of failed) {
        assert.equal(r.status, undefined);
        assert.match(r.error!, /^E[A-Z]+$/, `error code, got ${r.error}`);
      }
      // Every request the server saw is one record (no retries hidden inside),
      // and every 5th one failed.
      assert.equal(records.length, seen);
      assert.equal(failed.length, Math.floor(seen / 5));
      const s = summarizeRequests(records);
      assert.equal(s.failed, failed.length);
      assert.equal(s.ok, records.length - failed.length);
    } finally {
      destroyEvery = 0;
    }
  });

  it('ends a request that gets no answer at timeoutMs and records "timeout"', async () => {
    const started = Date.now();
    // A 300 ms timer beside the load's: how late this process's timers fire on this run
    // stretches the bounds below (a busy machine delays both alike).
    const beside = new Promise<number>((resolve) => setTimeout(() => resolve(Date.now() - started - 300), 300));
    const run = startLoad(base, { getPerSecond: 10, getPath: '/slow', postConcurrency: 0, timeoutMs: 300 });
    // The first GET times out at 300 ms; by then two more are in flight, and stop() must end them too.
    await waitFor('the first timeout', () => run.snapshot().length >= 1);
    const records = await run.stop();
    const waited = Date.now() - started;
    const late = Math.max(0, await beside);
    assert.ok(records.length >= 2, `expected a few GETs, got ${records.length}`);
    for (const r of records) {
      assert.equal(r.error, 'timeout');
      assert.ok(r.latencyMs >= 290 && r.latencyMs < 1000 + late, `latency ${r.latencyMs} (a 300 ms timer beside it was ${late} ms late)`);
    }
    assert.ok(waited < 1500 + late, `stop() waited ${waited} ms (a 300 ms timer beside it was ${late} ms late)`);
  });

  it('counts a response cut off mid-body as failed, keeping its status and version', async () => {
    const run = startLoad(base, { getPerSecond: 10, getPath: '/truncated', postConcurrency: 0 });
    await waitFor('a truncated response', () => run.snapshot().length >= 1);
    const records = await run.stop();
    assert.ok(records.length >= 1);
    for (const r of records) {
      assert.equal(r.status, 200);
      assert.equal(r.version, '1.0.0');
      assert.ok(r.error !== undefined, 'an error is recorded');
    }
    assert.equal(summarizeRequests(records).ok, 0);
  });

  it('keep-alive: a request on a reused connection closed before any answer is resent once, and marked retried', async () => {
    seen = 0;
    idempotencyKeys.length = 0;
    const run = startLoad(base, { getPerSecond: 20, getPath: '/reset-reused', postConcurrency: 1, postPath: '/reset-reused', keepAlive: true });
    await waitFor('6 resent requests', () => run.snapshot().filter((r) => r.retried).length >= 6);
    const records = await run.stop();
    const s = summarizeRequests(records);
    assert.equal(s.failed, 0, JSON.stringify(s.byMethod));
    const retried = records.filter((r) => r.retried);
    assert.ok(retried.length > 5, `expected resends, got ${retried.length} of ${records.length}`);
    assert.equal(s.retried, retried.length, 'summaries count every resend');
    for (const r of retried) {
      assert.match(r.retryError ?? '', /^(ECONNRESET|EPIPE)$/, `first attempt's error, got ${r.retryError}`);
      assert.equal(r.status, 200);
    }
    // Each resend is a second request the server saw; never a third.
    assert.equal(seen, records.length + retried.length);
    // POSTs carry an Idempotency-Key (what Go requires before resending one).
    assert.equal(idempotencyKeys.length, records.filter((r) => r.method === 'POST').length + retried.filter((r) => r.method === 'POST').length);
    assert.ok(idempotencyKeys.length > 0);
  });

  it('keep-alive: a reused connection that died after some bytes of a response is not resent', async () => {
    seen = 0;
    const run = startLoad(base, { getPerSecond: 10, getPath: '/partial-reused', postConcurrency: 0, keepAlive: true });
    await waitFor('3 failures on reused connections', () => run.snapshot().filter((r) => r.error !== undefined).length >= 3);
    const records = await run.stop();
    const failed = records.filter((r) => r.error !== undefined);
    assert.ok(failed.length >= 3, `expected failures on the reused connections, got ${JSON.stringify(records)}`);
    assert.equal(records.filter((r) => r.retried).length, 0);
    assert.equal(seen, records.length);
  });

  it('keep-alive: a failure on a fresh connection is not resent', async () => {
    seen = 0;
    const run = startLoad(base, { getPerSecond: 20, getPath: '/reset-always', postConcurrency: 0, keepAlive: true });
    await waitFor('5 requests', () => run.snapshot().length >= 5);
    const records = await run.stop();
    assert.ok(records.length >= 5);
    assert.equal(summarizeRequests(records).failed, records.length);
    assert.equal(records.filter((r) => r.retried).length, 0);
    assert.equal(seen, records.length);
  });

  it('without keep-alive nothing is ever resent, even where a reused connection would fail', async () => {
    seen = 0;
    idempotencyKeys.length = 0;
    const records = await (async () => {
      const run = startLoad(base, { getPerSecond: 20, getPath: '/reset-reused', postConcurrency: 1, postPath: '/reset-reused' });
      await waitFor('10 requests', () => run.snapshot().length >= 10);
      return run.stop();
    })();
    assert.equal(summarizeRequests(records).failed, 0);
    assert.equal(summarizeRequests(records).retried, 0);
    assert.equal(seen, records.length);
    assert.deepEqual(idempotencyKeys, []);
  });

  it('users: each request comes from the next of N users (X-User: user-0 .. user-N-1, then round again); none without', async () => {
    destroyEvery = 0;
    users.length = 0;
    const run = startLoad(base, { getPerSecond: 50, postConcurrency: 0, users: 3 });
    await waitFor('seven requests', () => users.length >= 7);
    await run.stop();
    assert.deepEqual(users.slice(0, 7), ['user-0', 'user-1', 'user-2', 'user-0', 'user-1', 'user-2', 'user-0']);
    users.length = 0;
    const plain = startLoad(base, { getPerSecond: 50, postConcurrency: 0 });
    await waitFor('two requests', () => users.length >= 2);
    await plain.stop();
    assert.deepEqual(users.slice(0, 2), ['', ''], 'users 0 (the default): no header');
  });

  it('only targets loopback addresses', async () => {
    for (const url of ['http://10.0.0.1', 'http://example.com:8080', 'http://192.168.1.10/api', 'http://[2001:db8::1]/']) {
      assert.throws(() => startLoad(url), /load probes only target loopback addresses/, url);
    }
    assert.throws(() => startLoad('https://127.0.0.1'), /plain http/);
    assert.throws(() => startLoad('not a url'), /not a valid URL/);
    // Loopback forms are accepted (nothing listens on port 9; stop at once).
    for (const url of ['http://127.0.0.1:9', 'http://127.8.9.10:9', 'http://localhost:9', 'http://[::1]:9']) {
      const records = await startLoad(url, { getPerSecond: 1, postConcurrency: 0, timeoutMs: 500 }).stop();
      assert.ok(
        records.every((r) => r.error !== undefined),
        url,
      );
    }
  });
});
