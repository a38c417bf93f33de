/**
 * Readers of a load balancer's access log, implementing the AccessLogSource
 * port: each read() returns the complete lines written since the previous
 * read, once each, in order. Three placements, as nginx is deployed:
 *
 * - LocalFileAccessLog: a file on this machine. It keeps the file open and
 *   reads on from its offset. Rotation (a different inode at the path) is
 *   seen on the next read: the old file is read to its end through the handle
 *   still open (nginx keeps appending to it until it reopens its logs on
 *   USR1), then the new file from 0. A file that shrank, or whose bytes before
 *   the offset changed (copytruncate, `> access.log`), is read again from 0.
 *
 * - containerFileAccessLog(): a file inside the nginx container. There is no
 *   handle to keep, so each read locates the file by identity (PathFollower,
 *   over FileOps that run in the container): with `stat`
 *   and `tail -c +N` run through docker exec (argument arrays, no shell) it
 *   follows the inode; in an image without them (fleetroll/nginx-base has
 *   only nginx) it fetches the file through Docker's archive API and follows
 *   the content. A rotated-away file is looked for among `rotatedPaths`
 *   (default: FILE.1, logrotate's first name) by inode, or by the bytes just
 *   before the offset, and read to its end there.
 *
 * - ContainerLogStreamAccessLog: nginx logging to stdout (`access_log
 *   /dev/stdout fleetroll_json;`, the official images' default target). It
 *   follows the container's log stream (dockerode logs, follow, timestamps)
 *   from `since`, demultiplexes stdout and stderr with dockerode's demuxer,
 *   and keeps only the lines that parse as fleetroll_json: nginx's notices and
 *   any other log format on the same stream are counted and dropped. A stream
 *   that ends (nginx restarted) is reopened from the last timestamp seen, and
 *   the lines Docker replays from that timestamp are dropped (tracked per
 *   output: stdout and stderr timestamps interleave out of order).
 *
 * Shared rules:
 * - "Overlap": every follower remembers the last up to 64 bytes before its
 *   offset and reads them again with the new bytes. If they differ, the file
 *   at that offset is not the one it was reading (replaced, or truncated and
 *   grown past the offset between two reads, which size alone cannot show;
 *   or a new file that got a deleted file's inode number, which file systems
 *   reuse at once).
 * - A partial last line is held (core/accessLog LineSplitter) until its
 *   newline arrives; a rotated-away file that stays unchanged for
 *   `quietReadsBeforeClose` reads (default 2) is closed and its held partial
 *   line, if any, returned as a last line.
 * - `from: 'end'` (default) starts at the end of the file at the first read
 *   (that read returns nothing; a file that does not exist yet is read from 0
 *   when it appears); `from: 'start'` reads the whole file.
 * - What cannot be recovered is counted in `counters`, never thrown: lines
 *   written between the last read and a copytruncate (LocalFileAccessLog does
 *   not look for the copy; PathFollower does, among rotatedPaths), lines in a
 *   rotated file that was deleted or overwritten by path. Not even counted: a
 *   file that was created and rotated away entirely between two reads (reads
 *   are seconds apart, rotations hours).
 * - A Docker or file system failure is thrown as a FleetrollError
 *   (E_ACCESS_LOG) naming the source; the caller decides whether a rollout
 *   goes on without its access log.
 */
