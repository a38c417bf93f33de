import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { PLACEHOLDER_SERVER, parseUpstreamServers, renderUpstream, UnsafeUpstreamValueError } from '../../src/core/upstream.js';
import { revisionOf } from '../../src/engine/revision.js';

const template = readFileSync(new URL('../../templates/upstream.conf.tmpl', import.meta.url), 'utf8');

describe('upstream rendering', () => {
  it('renders up and down servers with their names as comments', () => {
    const out = renderUpstream(template, {
      service: 'bookstore-api',
      upstream: 'bookstore_api',
      servers: [
        { address: '172.18.0.5:8080', down: false, name: 'api-a' },
        { address: '172.18.0.6:8080', down: true, name: 'api-b' },
      ],
    });
    assert.match(out, /^upstream bookstore_api \{$/m);
    assert.match(out, /^ {4}server 172\.18\.0\.5:8080; # api-a$/m);
    assert.match(out, /^ {4}server 172\.18\.0\.6:8080 down; # api-b$/m);
    assert.deepEqual(parseUpstreamServers(out), [
      { address: '172.18.0.5:8080', down: false, name: 'api-a' },
      { address: '172.18.0.6:8080', down: true, name: 'api-b' },
    ]);
  });

  it('an empty fleet gets a placeholder server that is always down (nginx rejects an empty upstream)', () => {
    const out = renderUpstream(template, { service: 's', upstream: 'u', servers: [] });
    assert.ok(out.includes(PLACEHOLDER_SERVER));
    assert.deepEqual(parseUpstreamServers(out), []);
  });

  const unsafe: [string, Parameters<typeof renderUpstream>[1]][] = [
    ['directive in an address', { service: 's', upstream: 'u', servers: [{ address: '1.2.3.4:80; include /etc/passwd', down: false, name: 'a' }] }],
    ['newline in a name', { service: 's', upstream: 'u', servers: [{ address: '1.2.3.4:80', down: false, name: 'a\nserver evil:80' }] }],
    ['brace in the upstream name', { service: 's', upstream: 'u {', servers: [] }],
  ];
  for (const [name, input] of unsafe) {
    it(`refuses ${name}`, () => assert.throws(() => renderUpstream(template, input), UnsafeUpstreamValueError));
  }
});

describe('revisionOf', () => {
  const base = { image: 'a:1', env: { B: '2', A: '1' }, port: 8080, version: '1' };
  it('is stable and ignores env order', () => assert.equal(revisionOf(base), revisionOf({ ...base, env: { A: '1', B: '2' } })));
  it('changes with the image, an env value, the port or the version', () => {
    const r = revisionOf(base);
    for (const changed of [{ ...base, image: 'a:2' }, { ...base, env: { A: '1', B: '3' } }, { ...base, port: 80 }, { ...base, version: '2' }]) {
      assert.notEqual(revisionOf(changed), r);
    }
  });
  it('does not contain env values', () => assert.match(revisionOf({ ...base, env: { SECRET: 'hunter2' } }), /^[0-9a-f]{10}$/));
});
