/**
 * templates/nginx.conf.example against the real nginx binary (DESIGN §3: it
 * works unchanged for every strategy, the access-log analysis included): it
 * carries the shipped fleetroll_json format verbatim, logs with it to the
 * path the README tells users to put in `accessLog:`, and `nginx -t` accepts
 * a copy whose machine paths (upstream file, log, pid, temp dirs) point into
 * a temp directory, with the upstream name substituted as a user would.
 *
 * The nginx part is skipped where /usr/sbin/nginx is missing.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { execa } from 'execa';
import { LOG_FORMAT } from '../../src/core/accessLog.js';

const NGINX = '/usr/sbin/nginx';
const example = readFileSync(new URL('../../templates/nginx.conf.example', import.meta.url), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-conf-example-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A directive's lines without their indentation. */
const dedent = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .join('\n');

describe('templates/nginx.conf.example', () => {
  it('holds the fleetroll_json log_format exactly as src/core/accessLog.ts renders it', () => {
    const m = /^\s*log_format fleetroll_json[\s\S]*?;\s*$/m.exec(example);
    assert.ok(m, 'a log_format fleetroll_json directive');
    assert.equal(dedent(m[0]), dedent(LOG_FORMAT));
  });

  it('the compose demo\'s nginx.conf carries the same format and log', () => {
    const compose = readFileSync(new URL('../../examples/compose/nginx.conf', import.meta.url), 'utf8');
    assert.equal(dedent(/^\s*log_format fleetroll_json[\s\S]*?;\s*$/m.exec(compose)?.[0] ?? ''), dedent(LOG_FORMAT));
    assert.match(compose, /^\s*access_log \/var\/log\/nginx\/fleetroll\.log fleetroll_json;$/m);
  });

  it('logs with it to /var/log/nginx/fleetroll.log, the accessLog the README and the fleet examples name', () => {
    assert.match(example, /^\s*access_log \/var\/log\/nginx\/fleetroll\.log fleetroll_json;$/m);
    assert.match(example, /accessLog: \/var\/log\/nginx\/fleetroll\.log/);
  });

  it('nginx -t accepts it, paths adjusted and the upstream name substituted', { skip: existsSync(NGINX) ? false : `${NGINX} not installed` }, async () => {
    const upstreamFile = join(dir, 'upstream.conf');
    writeFileSync(upstreamFile, 'upstream my_service {\n    server 127.0.0.1:1 down;\n}\n');
    const temps = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((p) => `    ${p}_temp_path ${dir}/${p}_temp;`).join('\n');
    const conf = `pid ${dir}/nginx.pid;\nerror_log ${dir}/error.log;\n${example
      .replaceAll('/etc/nginx/conf.d/upstream.conf', upstreamFile)
      .replaceAll('/var/log/nginx/fleetroll.log', join(dir, 'fleetroll.log'))
      .replaceAll('bookstore_api', 'my_service')
      .replace('listen 80;', 'listen 127.0.0.1:1;')
      .replace('http {\n', `http {\n${temps}\n`)}`;
    assert.notEqual(conf.indexOf(upstreamFile), -1);
    const file = join(dir, 'nginx.conf');
    writeFileSync(file, conf);
    const r = await execa(NGINX, ['-t', '-c', file, '-e', join(dir, 'error.log')], { reject: false, stdin: 'ignore' });
    assert.equal(r.exitCode, 0, `${r.stdout}${r.stderr}\n${conf}`);
    assert.ok(existsSync(join(dir, 'fleetroll.log')), 'nginx -t opened the access log');
  });
});