import { open, stat, type FileHandle } from 'node:fs/promises';
import { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { parseAccessLine } from '../core/accessLog.js';
import { LineSplitter } from '../core/lineSplitter.js';
import { FleetrollError } from '../errors.js';
import type { AccessLogCounters, AccessLogSource } from '../ports.js';
import { engineMessage, statusOf } from './dockerRetry.js';
import { getFileEntry } from './docker.js';

/** Bytes before the offset that are read again to check the file is the same. */
const OVERLAP = 64;
const CHUNK = 256 * 1024;

export interface FileFollowOptions {
  /** 'end' (default): only lines written after the first read; 'start': the whole file. */
  from?: 'start' | 'end';
  /** Longest line kept (default 64 KiB); longer ones are dropped and counted. */
  maxLineBytes?: number;
  /** Unchanged reads after which a rotated-away file is closed (default 2). */
  quietReadsBeforeClose?: number;
  /** Most bytes one read() takes from one file (default 16 MiB); the rest waits for the next read. */
  maxBytesPerRead?: number;
}

const newCounters = (): AccessLogCounters => ({ rotations: 0, truncations: 0, lostRotations: 0, skippedLines: 0 });

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The last up to OVERLAP bytes of `prev` followed by `next`. */
function tailBytes(prev: Uint8Array, next: Uint8Array): Uint8Array {
  if (next.length >= OVERLAP) return next.slice(next.length - OVERLAP);
  const keep = Math.min(prev.length, OVERLAP - next.length);
  const out = new Uint8Array(keep + next.length);
  out.set(prev.subarray(prev.length - keep), 0);
  out.set(next, keep);
  return out;
}

// ---------------------------------------------------------------------------
// (a) A file on this machine, followed through an open handle.

interface OpenLog {
  handle: FileHandle;
  dev: number;
  ino: number;
  offset: number;
  overlap: Uint8Array;
  splitter: LineSplitter;
  quiet: number;
  /** Started at the end of a file inside a line: the first line returned is its rest, dropped. */
  skipFirst: boolean;
}

export class LocalFileAccessLog implements AccessLogSource {
  readonly name: string;
  readonly counters = newCounters();
  private current: OpenLog | undefined;
  /** Rotated-away files still open, oldest first: nginx may still be appending to them. */
  private retired: OpenLog[] = [];
  private started = false;
  private closed = false;
  private readonly opts: Required<FileFollowOptions>;
  /** Read buffer, reused: the splitter copies what it holds and lines are strings. */
  private readonly buf = Buffer.alloc(CHUNK);

  constructor(
    readonly path: string,
    opts: FileFollowOptions = {},
  ) {
    this.name = `access log ${path} on this machine`;
    this.opts = { from: 'end', maxLineBytes: 64 * 1024, quietReadsBeforeClose: 2, maxBytesPerRead: 16 * 1024 * 1024, ...opts };
  }

  async read(): Promise<string[]> {
    if (this.closed) return [];
    try {
      return await this.readLines();
    } catch (err) {
      if (err instanceof FleetrollError) throw err;
      throw new FleetrollError('E_ACCESS_LOG', `reading the ${this.name}: ${(err as Error).message}`, { cause: err });
    }
  }

  private async readLines(): Promise<string[]> {
    const first = !this.started;
    this.started = true;
    const out: string[] = [];
    const now = await statOrUndefined(this.path);
    if (this.current && now && (now.ino !== this.current.ino || now.dev !== this.current.dev)) {
      // Rotated: the old file goes on being read through its handle until it is quiet.
      this.counters.rotations++;
      this.retired.push(this.current);
      this.current = undefined;
    }
    for (const old of [...this.retired]) {
      const got = await this.drain(old);
      out.push(...got.lines);
      old.quiet = got.bytes > 0 ? 0 : old.quiet + 1;
      if (old.quiet >= this.opts.quietReadsBeforeClose) {
        out.push(...old.splitter.flush());
        await old.handle.close().catch(() => undefined);
        this.retired.splice(this.retired.indexOf(old), 1);
      }
    }
    if (!this.current && now) {
      this.current = await this.openLog(first && this.opts.from === 'end');
      if (!this.current) return out;
    }
    if (this.current) {
      const cur = this.current;
      if (await this.replacedInPlace(cur)) {
        this.counters.truncations++;
        this.counters.skippedLines += cur.splitter.reset() > 0 ? 1 : 0;
        cur.offset = 0;
        cur.overlap = new Uint8Array(0);
        cur.skipFirst = false;
      }
      out.push(...(await this.drain(cur)).lines);
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const f of [...this.retired, ...(this.current ? [this.current] : [])]) await f.handle.close().catch(() => undefined);
    this.retired = [];
    this.current = undefined;
  }

  private async openLog(atEnd: boolean): Promise<OpenLog | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(this.path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new FleetrollError('E_ACCESS_LOG', `opening the ${this.name}: ${(err as Error).message}`, { cause: err });
    }
    const s = await handle.stat();
    const log: OpenLog = { handle, dev: s.dev, ino: s.ino, offset: 0, overlap: new Uint8Array(0), splitter: new LineSplitter(this.opts.maxLineBytes), quiet: 0, skipFirst: false };
    if (atEnd && s.size > 0) {
      log.offset = s.size;
      log.overlap = await this.readAt(handle, Math.max(0, s.size - OVERLAP), Math.min(OVERLAP, s.size));
      // Started inside a line nginx is writing: drop its rest rather than return half a line.
      log.skipFirst = log.overlap[log.overlap.length - 1] !== 0x0a;
    }
    return log;
  }

  /** The file shrank under its offset, or the bytes before the offset are not the ones read. */
  private async replacedInPlace(f: OpenLog): Promise<boolean> {
    const s = await f.handle.stat();
    if (s.size < f.offset) return true;
    if (f.overlap.length === 0) return false;
    const again = await this.readAt(f.handle, f.offset - f.overlap.length, f.overlap.length);
    return !sameBytes(again, f.overlap);
  }

  private async readAt(handle: FileHandle, position: number, length: number): Promise<Uint8Array> {
    const buf = Buffer.alloc(length);
    let got = 0;
    while (got < length) {
      const { bytesRead } = await handle.read(buf, got, length - got, position + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got);
  }

  /** Reads from the offset to the end (up to maxBytesPerRead) and splits into lines. */
  private async drain(f: OpenLog): Promise<{ lines: string[]; bytes: number }> {
    const lines: string[] = [];
    const buf = this.buf;
    let total = 0;
    while (total < this.opts.maxBytesPerRead) {
      const { bytesRead } = await f.handle.read(buf, 0, Math.min(CHUNK, this.opts.maxBytesPerRead - total), f.offset);
      if (bytesRead === 0) break;
      const chunk = buf.subarray(0, bytesRead);
      f.offset += bytesRead;
      total += bytesRead;
      f.overlap = tailBytes(f.overlap, chunk);
      lines.push(...this.take(f, f.splitter.push(chunk)));
    }
    this.counters.skippedLines += f.splitter.oversized;
    f.splitter.oversized = 0;
    return { lines, bytes: total };
  }

  private take(f: OpenLog, lines: string[]): string[] {
    if (f.skipFirst && lines.length > 0) {
      f.skipFirst = false;
      return lines.slice(1);
    }
    return lines;
  }
}

async function statOrUndefined(path: string): Promise<{ dev: number; ino: number; size: number } | undefined> {
  try {
    return await stat(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

// ---------------------------------------------------------------------------
// (b) A file reached by path only (inside a container): located by identity on every read.

/** What a follower can do with a file it reaches by path only. */
export interface FileOps {
  /**
   * The file at `path`: its identity (device:inode; undefined when the method
   * cannot tell), its size, and its bytes from `from` to the end, all of the
   * same file (an implementation that cannot read them atomically checks the
   * identity again after reading and retries). Undefined when there is no file.
   */
  read(path: string, from: number): Promise<{ id: string | undefined; size: number; data: Uint8Array } | undefined>;
}

interface Tracked {
  /** Where it was last seen. */
  path: string;
  id: string | undefined;
  offset: number;
  overlap: Uint8Array;
  splitter: LineSplitter;
  quiet: number;
  skipFirst: boolean;
  /** Retired only: found at least once after it was retired. */
  found?: boolean;
}

export interface PathFollowOptions extends FileFollowOptions {
  /** Where a rotated file is looked for, in order (default [path + ".1"]). */
  rotatedPaths?: string[];
}

/**
 * The rotation-safe follower for a file reached by path only (see the module
 * comment). One read():
 *   1. The file at the path is read from the offset (minus the overlap). A
 *      different inode, or (without inodes) different overlap bytes or a
 *      smaller size, is a rotation: the old file is retired and the new one
 *      read from 0. The same inode with a smaller size or different overlap
 *      bytes was truncated in place: the old bytes can only survive in a copy
 *      (logrotate's copytruncate), which is retired and looked for by content.
 *      No file at the path: renamed away, retired; a new one is read from 0.
 *   2. Each retired file is located among `rotatedPaths` (same inode and
 *      overlap bytes, or the overlap bytes alone for a copy) and read on from
 *      its offset; it is dropped once quiet for quietReadsBeforeClose reads,
 *      or when it cannot be found (counted in lostRotations if never found).
 *   Lines return oldest first: the retired files' lines, then the path's.
 */
export class PathFollower {
  readonly counters = newCounters();
  private current: Tracked | undefined;
  private retired: Tracked[] = [];
  private started = false;
  private readonly opts: Required<PathFollowOptions>;

  constructor(
    private readonly ops: FileOps,
    readonly path: string,
    opts: PathFollowOptions = {},
  ) {
    this.opts = { from: 'end', maxLineBytes: 64 * 1024, quietReadsBeforeClose: 2, maxBytesPerRead: 16 * 1024 * 1024, rotatedPaths: [`${path}.1`], ...opts };
  }

  async read(): Promise<string[]> {
    const first = !this.started;
    this.started = true;
    const out: string[] = [];
    // The file at the path first (it may retire the current one), then the retired ones, oldest first.
    const fresh: string[] = [];
    const cur = this.current;
    if (!cur) {
      if (first && this.opts.from === 'end') {
        // The size first, then only the last bytes: the file may be large.
        const size = (await this.ops.read(this.path, Number.MAX_SAFE_INTEGER))?.size;
        const r = size === undefined ? undefined : await this.ops.read(this.path, Math.max(0, size - OVERLAP));
        if (r) {
          this.current = this.track(this.path, r.id);
          this.current.offset = Math.max(0, size! - OVERLAP) + r.data.length;
          this.current.overlap = r.data.slice(Math.max(0, r.data.length - OVERLAP));
          this.current.skipFirst = r.data.length > 0 && r.data[r.data.length - 1] !== 0x0a;
        }
      } else {
        const r = await this.ops.read(this.path, 0);
        if (r) {
          this.current = this.track(this.path, r.id);
          fresh.push(...this.consume(this.current, r.data));
        }
      }
    } else {
      const r = await this.ops.read(this.path, cur.offset - cur.overlap.length);
      const sameId = r !== undefined && cur.id !== undefined && r.id === cur.id;
      const continues = r !== undefined && (cur.id === undefined || r.id === undefined || sameId) && r.size >= cur.offset && sameBytes(r.data.subarray(0, cur.overlap.length), cur.overlap);
      if (r && continues) {
        fresh.push(...this.consume(cur, r.data.subarray(cur.overlap.length)));
      } else if (!r) {
        // Renamed away and not (yet) recreated: look for it among the rotated paths.
        this.counters.rotations++;
        this.retire(cur, cur.id);
        this.current = undefined;
      } else {
        if (sameId) this.counters.truncations++;
        else this.counters.rotations++;
        // Truncated in place: the old bytes survive only in a copy (a new inode); rotated: the file itself.
        this.retire(cur, sameId ? undefined : cur.id);
        const whole = r.size === 0 || cur.offset - cur.overlap.length === 0 ? r : await this.ops.read(this.path, 0);
        this.current = this.track(this.path, whole?.id ?? r.id);
        if (whole) fresh.push(...this.consume(this.current, whole.data));
      }
    }
    for (const old of [...this.retired]) {
      const got = await this.locate(old);
      if (got === undefined) {
        if (!old.found) this.counters.lostRotations++;
        this.retired.splice(this.retired.indexOf(old), 1);
        continue;
      }
      old.found = true;
      out.push(...this.consume(old, got));
      old.quiet = got.length > 0 ? 0 : old.quiet + 1;
      if (old.quiet >= this.opts.quietReadsBeforeClose) {
        out.push(...old.splitter.flush());
        this.retired.splice(this.retired.indexOf(old), 1);
      }
    }
    return [...out, ...fresh];
  }

  private track(path: string, id: string | undefined): Tracked {
    return { path, id, offset: 0, overlap: new Uint8Array(0), splitter: new LineSplitter(this.opts.maxLineBytes), quiet: 0, skipFirst: false };
  }

  private retire(t: Tracked, id: string | undefined): void {
    // Nothing read from it yet and no inode to find it by: there is nothing to resume.
    if (t.offset === 0 && id === undefined) return;
    this.retired.push({ ...t, id, quiet: 0, found: false });
  }

  /** The new bytes of a retired file, wherever it went; undefined when it is nowhere. */
  private async locate(t: Tracked): Promise<Uint8Array | undefined> {
    const candidates = [t.path, ...this.opts.rotatedPaths.filter((p) => p !== t.path)].filter((p) => p !== this.path);
    for (const p of candidates) {
      const r = await this.ops.read(p, t.offset - t.overlap.length);
      if (!r || r.size < t.offset) continue;
      if (t.id !== undefined && r.id !== undefined && r.id !== t.id) continue;
      if (t.id === undefined && t.overlap.length === 0) continue;
      if (!sameBytes(r.data.subarray(0, t.overlap.length), t.overlap)) continue;
      t.path = p;
      return r.data.subarray(t.overlap.length);
    }
    return undefined;
  }

  private consume(t: Tracked, data: Uint8Array): string[] {
    const take = data.length > this.opts.maxBytesPerRead ? data.subarray(0, this.opts.maxBytesPerRead) : data;
    t.offset += take.length;
    t.overlap = tailBytes(t.overlap, take);
    let lines = t.splitter.push(take);
    if (t.skipFirst && lines.length > 0) {
      t.skipFirst = false;
      lines = lines.slice(1);
    }
    this.counters.skippedLines += t.splitter.oversized;
    t.splitter.oversized = 0;
    return lines;
  }
}

/** FileOps on this machine's file system (what the container ops do, without Docker): for tests and local use. */
export const localFileOps: FileOps = {
  async read(path, from) {
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    try {
      const s = await handle.stat();
      const length = Math.max(0, s.size - from);
      const buf = Buffer.alloc(length);
      let got = 0;
      while (got < length) {
        const { bytesRead } = await handle.read(buf, got, length - got, from + got);
        if (bytesRead === 0) break;
        got += bytesRead;
      }
      return { id: `${s.dev}:${s.ino}`, size: s.size, data: buf.subarray(0, got) };
    } finally {
      await handle.close();
    }
  },
};

/** A LocalFileAccessLog-like source over a PathFollower (the container's file, or a path followed without a handle). */
class FollowerSource implements AccessLogSource {
  private closed = false;
  constructor(
    readonly name: string,
    private readonly follower: PathFollower,
  ) {}
  get counters(): AccessLogCounters {
    return this.follower.counters;
  }
  async read(): Promise<string[]> {
    if (this.closed) return [];
    try {
      return await this.follower.read();
    } catch (err) {
      if (err instanceof FleetrollError) throw err;
      throw new FleetrollError('E_ACCESS_LOG', `reading the ${this.name}: ${engineMessage(err)}`, { cause: err });
    }
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

/**
 * Thrown by the exec FileOps when the image has no `stat` or `tail`; the archive API is used then.
 * Internal on purpose, and not a FleetrollError: autoFileOps catches it to fall back, and where it
 * is rethrown (method 'exec', or a second miss) FollowerSource.read wraps every error that is not
 * a FleetrollError into E_ACCESS_LOG naming the log. A FleetrollError would pass through unwrapped.
 */
class ToolMissing extends Error {}

const EMPTY = new Uint8Array(0);

/** Runs an argument array in the container; stdout as bytes (log lines can hold any byte), stderr as text. */
async function execRaw(docker: Dockerode, container: string, cmd: string[]): Promise<{ exitCode: number; stdout: Buffer; stderr: string }> {
  let exec: Dockerode.Exec;
  let stream: NodeJS.ReadableStream;
  try {
    exec = await docker.getContainer(container).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: false });
    stream = await exec.start({ hijack: true, stdin: false });
  } catch (err) {
    if (/executable file not found|no such file or directory/i.test(engineMessage(err))) throw new ToolMissing(engineMessage(err));
    throw new FleetrollError('E_ACCESS_LOG', `running \`${cmd.join(' ')}\` in container ${container}: ${engineMessage(err)}`, { cause: err });
  }
  const out: Buffer[] = [];
  const errs: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    const sink = (chunks: Buffer[]) => ({ write: (c: Buffer) => chunks.push(Buffer.from(c)) > 0 }) as unknown as NodeJS.WritableStream;
    stream.on('end', resolve);
    stream.on('close', resolve);
    stream.on('error', reject);
    docker.modem.demuxStream(stream as Readable, sink(out), sink(errs));
  });
  // The stream can end a moment before the engine records the exit code.
  let exitCode = -1;
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running && typeof info.ExitCode === 'number') {
      exitCode = info.ExitCode;
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const stdout = Buffer.concat(out);
  const stderr = Buffer.concat(errs).toString('utf8');
  // runc reports a missing binary on the stream with 126/127 rather than failing the start.
  if (exitCode === 126 || exitCode === 127 || /executable file not found/.test(stdout.subarray(0, 512).toString('utf8'))) throw new ToolMissing(`${cmd[0]}: ${stderr || stdout.toString('utf8')}`.trim());
  return { exitCode, stdout, stderr };
}

/**
 * FileOps through docker exec: `stat -L -c '%d:%i %s %F' FILE` for identity,
 * size and type (a link to /dev/stdout is refused, tail would never end), `tail -c +N FILE` for the bytes (busybox and coreutils both have
 * them). stat runs again after tail; a different inode means the file rotated
 * between the two, and the read is retried.
 */
export function execFileOps(docker: Dockerode, container: string): FileOps {
  const statOf = async (path: string) => {
    const r = await execRaw(docker, container, ['stat', '-L', '-c', '%d:%i %s %F', path]);
    if (r.exitCode !== 0) {
      if (/no such file/i.test(r.stderr)) return undefined;
      throw new FleetrollError('E_ACCESS_LOG', `stat ${path} in container ${container}: ${r.stderr.trim() || `exit ${r.exitCode}`}`);
    }
    const m = /^(\S+) ([0-9]+) (.+?)\s*$/.exec(r.stdout.toString('utf8'));
    if (!m) throw new FleetrollError('E_ACCESS_LOG', `stat ${path} in container ${container}: unexpected output ${JSON.stringify(r.stdout.toString('utf8'))}`);
    // The images' access.log is often a link to /dev/stdout: tail would wait on it for ever.
    if (m[3] !== 'regular file' && m[3] !== 'regular empty file') {
      throw new FleetrollError(
        'E_ACCESS_LOG',
        `${path} in container ${container} is not a regular file (${m[3]}): if nginx logs to the container's output, read its log stream instead`,
      );
    }
    return { id: m[1]!, size: Number(m[2]) };
  };
  return {
    async read(path, from) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = await statOf(path);
        if (!before) return undefined;
        if (from >= before.size) return { id: before.id, size: before.size, data: EMPTY };
        const t = await execRaw(docker, container, ['tail', '-c', `+${from + 1}`, path]);
        const after = await statOf(path);
        if (t.exitCode === 0 && after && after.id === before.id) return { id: before.id, size: after.size, data: t.stdout };
      }
      throw new FleetrollError('E_ACCESS_LOG', `reading ${path} in container ${container}: the file kept changing identity (rotating?) across three tries`);
    },
  };
}

