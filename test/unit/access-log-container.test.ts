/**
 * The container readers (src/adapters/accessLog.ts) without a Docker engine:
 * a stand-in for dockerode whose "container" is a temp directory on this
 * machine. Its exec runs the real `stat` / `tail` binaries with the argument
 * arrays the reader sends and frames their output the way Docker multiplexes
 * it; its archive API returns a real tar; its log stream is a stream the test
 * writes Docker frames into. dockerode's own demuxer does the demultiplexing.
 * So the parts Docker does not decide are checked here: the commands and
 * offsets, parsing stat's output, falling back to the archive API when the
 * image has no stat/tail, rotation, and the stream's filtering, frame
 * splitting, reconnection and de-duplication.
 *
 * test/integration/access-log.test.ts runs the same readers on real Docker.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import Dockerode from 'dockerode';
import { ContainerLogStreamAccessLog, containerFileAccessLog } from '../../src/adapters/accessLog.js';
import { createTar } from '../../src/adapters/tar.js';
import { line } from './access-log-lines.js';

const root = mkdtempSync(join(tmpdir(), 'fleetroll-fake-container-'));
after(() => rmSync(root, { recursive: true, force: true }));

/** One Docker multiplexed frame: stream 1 = stdout, 2 = stderr. */
function frame(stream: 1 | 2, payload: string | Buffer): Buffer {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const header = Buffer.alloc(8);
  header.writeUInt8(stream, 0);
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}

interface FakeOptions {
  /** false: an image without stat/tail (fleetroll/nginx-base). */
  tools?: boolean;
  tty?: boolean;
}

interface Fake {
  docker: Dockerode;
  /** Every exec'd command, in order. */
  execs: string[][];
  archives: number;
  /** Log streams handed out, newest last, with the options they were asked for. */
  logStreams: { stream: PassThrough; opts: Record<string, unknown> }[];
}

/** A dockerode whose container "runs" on this machine: paths are used as they are. */
function fakeDocker(o: FakeOptions = {}): Fake {
  const docker = new Dockerode({ socketPath: join(root, 'no-engine.sock') });
  const fake: Fake = { docker, execs: [], archives: 0, logStreams: [] };
  const container = {
    async exec({ Cmd }: { Cmd: string[] }) {
      fake.execs.push(Cmd);
      let exitCode = 0;
      let out: Buffer;
      let err: Buffer;
      if (o.tools === false) {
        exitCode = 127;
        out = Buffer.from(`OCI runtime exec failed: exec failed: unable to start container process: exec: "${Cmd[0]}": executable file not found in $PATH: unknown\r\n`);
        err = Buffer.alloc(0);
      } else {
        const r = spawnSync(Cmd[0]!, Cmd.slice(1));
        exitCode = r.status ?? -1;
        out = r.stdout;
        err = r.stderr;
      }
      return {
        async start() {
          // Split the frames at an awkward place, as a socket would.
          const all = Buffer.concat([frame(1, out), ...(err.length ? [frame(2, err)] : [])]);
          return Readable.from([all.subarray(0, 5), all.subarray(5)]);
        },
        async inspect() {
          return { Running: false, ExitCode: exitCode };
        },
      };
    },
    async getArchive({ path }: { path: string }) {
      fake.archives++;
      let content: Buffer;
      try {
        content = readFileSync(path);
      } catch {
        throw Object.assign(new Error(`(HTTP code 404) no such file - Could not find the file ${path} in container fake`), { statusCode: 404, json: { message: `Could not find the file ${path} in container fake` } });
      }
      return Readable.from([await createTar({ name: path.split('/').pop()!, content: content.toString('utf8'), mode: 0o644 })]);
    },
    async inspect() {
      return { Config: { Tty: Boolean(o.tty) } };
    },
    async logs(opts: Record<string, unknown>) {
      const stream = new PassThrough();
      fake.logStreams.push({ stream, opts });
      return stream;
    },
  };
  docker.getContainer = (() => container) as unknown as Dockerode['getContainer'];
  return fake;
}

let n = 0;
const logPath = () => {
  const d = join(root, `c${n++}`);
  spawnSync('mkdir', ['-p', d]);
  return join(d, 'access.log');
};

