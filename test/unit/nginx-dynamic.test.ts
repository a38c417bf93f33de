/**
 * The pieces of the dynamic nginx mode that fleetroll renders and parses
 * (src/adapters/nginxDynamic.ts): the peers file the Lua balancer reads, the
 * status file it answers with, and the check of an nginx config against
 * templates/nginx-dynamic.conf.example. The Lua side itself runs in
 * test/integration/dynamic.test.ts.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { DynamicNginxRouter, defaultPeersFile, dynamicConfigProblems, parsePeers, parseStatus, renderPeers } from '../../src/adapters/nginxDynamic.js';
import { containerPlace, hostPathOf, type NginxPlace } from '../../src/adapters/nginxPlace.js';
import type { DockerRuntime } from '../../src/adapters/docker.js';
import { mkdtempSync, readFileSync as readHostFile, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { forceRoute, renderUpstream } from '../../src/core/upstream.js';

const example = readFileSync(new URL('../../templates/nginx-dynamic.conf.example', import.meta.url), 'utf8');
const lua = readFileSync(new URL('../../templates/fleetroll.lua', import.meta.url), 'utf8');

describe('the peers file', () => {
  const servers = [
    { address: '10.0.0.5:8080', down: false, name: 'api-1' },
    { address: '10.0.0.6:8080', down: true, name: 'api-2' },
    { address: '10.0.0.7:8080', down: false, name: 'api-3', weight: 25 },
  ];

  it('renders every server with its state and weight between a header and a trailer of the same version', () => {
    assert.equal(
      renderPeers(servers, 42),
      'fleetroll-peers 1\nversion 42\npeer 10.0.0.5:8080 up 1 api-1\npeer 10.0.0.6:8080 down 1 api-2\npeer 10.0.0.7:8080 up 25 api-3\nend 42\n',
    );
  });

  it('parses back what it renders', () => {
    assert.deepEqual(parsePeers(renderPeers(servers, 7)), { version: 7, servers, groups: [] });
  });

  it("carries a canary's sticky key and the epoch of its assignments for the Lua split", () => {
    assert.equal(
      renderPeers(servers.slice(0, 1), 3, { split: { key: 'header:X-User', epoch: 2 } }),
      'fleetroll-peers 1\nversion 3\nsplit header X-User 2\npeer 10.0.0.5:8080 up 1 api-1\nend 3\n',
    );
    assert.match(renderPeers([], 3, { split: { key: 'remote_addr', epoch: 2 } }), /\nsplit remote_addr - 2\n/);
    assert.match(renderPeers([], 3, { split: { key: 'cookie:canary-user', epoch: 2 } }), /\nsplit cookie canary-user 2\n/);
    assert.deepEqual(parsePeers(renderPeers(servers, 4, { split: { key: 'header:X-User', epoch: 4 } }))?.servers, servers);
  });

  it("carries a second upstream's peers as a group (blue-green's preview), after the main upstream's, and parses them back", () => {
    const text = renderPeers(servers.slice(0, 1), 5, {
      groups: [
        { name: 'bookstore_preview', servers: [servers[2]!] },
        { name: 'empty_group', servers: [] },
      ],
    });
    assert.equal(text, 'fleetroll-peers 1\nversion 5\npeer 10.0.0.5:8080 up 1 api-1\nmember bookstore_preview 10.0.0.7:8080 up 25 api-3\nend 5\n');
    assert.deepEqual(parsePeers(text), { version: 5, servers: servers.slice(0, 1), groups: [{ name: 'bookstore_preview', servers: [servers[2]] }] });
  });

  it('carries canary.force: the header or cookie and the groups of each side', () => {
    const r = forceRoute('bookstore_api');
    assert.match(
      renderPeers([], 2, { force: { key: 'header:X-Canary', canary: r.canary, stable: r.stable } }),
      /\nforce header X-Canary fleetroll_bookstore_api_canary fleetroll_bookstore_api_stable\n/,
    );
    assert.match(renderPeers([], 2, { force: { key: 'cookie:canary_opt-in', canary: r.canary, stable: r.stable } }), /\nforce cookie canary_opt-in /);
  });

  const refusedExtras: [string, Parameters<typeof renderPeers>[2], RegExp][] = [
    ['a group name with a space', { groups: [{ name: 'a b', servers: [] }] }, /group name/],
    ['a group name with Lua in it', { groups: [{ name: 'x")os.exit(', servers: [] }] }, /group name/],
    ['a force key of another kind', { force: { key: 'remote_addr' as never, canary: 'a', stable: 'b' } }, /canary\.force must be/],
    ['a force header name with a newline', { force: { key: 'header:X\nend 1' as never, canary: 'a', stable: 'b' } }, /canary\.force must be/],
  ];
  for (const [name, extras, message] of refusedExtras) {
    it(`refuses ${name}`, () => {
      assert.throws(() => renderPeers([], 1, extras), message);
    });
  }

  it('leaves out the placeholder a file with no instance carries', () => {
    assert.equal(renderPeers([{ address: '127.0.0.1:9', down: true, name: 'no instance in service' }], 1), 'fleetroll-peers 1\nversion 1\nend 1\n');
  });

  const refused: [string, { address: string; down: boolean; name: string; weight?: number }, RegExp][] = [
    ['a host name instead of an address', { address: 'api.internal:8080', down: false, name: 'a' }, /IPv4 addresses with a port/],
    ['an address with Lua in it', { address: '10.0.0.1:80"..os.exit()', down: false, name: 'a' }, /IPv4 addresses with a port/],
    ['a name with a space (a second field to the Lua parser)', { address: '10.0.0.1:80', down: false, name: 'a b' }, /instance name/],
    ['a weight of 0', { address: '10.0.0.1:80', down: false, name: 'a', weight: 0 }, /weight from 1 to 1000/],
  ];
  for (const [name, server, message] of refused) {
    it(`refuses ${name}`, () => {
      assert.throws(() => renderPeers([server], 1), message);
    });
  }

  const incomplete: [string, string][] = [
    ['half-written (no trailer yet)', 'fleetroll-peers 1\nversion 3\npeer 10.0.0.5:8080 up 1 a\n'],
    ['a trailer of another version', 'fleetroll-peers 1\nversion 3\nend 2\n'],
    ['another format', 'upstream api {\n}\n'],
  ];
  for (const [name, text] of incomplete) {
    it(`is not taken when ${name}`, () => {
      assert.equal(parsePeers(text), undefined);
    });
  }
});

describe('the status file', () => {
  it('gives the version in force, the start time and the requests in flight on the peers marked down', () => {
    const s = parseStatus('fleetroll-status 1\nversion 9\nstarted 1796307841.147\ninflight 10.0.0.6:8080 2\ninflight 10.0.0.8:8080 -1\nend 9\n');
    assert.deepEqual(s && { ...s, inflight: [...s.inflight] }, {
      version: 9,
      started: 1796307841.147,
      lua: 1,
      since: undefined,
      inflight: [
        ['10.0.0.6:8080', 2],
        ['10.0.0.8:8080', 0],
      ],
    });
  });

  it("gives the Lua's own version and when the set went in force (a status from this fleetroll's Lua)", () => {
    const s = parseStatus('fleetroll-status 1\nversion 9\nstarted 1796307841.147\nlua 2\nsince 1796307850.25\nend 9\n');
    assert.equal(s?.lua, 2);
    assert.equal(s?.since, 1796307850.25);
  });

  it('is not taken half-written', () => {
    assert.equal(parseStatus('fleetroll-status 1\nversion 9\nstarted 1\ninflight 10.0.0.6:8080 2\n'), undefined);
  });
});

describe('the nginx side: templates/nginx-dynamic.conf.example and templates/fleetroll.lua', () => {
  it('the example has every piece the preflight looks for, for its upstream and the default peers file', () => {
    assert.deepEqual(dynamicConfigProblems(example, 'bookstore_api', defaultPeersFile('bookstore_api')), []);
  });

  it('the check names each missing piece', () => {
    const without = example.replace(/^\s*log_by_lua_block.*$/m, '').replace(/^\s*lua_shared_dict.*$/m, '');
    assert.deepEqual(dynamicConfigProblems(without, 'bookstore_api', defaultPeersFile('bookstore_api')), [
      'lua_shared_dict fleetroll 1m;',
      'log_by_lua_block { require("fleetroll").done() } where it proxies',
    ]);
  });

  it("with blue-green's preview, the check wants the preview upstream balanced by the Lua too", () => {
    assert.deepEqual(dynamicConfigProblems(example, 'bookstore_api', defaultPeersFile('bookstore_api'), 'bookstore_preview'), [
      'upstream bookstore_preview { server 0.0.0.1; balancer_by_lua_block { require("fleetroll").balance("bookstore_preview") } } (blue-green\'s preview)',
    ]);
    const withPreview = example.replace(
      /(\n\s*server \{)/,
      '\n    upstream bookstore_preview { server 0.0.0.1; balancer_by_lua_block { require("fleetroll").balance("bookstore_preview") } }$1',
    );
    assert.deepEqual(dynamicConfigProblems(withPreview, 'bookstore_api', defaultPeersFile('bookstore_api'), 'bookstore_preview'), []);
  });

  it("the check wants this fleet's upstream and peers file, not another's", () => {
    const problems = dynamicConfigProblems(example, 'orders', '/tmp/fleetroll-orders.peers');
    assert.equal(problems.length, 2);
    assert.match(problems.join('\n'), /upstream = "orders", peers = "\/tmp\/fleetroll-orders\.peers"/);
    assert.match(problems.join('\n'), /balance\("orders"\)/);
  });

  it('the Lua parses the formats fleetroll writes and reads (header, peer line, trailer)', () => {
    assert.match(lua, /"\^fleetroll%-peers 1\\nversion \(%d\+\)\\n"/);
    assert.match(lua, /"\\npeer \(%S\+\) \(%a\+\) \(%d\+\)"/);
    assert.match(lua, /"\\nsplit \(%S\+\) \(%S\+\) \(%d\+\)"/);
    assert.match(lua, /"fleetroll-status 1", "version " \.\. version, "started "/);
    assert.match(lua, /"inflight " \.\. p\.addr/);
    assert.match(lua, /^local TICK = 0\.01$/m, 'the tick fleetroll waits for before its first look (LUA_TICK_MS)');
    assert.match(lua, /"\\nmember \(%S\+\) \(\[\^\\n\]\*\)"/, 'a group line');
    assert.match(lua, /"\\nforce \(%S\+\) \(%S\+\) \(%S\+\) \(%S\+\)"/, 'the force line');
    assert.match(lua, /"lua " \.\. _M\.VERSION, "since "/, 'the Lua version and the in-force time in the status');
    assert.match(lua, /^local _M = \{ VERSION = "2" \}$/m, 'the version the preflight asks for when a fleet has groups');
  });
});

/** A place in memory: the files fleetroll writes, and a Lua side that answers when told. */
function memoryPlace(answer: (peers: string) => string | undefined): NginxPlace & { files: Map<string, string> } {
  const files = new Map<string, string>();
  return {
    name: 'nginx in memory',
    files,
    nginx: () => Promise.resolve({ ok: true, output: '', stdout: example }),
    read: (f) => Promise.resolve(files.get(f)),
    write: (f, text) => {
      files.set(f, text);
      const status = answer(text);
      if (status !== undefined) files.set(`${f}.status`, status);
      return Promise.resolve();
    },
  };
}