/**
 * FileOps through Docker's archive API, for images without stat/tail: the
 * whole file comes every time (fine for a deploy's worth of log; a long-lived
 * access log should be rotated or read with exec), and there is no inode,
 * so rotation is told by content (the overlap bytes).
 */
export function archiveFileOps(docker: Dockerode, container: string): FileOps {
  return {
    async read(path, from) {
      const entry = await getFileEntry(docker, container, path);
      if (!entry) return undefined;
      return { id: undefined, size: entry.content.length, data: entry.content.subarray(Math.min(from, entry.content.length)) };
    },
  };
}

/** exec FileOps that switch to the archive API for good the first time a tool is missing. */
function autoFileOps(docker: Dockerode, container: string): FileOps {
  let ops = execFileOps(docker, container);
  let fellBack = false;
  return {
    async read(path, from) {
      try {
        return await ops.read(path, from);
      } catch (err) {
        if (!(err instanceof ToolMissing) || fellBack) throw err;
        fellBack = true;
        ops = archiveFileOps(docker, container);
        return ops.read(path, from);
      }
    },
  };
}

export interface ContainerFileOptions extends PathFollowOptions {
  /** 'auto' (default): exec, falling back to the archive API when the image has no stat/tail. */
  method?: 'auto' | 'exec' | 'archive';
}

