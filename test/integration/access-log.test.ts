/**
 * The container access log readers (src/adapters/accessLog.ts) against a real
 * nginx container: the fleetroll_json file inside it, read through docker
 * exec (stat/tail) where the image has them and through the archive API where
 * it does not (fleetroll/nginx-base has only nginx), with rotation; and the
 * container's own log stream, where fleetroll_json lines share stdout with
 * nginx's default combined-format lines, across a container restart.
 *
 * The nginx container is the test fleet's (no instances: every request gets
 * nginx's own 502, which is a fleetroll_json line like any other).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ContainerLogStreamAccessLog, containerFileAccessLog } from '../../src/adapters/accessLog.js';
import { execIn, getFile, putFile } from '../../src/adapters/docker.js';
import { AccessLogParser, LOG_FORMAT } from '../../src/core/accessLog.js';
import type { AccessLogSource } from '../../src/ports.js';
import { docker, useFleets, waitFor, type TestFleet } from './fixture.js';

/**
 * Not ACCESS_LOG, which the fixture's nginx writes from its start: a line in
 * a file only the reloaded config writes is what tells that the reload is in
 * force (probeUntilLogged).
 */
const LOG = '/var/log/nginx/acclog-test.log';
const fleet = useFleets();

/**
 * Requests `/probe-<what>-N` until one shows up in the file at LOG (new
 * workers, or a reopened log, use it). nginx writes a line just after its
 * response, so any probe of this kind counts, not only the last one.
 */
async function probeUntilLogged(f: TestFleet, what: string): Promise<void> {
  let i = 0;
  await waitFor(
    `nginx to log a probe to ${LOG} (${what})`,
    async () => {
      // Right after a reload the old workers close idle keep-alive connections, and fetch may
      // have picked one of those: that request is lost before nginx sees it, so try the next.
      await fetch(`${f.url}/probe-${what}-${i++}`).then(
        (r) => r.arrayBuffer(),
        () => undefined,
      );
      return ((await getFile(docker, f.names.nginx, LOG)) ?? '').includes(`"/probe-${what}-`);
    },
    10_000,
    50,
  );
}

/** fleetroll_json to a file and to stdout (next to the image's own combined log), then a reload. */
async function withFleetrollLog(f: TestFleet): Promise<void> {
  await putFile(
    docker,
    f.names.nginx,
    '/etc/nginx/conf.d/00-fleetroll-log.conf',
    `${LOG_FORMAT}access_log ${LOG} fleetroll_json;\naccess_log /dev/stdout fleetroll_json;\n`,
  );
  const r = await execIn(docker, f.names.nginx, ['nginx', '-s', 'reload']);
  assert.equal(r.exitCode, 0, r.stderr);
  await probeUntilLogged(f, 'reload');
}

async function urlOf(f: TestFleet): Promise<string> {
  const info = await docker.getContainer(f.names.nginx).inspect();
  return `http://127.0.0.1:${info.NetworkSettings.Ports['80/tcp']?.[0]?.HostPort}`;
}

async function requests(url: string, paths: string[]): Promise<void> {
  for (const p of paths) await (await fetch(`${url}${p}`)).arrayBuffer();
}

/**
 * Reads until `n` lines of the test's own requests came (a probe's line, which
 * a late write may bring first, does not count); fails naming them once the
 * hang guard (5 s at the default concurrency) ends.
 */
async function readLines(src: AccessLogSource, n: number): Promise<string[]> {
  const lines: string[] = [];
  await waitFor(
    `${n} request line(s) from the access log source`,
    async () => {
      lines.push(...(await src.read()));
      return urisOf(lines).length >= n;
    },
    5000,
    100,
  );
  return lines;
}

/** The URIs of the lines, the probes left out. */
const urisOf = (lines: string[]) =>
  new AccessLogParser()
    .parse(lines)
    .map((r) => r.uri)
    .filter((u) => !u.startsWith('/probe-'));

/** Reads until a line for `uri` came (failing once the hang guard ends); returns the URIs of every line read. */
async function readUntil(src: AccessLogSource, uri: string): Promise<string[]> {
  const uris: string[] = [];
  await waitFor(
    `${uri} in the access log source`,
    async () => {
      uris.push(...urisOf(await src.read()));
      return uris.includes(uri);
    },
    5000,
    100,
  );
  return uris;
}

async function hasTools(f: TestFleet): Promise<boolean> {
  const r = await execIn(docker, f.names.nginx, ['stat', '-c', '%i', '/etc/nginx/nginx.conf']).catch(() => undefined);
  return r !== undefined && r.exitCode === 0;
}

