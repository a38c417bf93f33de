import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  canaryWeights,
  forceRoute,
  parseForceKey,
  parseStickyKey,
  PLACEHOLDER_SERVER,
  parseUpstreamServers,
  renderUpstream,
  splitTraffic,
  stickyVariable,
  UnsafeUpstreamValueError,
  type StickyKey,
  type UpstreamEntry,
} from '../../src/core/upstream.js';
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

  const up = (weight?: number): UpstreamEntry => ({ address: '1.2.3.4:80', down: false, name: 'a', weight });
  const unsafe: [string, Parameters<typeof renderUpstream>[1]][] = [
    ['directive in an address', { service: 's', upstream: 'u', servers: [{ address: '1.2.3.4:80; include /etc/passwd', down: false, name: 'a' }] }],
    ['newline in a name', { service: 's', upstream: 'u', servers: [{ address: '1.2.3.4:80', down: false, name: 'a\nserver evil:80' }] }],
    ['brace in the upstream name', { service: 's', upstream: 'u {', servers: [] }],
    ['a weight of 0 (nginx weights start at 1: render the server down)', { service: 's', upstream: 'u', servers: [up(0)] }],
    ['a weight above 1000', { service: 's', upstream: 'u', servers: [up(1001)] }],
    ['a fractional weight', { service: 's', upstream: 'u', servers: [up(1.5)] }],
    ['a weight that is not a number', { service: 's', upstream: 'u', servers: [up('5; include x' as unknown as number)] }],
    ['a sticky cookie name with ";"', { service: 's', upstream: 'u', servers: [], hash: 'cookie:a;b' as StickyKey }],
    ['a sticky header name with a newline', { service: 's', upstream: 'u', servers: [], hash: 'header:X\nserver evil:80' as StickyKey }],
    ['an empty sticky cookie name', { service: 's', upstream: 'u', servers: [], hash: 'cookie:' as StickyKey }],
    ['a sticky key of another kind', { service: 's', upstream: 'u', servers: [], hash: 'arg:user' as StickyKey }],
    ['a sticky name over 64 characters', { service: 's', upstream: 'u', servers: [], hash: `cookie:${'a'.repeat(65)}` as StickyKey }],
    ['a brace in the preview upstream name', { service: 's', upstream: 'u', servers: [], preview: { upstream: 'p }', servers: [] } }],
    ['a preview upstream named like the main one', { service: 's', upstream: 'u', servers: [], preview: { upstream: 'u', servers: [] } }],
    [
      'a directive in a preview server address',
      { service: 's', upstream: 'u', servers: [], preview: { upstream: 'p', servers: [{ address: '1.2.3.4:80 backup', down: false, name: 'a' }] } },
    ],
  ];
  for (const [name, input] of unsafe) {
    it(`refuses ${name}`, () => assert.throws(() => renderUpstream(template, input), UnsafeUpstreamValueError));
  }
});

