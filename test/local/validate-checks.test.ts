/**
 * The validate checks that need this machine's programs (the pure ones are
 * in test/unit/validate-checks.test.ts): the nginx variable-name limit that
 * validate enforces, proved on the real nginx binary (skipped without one),
 * and hooks that cannot run (no program, not executable, killed, timed out)
 * failing as hooks, run as real child processes.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { NGINX_MAP_VARIABLE_MAX, renderUpstream, splitTraffic, type UpstreamEntry, type UpstreamInput } from '../../src/core/upstream.js';
import { runHook } from '../../src/engine/hooks.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { BASE, canary, fleetFilesIn, lb, u } from '../support/fleet-checks.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-checks-local-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const { issuesOf } = fleetFilesIn(dir);
let n = 0;

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));

/** `nginx -t` on a self-contained nginx.conf that includes `upstreamConf` and proxies to each target. */
function nginxTest(upstreamConf: string, targets: string[]): { ok: boolean; output: string } {
  const d = join(dir, `nginx-${n++}`);
  mkdirSync(join(d, 'tmp'), { recursive: true });
  writeFileSync(join(d, 'upstream.conf'), upstreamConf);
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${d}/tmp;`).join('\n');
  const locations = targets.map((t, i) => `        location /${i}/ { proxy_pass http://${t}; }`).join('\n');
  writeFileSync(
    join(d, 'nginx.conf'),
    `pid ${d}/nginx.pid;\nevents {}\nhttp {\n    access_log off;\n${temp}\n    include ${d}/upstream.conf;\n    server {\n        listen 127.0.0.1:1;\n${locations}\n    }\n}\n`,
  );
  const r = spawnSync(NGINX!, ['-t', '-p', d, '-c', join(d, 'nginx.conf'), '-e', 'stderr'], { encoding: 'utf8', timeout: 10_000 });
  return { ok: r.status === 0, output: `${r.stdout}${r.stderr}` };
}

describe("the nginx variable limit is the real binary's", { skip: NGINX === undefined ? 'no nginx binary on this machine' : false }, () => {
  const template = readFileSync(new URL('../../templates/upstream.conf.tmpl', import.meta.url), 'utf8');
  const servers = (prefix: string, count: number, base: number): UpstreamEntry[] =>
    Array.from({ length: count }, (_, i) => ({ address: `10.0.${base}.${i + 1}:8080`, down: false, name: `${prefix}-${i + 1}` }));
  const stable = servers('stable', 3, 0);
  const canaryServers = servers('canary', 1, 1);
  // The derived name's length beyond the upstream's: "fleetroll_" + "_sticky" / "_route".
  const kinds: [string, number, string, (up: string) => UpstreamInput, (up: string) => string[]][] = [
    [
      'stickyKey cookie:my-session',
      17,
      'stickyKey: cookie:my-session',
      (up) => ({ service: 'api', upstream: up, hash: 'cookie:my-session', servers: splitTraffic(stable, canaryServers, 25) }),
      (up) => [up],
    ],
    [
      'canary.force header:X-Canary',
      16,
      'force: header:X-Canary',
      (up) => ({ service: 'api', upstream: up, servers: [...stable, ...canaryServers], force: { key: 'header:X-Canary', canary: canaryServers, stable } }),
      (up) => [up, `$fleetroll_${up}_route`],
    ],
  ];
  for (const [what, extra, canaryBlock, input, targets] of kinds) {
    for (const over of [0, 1]) {
      const up = u(NGINX_MAP_VARIABLE_MAX - extra + over);
      it(`${what}, upstream of ${up.length}: ${over ? 'nginx -t fails and validate refuses' : 'nginx -t passes and validate accepts'}`, async () => {
        const r = nginxTest(renderUpstream(template, input(up)), targets(up));
        assert.equal(r.ok, over === 0, r.output);
        if (over) assert.match(r.output, /could not build variables_hash/);
        const issues = await issuesOf(`${BASE}${canary(canaryBlock)}${lb(up)}`);
        assert.deepEqual(
          issues.map((i) => i.path),
          over ? ['loadBalancers/0/nginx/upstream'] : [],
        );
      });
    }
  }
});

describe('runHook: a hook that cannot run is a failed hook, never a throw', () => {
  const noExec = join(dir, 'not-executable.sh');
  writeFileSync(noExec, '#!/bin/sh\necho hi\n');
  chmodSync(noExec, 0o644);
  const rows: [string, string[], number, RegExp][] = [
    [
      'a NUL byte in an argument (execa throws a TypeError)',
      ['/bin/echo', 'a\0b'],
      5000,
      /^could not start: TypeError: Arguments cannot contain null bytes .*: a\\u0000b$/,
    ],
    ['a NUL byte in the program', ['/bin/ec\0ho'], 5000, /^could not start: ERR_INVALID_ARG_VALUE/],
    ['no such program', [join(dir, 'nope.sh')], 5000, /^could not start: ENOENT$/],
    ['not executable', [noExec], 5000, /^could not start: EACCES$/],
    ['a directory', [dir], 5000, /^could not start: EACCES$/],
    ['past its timeout', ['/bin/sleep', '5'], 200, /^timed out after 0\.2 s$/],
    ['killed by a signal', ['/bin/sh', '-c', 'kill -9 $$'], 5000, /^was killed by SIGKILL$/],
    ['non-zero exit', ['/bin/sh', '-c', 'exit 3'], 5000, /^exited with 3$/],
  ];
  for (const [name, argv, timeoutMs, outcome] of rows) {
    it(name, async () => {
      const events: RolloutEvent[] = [];
      const r = await runHook('postDeploy', argv, {}, timeoutMs, (e) => events.push(e));
      assert.equal(r.ok, false);
      assert.match(r.outcome, outcome);
      assert.ok(
        events.some((e) => e.type === 'info' && e.message === `hook postDeploy: ${r.outcome}`),
        JSON.stringify(events),
      );
    });
  }
  it('exit 0 is ok', async () => {
    const r = await runHook('postDeploy', ['/bin/sh', '-c', 'echo fine'], {}, 5000, () => {});
    assert.deepEqual([r.ok, r.outcome, r.output], [true, 'exited with 0', 'fine']);
  });
});