describe('access log file inside the nginx container', () => {
  for (const method of ['auto', 'archive'] as const) {
    it(`${method}: new lines since the last read, each once, parsed`, async () => {
      const f = await fleet('acclog-file');
      await withFleetrollLog(f);
      const src = containerFileAccessLog(docker, f.names.nginx, LOG, { method });
      assert.deepEqual(await src.read(), [], 'from the end');
      await requests(f.url, ['/a', '/b', '/c']);
      const lines = await readLines(src, 3);
      // nginx logs a request just after answering it, each worker on its own: two requests
      // one after the other may be logged in either order. Each once is what the reader owes.
      assert.deepEqual(urisOf(lines).sort(), ['/a', '/b', '/c']);
      assert.deepEqual(await src.read(), [], 'nothing twice');
      await requests(f.url, ['/d']);
      assert.deepEqual(urisOf(await readLines(src, 1)), ['/d']);
      await src.close();
    });
  }

  it('exec: stat and tail where the image has them; otherwise a clear error (auto falls back)', async () => {
    const f = await fleet('acclog-exec');
    await withFleetrollLog(f);
    const src = containerFileAccessLog(docker, f.names.nginx, LOG, { method: 'exec' });
    if (await hasTools(f)) {
      await src.read();
      await requests(f.url, ['/x']);
      assert.deepEqual(urisOf(await readLines(src, 1)), ['/x']);
    } else {
      await assert.rejects(src.read(), /stat|executable|not found/i);
    }
    await src.close();
  });

  it('rotation: the file replaced under nginx, nginx -s reopen; the lines after it come, none twice', async () => {
    const f = await fleet('acclog-rotate');
    await withFleetrollLog(f);
    const tools = await hasTools(f);
    const src = containerFileAccessLog(docker, f.names.nginx, LOG);
    await src.read();
    await requests(f.url, ['/before']);
    assert.deepEqual(urisOf(await readLines(src, 1)), ['/before']);
    await requests(f.url, ['/unread']);
    if (tools) {
      // logrotate's way: rename, reopen. The unread line is found in access log .1.
      assert.equal((await execIn(docker, f.names.nginx, ['mv', LOG, `${LOG}.1`])).exitCode, 0);
    } else {
      // No mv in the image: replace the file through the archive API (a new inode); nginx keeps
      // the old, now unlinked, one until it reopens, so the unread line is gone and counted.
      await putFile(docker, f.names.nginx, LOG, '');
    }
    assert.equal((await execIn(docker, f.names.nginx, ['nginx', '-s', 'reopen'])).exitCode, 0);
    await probeUntilLogged(f, 'reopen');
    await requests(f.url, ['/after']);
    const got = await readUntil(src, '/after');
    if (tools) {
      assert.deepEqual(got, ['/unread', '/after']);
      assert.equal(src.counters.lostRotations, 0);
    } else {
      assert.deepEqual(got, ['/after']);
      assert.equal(src.counters.lostRotations, 1);
    }
    assert.equal(src.counters.rotations + src.counters.truncations, 1);
    await src.close();
  });
});

describe("the nginx container's own log stream", () => {
  it('keeps only fleetroll_json lines, counts the rest, and carries on across a restart without repeats', async () => {
    const f = await fleet('acclog-stream');
    await withFleetrollLog(f);
    const src = await ContainerLogStreamAccessLog.open(docker, f.names.nginx);
    await requests(f.url, ['/one', '/two']);
    assert.deepEqual(urisOf(await readLines(src, 2)).sort(), ['/one', '/two'], 'each once (in either order: see above)');
    assert.ok(src.counters.skippedLines >= 2, `the combined-format twins were skipped (${src.counters.skippedLines})`);
    assert.deepEqual(await src.read(), []);

    await docker.getContainer(f.names.nginx).restart({ t: 1 });
    const url = await urlOf(f); // the published port may change
    await waitFor('nginx to answer after its restart', () => fetch(url).then(() => true), 10_000, 100);
    await requests(url, ['/three']);
    const after = await readUntil(src, '/three');
    // The probe requests of the wait loop above are "/" lines; /one and /two must not come again.
    assert.ok(after.includes('/three'), JSON.stringify(after));
    assert.ok(!after.includes('/one') && !after.includes('/two'), `no repeats: ${JSON.stringify(after)}`);
    await src.close();
    assert.deepEqual(await src.read(), [], 'nothing after close');
  });
});