describe('upstream rendering: canary weights, sticky hash, preview block', () => {
  it('renders a sticky hash line first, then weighted servers; down stays down', () => {
    const out = renderUpstream(template, {
      service: 'bookstore-api',
      upstream: 'bookstore_api',
      hash: 'cookie:session',
      servers: [
        { address: '172.18.0.5:8080', down: false, name: 'api-a', weight: 95 },
        { address: '172.18.0.6:8080', down: true, name: 'api-b' },
        { address: '172.18.0.7:8080', down: false, name: 'api-c', weight: 50 },
      ],
    });
    assert.match(out, /^upstream bookstore_api \{\n {4}hash \$cookie_session consistent;\n {4}server 172\.18\.0\.5:8080 weight=95; # api-a$/m);
    assert.match(out, /^ {4}server 172\.18\.0\.6:8080 down; # api-b$/m);
    assert.match(out, /^ {4}server 172\.18\.0\.7:8080 weight=50; # api-c$/m);
    assert.deepEqual(parseUpstreamServers(out), [
      { address: '172.18.0.5:8080', down: false, name: 'api-a', weight: 95 },
      { address: '172.18.0.6:8080', down: true, name: 'api-b' },
      { address: '172.18.0.7:8080', down: false, name: 'api-c', weight: 50 },
    ]);
    assert.doesNotMatch(out, /\{\{/, 'every placeholder is filled');
  });

  const keys: [string, StickyKey, string, RegExp | undefined][] = [
    ['the client address (default)', 'remote_addr', '$remote_addr', undefined],
    ['a cookie nginx can name', 'cookie:session_id', '$cookie_session_id', undefined],
    [
      'a cookie with "-": read through a map of $http_cookie',
      'cookie:my-session',
      '$fleetroll_bookstore_api_sticky',
      /^map \$http_cookie \$fleetroll_bookstore_api_sticky \{\n {4}"~\(\?:\^\|;\)\\s\*my-session=\(\[\^;\]\*\)" \$1;\n {4}default "";\n\}$/m,
    ],
    ['a header: lowercased, "-" becomes "_"', 'header:X-User-Id', '$http_x_user_id', undefined],
  ];
  for (const [name, key, variable, map] of keys) {
    it(`sticky key: ${name}`, () => {
      const v = stickyVariable(key, 'bookstore_api');
      assert.equal(v.variable, variable);
      const out = renderUpstream(template, { service: 's', upstream: 'bookstore_api', servers: [], hash: key });
      assert.ok(out.includes(`    hash ${variable} consistent;\n`), out);
      if (map) assert.match(out, map);
      else assert.doesNotMatch(out, /^map /m);
    });
  }

  it('parseStickyKey names what is allowed', () => {
    assert.deepEqual(parseStickyKey('header:X-User'), { kind: 'header', name: 'X-User' });
    assert.deepEqual(parseStickyKey('remote_addr'), { kind: 'remote_addr' });
    const bad = parseStickyKey('cookie:a b');
    assert.ok('error' in bad && /"remote_addr", "cookie:NAME" or "header:NAME"/.test(bad.error) && bad.error.includes('"cookie:a b"'));
  });

  it('the preview upstream is a second block, in the file the default template renders', () => {
    const out = renderUpstream(template, {
      service: 's',
      upstream: 'bookstore_api',
      servers: [{ address: '10.0.0.1:8080', down: false, name: 'old-1' }],
      preview: { upstream: 'bookstore_preview', servers: [{ address: '10.0.0.2:8080', down: false, name: 'new-1' }] },
    });
    assert.match(out, /^upstream bookstore_preview \{\n {4}server 10\.0\.0\.2:8080; # new-1\n\}$/m);
    assert.deepEqual(
      parseUpstreamServers(out, 'bookstore_api').map((x) => x.name),
      ['old-1'],
      'the main block alone',
    );
    assert.deepEqual(
      parseUpstreamServers(out, 'bookstore_preview').map((x) => x.name),
      ['new-1'],
      'the preview block alone',
    );
    assert.deepEqual(
      parseUpstreamServers(out).map((x) => x.name),
      ['old-1', 'new-1'],
      'every server line without a name',
    );
  });

  it('a preview with no new set yet holds the placeholder, so an nginx.conf proxying to it keeps passing nginx -t', () => {
    const out = renderUpstream(template, { service: 's', upstream: 'u', servers: [], preview: { upstream: 'u_preview', servers: [] } });
    assert.match(out, /^upstream u_preview \{\n {4}server 127\.0\.0\.1:9 down; # no instance in service\n\}$/m);
  });

  it('a template without {{blocks}} (a user template of before) gets the blocks appended', () => {
    const old = 'upstream {{upstream}} {\n    keepalive 8;\n{{servers}}\n}';
    const out = renderUpstream(old, { service: 's', upstream: 'u', servers: [], hash: 'cookie:my-id', preview: { upstream: 'p', servers: [] } });
    assert.match(out, /^upstream u \{\n {4}keepalive 8;\n {4}hash \$fleetroll_u_sticky consistent;\n/);
    assert.match(out, /\}\n# The my-id cookie[^\n]*\nmap \$http_cookie [\s\S]*\nupstream p \{\n[^\n]*\n\}\n$/);
  });

  it('without a hash or a preview, the default template renders what it always did', () => {
    const out = renderUpstream(template, { service: 's', upstream: 'u', servers: [{ address: '1.2.3.4:80', down: false, name: 'a' }] });
    assert.match(out, /\nupstream u \{\n {4}server 1\.2\.3\.4:80; # a\n\}\n$/);
  });
});

describe('upstream rendering: canary.force, the forced route for testers', () => {
  const stable = [
    { address: '10.0.0.1:8080', down: false, name: 'old-1', weight: 3 },
    { address: '10.0.0.2:8080', down: true, name: 'old-2' },
  ];
  const canary = [{ address: '10.0.1.1:8080', down: false, name: 'new-1', weight: 1 }];
  const render = (key: 'header:X-Canary' | 'cookie:my-canary', c: UpstreamEntry[], st: UpstreamEntry[]) =>
    renderUpstream(template, { service: 's', upstream: 'api', servers: [...st, ...c], hash: 'header:X-User', force: { key, canary: c, stable: st } });

  it('a header: a map from its value to an upstream per side, each side its servers in service, unweighted', () => {
    const out = render('header:X-Canary', canary, stable);
    assert.ok(
      out.includes(
        [
          'map $http_x_canary $fleetroll_api_route {',
          '    default api;',
          '    always fleetroll_api_canary;',
          '    never fleetroll_api_stable;',
          '}',
          'upstream fleetroll_api_canary {',
          '    server 10.0.1.1:8080; # new-1',
          '}',
          'upstream fleetroll_api_stable {',
          '    server 10.0.0.1:8080; # old-1',
          '}',
        ].join('\n'),
      ),
      out,
    );
    assert.deepEqual(
      parseUpstreamServers(out, 'api').map((x) => x.name),
      ['old-1', 'old-2', 'new-1'],
      'the main block is as without force',
    );
    assert.deepEqual(
      parseUpstreamServers(out).map((x) => x.name),
      ['old-1', 'old-2', 'new-1'],
      'a server repeated in a forced block counts once',
    );
  });

  it('a cookie: found in the Cookie header by a regular expression anchored on the cookie boundaries', () => {
    const out = render('cookie:my-canary', canary, stable);
    assert.match(
      out,
      /^map \$http_cookie \$fleetroll_api_route \{\n {4}default api;\n {4}"~\(\?:\^\|;\)\\s\*my-canary=\(\?i:always\)\\s\*\(\?:;\|\$\)" fleetroll_api_canary;\n {4}"~[^"]*=\(\?i:never\)[^"]*" fleetroll_api_stable;\n\}$/m,
    );
  });

  const sides: [string, UpstreamEntry[], UpstreamEntry[], RegExp, RegExp][] = [
    ['no canary in service yet: forcing it takes the main upstream', [], stable, /^ {4}never fleetroll_api_stable;$/m, /always/],
    ['the canary only down (aborting): the same', [{ ...canary[0]!, down: true }], stable, /^ {4}never /m, /always/],
    ['no stable left (the rollout is complete): forcing stable takes the main upstream', canary, [], /^ {4}always fleetroll_api_canary;$/m, /never/],
  ];
  for (const [name, c, st, has, hasNot] of sides) {
    it(name, () => {
      const out = render('header:X-Canary', c, st);
      const map = /^map [^{]*\{[^}]*\}/m.exec(out)?.[0] ?? '';
      assert.match(map, has);
      assert.doesNotMatch(map, hasNot);
      // The empty side's block holds the placeholder: the file's shape stays the same.
      assert.match(out, /^upstream fleetroll_api_canary \{\n[^}]*\}\nupstream fleetroll_api_stable \{\n[^}]*\}$/m);
    });
  }

  it('forceRoute names the variable and the two upstreams', () => {
    assert.deepEqual(forceRoute('bookstore_api'), {
      variable: '$fleetroll_bookstore_api_route',
      canary: 'fleetroll_bookstore_api_canary',
      stable: 'fleetroll_bookstore_api_stable',
    });
    assert.throws(() => forceRoute('a b'), UnsafeUpstreamValueError);
  });

  const parsed: [string, unknown, unknown][] = [
    ['a header', 'header:X-Canary', { kind: 'header', name: 'X-Canary' }],
    ['a cookie with "_"', 'cookie:canary_on', { kind: 'cookie', name: 'canary_on' }],
  ];
  for (const [name, raw, want] of parsed) it(`parseForceKey: ${name}`, () => assert.deepEqual(parseForceKey(raw), want));
  const refused: [string, unknown][] = [
    ['the client address (nothing a tester can set)', 'remote_addr'],
    ['a name with a quote', 'header:X"y'],
    ['a name with a space', 'cookie:a b'],
    ['an empty name', 'cookie:'],
    ['a number', 5],
  ];
  for (const [name, raw] of refused) {
    it(`parseForceKey refuses ${name}, and the renderer refuses to write it`, () => {
      const r = parseForceKey(raw);
      assert.ok('error' in r && /"header:NAME" or "cookie:NAME"/.test(r.error), JSON.stringify(r));
      assert.throws(
        () => renderUpstream(template, { service: 's', upstream: 'api', servers: [], force: { key: raw as 'header:x', canary: [], stable: [] } }),
        UnsafeUpstreamValueError,
      );
    });
  }
});

describe('canaryWeights: the canary share of the hash ring', () => {
  // [name, stable count, canary count, percent, expected weights or undefined (only the share is checked)]
  const rows: [string, number, number, number, { stable: number; canary: number } | undefined][] = [
    ['0%: the canary gets no traffic (its servers are rendered down)', 10, 1, 0, { stable: 1, canary: 0 }],
    ['100%: stable gets no traffic', 10, 10, 100, { stable: 0, canary: 1 }],
    ['1 canary among 10 stable at 5%', 10, 1, 5, { stable: 95, canary: 50 }],
    ['1 canary among 9 stable at 10%: equal weights', 9, 1, 10, { stable: 100, canary: 100 }],
    ['5 canaries among 10 stable at 50%', 10, 5, 50, { stable: 50, canary: 100 }],
    ['1 canary among 3 stable at 34%', 3, 1, 34, undefined],
    ['1 canary among 100 stable at 1%', 100, 1, 1, undefined],
    ['3 canaries among 3 stable at 99%', 3, 3, 99, undefined],
    ['2 canaries among 7 stable at 23%', 7, 2, 23, undefined],
    ['13 canaries among 50 stable at 27%', 50, 13, 27, undefined],
    ['1 canary among 1000 stable at 50% (weights at the 1000 limit)', 1000, 1, 50, { stable: 1, canary: 1000 }],
    ['10 canaries among 10 stable at 1%', 10, 10, 1, undefined],
    ['1 canary among 1 stable at 75%', 1, 1, 75, undefined],
  ];
  for (const [name, stable, canary, percent, want] of rows) {
    it(name, () => {
      const w = canaryWeights(stable, canary, percent);
      if (want) assert.deepEqual({ stable: w.stable, canary: w.canary }, want);
      for (const [side, count, weight] of [
        ['stable', stable, w.stable],
        ['canary', canary, w.canary],
      ] as const) {
        const out = (side === 'stable' && percent === 100) || (side === 'canary' && percent === 0);
        if (out) assert.equal(weight, 0, `${side} has no share`);
        else assert.ok(Number.isInteger(weight) && weight >= 1 && weight <= 1000, `${side} weight ${weight} is an nginx weight`);
        assert.ok(count >= 0);
      }
      const share = percent === 0 || percent === 100 ? percent : (100 * canary * w.canary) / (canary * w.canary + stable * w.stable);
      assert.ok(Math.abs(share - percent) <= 1, `share ${share} within 1 point of ${percent}`);
      assert.ok(Math.abs(w.sharePercent - share) < 1e-9, 'sharePercent is the share the weights give');
      if (percent > 0 && percent < 100) assert.ok(stable * w.stable + canary * w.canary <= Math.max(1000, stable + canary * 1000), 'a bounded ring');
    });
  }

  it('when no weights up to 1000 reach the percent, the closest share comes back and says so', () => {
    const w = canaryWeights(10000, 1, 50);
    assert.deepEqual([w.stable, w.canary], [1, 1000]);
    assert.ok(Math.abs(w.sharePercent - (100 * 1000) / 11000) < 1e-9);
  });

  const impossible: [string, number, number, number][] = [
    ['a share for a canary with no server', 10, 0, 5],
    ['a share for stable with no server', 0, 3, 50],
    ['a percent above 100', 10, 1, 101],
    ['a negative percent', 10, 1, -1],
    ['a fractional count', 2.5, 1, 10],
  ];
  for (const [name, s, c, p] of impossible) {
    it(`throws RangeError for ${name}`, () => assert.throws(() => canaryWeights(s, c, p), RangeError));
  }

  it('splitTraffic weighs the servers in service and marks a side at 0% down', () => {
    const entry = (name: string, down = false): UpstreamEntry => ({ address: `10.0.0.${name.length}:80`, down, name });
    const stable = [entry('s1'), entry('s2', true), ...Array.from({ length: 9 }, (_, i) => entry(`st${i}`))];
    const at5 = splitTraffic(stable, [entry('c1')], 5);
    assert.deepEqual(
      at5.find((x) => x.name === 's2'),
      { ...entry('s2', true), weight: undefined },
      'a draining server stays down, unweighted',
    );
    assert.deepEqual(new Set(at5.filter((x) => x.name !== 's2' && x.name !== 'c1').map((x) => x.weight)), new Set([95]));
    assert.equal(at5.find((x) => x.name === 'c1')?.weight, 50);
    const at0 = splitTraffic(stable, [entry('c1')], 0);
    assert.equal(at0.find((x) => x.name === 'c1')?.down, true);
  });
});

describe('revisionOf', () => {
  const base = { image: 'a:1', env: { B: '2', A: '1' }, port: 8080, version: '1' };
  it('is stable and ignores env order', () => assert.equal(revisionOf(base), revisionOf({ ...base, env: { A: '1', B: '2' } })));
  it('changes with the image, an env value, the port or the version', () => {
    const r = revisionOf(base);
    for (const changed of [
      { ...base, image: 'a:2' },
      { ...base, env: { A: '1', B: '3' } },
      { ...base, port: 80 },
      { ...base, version: '2' },
    ]) {
      assert.notEqual(revisionOf(changed), r);
    }
  });
  it('does not contain env values', () => assert.match(revisionOf({ ...base, env: { SECRET: 'hunter2' } }), /^[0-9a-f]{10}$/));
});
