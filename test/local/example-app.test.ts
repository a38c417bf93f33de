/**
 * The example app's "subtly bad version" switches, with the app run by node
 * itself on a free port of 127.0.0.1 (no Docker): BAD_ERROR_RATE answers a
 * predictable share of API requests with 500 (the n-th fails when
 * floor(n × rate) goes up) while readiness, liveness and the version probe
 * stay healthy; BAD_LATENCY_MS slows API requests only. And what the
 * integration tests read of a container's mounts and env: CONFIG_FILE,
 * DATA_DIR, /api/env-digest. And READY_FILE, the readiness gate a test opens
 * when it chooses.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const SERVER = fileURLToPath(new URL('../../examples/app/server.mjs', import.meta.url));
const running: ChildProcess[] = [];
after(() => {
  for (const c of running) c.kill('SIGKILL');
});

/** Starts the app with `env` on a free port; resolves once it listens, with its port and log so far. */
async function startApp(env: Record<string, string>): Promise<{ port: number; log: () => string }> {
  const child = spawn(process.execPath, [SERVER], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', APP_VERSION: '2.0.0', ORDER_DELAY_MS: '0', PRESTOP_SECONDS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.push(child);
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`the app did not start: ${out}`)), 10_000);
    const check = () => {
      const m = /listening port=(\d+)/.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    };
    child.stdout?.on('data', check);
    child.on('exit', (code) => reject(new Error(`the app exited with ${code}: ${out}`)));
  });
  return { port, log: () => out };
}

const agent = new http.Agent({ keepAlive: true });
after(() => agent.destroy());

function request(port: number, method: string, path: string, body?: string): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, agent, headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, ms: performance.now() - t0 }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('example app: a bad version that still passes readiness', () => {
  it('BAD_ERROR_RATE 0.1: exactly every 10th API request is a 500, health and version stay 200', async () => {
    const app = await startApp({ BAD_ERROR_RATE: '0.1' });
    const failed: number[] = [];
    for (let n = 1; n <= 100; n++) {
      // GETs and POSTs share the counter; probes in between do not count.
      const r = n % 3 === 0 ? await request(app.port, 'POST', '/api/orders', '{"bookId":1}') : await request(app.port, 'GET', '/api/books');
      if (r.status === 500) failed.push(n);
      else assert.equal(r.status, n % 3 === 0 ? 201 : 200);
      assert.equal((await request(app.port, 'GET', '/health/ready')).status, 200, 'readiness passes');
      if (n % 10 === 5) {
        assert.equal((await request(app.port, 'GET', '/health/live')).status, 200);
        assert.deepEqual(await request(app.port, 'GET', '/api/version').then((v) => [v.status, v.body]), [200, '2.0.0'], 'the version probe passes');
      }
    }
    assert.deepEqual(failed, [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
    assert.match(app.log(), /bad version 500 for a share of 0\.1 of API requests/);
  });

  // [name, rate, requests, expected failures]: floor(n × rate), spread evenly.
  const rows: [string, string, number, number][] = [
    ['a quarter of 40', '0.25', 40, 10],
    ['1% of 250 (a small share, the canary-analysis case)', '0.01', 250, 2],
    ['a third of 10', '0.3333333', 10, 3],
    ['0 fails nothing', '0', 30, 0],
    ['1 fails every API request', '1', 12, 12],
    ['an invalid rate (above 1) falls back to 0', '2', 20, 0],
  ];
  for (const [name, rate, requests, want] of rows) {
    it(`BAD_ERROR_RATE ${rate}: ${name}`, async () => {
      const app = await startApp({ BAD_ERROR_RATE: rate });
      let failures = 0;
      for (let n = 0; n < requests; n++) if ((await request(app.port, 'GET', '/api/books')).status === 500) failures++;
      assert.equal(failures, want);
      assert.equal((await request(app.port, 'GET', '/health/ready')).status, 200);
      if (Number(rate) > 1) assert.match(app.log(), /invalid BAD_ERROR_RATE/);
    });
  }

  it('BAD_LATENCY_MS slows API requests, not the probes', async () => {
    // Ordering, not a wall-clock bound: each probe is sent beside an API request
    // and must answer first. The added latency (3 s) is far above what a busy
    // machine adds to a local request, and a lower bound holds at any load.
    const app = await startApp({ BAD_LATENCY_MS: '3000' });
    for (const probe of ['/health/ready', '/health/live', '/api/version']) {
      const [api, answer] = await Promise.all([request(app.port, 'GET', '/api/books'), request(app.port, 'GET', probe)]);
      assert.equal(answer.status, 200, `${probe} answered`);
      assert.equal(api.status, 200);
      assert.ok(api.ms >= 2990, `an API request took ${api.ms.toFixed(0)} ms, with BAD_LATENCY_MS 3000`);
      assert.ok(answer.ms < api.ms, `${probe} (${answer.ms.toFixed(0)} ms) answered before the API request sent beside it (${api.ms.toFixed(0)} ms)`);
    }
  });
});

describe('example app: what the container was given, shown without printing a value', () => {
  it('CONFIG_FILE is read on each request; DATA_DIR gets one line per start; /api/env-digest answers a sha256 or 404', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'example-app-'));
    const conf = join(dir, 'app.conf');
    writeFileSync(conf, 'a = 1\n');
    const env = { CONFIG_FILE: conf, DATA_DIR: dir, SECRET_X: 'hunter2' };
    await startApp(env);
    const app = await startApp(env);
    assert.deepEqual(await request(app.port, 'GET', '/api/config').then((r) => [r.status, r.body]), [200, 'a = 1\n']);
    writeFileSync(conf, 'a = 2\n');
    assert.equal((await request(app.port, 'GET', '/api/config')).body, 'a = 2\n', 'read again, not cached');
    assert.deepEqual((await request(app.port, 'GET', '/api/data')).body, `2.0.0 ${hostname()}\n2.0.0 ${hostname()}\n`, 'both starts, appended');
    const digest = await request(app.port, 'GET', '/api/env-digest?name=SECRET_X');
    assert.deepEqual([digest.status, digest.body], [200, createHash('sha256').update('hunter2').digest('hex')]);
    assert.equal((await request(app.port, 'GET', '/api/env-digest?name=NOT_SET_ANYWHERE')).status, 404);
    rmSync(conf);
    const gone = await request(app.port, 'GET', '/api/config');
    assert.deepEqual([gone.status, gone.body], [500, JSON.stringify({ error: 'cannot read it: ENOENT' })]);
    assert.doesNotMatch(app.log(), /hunter2/);
  });

  it('without CONFIG_FILE or DATA_DIR both answer 404 naming the variable', async () => {
    const app = await startApp({});
    for (const [path, name] of [
      ['/api/config', 'CONFIG_FILE'],
      ['/api/data', 'DATA_DIR'],
    ] as const) {
      const r = await request(app.port, 'GET', path);
      assert.deepEqual([r.status, r.body], [404, JSON.stringify({ error: `${name} not set` })]);
    }
  });
});

