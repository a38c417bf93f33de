/**
 * `fleetroll undo`'s request to a blue-green rollout waiting out its delay
 * (engine/switchBack.ts), on an in-memory state and fake asks: who is asked,
 * what is read before the ask (users wait on it), and what is taken back.
 * And the other side, the rollout's offer (engine/session.ts runManaged), on
 * the simulated world and virtual clock: made while the old set waits, gone
 * once the rollout ends however it ends, never two at once.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy } from '../../src/core/strategy.js';
import { runManaged } from '../../src/engine/session.js';
import { requestSwitchBack } from '../../src/engine/switchBack.js';
import type { SwitchBackAsks } from '../../src/engine/types.js';
import { LABELS, type JournalEntry } from '../../src/ports.js';
import { simulatedFleet } from '../../src/sim/simulate.js';
import { MemoryLock, MemoryStateStore } from '../support/memory-state.js';
import { invariants, T } from '../support/sim-invariants.js';

const R = '2026-12-04T00:00:00.000Z-abcdef';
const entry = (step: string, rollout = R): JournalEntry => ({ at: new Date().toISOString(), rollout, step });

/** Fake asks; `answer` is what the rollout does once asked (writes its journal). */
class FakeAsks implements SwitchBackAsks {
  readonly calls: string[] = [];
  constructor(
    private readonly offer_: { rollout: string; image: string } | undefined,
    private readonly answer: (rollout: string) => void,
  ) {}
  async offer(_rollout: string): Promise<void> {}
  async withdraw(): Promise<void> {}
  async offered() {
    this.calls.push('offered');
    return this.offer_;
  }
  async ask(rollout: string, image?: string): Promise<void> {
    this.calls.push(`ask ${rollout} ${image ?? '(lock image)'}`);
    this.answer(rollout);
  }
  async asked(_rollout: string): Promise<boolean> {
    return false;
  }
  async unask(): Promise<void> {
    this.calls.push('unask');
  }
  onAsk(_listener: () => void): () => void {
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

const opts = (asks?: SwitchBackAsks, timeoutMs = 5_000) => ({
  sleep: (ms: number) => new Promise<void>((r) => setTimeout(r, Math.min(ms, 5))),
  timeoutMs,
  asks,
});

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
  {
    name: 'an offer: asked at once, the journal read only after the ask',
    journal: [entry('begin'), entry('switch')],
    offer: { rollout: R, image: 'img' },
    answers: 'switched-back',
    want: 'switched back',
    calls: ['offered', `ask ${R} img`],
    readsBeforeAsk: 0,
  },
  {
    name: 'no offer, the journal says a blue-green rollout waits: asked, with the lock image',
    journal: [entry('begin'), entry('switch')],
    answers: 'switched-back',
    want: 'switched back',
    calls: ['offered', `ask ${R} (lock image)`],
    readsBeforeAsk: 1,
  },
  {
    name: 'no offer, the last rollout ended: no switch-back, nothing asked',
    journal: [entry('begin'), entry('switch'), entry('complete')],
    want: undefined,
    calls: ['offered'],
  },
  { name: 'no offer, the last rollout never switched: no switch-back, nothing asked', journal: [entry('begin')], want: undefined, calls: ['offered'] },
  {
    name: 'the rollout ends before it switches back: too late, the ask taken back',
    journal: [entry('begin'), entry('switch')],
    offer: { rollout: R, image: 'img' },
    answers: 'complete',
    want: 'too late',
    calls: ['offered', `ask ${R} img`, 'unask'],
  },
  {
    name: "an offer of another rollout than the journal's last: that rollout is asked",
    journal: [entry('begin', 'older'), entry('switch', 'older')],
    offer: { rollout: R, image: 'img' },
    answers: 'switched-back',
    want: 'switched back',
    calls: ['offered', `ask ${R} img`],
  },
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

/**
 * The asks as the rollout uses them, on the virtual clock: an offer takes
 * `offerMs` to be made (the real one is an inspect, a remove and a create),
 * and lasts until withdrawn; undo's ask wakes onAsk's listener.
 */
class OfferingAsks extends FakeAsks {
  /** Offers made and not withdrawn, by rollout: the real offer is one container of a fixed name. */
  readonly offers: string[] = [];
  /** Every offer made, by rollout. */
  readonly made: string[] = [];
  private askedOf: string | undefined;
  private listener: (() => void) | undefined;
  constructor(
    private readonly sleep: (ms: number) => Promise<void>,
    private readonly offerMs: number,
    private readonly seen: () => void,
  ) {
    super(undefined, () => {});
  }
  override async offer(rollout: string): Promise<void> {
    await this.sleep(this.offerMs);
    this.offers.push(rollout);
    this.made.push(rollout);
    this.calls.push('offer');
    this.seen();
  }
  override async withdraw(): Promise<void> {
    this.offers.length = 0;
    this.askedOf = undefined;
    this.calls.push('withdraw');
    this.seen();
  }
  /** What undo does: asks the rollout that offers. */
  undo(): void {
    this.askedOf = this.offers[0];
    this.listener?.();
  }
  override async asked(rollout: string): Promise<boolean> {
    return this.askedOf === rollout;
  }
  override onAsk(listener: () => void): () => void {
    this.listener = listener;
    return () => (this.listener = undefined);
  }
}

interface OfferRow {
  name: string;
  /** Virtual ms an offer takes to be made. */
  offerMs?: number;
  /** undo asks this long after the switch. */
  undoAfterMs?: number;
  /** The new set never becomes available: the rollout fails before any switch. */
  neverReady?: boolean;
  fails?: RegExp;
  /** The offer, by the time the old set starts to stop (its delay over), or by the undo. */
  offeredInDelay: boolean;
  calls: string[];
}

const DELAY_S = 30;

const offerRows: OfferRow[] = [
  { name: 'completes: offered once the switch is in force, withdrawn when the rollout ends', offeredInDelay: true, calls: ['withdraw', 'offer', 'withdraw'] },
  {
    name: 'undo asks 5 s into the delay: switched back, the rollout fails, the offer withdrawn',
    undoAfterMs: 5000,
    fails: /rolled back \(undo\)/,
    offeredInDelay: true,
    calls: ['withdraw', 'offer', 'withdraw'],
  },
  {
    name: 'the new set never becomes available: the rollout fails, never offered, nothing left',
    neverReady: true,
    fails: /made no progress/,
    offeredInDelay: false,
    calls: ['withdraw', 'withdraw'],
  },
  {
    name: 'an offer slower than the rest of the rollout: withdrawn only once it is made, so it does not outlive the rollout',
    offerMs: (DELAY_S + 60) * 1000,
    offeredInDelay: false,
    calls: ['withdraw', 'offer', 'withdraw'],
  },
];

describe('runManaged: the switch-back offer of a blue-green rollout', () => {
  for (const row of offerRows) {
    it(row.name, async () => {
      const s = resolveStrategy({ replicas: 3, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: DELAY_S } } });
      const inv = invariants(s, T);
      const violations: string[] = [];
      let asks: OfferingAsks | undefined;
      let switchedAt: number | undefined;
      let offersAtDelayEnd: number | undefined;
      let offeredAtUndo: number | undefined;
      const sim = simulatedFleet(s, T, {
        inspect: inv.setup.inspect,
        progressDeadlineSeconds: 20,
        ...(row.neverReady ? { faults: { neverReady: new Set(['new']) } } : {}),
        events: (e, at) => {
          check();
          if (e.type !== 'switched') return;
          switchedAt = at;
          if (row.undoAfterMs !== undefined) {
            sim.clock.timer(row.undoAfterMs, () => {
              offeredAtUndo = asks!.offers.length;
              asks!.undo();
            });
          }
        },
      });
      const { clock, world } = sim;
      inv.setup.world?.(world, clock);
      const before = world.onEvent;
      world.onEvent = (e) => {
        before?.(e);
        check();
        if (e.kind === 'stopping' && e.c.labels[LABELS.version] === 'old') offersAtDelayEnd ??= asks!.offers.length;
      };
      asks = new OfferingAsks((ms) => clock.sleep(ms), row.offerMs ?? 5, check);
      function check(): void {
        if ((asks?.offers.length ?? 0) > 1) violations.push(`t=${clock.now()}: ${asks!.offers.length} offers at once`);
      }
      const store = new MemoryStateStore();
      const lock = new MemoryLock('fleet simulated');
      const outcome = await clock
        .run(runManaged(sim.fleet, sim.deps, { store, lock, who: 'test@sim', asks }, { command: 'fleetroll deploy' }))
        .catch((e: unknown) => e);

      assert.deepEqual([...inv.checked.violations, ...violations], []);
      if (row.fails) assert.match(String(outcome), row.fails);
      else assert.ok(!(outcome instanceof Error), String(outcome));
      assert.deepEqual(asks.calls, row.calls, 'a stale offer withdrawn before the rollout begins, its own after it ends');
      assert.deepEqual(asks.offers, [], 'no offer outlives the rollout');
      assert.ok(!lock.isHeld, 'the lock released');
      if (row.neverReady) assert.equal(switchedAt, undefined, 'no switch');
      const offered = row.undoAfterMs !== undefined ? offeredAtUndo : offersAtDelayEnd;
      assert.equal(offered === 1, row.offeredInDelay, `offers while the old set waited: ${offered}`);
      if (asks.made.length > 0)
        assert.deepEqual(asks.made, [store.entries.find((e) => e.step === 'begin')?.rollout], 'the offer names the rollout its journal begins');
    });
  }
});
