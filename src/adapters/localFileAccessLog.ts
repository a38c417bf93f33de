/**
 * The access log reader for a file on this machine, followed through an open
 * handle (rotation, truncation and the shared rules: ./accessLog.ts). Its own
 * file because it is the only reader that can keep a handle open, and so the
 * only one that reads a rotated file through it rather than by path.
 */
import { open, stat, type FileHandle } from 'node:fs/promises';
import { LineSplitter } from '../core/lineSplitter.js';
import { FleetrollError } from '../errors.js';
import type { AccessLogSource } from '../ports.js';
import { CHUNK, newCounters, OVERLAP, sameBytes, tailBytes, type FileFollowOptions } from './accessLogShared.js';

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
    const log: OpenLog = {
      handle,
      dev: s.dev,
      ino: s.ino,
      offset: 0,
      overlap: new Uint8Array(0),
      splitter: new LineSplitter(this.opts.maxLineBytes),
      quiet: 0,
      skipFirst: false,
    };
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