describe('container file reader through exec (stat / tail)', () => {
  it('reads new lines with tail -c +N from the offset, stat before and after, argument arrays only', async () => {
    const path = logPath();
    writeFileSync(path, 'old\n');
    const fake = fakeDocker();
    const src = containerFileAccessLog(fake.docker, 'nginx', path, { method: 'exec' });
    assert.deepEqual(await src.read(), []);
    appendFileSync(path, 'a\nb\n');
    assert.deepEqual(await src.read(), ['a', 'b']);
    assert.deepEqual(await src.read(), []);
    assert.ok(fake.execs.every((c) => Array.isArray(c) && (c[0] === 'stat' || c[0] === 'tail')));
    const tails = fake.execs.filter((c) => c[0] === 'tail');
    // Each tail starts at the offset minus the overlap bytes re-read to check the file is the same.
    assert.deepEqual(tails[tails.length - 1], ['tail', '-c', '+1', path]);
    assert.ok(fake.execs.some((c) => c.join(' ') === `stat -L -c %d:%i %s %F ${path}`));
    assert.equal(fake.archives, 0);
  });

  it('bytes, not characters: a multi-byte URI does not shift the offset', async () => {
    const path = logPath();
    writeFileSync(path, '');
    const fake = fakeDocker();
    const src = containerFileAccessLog(fake.docker, 'nginx', path, { method: 'exec', from: 'start' });
    await src.read();
    appendFileSync(path, '/é/ü\n');
    assert.deepEqual(await src.read(), ['/é/ü']);
    appendFileSync(path, 'next\n');
    assert.deepEqual(await src.read(), ['next']);
  });

  it('rotation by rename: the rest of the old file is read at FILE.1 (same inode), then the new file', async () => {
    const path = logPath();
    writeFileSync(path, '');
    const fake = fakeDocker();
    const src = containerFileAccessLog(fake.docker, 'nginx', path, { method: 'exec' });
    await src.read();
    appendFileSync(path, 'a\n');
    assert.deepEqual(await src.read(), ['a']);
    appendFileSync(path, 'b\n');
    renameSync(path, `${path}.1`);
    writeFileSync(path, 'c\n');
    assert.deepEqual(await src.read(), ['b', 'c']);
    assert.deepEqual(src.counters, { rotations: 1, truncations: 0, lostRotations: 0, skippedLines: 0 });
  });

  it('refuses what is not a regular file (access.log linked to the output): tail would never end', async () => {
    const path = logPath();
    spawnSync('mkfifo', [path]);
    const src = containerFileAccessLog(fakeDocker().docker, 'nginx', path, { method: 'exec' });
    await assert.rejects(src.read(), /is not a regular file \(fifo\): if nginx logs to the container's output, read its log stream instead/);
  });

  it('the fleetroll_json lines parse (end to end through the fake exec)', async () => {
    const path = logPath();
    writeFileSync(path, '');
    const fake = fakeDocker();
    const src = containerFileAccessLog(fake.docker, 'nginx', path, { method: 'exec' });
    await src.read();
    appendFileSync(path, `${line()}\n${line({ status: '502' })}\n`);
    assert.deepEqual(await src.read(), [line(), line({ status: '502' })]);
  });
});

describe('container file reader without stat/tail in the image', () => {
  it('exec: fails with the reason', async () => {
    const path = logPath();
    writeFileSync(path, 'x\n');
    const src = containerFileAccessLog(fakeDocker({ tools: false }).docker, 'nginx', path, { method: 'exec' });
    await assert.rejects(src.read(), /reading the access log .* in container nginx: stat: .*executable file not found/);
  });

  it('auto: falls back to the archive API for good after the first missing tool', async () => {
    const path = logPath();
    writeFileSync(path, 'old\n');
    const fake = fakeDocker({ tools: false });
    const src = containerFileAccessLog(fake.docker, 'nginx', path);
    assert.deepEqual(await src.read(), []);
    appendFileSync(path, 'a\n');
    assert.deepEqual(await src.read(), ['a']);
    assert.equal(fake.execs.length, 1, 'exec tried once');
    assert.ok(fake.archives >= 2);
  });

  it('archive: a file replaced under the reader (no inode to go by) is told by content', async () => {
    const path = logPath();
    writeFileSync(path, '');
    const fake = fakeDocker({ tools: false });
    const src = containerFileAccessLog(fake.docker, 'nginx', path, { method: 'archive' });
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
    const path = logPath();
    const src = containerFileAccessLog(fakeDocker({ tools: false }).docker, 'nginx', path, { method: 'archive' });
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
    fake.logStreams[1]!.stream.write(frame(1, `${ts('46.25')} ${line({ uri: '/2' })}\n${ts('46.25')} ${line({ uri: '/2b' })}\n${ts('47.0')} ${line({ uri: '/3' })}\n`));
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
