/**
 * A tiny in-memory tar writer and reader: just enough for Docker's archive API
 * (`PUT/GET /containers/{id}/archive`), which is how fleetroll writes and reads one
 * file inside a container whose image has no shell (no `sh -c 'cat > f'`).
 *
 * Writer: one regular-file entry in ustar format (512-byte header with checksum,
 * content padded to a 512-byte boundary, two zero blocks as the end marker).
 * Reader: walks ustar/GNU/PAX entries; applies PAX `path`/`size`/`linkpath` records and
 * GNU long names (`L`/`K`) to the entry that follows, as Go's archive/tar (used by the
 * Docker engine) may emit them.
 *
 * No I/O and no dependencies.
 */

const BLOCK = 512;

export interface TarFileInput {
  /** Entry name, e.g. `upstream.conf` (at most 100 bytes; no prefix splitting). */
  name: string;
  content: string | Uint8Array;
  /** Permission bits (default 0o644). */
  mode?: number;
  uid?: number;
  gid?: number;
  /** Modification time (default now). */
  mtime?: Date;
}

export type TarEntryType = 'file' | 'directory' | 'symlink' | 'hardlink' | 'other';

export interface TarEntry {
  name: string;
  type: TarEntryType;
  /** Raw ustar typeflag character ('0', '5', '2', ...). */
  typeflag: string;
  mode: number;
  uid: number;
  gid: number;
  size: number;
  mtime: Date;
  linkname: string;
  content: Buffer;
}

/** Write `value` as a zero-padded octal string of `width - 1` digits plus a NUL. */
function writeOctal(header: Buffer, offset: number, width: number, value: number, field: string): void {
  if (!Number.isInteger(value) || value < 0) throw new Error(`tar: invalid ${field} ${value}`);
  const digits = value.toString(8);
  if (digits.length > width - 1) throw new Error(`tar: ${field} ${value} does not fit in a ustar header`);
  header.write(digits.padStart(width - 1, '0') + '\0', offset, width, 'ascii');
}

function writeString(header: Buffer, offset: number, width: number, value: string, field: string): void {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length > width) throw new Error(`tar: ${field} ${JSON.stringify(value)} is longer than ${width} bytes`);
  bytes.copy(header, offset);
}

function checksum(header: Buffer): number {
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : header[i]!;
  return sum;
}

/** A complete tar archive holding exactly one regular file. */
export function createTar(file: TarFileInput): Buffer {
  if (!file.name || file.name.includes('\0')) throw new Error('tar: entry name must be non-empty and contain no NUL');
  const content = typeof file.content === 'string' ? Buffer.from(file.content, 'utf8') : Buffer.from(file.content);
  const header = Buffer.alloc(BLOCK, 0);
  writeString(header, 0, 100, file.name, 'name');
  writeOctal(header, 100, 8, (file.mode ?? 0o644) & 0o7777, 'mode');
  writeOctal(header, 108, 8, file.uid ?? 0, 'uid');
  writeOctal(header, 116, 8, file.gid ?? 0, 'gid');
  writeOctal(header, 124, 12, content.length, 'size');
  writeOctal(header, 136, 12, Math.floor((file.mtime ?? new Date()).getTime() / 1000), 'mtime');
  header.write('0', 156, 1, 'ascii'); // typeflag: regular file
  header.write('ustar\0', 257, 6, 'ascii');
  header.write('00', 263, 2, 'ascii');
  writeString(header, 265, 32, 'root', 'uname');
  writeString(header, 297, 32, 'root', 'gname');
  // Checksum: 6 octal digits, NUL, space (computed with the field itself as spaces).
  header.write(checksum(header).toString(8).padStart(6, '0') + '\0 ', 148, 8, 'ascii');
  const padding = (BLOCK - (content.length % BLOCK)) % BLOCK;
  return Buffer.concat([header, content, Buffer.alloc(padding, 0), Buffer.alloc(2 * BLOCK, 0)]);
}

