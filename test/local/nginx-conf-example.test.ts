/**
 * templates/nginx.conf.example against the real nginx binary: `nginx -t`
 * accepts a copy whose machine paths (upstream file, log, pid, temp dirs)
 * point into a temp directory, with the upstream name substituted as a user
 * would, and opens the access log. Skipped where /usr/sbin/nginx is missing.
 * What the file holds is checked in test/unit/nginx-conf-example.test.ts.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { execa } from 'execa';

const NGINX = '/usr/sbin/nginx';
const example = readFileSync(new URL('../../templates/nginx.conf.example', import.meta.url), 'utf8');
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-conf-example-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('templates/nginx.conf.example', () => {
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
