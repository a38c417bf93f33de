/**
 * The tar archives fleetroll exchanges with Docker's archive API (one file in,
 * one file out), without Docker: moved here from the adapters integration test.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pack } from 'tar-stream';
import { createTar, readTar } from '../../src/adapters/tar.js';

async function archiveOf(build: (p: ReturnType<typeof pack>) => void): Promise<Buffer> {
  const p = pack();
  build(p);
  p.finalize();
  const chunks: Buffer[] = [];
  for await (const c of p as AsyncIterable<Uint8Array>) chunks.push(Buffer.from(c));
  return Buffer.concat(chunks);
}

describe('tar', () => {
  test('round-trips one file through createTar/readTar', async () => {
    const tar = await createTar({ name: 'upstream.conf', content: 'a'.repeat(700), mode: 0o640 });
    assert.equal(tar.length, 512 + 1024 + 1024, 'one header, the content padded to 512-byte blocks, two zero blocks');
    const [entry, ...rest] = await readTar(tar);
    assert.equal(rest.length, 0);
    assert.equal(entry?.name, 'upstream.conf');
    assert.equal(entry?.type, 'file');
    assert.equal(entry?.mode, 0o640);
    assert.equal(entry?.content.toString(), 'a'.repeat(700));
  });

  test('an empty file and the default mode', async () => {
    const [entry] = await readTar(await createTar({ name: '.fleetroll-placeholder', content: '' }));
    assert.equal(entry?.content.length, 0);
    assert.equal(entry?.mode, 0o644);
  });

  test('a long name (PAX header) and a symlink, as Docker may send them', async () => {
    const long = `${'d'.repeat(120)}/${'u'.repeat(110)}.conf`; // a last part over 100 bytes: only PAX can carry it
    const tar = await archiveOf((p) => {
      p.entry({ name: long, mode: 0o600 }, 'x');
      p.entry({ name: 'link.conf', type: 'symlink', linkname: '../conf/upstream.conf' });
    });
    const entries = await readTar(tar);
    assert.deepEqual(
      entries.map((e) => ({ name: e.name, type: e.type, linkname: e.linkname, content: e.content.toString() })),
      [
        { name: long, type: 'file', linkname: '', content: 'x' },
        { name: 'link.conf', type: 'symlink', linkname: '../conf/upstream.conf', content: '' },
      ],
    );
  });

  test('a corrupt archive is an error, not an empty list', async () => {
    const tar = await createTar({ name: 'f', content: 'abc' });
    tar[150] = tar[150] === 0x31 ? 0x32 : 0x31; // inside the header checksum
    await assert.rejects(readTar(tar));
  });
});
