/**
 * The access log readers on real temp files (src/adapters/accessLog.ts), no
 * Docker: LocalFileAccessLog (follows an open handle) and PathFollower, the
 * algorithm the container reader runs over docker exec, here over the local
 * file system (localFileOps). Appends, partial lines, starting at the end,
 * rotation by rename + new file (nginx still writing to the old one until it
 * reopens), copytruncate, truncation that grows back past the offset, garbage
 * and oversized lines; and a property: whatever the interleaving of writes,
 * rotations and reads, every line comes back once, in order.
 */
import assert from 'node:assert/strict';
import {
  appendFileSync,
  closeSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  truncateSync,
  unlinkSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import fc from 'fast-check';
import { AccessLogParser } from '../../src/core/accessLog.js';
import { LocalFileAccessLog, PathFollower, localFileOps, type FileOps, type PathFollowOptions } from '../../src/adapters/accessLog.js';
import type { AccessLogCounters } from '../../src/ports.js';
import { line } from '../support/access-log-lines.js';

const root = mkdtempSync(join(tmpdir(), 'fleetroll-access-log-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const freshDir = () => {
  const d = join(root, String(n++));
  mkdirSync(d);
  return d;
};

interface Reader {
  read(): Promise<string[]>;
  readonly counters: AccessLogCounters;
}

const readers: { name: string; kind: 'handle' | 'path'; make: (path: string, opts?: PathFollowOptions) => Reader & { close?: () => Promise<void> } }[] = [
  { name: 'LocalFileAccessLog', kind: 'handle', make: (p, o) => new LocalFileAccessLog(p, o) },
  { name: 'PathFollower over the file system', kind: 'path', make: (p, o) => new PathFollower(localFileOps, p, o) },
];

/**
 * A scripted scenario. `write` goes through the writer's own descriptor, like
 * nginx: after `rename` it still writes to the old file until `reopen`.
 */
type Step =
  | { write: string }
  | { rename: string } // the log file to dir/<name>
  | { reopen: true } // the writer opens the path again (creating it), as nginx on USR1
  | { copytruncate: string } // copy the file to dir/<name>, then truncate it to 0
  | { truncate: true } // truncate in place, no copy
  | { remove: string } // delete dir/<name>
  | { read: string[]; handle?: string[]; path?: string[] }; // expected lines (per reader kind when they differ)

interface Row {
  name: string;
  /** Content before the reader starts. */
  initial?: string;
  from?: 'start' | 'end';
  steps: Step[];
  counters?: Partial<AccessLogCounters> | { handle?: Partial<AccessLogCounters>; path?: Partial<AccessLogCounters> };
  maxLineBytes?: number;
}

const rows: Row[] = [
  { name: 'from start: the lines already there', initial: 'a\nb\n', from: 'start', steps: [{ read: ['a', 'b'] }, { read: [] }] },
  {
    name: 'from end: the first read returns nothing, appends come after',
    initial: 'old\n',
    steps: [{ read: [] }, { write: 'a\nb\n' }, { read: ['a', 'b'] }, { read: [] }],
  },
  {
    name: 'from end, started inside a line: its rest is dropped, not returned as half a line',
    initial: 'old\nhal',
    steps: [{ read: [] }, { write: 'f\nnext\n' }, { read: ['next'] }],
  },
  { name: 'the file does not exist yet: read from 0 once it does', steps: [{ read: [] }, { reopen: true }, { write: 'a\n' }, { read: ['a'] }] },
  {
    name: 'partial line: held until its newline arrives',
    initial: '',
    steps: [{ read: [] }, { write: '{"a":' }, { read: [] }, { write: '1}\n{"b"' }, { read: ['{"a":1}'] }, { write: ':2}\n' }, { read: ['{"b":2}'] }],
  },
  {
    name: 'rotation: rename + new file + reopen; the old file is read to its end first',
    initial: '',
    steps: [
      { read: [] },
      { write: 'a\n' },
      { rename: 'access.log.1' },
      { write: 'b\n' },
      { reopen: true },
      { write: 'c\n' },
      { read: ['a', 'b', 'c'] },
      { write: 'd\n' },
      { read: ['d'] },
    ],
    counters: { rotations: 1, lostRotations: 0 },
  },
  {
    name: 'rotation seen before nginx reopened: lines keep coming from the old file',
    initial: '',
    steps: [
      { read: [] },
      { write: 'a\n' },
      { read: ['a'] },
      { rename: 'access.log.1' },
      { write: 'b\n' },
      { read: ['b'] },
      { write: 'c\n' },
      { read: ['c'] },
      { reopen: true },
      { write: 'd\n' },
      { read: ['d'] },
    ],
    counters: { rotations: 1, lostRotations: 0 },
  },
  {
    name: "rotation with a partial line: the old file's half line completes there; the new file's lines follow",
    initial: '',
    steps: [
      { read: [] },
      { write: 'a\nhal' },
      { read: ['a'] },
      { rename: 'access.log.1' },
      { write: 'f\n' },
      { reopen: true },
      { write: 'new\n' },
      { read: ['half', 'new'] },
    ],
  },
  {
    name: 'a rotated file that ends in a partial line: returned as the last line once it is quiet',
    initial: '',
    steps: [
      { read: [] },
      { write: 'a\ncut' },
      { rename: 'access.log.1' },
      { reopen: true },
      { write: 'b\n' },
      { read: ['a', 'b'] },
      { read: [] },
      { read: ['cut'] },
      { read: [] },
    ],
  },
  {
    name: 'rotated twice between reads: the file in between is never seen (reads are seconds apart, rotations hours)',
    initial: '',
    steps: [
      { read: [] },
      { write: 'a\n' },
      { read: ['a'] },
      { write: 'b\n' },
      { rename: 'access.log.1' },
      { reopen: true },
      { write: 'c\n' },
      { rename: 'access.log.1' },
      { reopen: true },
      { write: 'd\n' },
      { read: ['b', 'd'], path: ['d'] },
    ],
    // The handle keeps the first old file; by path it was overwritten by the second: counted. (Not
    // `rotations` by path: the new file may get the deleted file's inode number, which reads as a truncation.)
    counters: { handle: { rotations: 1, lostRotations: 0 }, path: { lostRotations: 1 } },
  },
  {
    name: 'copytruncate: lines written before the copy are found in the copy by path; the handle reader cannot see them',
    initial: '',
    steps: [
      { read: [] },
      { write: 'a\n' },
      { read: ['a'] },
      { write: 'b\n' },
      { copytruncate: 'access.log.1' },
      { write: 'c\n' },
      { read: ['b', 'c'], handle: ['c'] },
    ],
    counters: { truncations: 1 },
  },
  {
    name: 'truncated and grown back past the offset between two reads: the overlap bytes tell',
    initial: '',
    steps: [{ read: [] }, { write: 'aaaa\n' }, { read: ['aaaa'] }, { truncate: true }, { write: 'bbbbbbbbbb\n' }, { read: ['bbbbbbbbbb'] }],
    counters: { truncations: 1 },
  },
  {
    name: 'deleted and recreated: the new file from 0 (by path the old one cannot be checked for unread lines: counted as possibly lost)',
    initial: '',
    steps: [{ read: [] }, { write: 'a\n' }, { read: ['a'] }, { remove: 'access.log' }, { reopen: true }, { write: 'b\n' }, { read: ['b'] }, { read: [] }],
    counters: { handle: { rotations: 1, lostRotations: 0 }, path: { lostRotations: 1 } },
  },
  {
    name: 'garbage lines are returned as lines (the parser counts them), not lost or merged',
    initial: '',
    steps: [
      { read: [] },
      { write: `${line()}\nnginx: [warn] hello\n\n${line({ status: '500' })}\n` },
      { read: [line(), 'nginx: [warn] hello', '', line({ status: '500' })] },
    ],
  },
  {
    name: 'an oversized line is dropped and counted',
    initial: '',
    maxLineBytes: 8,
    steps: [{ read: [] }, { write: 'ok\n0123456789abcdef\nok2\n' }, { read: ['ok', 'ok2'] }],
    counters: { skippedLines: 1 },
  },
];

for (const reader of readers) {
  describe(`${reader.name}: scenarios`, () => {
    for (const row of rows) {
      it(row.name, async () => {
        const dir = freshDir();
        const path = join(dir, 'access.log');
        let fd: number | undefined;
        if (row.initial !== undefined) {
          writeFileSync(path, row.initial);
          fd = openSync(path, 'a');
        }
        const r = reader.make(path, { from: row.from ?? 'end', ...(row.maxLineBytes ? { maxLineBytes: row.maxLineBytes } : {}) });
        try {
          for (const [i, step] of row.steps.entries()) {
            if ('write' in step) writeSync(fd!, step.write);
            else if ('rename' in step) renameSync(path, join(dir, step.rename));
            else if ('reopen' in step) {
              if (fd !== undefined) closeSync(fd);
              fd = openSync(path, 'a');
            } else if ('copytruncate' in step) {
              copyFileSync(path, join(dir, step.copytruncate));
              truncateSync(path, 0);
            } else if ('truncate' in step) truncateSync(path, 0);
            else if ('remove' in step) unlinkSync(join(dir, step.remove));
            else {
              const want = step[reader.kind] ?? step.read;
              assert.deepEqual(await r.read(), want, `read at step ${i}`);
            }
          }
          const c = row.counters as Record<string, unknown> | undefined;
          const wantCounters = (c && ('handle' in c || 'path' in c) ? (c[reader.kind] as Partial<AccessLogCounters>) : (c as Partial<AccessLogCounters>)) ?? {};
          for (const [k, v] of Object.entries(wantCounters)) assert.equal(r.counters[k as keyof AccessLogCounters], v, k);
        } finally {
          if (fd !== undefined) closeSync(fd);
          await r.close?.();
        }
      });
    }
  });
}

describe('LocalFileAccessLog', () => {
  it('closes its files and returns nothing after close()', async () => {
    const dir = freshDir();
    const path = join(dir, 'access.log');
    writeFileSync(path, 'a\n');
    const r = new LocalFileAccessLog(path, { from: 'start' });
    assert.deepEqual(await r.read(), ['a']);
    await r.close();
    appendFileSync(path, 'b\n');
    assert.deepEqual(await r.read(), []);
  });

  it('maxBytesPerRead: a big backlog comes over several reads, nothing lost', async () => {
    const dir = freshDir();
    const path = join(dir, 'access.log');
    const lines = Array.from({ length: 1000 }, (_, i) => `line ${i}`);
    writeFileSync(path, `${lines.join('\n')}\n`);
    const r = new LocalFileAccessLog(path, { from: 'start', maxBytesPerRead: 1000 });
    const got: string[] = [];
    for (let i = 0; i < 20; i++) got.push(...(await r.read()));
    assert.deepEqual(got, lines);
    await r.close();
  });

  it('the lines parse: fleetroll_json records counted, garbage counted and skipped', async () => {
    const dir = freshDir();
    const path = join(dir, 'access.log');
    writeFileSync(path, `${line()}\n127.0.0.1 - - [..] "GET / HTTP/1.1" 200\n${line({ status: '502' })}\n{"trunc`);
    const r = new LocalFileAccessLog(path, { from: 'start' });
    const p = new AccessLogParser();
    const records = p.parse(await r.read());
    assert.deepEqual(
      records.map((x) => x.status),
      [200, 502],
    );
    assert.deepEqual(p.counts, { lines: 3, records: 2, garbage: 1, blank: 0 });
    await r.close();
  });
});

describe('PathFollower', () => {
  it('retries are not needed when ids match; a file whose id changes under a read is a rotation', async () => {
    // FileOps over an in-memory "file system", to drive the follower without timing.
    const files = new Map<string, { id: string; bytes: Buffer }>();
    const ops: FileOps = {
      async read(p, from) {
        const f = files.get(p);
        return f && { id: f.id, size: f.bytes.length, data: f.bytes.subarray(Math.min(from, f.bytes.length)) };
      },
    };
    files.set('/log', { id: '1', bytes: Buffer.from('a\n') });
    const f = new PathFollower(ops, '/log', { from: 'start' });
    assert.deepEqual(await f.read(), ['a']);
    files.set('/log.1', { id: '1', bytes: Buffer.from('a\nb\n') });
    files.set('/log', { id: '2', bytes: Buffer.from('c\n') });
    assert.deepEqual(await f.read(), ['b', 'c']);
    assert.equal(f.counters.rotations, 1);
  });

  it('without inodes (the archive API), rotation is told by content and the old file found by it', async () => {
    const files = new Map<string, Buffer>();
    const ops: FileOps = {
      async read(p, from) {
        const b = files.get(p);
        return b && { id: undefined, size: b.length, data: b.subarray(Math.min(from, b.length)) };
      },
    };
    files.set('/log', Buffer.from('first line\n'));
    const f = new PathFollower(ops, '/log', { from: 'start' });
    assert.deepEqual(await f.read(), ['first line']);
    // Rotated, the old file grew by one line before nginx reopened, the new one is already longer.
    files.set('/log.1', Buffer.from('first line\nsecond line\n'));
    files.set('/log', Buffer.from('third line, longer than the first\n'));
    assert.deepEqual(await f.read(), ['second line', 'third line, longer than the first']);
    assert.deepEqual(f.counters, { rotations: 1, truncations: 0, lostRotations: 0, skippedLines: 0 });
  });

  it('a rotated file that is nowhere to be found is counted as lost', async () => {
    const files = new Map<string, Buffer>();
    const ops: FileOps = {
      async read(p, from) {
        const b = files.get(p);
        return b && { id: undefined, size: b.length, data: b.subarray(Math.min(from, b.length)) };
      },
    };
    files.set('/log', Buffer.from('a\n'));
    const f = new PathFollower(ops, '/log', { from: 'start' });
    await f.read();
    files.set('/log', Buffer.from('something else entirely\n'));
    assert.deepEqual(await f.read(), ['something else entirely']);
    assert.equal(f.counters.lostRotations, 1);
  });
});

describe('property: every line once, in order, whatever the interleaving', () => {
  type Op = { kind: 'write'; text: string } | { kind: 'rotate'; reopenAfterWrites: number } | { kind: 'read' };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.string({ unit: fc.constantFrom('a', 'b', 'é', '\n'), minLength: 1, maxLength: 12 }).map((text) => ({ kind: 'write' as const, text })),
    },
    { weight: 1, arbitrary: fc.nat(2).map((reopenAfterWrites) => ({ kind: 'rotate' as const, reopenAfterWrites })) },
    { weight: 3, arbitrary: fc.constant({ kind: 'read' as const }) },
  );

  for (const reader of readers) {
    it(`${reader.name}: writes, rotations (nginx reopening a few writes later) and reads`, async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(opArb, { maxLength: 40 }), async (ops) => {
          const dir = freshDir();
          const path = join(dir, 'access.log');
          writeFileSync(path, '');
          let fd = openSync(path, 'a');
          // Rotated files stay open for the whole run: quietness is a heuristic this property does not test.
          const r = reader.make(path, { from: 'start', quietReadsBeforeClose: 1000 });
          const got: string[] = await r.read();
          let written = '';
          let pendingReopen: number | undefined;
          /** By path: the file at access.log.1 may hold bytes no read has seen. */
          let unreadInRotated = false;
          /** A file created and rotated away between two reads is never seen by any reader (documented). */
          let readSinceRotation = true;
          const reopen = () => {
            closeSync(fd);
            fd = openSync(path, 'a');
            pendingReopen = undefined;
          };
          try {
            for (const op of ops) {
              if (op.kind === 'write') {
                writeSync(fd, op.text);
                written += op.text;
                if (pendingReopen !== undefined) unreadInRotated = true;
                // nginx writes whole lines, so it reopens between two lines.
                if (pendingReopen !== undefined && --pendingReopen < 0 && written.endsWith('\n')) reopen();
              } else if (op.kind === 'rotate') {
                // By path, a second rotation before a read overwrites the unread old file: that is
                // what rotatedPaths is for, not what this property is about.
                if (pendingReopen !== undefined || !readSinceRotation || (reader.kind === 'path' && unreadInRotated)) continue;
                renameSync(path, join(dir, 'access.log.1'));
                writeFileSync(path, '');
                pendingReopen = op.reopenAfterWrites;
                unreadInRotated = true;
                readSinceRotation = false;
              } else {
                got.push(...(await r.read()));
                unreadInRotated = false;
                readSinceRotation = true;
              }
            }
            if (!written.endsWith('\n') && written !== '') {
              writeSync(fd, '\n');
              written += '\n';
            }
            if (pendingReopen !== undefined) reopen();
            for (let i = 0; i < 3; i++) got.push(...(await r.read()));
            assert.deepEqual(got, written.split('\n').slice(0, -1));
            assert.equal(r.counters.lostRotations, 0);
          } finally {
            closeSync(fd);
            await r.close?.();
          }
        }),
        { numRuns: 150 },
      );
    });
  }
});