describe("the peers file in a bind mount of a container on this machine's engine (hostPathOf)", () => {
  const mounts = [
    { Type: 'volume', Source: '/var/lib/docker/volumes/v/_data', Destination: '/var/log/nginx' },
    { Type: 'bind', Source: '/run/fleetroll/books', Destination: '/run/fleetroll/' },
  ];
  const rows: [string, string, string | undefined][] = [
    ['a file in the bind mount: its host path', '/run/fleetroll/books_api.peers', '/run/fleetroll/books/books_api.peers'],
    ['the status beside it', '/run/fleetroll/books_api.peers.status', '/run/fleetroll/books/books_api.peers.status'],
    ['a file in a subdirectory of the mount', '/run/fleetroll/a/b.peers', '/run/fleetroll/books/a/b.peers'],
    ['a file outside every bind mount: the archive API', '/tmp/fleetroll-books_api.peers', undefined],
    ['a named volume is not a path on this machine fleetroll may write', '/var/log/nginx/x.peers', undefined],
    ['a prefix that is not a directory boundary', '/run/fleetroll2/x.peers', undefined],
    ['a path that climbs out of the mount', '/run/fleetroll/../etc/x.peers', undefined],
  ];
  for (const [name, file, want] of rows) {
    it(name, () => {
      assert.equal(hostPathOf(file, mounts), want);
    });
  }
});

