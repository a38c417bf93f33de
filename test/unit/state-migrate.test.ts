/**
 * migrateState on in-memory stores: what moves, what reads back, and that a
 * refused or failed copy leaves the target as it was (exit 2).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { migrateState } from '../../src/engine/stateMigrate.js';
import { FleetrollError } from '../../src/errors.js';
import type { FleetState, JournalEntry, RevisionRecord } from '../../src/ports.js';
import { MemoryStateStore } from '../support/memory-state.js';

const record = (number: number): RevisionRecord =>
  ({
    number,
    hash: `rev-${number}`,
    image: `api:${number}`,
    version: String(number),
    env: { MODE: 'x' },
    changeCause: 'deploy',
    who: 't@m',
    when: '2026-12-07T00:00:00Z',
    outcome: 'complete',
  }) as RevisionRecord;

const STATE: FleetState = { service: 'api', revisionKey: 'k', nextRevision: 3, revisions: [record(1), record(2)], paused: true };
const JOURNAL: JournalEntry[] = [
  { at: '2026-12-07T00:00:00Z', rollout: 'r1', step: 'start', phase: 'begin' },
  { at: '2026-12-07T00:00:01Z', rollout: 'r1', step: 'done', phase: 'end', detail: { waves: 2 } },
];

function source(): MemoryStateStore {
  const s = new MemoryStateStore(STATE);
  s.entries.push(...JOURNAL);
  return s;
}

async function migrate(from: MemoryStateStore, to: MemoryStateStore, discard = async () => {}) {
  return migrateState({ service: 'api', from: { store: from, name: 'the volume' }, to: { store: to, name: 'etcd' }, image: 'img', discard });
}

async function refused(p: Promise<unknown>, message: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof FleetrollError, String(err));
    assert.equal(err.exitCode, 2);
    assert.match(err.message, message);
    return true;
  });
}

describe('migrateState', () => {
  it('copies every revision, the pause flag and the journal; the copy reads back the same; the source is untouched', async () => {
    const from = source();
    const to = new MemoryStateStore();
    const r = await migrate(from, to);
    assert.deepEqual(r, { revisions: [1, 2], journalEntries: 2, paused: true, alreadyThere: false });
    assert.deepEqual(await to.read(), STATE);
    assert.deepEqual(await to.journal(), JOURNAL);
    assert.deepEqual(await from.read(), STATE);
    assert.equal(from.writes, 0);
  });

  it('a target that already holds the same copy: nothing written, said so', async () => {
    const to = source();
    const r = await migrate(source(), to);
    assert.equal(r.alreadyThere, true);
    assert.equal(to.writes, 0);
  });

  it('a target that holds a different state: exit 2 naming its revisions, nothing changed', async () => {
    const to = new MemoryStateStore({ ...STATE, revisions: [record(1)] });
    await refused(migrate(source(), to), /etcd already holds a different state for api \(revisions 1\): nothing was changed/);
    assert.equal(to.writes, 0);
  });

  it('a source with no state: exit 2, nothing to migrate', async () => {
    await refused(migrate(new MemoryStateStore(), new MemoryStateStore()), /nothing to migrate: the volume holds no state for api/);
  });

  it('a copy that does not read back the same: exit 2 and the copy discarded', async () => {
    class Lossy extends MemoryStateStore {
      override async write(state: FleetState): Promise<void> {
        await super.write({ ...state, revisions: state.revisions.slice(1) });
      }
    }
    let discarded = 0;
    await refused(
      migrate(source(), new Lossy(), async () => void discarded++),
      /the copy in etcd does not read back as the volume holds it: nothing was changed \(the copy was removed\)/,
    );
    assert.equal(discarded, 1);
  });

  it('a target that fails mid-copy: exit 2 with its error, the copy discarded', async () => {
    class Failing extends MemoryStateStore {
      override async appendJournal(): Promise<void> {
        throw new Error('etcd: request timed out');
      }
    }
    let discarded = 0;
    await refused(
      migrate(source(), new Failing(), async () => void discarded++),
      /copying the state to etcd failed: nothing was changed .*request timed out/,
    );
    assert.equal(discarded, 1);
  });
});
