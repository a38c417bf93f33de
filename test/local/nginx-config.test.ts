/**
 * What core/upstream renders is valid nginx, checked by the real binary
 * (`nginx -t` on a temporary nginx.conf that includes the rendered file and
 * proxies to its upstreams), and the weighted sticky split does what
 * canaryWeights promises when a real nginx serves it, and canary.force sends
 * testers to the side they ask for: an nginx process on
 * 127.0.0.1 in front of in-process HTTP backends, no Docker.
 *
 * Skipped where there is no nginx binary (scripts/setup-host.sh installs one).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { renderUpstream, splitTraffic, type StickyKey, type UpstreamEntry, type UpstreamInput } from '../../src/core/upstream.js';
import { waitFor } from '../support/wait.js';

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
const skip = NGINX === undefined ? 'no nginx binary on this machine' : false;
const template = readFileSync(new URL('../../templates/upstream.conf.tmpl', import.meta.url), 'utf8');
const root = mkdtempSync(join(tmpdir(), 'fleetroll-nginx-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** A self-contained nginx.conf in its own directory that includes `upstreamConf` and proxies to each upstream. */
function nginxConf(upstreamConf: string, upstreams: string[], port = 1): { dir: string; conf: string } {
  const dir = join(root, `conf-${n++}`);
  mkdirSync(join(dir, 'tmp'), { recursive: true });
  writeFileSync(join(dir, 'upstream.conf'), upstreamConf);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${dir}/tmp;`).join('\n');
  const locations = upstreams.map((u, i) => `        location ${i === 0 ? '/' : `/${u}/`} { proxy_pass http://${u}; }`).join('\n');
  const conf = join(dir, 'nginx.conf');
  writeFileSync(
    conf,
    `pid ${dir}/nginx.pid;\nevents {}\nhttp {\n    access_log off;\n${temp}\n    include ${dir}/upstream.conf;\n    server {\n        listen 127.0.0.1:${port};\n${locations}\n    }\n}\n`,
  );
  return { dir, conf };
}

function nginxTest(upstreamConf: string, upstreams: string[]): { ok: boolean; output: string } {
  const { dir, conf } = nginxConf(upstreamConf, upstreams);
  const r = spawnSync(NGINX!, ['-t', '-p', dir, '-c', conf, '-e', 'stderr'], { encoding: 'utf8', timeout: 10_000 });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

const servers = (prefix: string, count: number, base: number, weight?: number): UpstreamEntry[] =>
  Array.from({ length: count }, (_, i) => ({
    address: `10.0.${base}.${i + 1}:8080`,
    down: false,
    name: `${prefix}-${i + 1}`,
    ...(weight !== undefined ? { weight } : {}),
  }));

describe('rendered upstream files pass the real `nginx -t`', { skip }, () => {
  const rows: [string, UpstreamInput, string[]][] = [
    ['plain (RollingUpdate), the default template', { service: 'api', upstream: 'api_up', servers: servers('a', 3, 0) }, ['api_up']],
    ['no instance: the placeholder', { service: 'api', upstream: 'api_up', servers: [] }, ['api_up']],
    ...(
      [
        ['remote_addr', 'remote_addr'],
        ['a cookie nginx can name', 'cookie:session'],
        ['a cookie with "-" (through a map)', 'cookie:my-session'],
        ['a header with "-"', 'header:X-User-Id'],
      ] as [string, StickyKey][]
    ).map(([what, key]): [string, UpstreamInput, string[]] => [
      `weights + hash on ${what}`,
      { service: 'api', upstream: 'api_up', hash: key, servers: splitTraffic(servers('stable', 10, 0), servers('canary', 1, 1), 5) },
      ['api_up'],
    ]),
    [
      'weights + hash with a down canary (0%)',
      { service: 'api', upstream: 'api_up', hash: 'cookie:session', servers: splitTraffic(servers('stable', 3, 0), servers('canary', 1, 1), 0) },
      ['api_up'],
    ],
    [
      'main + preview blocks',
      { service: 'api', upstream: 'api_up', servers: servers('old', 3, 0), preview: { upstream: 'api_preview', servers: servers('new', 3, 1) } },
      ['api_up', 'api_preview'],
    ],
    [
      'main + an empty preview (outside a blue-green rollout)',
      { service: 'api', upstream: 'api_up', servers: servers('old', 3, 0), preview: { upstream: 'api_preview', servers: [] } },
      ['api_up', 'api_preview'],
    ],
    [
      'main with a dashed-cookie hash + preview (both extra blocks)',
      {
        service: 'api',
        upstream: 'api_up',
        hash: 'cookie:a-b',
        servers: servers('s', 2, 0, 7),
        preview: { upstream: 'api_preview', servers: servers('n', 1, 1) },
      },
      ['api_up', 'api_preview'],
    ],
    ...(
      [
        ['a header, both sides in service', 'header:X-Canary', 1, 3],
        ['a dashed cookie, both sides in service', 'cookie:my-canary', 1, 3],
        ['a header, no canary in service', 'header:X-Canary', 0, 3],
        ['a cookie, no stable left', 'cookie:canary', 2, 0],
      ] as const
    ).map(([what, key, c, st]): [string, UpstreamInput, string[]] => {
      const canary = servers('canary', c, 1);
      const stable = servers('stable', st, 0);
      const main = c > 0 && st > 0 ? splitTraffic(stable, canary, 25) : [...stable, ...canary];
      return [
        `canary.force by ${what}, nginx.conf proxying to its variable`,
        { service: 'api', upstream: 'api_up', hash: c > 0 && st > 0 ? 'cookie:a-b' : undefined, servers: main, force: { key, canary, stable } },
        ['$fleetroll_api_up_route', 'api_up'],
      ];
    }),
  ];
  for (const [name, input, upstreams] of rows) {
    it(name, () => {
      const r = nginxTest(renderUpstream(template, input), upstreams);
      assert.ok(r.ok, r.output);
    });
  }

  it('and the check is real: a broken file fails it', () => {
    const r = nginxTest('upstream api_up {\n    hash $remote_addr consistent;\n}\n', ['api_up']);
    assert.equal(r.ok, false);
    assert.match(r.output, /no servers are inside upstream/);
  });
});

/** A backend that answers its own name. */
async function backend(name: string): Promise<{ server: http.Server; address: string }> {
  const server = http.createServer((_req, res) => res.end(name));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { server, address: `127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function freePort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

function get(port: number, headers: Record<string, string>, agent: http.Agent): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', headers, agent }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString()));
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
    });
    req.on('error', reject);
  });
}

/** Starts nginx in front of `file` (upstreams as nginxConf takes them) and waits until it answers. */
async function serve(file: string, upstreams: string[]): Promise<{ port: number; agent: http.Agent; stop: () => void }> {
  const port = await freePort();
  const { dir, conf } = nginxConf(file, upstreams, port);
  const nginx = spawn(NGINX!, ['-p', dir, '-c', conf, '-e', 'stderr', '-g', 'daemon off; master_process off;'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  nginx.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 20 });
  const stop = () => {
    agent.destroy();
    nginx.kill('SIGTERM');
  };
  // Up, or gone: either ends the wait (a dead nginx will not answer later).
  const answered = async () =>
    nginx.exitCode !== null ||
    (await get(port, {}, agent).then(
      () => true,
      () => false,
    ));
  const up = await waitFor(`nginx on port ${port} to answer`, answered, 5000, 50).then(
    () => nginx.exitCode === null,
    () => false,
  );
  if (!up) {
    stop();
    assert.fail(`nginx did not start: ${stderr}`);
  }
  return { port, agent, stop };
}

describe('a real nginx splits traffic as the weights say, sticky per key', { skip }, () => {
  it('1 canary among 10 stable at 5%, keyed on a dashed cookie: about 5% of users, each always on the same instance', async () => {
    const stable = await Promise.all(Array.from({ length: 10 }, (_, i) => backend(`stable-${i + 1}`)));
    const canary = [await backend('canary-1')];
    const entries = (xs: typeof stable, prefix: string) => xs.map((b, i) => ({ address: b.address, down: false, name: `${prefix}-${i + 1}` }));
    const file = renderUpstream(template, {
      service: 'api',
      upstream: 'api_up',
      hash: 'cookie:my-session',
      servers: splitTraffic(entries(stable, 'stable'), entries(canary, 'canary'), 5),
    });
    const { port, agent, stop } = await serve(file, ['api_up']);
    try {
      const users = 1000;
      const answers = await Promise.all(Array.from({ length: users }, (_, i) => get(port, { cookie: `theme=dark; my-session=user-${i}` }, agent)));
      assert.ok(
        answers.every((a) => a.startsWith('200 ')),
        answers.find((a) => !a.startsWith('200 ')),
      );
      const share = (100 * answers.filter((a) => a === '200 canary-1').length) / users;
      assert.ok(Math.abs(share - 5) <= 2.5, `canary share ${share}% for a set weight of 5%`);
      const again = await Promise.all(Array.from({ length: 50 }, (_, i) => get(port, { cookie: `my-session=user-${i}` }, agent)));
      assert.deepEqual(again, answers.slice(0, 50), 'each user stays on the instance (and version) it got');
    } finally {
      stop();
      for (const b of [...stable, ...canary]) b.server.close();
    }
  });
});

describe('canary.force on a real nginx: testers reach the side they ask for, everyone else gets the split', { skip }, () => {
  const rows: [string, 'header:X-Canary' | 'cookie:my-canary', (v: string) => Record<string, string>][] = [
    ['by header', 'header:X-Canary', (v) => ({ 'x-canary': v })],
    ['by a dashed cookie among others', 'cookie:my-canary', (v) => ({ cookie: `theme=dark; my-canary=${v}; x=1` })],
  ];
  for (const [name, key, ask] of rows) {
    it(name, async () => {
      const stable = await Promise.all(Array.from({ length: 3 }, (_, i) => backend(`stable-${i + 1}`)));
      const canary = [await backend('canary-1')];
      const entries = (xs: typeof stable, prefix: string) => xs.map((b, i) => ({ address: b.address, down: false, name: `${prefix}-${i + 1}` }));
      const [st, cn] = [entries(stable, 'stable'), entries(canary, 'canary')];
      const file = renderUpstream(template, {
        service: 'api',
        upstream: 'api_up',
        hash: 'header:X-User',
        servers: splitTraffic(st, cn, 25),
        force: { key, canary: cn, stable: st },
      });
      const { port, agent, stop } = await serve(file, ['$fleetroll_api_up_route']);
      try {
        const users = (n: number, headers: Record<string, string>) =>
          Promise.all(Array.from({ length: n }, (_, i) => get(port, { 'x-user': `user-${i}`, ...headers }, agent)));
        const always = await users(100, ask('always'));
        assert.deepEqual([...new Set(always)], ['200 canary-1'], '"always": every user on the canary');
        assert.deepEqual([...new Set(await users(50, ask('ALWAYS')))], ['200 canary-1'], 'the value ignores case');
        const never = await users(100, ask('never'));
        assert.ok(
          never.every((a) => /^200 stable-[123]$/.test(a)),
          `"never": every user on stable, got ${[...new Set(never)].join(', ')}`,
        );
        // Without the force (or with another value) the weighted split decides: about 25% on the canary.
        for (const headers of [{}, ask('maybe')]) {
          const split = await users(400, headers);
          const share = (100 * split.filter((a) => a === '200 canary-1').length) / split.length;
          assert.ok(share > 10 && share < 40, `${JSON.stringify(headers)}: ${share}% on the canary at weight 25`);
        }
        if (key.startsWith('cookie:')) {
          // Another cookie whose name ends the same is not the force cookie.
          const lookalike = await users(400, { cookie: 'not-my-canary=always' });
          assert.ok(
            lookalike.some((a) => a !== '200 canary-1'),
            'a cookie named not-my-canary does not force',
          );
        }
      } finally {
        stop();
        for (const b of [...stable, ...canary]) b.server.close();
      }
    });
  }

  it('with no canary in service, "always" falls back to the main upstream (stable): nothing fails', async () => {
    const stable = await Promise.all(Array.from({ length: 2 }, (_, i) => backend(`stable-${i + 1}`)));
    const st = stable.map((b, i) => ({ address: b.address, down: false, name: `stable-${i + 1}` }));
    const file = renderUpstream(template, { service: 'api', upstream: 'api_up', servers: st, force: { key: 'header:X-Canary', canary: [], stable: st } });
    const { port, agent, stop } = await serve(file, ['$fleetroll_api_up_route']);
    try {
      const answers = await Promise.all(Array.from({ length: 20 }, () => get(port, { 'x-canary': 'always' }, agent)));
      assert.ok(
        answers.every((a) => /^200 stable-[12]$/.test(a)),
        answers.join(', '),
      );
    } finally {
      stop();
      for (const b of stable) b.server.close();
    }
  });
});