describe('containerPlace: a file in a bind mount on this machine is read and written as a plain file', () => {
  /** A runtime whose engine knows only inspect: the archive API (putArchive, getArchive) is not there to be called. */
  const runtime = (endpoint: string, source: string) =>
    ({
      endpoint,
      docker: { getContainer: () => ({ inspect: () => Promise.resolve({ Mounts: [{ Type: 'bind', Source: source, Destination: '/run/fleetroll' }] }) }) },
    }) as unknown as DockerRuntime;

  it('on the local engine: written aside and renamed in the host directory, read back, never through Docker', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetroll-place-'));
    const place = containerPlace(runtime('unix:///var/run/docker.sock', dir), 'lb', 'local');
    await place.write('/run/fleetroll/api.peers', 'fleetroll-peers 1\nversion 1\nend 1\n');
    assert.equal(readHostFile(join(dir, 'api.peers'), 'utf8'), 'fleetroll-peers 1\nversion 1\nend 1\n');
    assert.equal(await place.read('/run/fleetroll/api.peers'), 'fleetroll-peers 1\nversion 1\nend 1\n');
    assert.equal(await place.read('/run/fleetroll/none.status'), undefined);
  });

  it('a symlink planted in the shared directory is not read through', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetroll-place-'));
    symlinkSync('/etc/hostname', join(dir, 'api.peers.status'));
    const place = containerPlace(runtime('unix:///var/run/docker.sock', dir), 'lb', 'local');
    await assert.rejects(place.read('/run/fleetroll/api.peers.status'), /is a symbolic link/);
  });

  it("on a remote engine the mount's source is that machine's path: the archive API, not this machine's files", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'fleetroll-place-'));
    const place = containerPlace(runtime('ssh://deploy@vm1', dir), 'lb', 'vm1');
    await assert.rejects(place.write('/run/fleetroll/api.peers', 'x'));
    assert.throws(() => readHostFile(join(dir, 'api.peers')), /ENOENT/);
  });
});