function readString(buf: Buffer, offset: number, width: number): string {
  const slice = buf.subarray(offset, offset + width);
  const nul = slice.indexOf(0);
  return (nul === -1 ? slice : slice.subarray(0, nul)).toString('utf8');
}

function readNumber(buf: Buffer, offset: number, width: number): number {
  const first = buf[offset]!;
  if (first & 0x80) {
    // GNU base-256 encoding (big numbers): the remaining bytes, big-endian.
    let n = 0;
    for (let i = offset + 1; i < offset + width; i++) n = n * 256 + buf[i]!;
    return n;
  }
  const text = readString(buf, offset, width).trim();
  return text === '' ? 0 : parseInt(text, 8);
}

function parsePax(data: Buffer): Map<string, string> {
  const records = new Map<string, string>();
  let pos = 0;
  while (pos < data.length) {
    const space = data.indexOf(0x20, pos);
    if (space === -1) break;
    const len = parseInt(data.subarray(pos, space).toString('ascii'), 10);
    if (!Number.isFinite(len) || len <= 0) break;
    const record = data.subarray(space + 1, pos + len - 1).toString('utf8'); // drop trailing \n
    const eq = record.indexOf('=');
    if (eq > 0) records.set(record.slice(0, eq), record.slice(eq + 1));
    pos += len;
  }
  return records;
}

function entryType(flag: string): TarEntryType {
  switch (flag) {
    case '0':
    case '\0':
    case '':
    case '7':
      return 'file';
    case '5':
      return 'directory';
    case '2':
      return 'symlink';
    case '1':
      return 'hardlink';
    default:
      return 'other';
  }
}

/** Every entry of a tar archive, in order; metadata entries (PAX, GNU long names) are applied, not returned. */
export function readTar(archive: Uint8Array): TarEntry[] {
  const buf = Buffer.isBuffer(archive) ? archive : Buffer.from(archive);
  const entries: TarEntry[] = [];
  let pos = 0;
  let pax = new Map<string, string>();
  let longName: string | undefined;
  let longLink: string | undefined;
  while (pos + BLOCK <= buf.length) {
    const header = buf.subarray(pos, pos + BLOCK);
    if (header.every((b) => b === 0)) break; // end of archive
    const stored = readNumber(header, 148, 8);
    if (stored !== checksum(header)) throw new Error(`tar: bad header checksum at offset ${pos}`);
    const typeflag = String.fromCharCode(header[156]!);
    let size = readNumber(header, 124, 12);
    const paxSize = pax.get('size');
    if (paxSize !== undefined) size = Number(paxSize);
    const dataStart = pos + BLOCK;
    if (dataStart + size > buf.length) throw new Error(`tar: truncated entry at offset ${pos}`);
    const data = buf.subarray(dataStart, dataStart + size);
    pos = dataStart + Math.ceil(size / BLOCK) * BLOCK;

    if (typeflag === 'x') {
      pax = parsePax(data);
      continue;
    }
    if (typeflag === 'g') continue; // global PAX header: nothing fleetroll needs
    if (typeflag === 'L') {
      longName = readString(data, 0, data.length);
      continue;
    }
    if (typeflag === 'K') {
      longLink = readString(data, 0, data.length);
      continue;
    }

    let name = readString(header, 0, 100);
    const magic = readString(header, 257, 6);
    const prefix = magic.startsWith('ustar') ? readString(header, 345, 155) : '';
    if (prefix) name = `${prefix}/${name}`;
    name = pax.get('path') ?? longName ?? name;
    const linkname = pax.get('linkpath') ?? longLink ?? readString(header, 157, 100);
    entries.push({
      name,
      type: entryType(typeflag),
      typeflag,
      mode: readNumber(header, 100, 8),
      uid: readNumber(header, 108, 8),
      gid: readNumber(header, 116, 8),
      size,
      mtime: new Date(readNumber(header, 136, 12) * 1000),
      linkname,
      content: Buffer.from(data),
    });
    pax = new Map();
    longName = undefined;
    longLink = undefined;
  }
  return entries;
}
