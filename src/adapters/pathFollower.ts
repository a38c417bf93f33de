/**
 * The rotation-safe follower of a file reached by path only, over FileOps
 * that say what is at a path (how it is located on every read: PathFollower's
 * comment; the shared rules: ./accessLog.ts). Apart from the container reader
 * that uses it (./containerFileAccessLog.ts) because it knows nothing of
 * Docker: localFileOps runs it on this machine's files, which is how it is
 * tested.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { LineSplitter } from '../core/lineSplitter.js';
import { newCounters, OVERLAP, sameBytes, tailBytes, type FileFollowOptions } from './accessLogShared.js';

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
      const continues =
        r !== undefined &&
        (cur.id === undefined || r.id === undefined || sameId) &&
        r.size >= cur.offset &&
        sameBytes(r.data.subarray(0, cur.overlap.length), cur.overlap);
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
