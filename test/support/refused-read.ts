/**
 * A file read that src/config/document.ts refuses as invalid input (exit 2),
 * shared by the special files of test/unit/document.test.ts and the FIFO of
 * test/local/document.test.ts (which needs mkfifo).
 */
import assert from 'node:assert/strict';
import { FleetrollError } from '../../src/errors.js';

/** The error `p` rejects with, checked to be a FleetrollError with exit code 2; fails the test if it resolves. */
export async function refusedRead(p: Promise<unknown>): Promise<FleetrollError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof FleetrollError, String(err));
    assert.equal(err.exitCode, 2);
    return err;
  }
  assert.fail('expected the read to be refused');
}
