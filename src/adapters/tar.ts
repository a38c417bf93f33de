/**
 * One file in and out of a tar archive, for Docker's archive API
 * (`PUT/GET /containers/{id}/archive`): how fleetroll writes and reads a file
 * inside a container whose image has no shell. tar-stream does the format
 * (ustar headers, and the PAX records and GNU long names Go's archive/tar, which
 * the Docker engine uses, may emit).
 */
import type { Header } from 'tar-stream';

export interface TarFileInput {
  /** Entry name, e.g. `upstream.conf`. */
  name: string;
  content: string | Uint8Array;
  /** Permission bits (default 0o644). */
  mode?: number;
}

export interface TarEntry {
  name: string;
  type: Header['type'];
  mode: number;
  /** Target of a symlink or hard link; '' otherwise. */
  linkname: string;
  content: Buffer;
}

/** A complete tar archive holding exactly one regular file, owned by root. */
export async function createTar(file: TarFileInput): Promise<Buffer> {
  const { pack } = await import('tar-stream');
  const archive = pack();
  const content = typeof file.content === 'string' ? Buffer.from(file.content, 'utf8') : Buffer.from(file.content);
  archive.entry({ name: file.name, mode: (file.mode ?? 0o644) & 0o7777, uid: 0, gid: 0, uname: 'root', gname: 'root' }, content);
  archive.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of archive as AsyncIterable<Uint8Array>) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

/** Every entry of a tar archive, in order (metadata entries such as PAX headers are applied, not returned). */
export async function readTar(archive: Uint8Array): Promise<TarEntry[]> {
  const { extract } = await import('tar-stream');
  const reader = extract();
  reader.end(Buffer.from(archive));
  const entries: TarEntry[] = [];
  for await (const entry of reader) {
    const chunks: Buffer[] = [];
    for await (const chunk of entry as AsyncIterable<Uint8Array>) chunks.push(Buffer.from(chunk));
    const h = entry.header;
    entries.push({ name: h.name, type: h.type, mode: h.mode, linkname: h.linkname ?? '', content: Buffer.concat(chunks) });
  }
  return entries;
}
