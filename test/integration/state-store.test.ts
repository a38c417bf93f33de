/**
 * The fleet state store on a real engine (src/adapters/fleetState.ts): a
 * write by another process wakes the listeners of a running rollout at once
 * (Docker's extract-to-dir event), a write of its own does not (its polls ask
 * about what others wrote, and each wake costs a read through the archive
 * API), and journal entries appended one batch at a time are all kept.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { FleetStateStore, removeFleetState } from '../../src/adapters/fleetState.js';
import { docker, ensureImages, uniqueName, waitFor } from './fixture.js';

const service = uniqueName('it-store');
after(() => removeFleetState(docker, service));

describe('the fleet state store, for real', () => {
  it("another process's write wakes the listeners, its own writes do not; appended journal batches are all kept", async () => {
    await ensureImages();
    const mine = new FleetStateStore(docker, service, 'local');
    const theirs = new FleetStateStore(docker, service, 'local');
    await mine.ensure('fleetroll-example:1.0.0');
    await mine.write({ service, nextRevision: 1, revisions: [] });
    let wakes = 0;
    const stop = mine.watch(() => wakes++);
    try {
      // The stream is open once a write of theirs is heard.
      await theirs.write({ service, nextRevision: 1, revisions: [], paused: true });
      await waitFor('the first event', () => wakes === 1, 15_000);
      const journal = await mine.journal();
      for (let i = 0; i < 3; i++) {
        await mine.write({ service, nextRevision: 2 + i, revisions: [] });
        await mine.appendJournal([{ at: new Date().toISOString(), rollout: 'r1', step: `own-${i}`, phase: 'end' }]);
      }
      await theirs.write({ service, nextRevision: 9, revisions: [], paused: false });
      await waitFor("their second write's event", () => wakes >= 2, 15_000);
      // Settle: any wake from the six own writes would have come by now.
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(wakes, 2, 'two wakes: their two writes, none for the six of mine');
      const after = (await theirs.journal()).map((e) => e.step);
      assert.deepEqual(after.slice(journal.length), ['own-0', 'own-1', 'own-2'], 'every batch kept, in order');
      assert.equal((await mine.read())?.nextRevision, 9);
    } finally {
      stop();
    }
  });
});