describe('example app: READY_FILE, a readiness gate opened by creating a file', () => {
  const dirs: string[] = [];
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const gate = (): string => {
    const dir = mkdtempSync(join(tmpdir(), 'example-app-gate-'));
    dirs.push(dir);
    return join(dir, 'ready');
  };

  it('not ready before the file exists, ready once it is created, not ready again once it is removed (checked on each request)', async () => {
    const file = gate();
    const app = await startApp({ READY_FILE: file });
    assert.equal((await request(app.port, 'GET', '/health/ready')).status, 503, 'gate closed');
    assert.equal((await request(app.port, 'GET', '/health/live')).status, 200, 'live meanwhile');
    writeFileSync(file, '');
    assert.equal((await request(app.port, 'GET', '/health/ready')).status, 200, 'gate open');
    rmSync(file);
    assert.equal((await request(app.port, 'GET', '/health/ready')).status, 503, 'closed again, not cached');
    assert.match(app.log(), /readiness waits for READY_FILE/);
  });

  // [name, more env, the file exists, readiness status]: the gate combines with the other readiness switches.
  const rows: [string, Record<string, string>, boolean, number][] = [
    ['the file missing', {}, false, 503],
    ['the file present', {}, true, 200],
    ['the file present but BROKEN_NEVER_READY=1', { BROKEN_NEVER_READY: '1' }, true, 503],
    ['the file present but still warming up', { WARMUP_SECONDS: '600' }, true, 503],
  ];
  for (const [name, env, exists, want] of rows) {
    it(`READY_FILE: ${name} -> ${want}`, async () => {
      const file = gate();
      if (exists) writeFileSync(file, '');
      const app = await startApp({ READY_FILE: file, ...env });
      assert.equal((await request(app.port, 'GET', '/health/ready')).status, want);
    });
  }

  it('READY_FILE unset: readiness as before', async () => {
    const app = await startApp({});
    assert.equal((await request(app.port, 'GET', '/health/ready')).status, 200);
  });
});
