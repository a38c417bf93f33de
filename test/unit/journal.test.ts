import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { journalWriter } from '../../src/engine/journal.js';
import type { JournalEntry } from '../../src/ports.js';

/** A store whose appends wait until released, like a read-and-rewrite through Docker. */
function slowStore() {
  const writes: JournalEntry[][] = [];
  const waiting: (() => void)[] = [];
  return {
    writes,
    release: () => waiting.splice(0).forEach((w) => w()),
    appendJournal: (entries: JournalEntry[]) =>
      new Promise<void>((resolve) => {
        writes.push(entries);
        waiting.push(resolve);
      }),
  };
}

describe('journal writer', () => {
  it('records without waiting for the store, one write in flight, the rest grouped into the next', async () => {
    const store = slowStore();
    const write = journalWriter(store, 'r1', () => {});
    write('start', 'begin', { name: 'a' });
    write('start', 'begin', { name: 'b' });
    write('start', 'begin', { name: 'c' });
    // The first entry went out at once; the other two wait for it, together.
    assert.deepEqual(
      store.writes.map((w) => w.map((e) => e.detail?.name)),
      [['a']],
    );
    store.release();
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(
      store.writes.map((w) => w.map((e) => e.detail?.name)),
      [['a'], ['b', 'c']],
    );
    const flushed = write.flush();
    store.release();
    await flushed;
    assert.equal(store.writes.length, 2);
  });

  it('a failing store is reported, never thrown into the rollout', async () => {
    const errors: unknown[] = [];
    const write = journalWriter({ appendJournal: async () => Promise.reject(new Error('state container gone')) }, 'r1', (e) => errors.push(e));
    write('wave', 'begin');
    await write.flush();
    assert.equal(errors.length, 1);
    assert.match(String(errors[0]), /state container gone/);
  });
});
