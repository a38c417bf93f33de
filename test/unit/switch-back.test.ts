/**
 * `fleetroll undo`'s request to a blue-green rollout waiting out its delay
 * (engine/switchBack.ts), on an in-memory state and fake asks: who is asked,
 * what is read before the ask (users wait on it), and what is taken back.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { requestSwitchBack } from '../../src/engine/switchBack.js';
import type { SwitchBackAsks } from '../../src/engine/types.js';
import type { JournalEntry } from '../../src/ports.js';
import { MemoryStateStore } from '../support/memory-state.js';

const R = '2026-12-04T00:00:00.000Z-abcdef';
const entry = (step: string, rollout = R): JournalEntry => ({ at: new Date().toISOString(), rollout, step });

/** Fake asks; `answer` is what the rollout does once asked (writes its journal). */
class FakeAsks implements SwitchBackAsks {
  readonly calls: string[] = [];
  constructor(
    private readonly offer_: { rollout: string; image: string } | undefined,
    private readonly answer: (rollout: string) => void,
  ) {}
  async offer(): Promise<void> {}
  async withdraw(): Promise<void> {}
  async offered() {
    this.calls.push('offered');
    return this.offer_;
  }
  async ask(rollout: string, image?: string): Promise<void> {
    this.calls.push(`ask ${rollout} ${image ?? '(lock image)'}`);
    this.answer(rollout);
  }
  async asked(): Promise<boolean> {
    return false;
  }
  async unask(): Promise<void> {
    this.calls.push('unask');
  }
  onAsk(): () => void {
    return () => {};
  }
}

/** Counts the journal reads made before the ask. */
class CountingStore extends MemoryStateStore {
  journalReads = 0;
  override async journal(): Promise<JournalEntry[]> {
    this.journalReads++;
    return super.journal();
  }
}

const opts = (asks?: SwitchBackAsks, timeoutMs = 5_000) => ({ sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, Math.min(ms, 5))), timeoutMs, asks });

interface Row {
  name: string;
  journal: JournalEntry[];
  offer?: { rollout: string; image: string };
  /** What the rollout writes to its journal when asked; nothing when undefined. */
  answers?: string;
  want: string | undefined;
  calls: string[];
  /** Journal reads before the ask. */
  readsBeforeAsk?: number;
}

const rows: Row[] = [
  { name: 'an offer: asked at once, the journal read only after the ask', journal: [entry('begin'), entry('switch')], offer: { rollout: R, image: 'img' }, answers: 'switched-back', want: 'switched back', calls: ['offered', `ask ${R} img`], readsBeforeAsk: 0 },
  { name: 'no offer, the journal says a blue-green rollout waits: asked, with the lock image', journal: [entry('begin'), entry('switch')], answers: 'switched-back', want: 'switched back', calls: ['offered', `ask ${R} (lock image)`], readsBeforeAsk: 1 },
  { name: 'no offer, the last rollout ended: no switch-back, nothing asked', journal: [entry('begin'), entry('switch'), entry('complete')], want: undefined, calls: ['offered'] },
  { name: 'no offer, the last rollout never switched: no switch-back, nothing asked', journal: [entry('begin')], want: undefined, calls: ['offered'] },
  { name: 'the rollout ends before it switches back: too late, the ask taken back', journal: [entry('begin'), entry('switch')], offer: { rollout: R, image: 'img' }, answers: 'complete', want: 'too late', calls: ['offered', `ask ${R} img`, 'unask'] },
  { name: 'an offer of another rollout than the journal\'s last: that rollout is asked', journal: [entry('begin', 'older'), entry('switch', 'older')], offer: { rollout: R, image: 'img' }, answers: 'switched-back', want: 'switched back', calls: ['offered', `ask ${R} img`] },
];

describe('requestSwitchBack', () => {
  for (const row of rows) {
    it(row.name, async () => {
      const store = new CountingStore({ service: 's', nextRevision: 2, revisions: [] });
      await store.appendJournal(row.journal);
      let readsAtAsk: number | undefined;
      const asks = new FakeAsks(row.offer, (rollout) => {
        readsAtAsk = store.journalReads;
        if (row.answers) void store.appendJournal([entry(row.answers, rollout)]);
      });
      const r = await requestSwitchBack(store, opts(asks));
      assert.equal(r?.outcome, row.want);
      assert.deepEqual(asks.calls, row.calls);
      if (row.readsBeforeAsk !== undefined) assert.equal(readsAtAsk, row.readsBeforeAsk);
      assert.equal(store.writes, 0, 'the state itself is never written: the asks carry the request');
    });
  }

  it('never answered: E_SWITCH_BACK at the timeout, the ask taken back', async () => {
    const store = new MemoryStateStore();
    await store.appendJournal([entry('begin'), entry('switch')]);
    const asks = new FakeAsks({ rollout: R, image: 'img' }, () => {});
    await assert.rejects(requestSwitchBack(store, opts(asks, 30)), (e: Error & { code?: string }) => e.code === 'E_SWITCH_BACK');
    assert.deepEqual(asks.calls.at(-1), 'unask');
  });

  it('without asks (a library store): the request goes into the state, and is cleared when too late', async () => {
    const store = new MemoryStateStore({ service: 's', nextRevision: 2, revisions: [] });
    await store.appendJournal([entry('begin'), entry('switch')]);
    const write = store.write.bind(store);
    store.write = async (s) => {
      await write(s);
      if (s.switchBack) await store.appendJournal([entry('complete')]);
    };
    const r = await requestSwitchBack(store, opts());
    assert.equal(r?.outcome, 'too late');
    assert.equal((await store.read())?.switchBack, undefined, 'the request is cleared');
    assert.equal(store.writes, 2);
  });
});
