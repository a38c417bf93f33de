/**
 * A stand-in for dockerode whose "container" is a directory on this machine,
 * for the container access log readers (src/adapters/containerFileAccessLog.ts,
 * logStreamAccessLog.ts) without a Docker engine: its exec runs the command
 * it is sent here (`stat`, `tail`: only test/local uses that, test/unit
 * fakes an image without them), its archive API returns a real tar, its log
 * stream is a stream the test writes Docker frames into.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { after } from 'node:test';
import Dockerode from 'dockerode';
import { containerFileAccessLog } from '../../src/adapters/accessLog.js';
import { createTar } from '../../src/adapters/tar.js';

/** One Docker multiplexed frame: stream 1 = stdout, 2 = stderr. */
export function frame(stream: 1 | 2, payload: string | Buffer): Buffer {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const header = Buffer.alloc(8);
  header.writeUInt8(stream, 0);
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
}

export interface FakeOptions {
  /** false: an image without stat/tail (fleetroll/nginx-base). */
  tools?: boolean;
  tty?: boolean;
}

export interface Fake {
  docker: Dockerode;
  /** Every exec'd command, in order. */
  execs: string[][];
  archives: number;
  /** Log streams handed out, newest last, with the options they were asked for. */
  logStreams: { stream: PassThrough; opts: Record<string, unknown> }[];
}

/** A dockerode whose container "runs" on this machine: paths are used as they are. */
function fakeDockerIn(root: string, o: FakeOptions): Fake {
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
        out = Buffer.from(
          `OCI runtime exec failed: exec failed: unable to start container process: exec: "${Cmd[0]}": executable file not found in $PATH: unknown\r\n`,
        );
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
        throw Object.assign(new Error(`(HTTP code 404) no such file - Could not find the file ${path} in container fake`), {
          statusCode: 404,
          json: { message: `Could not find the file ${path} in container fake` },
        });
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

/** Fake containers whose files live under `root`: `logPath` gives each test a fresh access.log path there. */
export function fakeContainersIn(root: string): { fakeDocker: (o?: FakeOptions) => Fake; logPath: () => string } {
  let n = 0;
  return {
    fakeDocker: (o: FakeOptions = {}) => fakeDockerIn(root, o),
    logPath: () => {
      const d = join(root, `c${n++}`);
      mkdirSync(d, { recursive: true });
      return join(d, 'access.log');
    },
  };
}

type FileReaderOptions = NonNullable<Parameters<typeof containerFileAccessLog>[3]>;

/**
 * Fake containers under a temp folder of their own, removed after the test
 * file; `fileReader` gives a test a fresh access.log holding `content`
 * (undefined: no file yet), a fake container and the file reader on it.
 */
export function fakeContainers(): ReturnType<typeof fakeContainersIn> & {
  root: string;
  fileReader: (
    content: string | undefined,
    o?: FakeOptions,
    opts?: FileReaderOptions,
  ) => { path: string; fake: Fake; src: ReturnType<typeof containerFileAccessLog> };
} {
  const root = mkdtempSync(join(tmpdir(), 'fleetroll-fake-container-'));
  after(() => rmSync(root, { recursive: true, force: true }));
  const { fakeDocker, logPath } = fakeContainersIn(root);
  const fileReader = (content: string | undefined, o: FakeOptions = {}, opts?: FileReaderOptions) => {
    const path = logPath();
    if (content !== undefined) writeFileSync(path, content);
    const fake = fakeDocker(o);
    return { path, fake, src: containerFileAccessLog(fake.docker, 'nginx', path, opts) };
  };
  return { root, fakeDocker, logPath, fileReader };
}
