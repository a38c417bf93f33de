/**
 * Commands and single files inside a container, through the Docker API only:
 * exec with its exit code and output, and one file in or out through the
 * archive API (which works on images without a shell or tar, such as
 * fleetroll/nginx-base). Used by the nginx router, the fleet state, the
 * access log readers and the runtime's exec probe.
 */
import { posix } from 'node:path';
import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { FleetrollError } from '../errors.js';
import { engineMessage, runtimeError, statusOf } from './dockerRetry.js';
import { createTar, readTar, type TarEntry } from './tar.js';

/**
 * Splits Docker's multiplexed stream (8-byte frame headers) into `stdout` and
 * `stderr` chunks with dockerode's own demuxer, which passes output that is not
 * multiplexed (TTY) through as stdout. Resolves when the stream ends.
 */
export function demux(docker: Dockerode, stream: NodeJS.ReadableStream, stdout: Buffer[], stderr: Buffer[]): Promise<void> {
  const sink = (chunks: Buffer[]) => ({ write: (c: Buffer) => chunks.push(Buffer.from(c)) > 0 }) as unknown as NodeJS.WritableStream;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const done = (err?: Error) => {
      if (settled) return;
      settled = true;
      if (err) reject(err);
      else resolve();
    };
    stream.on('end', () => done());
    stream.on('close', () => done());
    stream.on('error', (e: Error) => done(e));
    docker.modem.demuxStream(stream as Readable, sink(stdout), sink(stderr));
  });
}

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

function containerError(err: unknown, container: string, doing: string): FleetrollError {
  const status = statusOf(err);
  const msg = engineMessage(err);
  if (status === 404 && /no such container/i.test(msg)) {
    return runtimeError('E_CONTAINER_MISSING', `${doing}: container ${container} does not exist`, err);
  }
  if (status === 409) {
    return runtimeError('E_CONTAINER_NOT_RUNNING', `${doing}: container ${container} is not running (${msg})`, err);
  }
  return runtimeError('E_DOCKER', `${doing} in container ${container}: ${msg}`, err);
}

/**
 * Creates and starts an exec of `cmd` (argument array, no shell) with stdout and stderr
 * attached and no TTY (so the output is multiplexed, for `demux`); fails with the engine's
 * error as it is, for the caller to say what it was doing.
 */
export async function startExec(docker: Dockerode, container: string, cmd: string[]): Promise<{ exec: Dockerode.Exec; stream: NodeJS.ReadableStream }> {
  const exec = await docker.getContainer(container).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: false });
  return { exec, stream: await exec.start({ hijack: true, stdin: false }) };
}

/**
 * Run `cmd` (argument array, no shell) in a running container; capture exit code,
 * stdout and stderr. A non-zero exit is a result, not an error; a missing or stopped
 * container is a FleetrollError (E_CONTAINER_MISSING / E_CONTAINER_NOT_RUNNING).
 */
export async function execIn(docker: Dockerode, container: string, cmd: string[]): Promise<ExecResult> {
  const doing = `running \`${cmd.join(' ')}\``;
  const { exec, stream } = await startExec(docker, container, cmd).catch((err: unknown) => {
    throw containerError(err, container, doing);
  });
  const out: Buffer[] = [];
  const errs: Buffer[] = [];
  await demux(docker, stream, out, errs).catch((err: Error) => {
    throw runtimeError('E_DOCKER', `${doing} in container ${container}: ${err.message}`, err);
  });
  // The stream can end a moment before the engine records the exit code.
  let exitCode: number | null | undefined;
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect().catch((err: unknown) => {
      throw containerError(err, container, doing);
    });
    exitCode = info.ExitCode;
    if (!info.Running && typeof exitCode === 'number') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return { exitCode: typeof exitCode === 'number' ? exitCode : -1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(errs).toString('utf8') };
}

function checkAbsolute(absPath: string): void {
  if (!posix.isAbsolute(absPath) || absPath.endsWith('/')) {
    throw new FleetrollError('E_INVALID', `expected an absolute file path, got ${JSON.stringify(absPath)}`);
  }
}

/**
 * Write one file into a container (running or just created) through the archive API:
 * an in-memory tar with a single entry, extracted into the file's directory (which must
 * exist). The engine replaces an existing file (unlink + create), owner root:root.
 */
export async function putFile(docker: Dockerode, container: string, absPath: string, content: string, mode = 0o644): Promise<void> {
  checkAbsolute(absPath);
  const tar = await createTar({ name: posix.basename(absPath), content, mode });
  try {
    await docker.getContainer(container).putArchive(tar, { path: posix.dirname(absPath) });
  } catch (err) {
    const status = statusOf(err);
    const msg = engineMessage(err);
    if (status === 404 && !/no such container/i.test(msg)) {
      throw runtimeError('E_PUT_FILE', `writing ${absPath} in container ${container}: directory ${posix.dirname(absPath)} does not exist (${msg})`, err);
    }
    throw containerError(err, container, `writing ${absPath}`);
  }
}

/** The raw tar entry for `absPath` in `container`, following symlinks; undefined when the file does not exist. */
export async function getFileEntry(docker: Dockerode, container: string, absPath: string, depth = 0): Promise<TarEntry | undefined> {
  checkAbsolute(absPath);
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.getContainer(container).getArchive({ path: absPath });
  } catch (err) {
    const status = statusOf(err);
    const msg = engineMessage(err);
    if (status === 404 && !/no such container/i.test(msg)) return undefined;
    throw containerError(err, container, `reading ${absPath}`);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer | string>) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  const entry = (await readTar(Buffer.concat(chunks)))[0];
  if (!entry) return undefined;
  if (entry.type === 'symlink' && depth < 8) {
    const target = posix.resolve(posix.dirname(absPath), entry.linkname);
    return getFileEntry(docker, container, target, depth + 1);
  }
  if (entry.type !== 'file' && entry.type !== 'contiguous-file') {
    throw runtimeError('E_GET_FILE', `reading ${absPath} in container ${container}: not a regular file (${entry.type})`, undefined);
  }
  return entry;
}

/** One file's content (UTF-8) from a container; undefined when the file does not exist. */
export async function getFile(docker: Dockerode, container: string, absPath: string): Promise<string | undefined> {
  return (await getFileEntry(docker, container, absPath))?.content.toString('utf8');
}
