/**
 * A user's file read as hostile input: only a regular file (a FIFO, a device
 * or a socket is refused before a byte is read), of bounded size, as UTF-8,
 * with a message that says what was wrong without quoting the file.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { constants } from 'node:fs';
import { FleetrollError } from '../errors.js';
import { MAX_DOCUMENT_BYTES } from './documentLimits.js';

function mib(bytes: number): string {
  const m = bytes / (1024 * 1024);
  if (m >= 1) return `${Number.isInteger(m) ? m : m.toFixed(1)} MiB`;
  const k = bytes / 1024;
  return k >= 1 ? `${Number.isInteger(k) ? k : k.toFixed(1)} KiB` : `${bytes} bytes`;
}

function kindOf(st: { isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * Reads a regular file of at most `maxBytes` as UTF-8 text. A FIFO, a device
 * or a socket is refused before a byte is read (opened non-blocking, so a FIFO
 * with no writer cannot hold the open), and a file that grows past the limit
 * while being read (or reports no size, as /proc files do) is cut off at it.
 */
export async function readTextFile(file: string, what: string, maxBytes: number = MAX_DOCUMENT_BYTES): Promise<string> {
  const fail = (code: 'E_NO_FILE' | 'E_INVALID', why: string, cause?: unknown): FleetrollError =>
    new FleetrollError(code, `cannot read ${what} ${file}: ${why}`, cause === undefined ? {} : { cause });
  let fh: FileHandle;
  try {
    fh = await open(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT' || code === 'ENOTDIR'
        ? 'no such file'
        : code === 'EISDIR'
          ? 'is a directory'
          : code === 'EACCES' || code === 'EPERM'
            ? 'permission denied'
            : code === 'ENXIO'
              ? 'is not a regular file (a socket or a device with nothing behind it)'
              : code === 'ELOOP'
                ? 'too many levels of symbolic links'
                : String((err as Error).message);
    throw fail('E_NO_FILE', why, err);
  }
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw fail('E_NO_FILE', 'is a directory');
    if (!st.isFile()) throw fail('E_INVALID', `is not a regular file (${kindOf(st)})`);
    const tooLarge = (size: string): FleetrollError => fail('E_INVALID', `it is ${size}, larger than the ${mib(maxBytes)} a ${what} may be`);
    if (st.size > maxBytes) throw tooLarge(mib(st.size));
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      // One byte past the limit tells "exactly at the limit" from "over it".
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw tooLarge(`more than ${mib(maxBytes)}`);
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, total));
    } catch (err) {
      throw fail('E_INVALID', 'is not UTF-8 text', err);
    }
  } catch (err) {
    if (err instanceof FleetrollError) throw err;
    throw fail('E_NO_FILE', (err as NodeJS.ErrnoException).code ?? String((err as Error).message), err);
  } finally {
    await fh.close().catch(() => undefined);
  }
}
