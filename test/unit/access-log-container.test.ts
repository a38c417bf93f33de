/**
 * The container readers (src/adapters/accessLog.ts) without a Docker engine:
 * a stand-in for dockerode whose "container" is a temp directory on this
 * machine (test/support/fake-container.ts). Its archive API returns a real
 * tar; its log stream is a stream the test writes Docker frames into.
 * dockerode's own demuxer does the demultiplexing. So the parts Docker does
 * not decide are checked here: falling back to the archive API when the
 * image has no stat/tail, rotation told by content, and the stream's
 * filtering, frame splitting, reconnection and de-duplication.
 *
 * The exec path, which runs the real `stat` and `tail`, is in
 * test/local/access-log-container.test.ts; test/integration/access-log.test.ts
 * runs the same readers on real Docker.
 */
import assert from 'node:assert/strict';
import { appendFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import Dockerode from 'dockerode';
import { ContainerLogStreamAccessLog } from '../../src/adapters/accessLog.js';
import { line } from '../support/access-log-lines.js';
import { fakeContainers, frame } from '../support/fake-container.js';

const { root, fakeDocker, fileReader } = fakeContainers();

describe('container file reader without stat/tail in the image', () => {
  it('exec: fails with the reason', async () => {
    const { src } = fileReader('x\n', { tools: false }, { method: 'exec' });
    await assert.rejects(src.read(), /reading the access log .* in container nginx: stat: .*executable file not found/);
  });

  it('auto: falls back to the archive API for good after the first missing tool', async () => {
    const { path, fake, src } = fileReader('old\n', { tools: false });
    assert.deepEqual(await src.read(), []);
    appendFileSync(path, 'a\n');
    assert.deepEqual(await src.read(), ['a']);
    assert.equal(fake.execs.length, 1, 'exec tried once');
    assert.ok(fake.archives >= 2);
  });

  it('archive: a file replaced under the reader (no inode to go by) is told by content', async () => {
    const { path, src } = fileReader('', { tools: false }, { method: 'archive' });
    await src.read();
    appendFileSync(path, 'first\n');
    assert.deepEqual(await src.read(), ['first']);
    appendFileSync(path, 'second\n');
    renameSync(path, `${path}.1`);
    writeFileSync(path, 'a longer first line of the new file\n');
    assert.deepEqual(await src.read(), ['second', 'a longer first line of the new file']);
    assert.equal(src.counters.rotations, 1);
    assert.equal(src.counters.lostRotations, 0);
  });

  it('archive: a missing file is no lines, then read from 0 when it appears', async () => {
    const { path, src } = fileReader(undefined, { tools: false }, { method: 'archive' });
    assert.deepEqual(await src.read(), []);
    writeFileSync(path, 'a\n');
    assert.deepEqual(await src.read(), ['a']);
  });
});

describe('container log stream', () => {
  const ts = (s: string) => `2026-12-01T04:33:${s}Z`;
  const settle = () => new Promise((r) => setImmediate(r));

  it('keeps fleetroll_json lines from stdout, drops the rest (counted), across split frames', async () => {
    const fake = fakeDocker();
    const src = await ContainerLogStreamAccessLog.open(fake.docker, 'nginx', { sinceMs: 1_700_000_000_500 });
    assert.deepEqual(fake.logStreams[0]!.opts, { follow: true, stdout: true, stderr: true, timestamps: true, since: '1700000000.5' });
    const s = fake.logStreams[0]!.stream;
    const bytes = Buffer.concat([
      frame(1, `${ts('43.1')} ${line({ uri: '/a' })}\n`),
      frame(2, `${ts('43.2')} 2026/12/01 04:33:43 [notice] 1#1: signal process started\n`),
      frame(1, `${ts('43.3')} 127.0.0.1 - - [01/Dec/2026:04:33:43 +0000] "GET /a HTTP/1.1" 502 157 "-" "curl"\n`),
      frame(1, `${ts('43.4')} ${line({ uri: '/b' })}\n`),
    ]);
    // Frames cut anywhere, a header included.
    const cuts = [0, 3, 20, 200, 301, bytes.length];
    for (let i = 0; i + 1 < cuts.length; i++) s.write(bytes.subarray(cuts[i], cuts[i + 1]));
    await settle();
    assert.deepEqual(await src.read(), [line({ uri: '/a' }), line({ uri: '/b' })]);
    assert.equal(src.counters.skippedLines, 2);
    assert.deepEqual(await src.read(), []);
    await src.close();
  });

  it('a line split across two frames of the same stream, with a stderr frame between', async () => {
    const fake = fakeDocker();
    const src = await ContainerLogStreamAccessLog.open(fake.docker, 'nginx');
    const s = fake.logStreams[0]!.stream;
    const full = `${ts('44.1')} ${line({ uri: '/split' })}\n`;
    s.write(Buffer.concat([frame(1, full.slice(0, 50)), frame(2, `${ts('44.2')} notice\n`), frame(1, full.slice(50))]));
    await settle();
    assert.deepEqual(await src.read(), [line({ uri: '/split' })]);
    await src.close();
  });

  it('a TTY container: the stream is not multiplexed', async () => {
    const fake = fakeDocker({ tty: true });
    const src = await ContainerLogStreamAccessLog.open(fake.docker, 'nginx');
    const s = fake.logStreams[0]!.stream;
    const text = `${ts('45.1')} ${line({ uri: '/tty' })}\r\n`;
    s.write(text.slice(0, 10));
    s.write(text.slice(10));
    await settle();
    assert.deepEqual(await src.read(), [line({ uri: '/tty' })]);
    await src.close();
  });

  it('a stream that ends (nginx restarted) is reopened from the last timestamp; lines seen are not returned twice', async () => {
    const fake = fakeDocker();
    const src = await ContainerLogStreamAccessLog.open(fake.docker, 'nginx');
    const first = fake.logStreams[0]!.stream;
    first.write(frame(1, `${ts('46.1')} ${line({ uri: '/1' })}\n${ts('46.25')} ${line({ uri: '/2' })}\n`));
    first.end();
    await settle();
    // The read that finds the stream ended reopens it, and returns what came before the end.
    assert.deepEqual(await src.read(), [line({ uri: '/1' }), line({ uri: '/2' })]);
    assert.equal(fake.logStreams.length, 2);
    assert.deepEqual(await src.read(), [], 'the reopened stream has nothing yet');
    const since = String(fake.logStreams[1]!.opts.since);
    assert.equal(since, `${Math.floor(Date.parse('2026-12-01T04:33:46Z') / 1000)}.250000000`);
    // Docker replays from `since`: the line at that very timestamp again, then new ones.
    fake.logStreams[1]!.stream.write(
      frame(1, `${ts('46.25')} ${line({ uri: '/2' })}\n${ts('46.25')} ${line({ uri: '/2b' })}\n${ts('47.0')} ${line({ uri: '/3' })}\n`),
    );
    await settle();
    assert.deepEqual(await src.read(), [line({ uri: '/2b' }), line({ uri: '/3' })]);
    await src.close();
  });

  it('close() stops the stream; read() then returns nothing', async () => {
    const fake = fakeDocker();
    const src = await ContainerLogStreamAccessLog.open(fake.docker, 'nginx');
    await src.close();
    assert.equal(fake.logStreams[0]!.stream.destroyed, true);
    assert.deepEqual(await src.read(), []);
  });

  it('an unknown container: a clear error at open', async () => {
    const docker = new Dockerode({ socketPath: join(root, 'no-engine.sock') });
    docker.getContainer = (() => ({
      inspect: async () => {
        throw Object.assign(new Error('(HTTP code 404) no such container - No such container: nope'), { statusCode: 404 });
      },
    })) as unknown as Dockerode['getContainer'];
    await assert.rejects(ContainerLogStreamAccessLog.open(docker, 'nope'), /following the log stream of container nope: it does not exist/);
  });
});