describe('DynamicNginxRouter', () => {
  const upstream = renderUpstream('upstream {{upstream}} {\n{{servers}}\n}\n', {
    service: 'bookstore-api',
    upstream: 'bookstore_api',
    servers: [
      { address: '10.0.0.5:8080', down: false, name: 'api-1' },
      { address: '10.0.0.6:8080', down: true, name: 'api-2' },
    ],
  });
  const peersFile = defaultPeersFile('bookstore_api');

  it('writeAndTest only stages: nothing reaches nginx before reload, which returns once the status names its version', async () => {
    const place = memoryPlace((text) => `fleetroll-status 1\nversion ${parsePeers(text)?.version}\nstarted 1\nend ${parsePeers(text)?.version}\n`);
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile });
    await r.writeAndTest(upstream);
    assert.equal(place.files.size, 0, 'nothing written by writeAndTest');
    await r.reload();
    assert.deepEqual(parsePeers(place.files.get(peersFile))?.servers, [
      { address: '10.0.0.5:8080', down: false, name: 'api-1' },
      { address: '10.0.0.6:8080', down: true, name: 'api-2' },
    ]);
    assert.equal(r.reloadFree, true);
    assert.deepEqual(Object.keys(r.lastChange() ?? {}), ['file', 'confirm'], 'no in-force time from a status without one');
    assert.match((await r.read()) ?? '', /server 10\.0\.0\.6:8080 down; # api-2/);
  });

  it('read: the peers only when nginx has them in force; a status of another version (a restart that lost them) reads as none, so the rollout writes them all first', async () => {
    const place = memoryPlace(() => undefined);
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile });
    place.files.set(peersFile, renderPeers([{ address: '10.0.0.5:8080', down: false, name: 'api-1' }], 5));
    place.files.set(`${peersFile}.status`, 'fleetroll-status 1\nversion 5\nstarted 1\nend 5\n');
    assert.match((await r.read()) ?? '', /server 10\.0\.0\.5:8080; # api-1/);
    place.files.set(`${peersFile}.status`, 'fleetroll-status 1\nversion 0\nstarted 2\nend 0\n');
    assert.equal(await r.read(), undefined);
    place.files.delete(`${peersFile}.status`);
    assert.equal(await r.read(), undefined);
  });

  it("a canary's hash line turns the Lua split on, with one epoch for the whole canary; without it the split is off", async () => {
    const place = memoryPlace((text) => `fleetroll-status 1\nversion ${parsePeers(text)?.version}\nstarted 1\nend ${parsePeers(text)?.version}\n`);
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile, stickyKey: 'header:X-User' });
    const canary = (w: number) =>
      `upstream bookstore_api {\n    hash $http_x_user consistent;\n    server 10.0.0.5:8080 weight=${100 - w}; # api-1\n    server 10.0.0.9:8080 weight=${w}; # api-9\n}\n`;
    const epochs: (string | undefined)[] = [];
    for (const text of [canary(25), canary(50), upstream]) {
      await r.writeAndTest(text);
      await r.reload();
      epochs.push(/\nsplit header X-User (\d+)\n/.exec(place.files.get(peersFile) ?? '')?.[1]);
    }
    assert.ok(epochs[0] !== undefined && epochs[0] === epochs[1], `one epoch while the canary runs: ${epochs.join(', ')}`);
    assert.equal(epochs[2], undefined, 'no split once the hash line is gone');
  });

  it("stages blue-green's preview and canary.force's sides from the upstream file reload mode would write, and reads them back as upstream blocks", async () => {
    const place = memoryPlace(
      (text) => `fleetroll-status 1\nversion ${parsePeers(text)?.version}\nstarted 1\nlua 2\nsince ${Date.now() / 1000}\nend ${parsePeers(text)?.version}\n`,
    );
    const preview = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile, preview: 'bookstore_preview' });
    const file = renderUpstream('upstream {{upstream}} {\n{{servers}}\n}\n{{blocks}}', {
      service: 'bookstore-api',
      upstream: 'bookstore_api',
      servers: [{ address: '10.0.0.5:8080', down: false, name: 'api-1' }],
      preview: { upstream: 'bookstore_preview', servers: [{ address: '10.0.0.9:8080', down: false, name: 'api-9' }] },
    });
    await preview.writeAndTest(file);
    await preview.reload();
    assert.deepEqual(parsePeers(place.files.get(peersFile))?.groups, [
      { name: 'bookstore_preview', servers: [{ address: '10.0.0.9:8080', down: false, name: 'api-9' }] },
    ]);
    assert.match((await preview.read()) ?? '', /upstream bookstore_preview \{\n {4}server 10\.0\.0\.9:8080; # api-9\n\}/);
    assert.ok((preview.lastChange()?.inForce ?? -1) >= 0, 'the in-force time from the status');

    const forced = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile, stickyKey: 'header:X-User', force: 'header:X-Canary' });
    const r = forceRoute('bookstore_api');
    const canary = renderUpstream('upstream {{upstream}} {\n{{servers}}\n}\n{{blocks}}', {
      service: 'bookstore-api',
      upstream: 'bookstore_api',
      hash: 'header:X-User',
      servers: [
        { address: '10.0.0.5:8080', down: false, name: 'api-1', weight: 75 },
        { address: '10.0.0.9:8080', down: false, name: 'api-9', weight: 25 },
      ],
      force: {
        key: 'header:X-Canary',
        canary: [{ address: '10.0.0.9:8080', down: false, name: 'api-9' }],
        stable: [{ address: '10.0.0.5:8080', down: false, name: 'api-1' }],
      },
    });
    await forced.writeAndTest(canary);
    await forced.reload();
    const written = place.files.get(peersFile) ?? '';
    assert.match(written, new RegExp(`\\nforce header X-Canary ${r.canary} ${r.stable}\\n`));
    assert.deepEqual(
      parsePeers(written)?.groups.map((g) => [g.name, g.servers.map((x) => x.name)]),
      [
        [r.canary, ['api-9']],
        [r.stable, ['api-1']],
      ],
    );
    assert.match(written, /\nsplit header X-User \d+\n/, 'the weighted split for everyone else');
  });

  it('check: a fleet with a preview or canary.force and nginx running an older fleetroll.lua is told to copy it again', async () => {
    const place = memoryPlace(() => undefined);
    place.files.set(`${peersFile}.status`, 'fleetroll-status 1\nversion 0\nstarted 1\nend 0\n');
    await assert.rejects(
      new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile, force: 'header:X-Canary' }).check(),
      /fleetroll\.lua nginx runs is version 1, too old for canary\.force: copy templates\/fleetroll\.lua/,
    );
    await new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile }).check();
  });

  it('a later version each change, also after reading what an earlier run wrote', async () => {
    const place = memoryPlace((text) => `fleetroll-status 1\nversion ${parsePeers(text)?.version}\nstarted 1\nend ${parsePeers(text)?.version}\n`);
    place.files.set(peersFile, renderPeers([], Date.now() + 60_000));
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile });
    const before = parsePeers(place.files.get(peersFile))!.version;
    await r.read();
    await r.writeAndTest(upstream);
    await r.reload();
    assert.ok(parsePeers(place.files.get(peersFile))!.version > before);
  });

  it('a Lua side that never answers: reload fails naming the version it waited for', { timeout: 20_000 }, async () => {
    const place = memoryPlace(() => undefined);
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile, confirmTimeoutMs: 5000 });
    await r.writeAndTest(upstream);
    await assert.rejects(r.reload(), /did not take the new peers within 5 s \(its status file says version none, wanted \d+\)/);
  });

  it('check: a config without the Lua pieces is refused, naming them', async () => {
    const place = { ...memoryPlace(() => undefined), nginx: () => Promise.resolve({ ok: true, output: '', stdout: 'events {}\nhttp {}\n' }) };
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile });
    await assert.rejects(
      r.check(),
      /lacks what the dynamic mode needs for upstream bookstore_api \(templates\/nginx-dynamic\.conf\.example has every piece; or set mode: reload\):[\s\S]*lua_shared_dict fleetroll 1m;[\s\S]*balancer_by_lua_block/,
    );
  });

  it('check: nginx without the Lua module is told the Debian packages', async () => {
    const place = {
      ...memoryPlace(() => undefined),
      nginx: () => Promise.resolve({ ok: false, output: 'nginx: [emerg] unknown directive "balancer_by_lua_block" in /etc/nginx/nginx.conf:40', stdout: '' }),
    };
    const r = new DynamicNginxRouter({ place, upstream: 'bookstore_api', peersFile });
    await assert.rejects(
      r.check(),
      (err: Error & { hint?: string }) =>
        /libnginx-mod-http-lua/.test(err.hint ?? '') && /fails `nginx -t`[\s\S]*install libnginx-mod-http-lua/.test(err.message),
    );
  });

  it('check: the pieces there but no status file (the timer does not run) is refused', async () => {
    const r = new DynamicNginxRouter({ place: memoryPlace(() => undefined), upstream: 'bookstore_api', peersFile });
    await assert.rejects(r.check(), /no status file from fleetroll's Lua at \/tmp\/fleetroll-bookstore_api\.peers\.status/);
  });
});
