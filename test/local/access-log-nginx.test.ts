/**
 * The shipped log format against the real nginx binary on this machine (no
 * Docker): `nginx -t` accepts the template and every sticky-key variant, and
 * a local nginx (own pid, error log and temp paths, a free 127.0.0.1 port)
 * proxying to two in-process backends writes lines that the reader, the parser
 * and the statistics understand end to end: a retried request, a dead server's
 * connection failure, "no live upstreams", a request answered by nginx itself,
 * and a log rotation with `nginx -s reopen` that loses nothing.
 *
 * Skipped where /usr/sbin/nginx is missing. Takes about a second.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createServer as createNetServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { LocalFileAccessLog } from '../../src/adapters/accessLog.js';
import { AccessLogParser, renderLogFormat, type AccessRecord } from '../../src/core/accessLog.js';
import { deployHealth, revisionStats } from '../../src/core/logStats.js';
import { waitFor } from '../support/wait.js';

const NGINX = '/usr/sbin/nginx';
const skip = existsSync(NGINX) ? false : `${NGINX} not installed`;
const template = new URL('../../templates/fleetroll-log-format.conf', import.meta.url).pathname;

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createNetServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? res(a.port) : rej(new Error('no port'))));
    });
  });
}

const temps = (dir: string) => ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((p) => `  ${p}_temp_path ${dir}/${p}_temp;`);

async function nginxTest(dir: string, httpBody: string[]): Promise<{ ok: boolean; output: string }> {
  const conf = join(dir, 'test.conf');
  writeFileSync(conf, [`pid ${dir}/test.pid;`, `error_log ${dir}/test-error.log;`, 'events {}', 'http {', ...temps(dir), ...httpBody, '}', ''].join('\n'));
  const r = await execa(NGINX, ['-t', '-c', conf, '-e', `${dir}/test-error.log`], { reject: false, stdin: 'ignore' });
  return { ok: r.exitCode === 0, output: `${r.stdout}${r.stderr}` };
}

describe('the log format and the real nginx', { skip }, () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'fleetroll-nginx-log-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('nginx -t accepts templates/fleetroll-log-format.conf, included and used', async () => {
    const r = await nginxTest(dir, [`  include ${template};`, `  access_log ${dir}/a.log fleetroll_json;`, '  server { listen 127.0.0.1:1; return 204; }']);
    assert.ok(r.ok, r.output);
  });

  for (const key of ['client', 'cookie:session', 'header:X-User-Id']) {
    it(`nginx -t accepts the format keyed on ${key}`, async () => {
      const r = await nginxTest(dir, [renderLogFormat(key), `  access_log ${dir}/a.log fleetroll_json;`, '  server { listen 127.0.0.1:1; return 204; }']);
      assert.ok(r.ok, r.output);
    });
  }

  it('nginx -t would refuse a format with an unknown variable (the check above means something)', async () => {
    const r = await nginxTest(dir, [renderLogFormat().replace('$msec', '$fleetroll_no_such_variable'), '  server { listen 127.0.0.1:1; return 204; }']);
    assert.equal(r.ok, false);
    assert.match(r.output, /unknown "fleetroll_no_such_variable" variable/);
  });
});

describe('a local nginx writing fleetroll_json, read back end to end', { skip }, () => {
  let dir: string;
  let conf: string;
  let url: string;
  const backends: Server[] = [];
  const addr: Record<'v1' | 'v2' | 'dead', string> = { v1: '', v2: '', dead: '' };
  const logFile = () => join(dir, 'access.log');
  const nginx = (...args: string[]) => execa(NGINX, ['-c', conf, '-e', `${dir}/error.log`, ...args], { stdin: 'ignore' });

  async function backend(version: string): Promise<string> {
    const s = createServer((req, res) => {
      if (req.url?.includes('fail')) {
        res.writeHead(500, { 'X-App-Version': version });
        res.end('no');
        return;
      }
      res.writeHead(200, { 'X-App-Version': version });
      res.end(version);
    });
    await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
    backends.push(s);
    const a = s.address();
    return `127.0.0.1:${typeof a === 'object' && a ? a.port : 0}`;
  }

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'fleetroll-nginx-run-'));
    conf = join(dir, 'nginx.conf');
    addr.v1 = await backend('1.0.0');
    addr.v2 = await backend('1.1.0');
    addr.dead = `127.0.0.1:${await freePort()}`; // nothing listens: connection refused
    const port = await freePort();
    url = `http://127.0.0.1:${port}`;
    writeFileSync(
      conf,
      [
        'daemon on;',
        // As root, workers would run as nobody and could not reopen the logs in this 0700 temp dir.
        ...(process.getuid?.() === 0 ? ['user root;'] : []),
        'worker_processes 1;',
        `pid ${dir}/nginx.pid;`,
        `error_log ${dir}/error.log warn;`,
        'events { worker_connections 64; }',
        'http {',
        ...temps(dir),
        renderLogFormat('header:X-User'),
        `  access_log ${logFile()} fleetroll_json;`,
        `  upstream app { server ${addr.v1}; server ${addr.v2}; }`,
        // The dead server first: the first request tries it, fails, and is retried on 1.1.0.
        `  upstream retry { server ${addr.dead}; server ${addr.v2} backup; }`,
        '  upstream none { server 127.0.0.1:9 down; }',
        `  server { listen 127.0.0.1:${port};`,
        '    location /app/ { proxy_pass http://app; }',
        '    location /retry/ { proxy_pass http://retry; proxy_next_upstream error timeout; proxy_connect_timeout 1s; }',
        '    location /none/ { proxy_pass http://none; }',
        '    location /static { return 204; }',
        '  }',
        '}',
        '',
      ].join('\n'),
    );
    await nginx();
  });

  after(async () => {
    await nginx('-s', 'stop').catch(() => undefined);
    for (const s of backends) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = async (path: string, headers: Record<string, string> = {}) => {
    const r = await fetch(`${url}${path}`, { headers });
    await r.arrayBuffer();
    return r.status;
  };

  /** Reads until `n` lines came (nginx writes its line after the response). */
  async function readLines(reader: LocalFileAccessLog, n: number): Promise<string[]> {
    const lines: string[] = [];
    await waitFor(
      `${n} access log lines`,
      async () => {
        lines.push(...(await reader.read()));
        return lines.length >= n;
      },
      5000,
      20,
    );
    return lines;
  }

  it('every kind of request parses, and the statistics attribute it', async () => {
    const reader = new LocalFileAccessLog(logFile(), { from: 'end' });
    await reader.read();
    const t0 = Date.now() - 1;
    const statuses = [
      await get('/app/a', { 'X-User': 'alice' }),
      await get('/app/b', { 'X-User': 'bob' }),
      await get('/app/fail'),
      await get('/app/fail'),
      await get('/retry/x'),
      await get('/none/x'),
      await get('/static'),
    ];
    assert.deepEqual(statuses, [200, 200, 500, 500, 200, 502, 204]);
    const parser = new AccessLogParser();
    const records: AccessRecord[] = parser.parse(await readLines(reader, 7));
    assert.deepEqual(parser.counts, { lines: 7, records: 7, garbage: 0, blank: 0 });
    assert.deepEqual(
      records.map((r) => [r.uri, r.status]),
      [
        ['/app/a', 200],
        ['/app/b', 200],
        ['/app/fail', 500],
        ['/app/fail', 500],
        ['/retry/x', 200],
        ['/none/x', 502],
        ['/static', 204],
      ],
    );
    assert.deepEqual(
      records.slice(0, 2).map((r) => r.key),
      ['alice', 'bob'],
    );
    const retried = records[4]!;
    assert.deepEqual(retried.upstreamAddr, [addr.dead, addr.v2]);
    assert.deepEqual(retried.upstreamStatus, [502, 200]);
    assert.equal(retried.upstreamHeaderTimeMs[0], null);
    assert.equal(retried.appVersion, '1.1.0');
    assert.deepEqual(records[5]!.upstreamAddr, ['none']);
    assert.deepEqual(records[6]!.upstreamAddr, []);
    assert.ok(
      records.every((r) => r.timeMs >= t0 && r.timeMs <= Date.now() + 1),
      'times are $msec in ms',
    );

    const revisionOf = (a: string) => ({ [addr.v1]: '1.0.0', [addr.v2]: '1.1.0', [addr.dead]: '1.1.0' })[a];
    const s = revisionStats(records, revisionOf, t0, Date.now() + 1);
    const v1 = s.byRevision['1.0.0']!;
    const v2 = s.byRevision['1.1.0']!;
    // The two /app/fail went one to each (round robin), as did /app/a and /app/b.
    assert.equal(v1.requests + v2.requests, 5);
    assert.equal(v1.errors5xx + v2.errors5xx, 2);
    assert.equal(v2.retriedFailures, 1, "the dead server's refused connection counts against 1.1.0");
    assert.equal(s.unattributed.requests, 2, '"no live upstreams" and the static answer');
    const h = deployHealth(records, { startMs: t0, endMs: Date.now() + 1, revisionOf, newRevision: '1.1.0', firstNewAddress: addr.v2 });
    assert.equal(h.requests, 7);
    assert.equal(h.errors5xx, 3);
    assert.equal(h.dropped, 1, 'only "no live upstreams" reached the user as nginx\'s own 502');
    await reader.close();
  });

  it('rotation by rename + nginx -s reopen: every line once', async () => {
    const reader = new LocalFileAccessLog(logFile(), { from: 'end' });
    await reader.read();
    await get('/app/before-1');
    await get('/app/before-2');
    renameSync(logFile(), `${logFile()}.1`);
    await get('/app/after-rename'); // nginx still writes to the renamed file
    await nginx('-s', 'reopen');
    // Reopening is asynchronous (the master reopens, then signals the worker): probe until a
    // request lands in the new file (nginx writes a line just after its response, so look
    // for any probe). The probes are lines like any other; left out below.
    let probe = 0;
    await waitFor(
      'nginx to write a probe into the reopened log',
      async () => {
        await get(`/app/probe-${probe++}`);
        return existsSync(logFile()) && readFileSync(logFile(), 'utf8').includes('/app/probe-');
      },
      5000,
      5,
    );
    await get('/app/after-reopen');
    const uris: string[] = [];
    await waitFor(
      "/app/after-reopen in the reader's lines",
      async () => {
        uris.push(...new AccessLogParser().parse(await reader.read()).map((r) => r.uri));
        return uris.includes('/app/after-reopen');
      },
      5000,
      20,
    );
    assert.deepEqual(
      uris.filter((u) => !u.startsWith('/app/probe-')),
      ['/app/before-1', '/app/before-2', '/app/after-rename', '/app/after-reopen'],
    );
    assert.equal(reader.counters.rotations, 1);
    assert.ok(readFileSync(`${logFile()}.1`, 'utf8').includes('/app/after-rename'), 'the line really went to the old file');
    assert.ok(readFileSync(logFile(), 'utf8').includes('/app/after-reopen'), 'and this one to the new file');
    await reader.close();
  });
});
