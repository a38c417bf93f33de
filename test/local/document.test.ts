/**
 * Reading a fleet file that is a FIFO (src/config/document.ts): refused at
 * once, not read for ever. Here rather than in test/unit/document.test.ts,
 * which has the other special files, because making a FIFO takes this
 * machine's mkfifo.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, describe, it } from 'node:test';
import { readTextFile } from '../../src/config/document.js';
import { refusedRead } from '../support/refused-read.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-document-local-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('readTextFile: only regular files', () => {
  it('a FIFO is refused at once, not read for ever', async () => {
    const fifo = join(dir, 'fifo.yaml');
    await promisify(execFile)('mkfifo', [fifo]);
    const started = performance.now();
    const guard = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('readTextFile blocked on the FIFO')), 5000).unref());
    const err = await Promise.race([refusedRead(readTextFile(fifo, 'fleet file')), guard]);
    assert.ok(performance.now() - started < 2000, 'promptly');
    assert.equal(err.message, `cannot read fleet file ${fifo}: is not a regular file (a FIFO)`);
    assert.equal(err.code, 'E_INVALID');
  });
});
