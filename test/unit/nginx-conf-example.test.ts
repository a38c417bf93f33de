/**
 * templates/nginx.conf.example (DESIGN §3: it works unchanged for every
 * strategy, the access-log analysis included): it carries the shipped
 * fleetroll_json format verbatim and logs with it to the path the README
 * tells users to put in `accessLog:`. That the real nginx accepts it is
 * test/local/nginx-conf-example.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { LOG_FORMAT } from '../../src/core/accessLog.js';

const example = readFileSync(new URL('../../templates/nginx.conf.example', import.meta.url), 'utf8');

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

  it("the compose demo's nginx.conf carries the same format and log", () => {
    const compose = readFileSync(new URL('../../examples/compose/nginx.conf', import.meta.url), 'utf8');
    assert.equal(dedent(/^\s*log_format fleetroll_json[\s\S]*?;\s*$/m.exec(compose)?.[0] ?? ''), dedent(LOG_FORMAT));
    assert.match(compose, /^\s*access_log \/var\/log\/nginx\/fleetroll\.log fleetroll_json;$/m);
  });

  it('logs with it to /var/log/nginx/fleetroll.log, the accessLog the README and the fleet examples name', () => {
    assert.match(example, /^\s*access_log \/var\/log\/nginx\/fleetroll\.log fleetroll_json;$/m);
    assert.match(example, /accessLog: \/var\/log\/nginx\/fleetroll\.log/);
  });
});