/** The access log file inside an nginx container (see the module comment). */
export function containerFileAccessLog(docker: Dockerode, container: string, path: string, opts: ContainerFileOptions = {}): AccessLogSource {
  const { method = 'auto', ...follow } = opts;
  const ops = method === 'exec' ? execFileOps(docker, container) : method === 'archive' ? archiveFileOps(docker, container) : autoFileOps(docker, container);
  return new FollowerSource(`access log ${path} in container ${container}`, new PathFollower(ops, path, follow));
}

// ---------------------------------------------------------------------------
// (c) The container's own log stream (nginx logging to stdout).

export interface LogStreamOptions {
  /** Lines logged from this time on (ms since the epoch); default: now. */
  sinceMs?: number;
  /** Lines kept between two reads at most (default 500 000); more are dropped and counted. */
  maxBufferedLines?: number;
  maxLineBytes?: number;
}

/** Docker's RFC 3339 timestamp (nanoseconds, trailing zeros trimmed) → a key that sorts as text. */
function timestampKey(ts: string): string | undefined {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(ts);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}` : undefined;
}

/** "2024-04-05T12:34:56.123456789" → "1712320496.123456789", Docker's `since` with nanoseconds. */
function sinceOf(key: string): string {
  const [date, nanos] = key.split('.') as [string, string];
  return `${Math.floor(Date.parse(`${date}Z`) / 1000)}.${nanos}`;
}

/**
 * The container's log stream, fleetroll_json lines only. Open it with
 * `ContainerLogStreamAccessLog.open(docker, container)` when the rollout
 * starts; read() then returns what arrived since the last read.
 */
export class ContainerLogStreamAccessLog implements AccessLogSource {
  readonly name: string;
  readonly counters = newCounters();
  private buffered: string[] = [];
  private stream: NodeJS.ReadableStream | undefined;
  private ended = false;
  private closed = false;
  private failure: Error | undefined;
  /**
   * Per output stream (stdout, stderr: their timestamps interleave out of
   * order), the last timestamp seen and the lines seen at it: what a reopened
   * stream repeats.
   */
  private readonly seen = { stdout: { lastKey: '', atLastKey: new Set<string>() }, stderr: { lastKey: '', atLastKey: new Set<string>() } };
  private readonly maxBuffered: number;

  private constructor(
    private readonly docker: Dockerode,
    readonly container: string,
    private readonly tty: boolean,
    private readonly opts: LogStreamOptions,
  ) {
    this.name = `log stream of container ${container}`;
    this.maxBuffered = opts.maxBufferedLines ?? 500_000;
  }

  static async open(docker: Dockerode, container: string, opts: LogStreamOptions = {}): Promise<ContainerLogStreamAccessLog> {
    let tty: boolean;
    try {
      tty = Boolean((await docker.getContainer(container).inspect()).Config?.Tty);
    } catch (err) {
      const what = statusOf(err) === 404 ? 'it does not exist' : engineMessage(err);
      throw new FleetrollError('E_ACCESS_LOG', `following the log stream of container ${container}: ${what}`, { cause: err });
    }
    const source = new ContainerLogStreamAccessLog(docker, container, tty, opts);
    await source.connect(String((opts.sinceMs ?? Date.now()) / 1000));
    return source;
  }

  async read(): Promise<string[]> {
    if (this.closed) return [];
    if (this.ended) {
      // nginx restarted (or the engine dropped the stream): pick up where the earliest last line was.
      this.ended = false;
      const keys = [this.seen.stdout.lastKey, this.seen.stderr.lastKey].filter((k) => k !== '').sort();
      await this.connect(keys[0] ? sinceOf(keys[0]) : String((this.opts.sinceMs ?? Date.now()) / 1000));
    }
    const out = this.buffered;
    this.buffered = [];
    if (out.length === 0 && this.failure) {
      const err = this.failure;
      this.failure = undefined;
      throw new FleetrollError('E_ACCESS_LOG', `following the ${this.name}: ${engineMessage(err)}`, { cause: err });
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    const s = this.stream as (NodeJS.ReadableStream & { destroy?: () => void }) | undefined;
    s?.destroy?.();
    this.stream = undefined;
    this.buffered = [];
  }

  private async connect(since: string): Promise<void> {
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.docker.getContainer(this.container).logs({ follow: true, stdout: true, stderr: true, timestamps: true, since });
    } catch (err) {
      throw new FleetrollError('E_ACCESS_LOG', `following the ${this.name}: ${engineMessage(err)}`, { cause: err });
    }
    this.stream = stream;
    // stdout and stderr frames interleave: one splitter each, or a line could be cut by the other stream.
    const sink = (from: 'stdout' | 'stderr') => {
      const splitter = new LineSplitter(this.opts.maxLineBytes);
      return {
        write: (c: Buffer) => {
          for (const l of splitter.push(c)) this.line(l, from);
          this.counters.skippedLines += splitter.oversized;
          splitter.oversized = 0;
          return true;
        },
      } as unknown as NodeJS.WritableStream;
    };
    const stop = (err?: Error) => {
      if (this.stream !== stream) return;
      this.ended = true;
      if (err && !this.closed) this.failure = err;
    };
    stream.on('end', () => stop());
    stream.on('close', () => stop());
    stream.on('error', (e: Error) => stop(e));
    if (this.tty) {
      const out = sink('stdout');
      stream.on('data', (c: Buffer) => out.write(c));
    } else this.docker.modem.demuxStream(stream as Readable, sink('stdout'), sink('stderr'));
  }

  /** One "<timestamp> <text>" line from Docker. */
  private line(raw: string, from: 'stdout' | 'stderr'): void {
    const space = raw.indexOf(' ');
    const key = space > 0 ? timestampKey(raw.slice(0, space)) : undefined;
    const text = key === undefined ? raw : raw.slice(space + 1);
    if (key !== undefined) {
      // A reopened stream starts at the last timestamp seen: drop what came already.
      const seen = this.seen[from];
      if (key < seen.lastKey || (key === seen.lastKey && seen.atLastKey.has(text))) return;
      if (key !== seen.lastKey) {
        seen.lastKey = key;
        seen.atLastKey = new Set();
      }
      seen.atLastKey.add(text);
    }
    if (!parseAccessLine(text).ok) {
      this.counters.skippedLines++;
      return;
    }
    if (this.buffered.length >= this.maxBuffered) {
      this.counters.skippedLines++;
      return;
    }
    this.buffered.push(text);
  }
}
