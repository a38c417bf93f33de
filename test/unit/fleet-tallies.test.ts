/**
 * The tallies that let the controller's decisions cost what changed rather
 * than the fleet: the fleet view's draining set (FleetView.draining, what
 * decide() looks at for stops) and its phase readers, and the batches the
 * lifecycle waits for (engine/batches.ts), each checked against the pass
 * over every instance it replaces.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { decide, isTerminating, type FleetSnapshot, type InstanceView, type Phase } from '../../src/core/decide.js';
import { seededRandom } from '../../src/core/random.js';
import { resolveStrategy } from '../../src/core/strategy.js';
import { Batches } from '../../src/engine/batches.js';
import { FleetView } from '../../src/engine/fleetView.js';

const PHASES: Phase[] = ['starting', 'unready', 'ready', 'available', 'failed', 'draining', 'stopping'];

/** A view with random instances, then `churn` random changes (phases, removals, stopAt and routed of draining ones). */
function churned(seed: number, churn: number, each?: (v: FleetView<InstanceView>, all: InstanceView[], rand: () => number) => void) {
  const rand = seededRandom(seed);
  const v = new FleetView<InstanceView>();
  const all: InstanceView[] = [];
  for (let k = 0; k < 80; k++) {
    const i: InstanceView = {
      id: `i${k}`,
      host: 'h1',
      revision: k % 2 === 0 ? 'new' : 'old',
      created: k,
      phase: PHASES[Math.floor(rand() * PHASES.length)]!,
      routed: rand() < 0.5,
    };
    all.push(i);
    v.add(i);
  }
  for (let c = 0; c < churn; c++) {
    const i = all[Math.floor(rand() * all.length)]!;
    const r = rand();
    if (r < 0.05) v.remove(i.id);
    else if (r < 0.3) i.stopAt = rand() < 0.2 ? undefined : Math.floor(rand() * 100);
    else if (r < 0.45) i.routed = !i.routed;
    else v.setPhase(i, PHASES[Math.floor(rand() * PHASES.length)]!);
    each?.(v, all, rand);
  }
  return { v, all, rand };
}

/** The view as decide() saw it before: terminating() only, no draining set nor count. */
function withoutDraining(v: FleetView<InstanceView>): FleetSnapshot {
  return {
    counts: (revision, replicas, hold) => v.counts(revision, replicas, hold),
    terminating: () => v.terminating(),
    candidates: (revision) => v.candidates(revision),
    loads: (revision) => v.loads(revision),
    leastUseful: (revision, n) => v.leastUseful(revision, n),
  };
}

describe('FleetView.draining', () => {
  const rows = [
    { name: 'after few changes', seed: 1, churn: 20 },
    { name: 'after many changes', seed: 2, churn: 2000 },
    { name: 'after many changes, another seed', seed: 3, churn: 2000 },
  ];
  for (const row of rows) {
    it(`${row.name}: the draining ones among terminating(), in its order, at every step`, () => {
      churned(row.seed, row.churn, (v) => {
        assert.deepEqual(
          [...v.draining()].map((i) => i.id),
          [...v.terminating()].filter((i) => i.phase === 'draining').map((i) => i.id),
        );
        assert.equal(v.terminatingCount(), [...v.values()].filter((i) => isTerminating(i.phase)).length);
      });
    });
  }

  const decideRows = [
    { name: 'TerminationStarted', seed: 4, policy: 'TerminationStarted' as const },
    { name: 'TerminationComplete', seed: 5, policy: 'TerminationComplete' as const },
  ];
  for (const row of decideRows) {
    it(`decide() over the draining set is decide() over every terminating instance: ${row.name}`, () => {
      const strategy = resolveStrategy({ replicas: 40, cli: { maxSurge: 5, maxUnavailable: 3 }, replacementPolicy: { own: row.policy } });
      let now = 0;
      churned(row.seed, 1500, (v) => {
        now += 1;
        const ctx = { revision: 'new', replicas: 40, strategy, now: now % 100, hosts: [{ name: 'h1' }] };
        assert.deepEqual(decide(v, ctx), decide(withoutDraining(v), ctx));
      });
    });
  }
});

describe('FleetView.onPhase', () => {
  it('hears every change of phase with the phase before, removed instances included, and no non-change', () => {
    const v = new FleetView<InstanceView>();
    const heard: string[] = [];
    v.onPhase((i, from) => heard.push(`${i.id} ${from}>${i.phase}`));
    const a: InstanceView = { id: 'a', host: 'h1', revision: 'new', created: 0, phase: 'starting', routed: false };
    v.add(a);
    v.setPhase(a, 'unready');
    v.setPhase(a, 'unready');
    v.remove('a');
    v.setPhase(a, 'failed');
    assert.deepEqual(heard, ['a starting>unready', 'a unready>failed']);
  });
});

describe('Batches', () => {
  /** What holdForBatch asked before: some member starting or unready, by a pass over the batch. */
  const passOver = (members: InstanceView[]) => members.some((m) => m.phase === 'starting' || m.phase === 'unready');
  const rows = [
    { name: 'one batch', seed: 6, starts: 30, gapMs: 0 },
    { name: 'batches opened by gaps of more than the window', seed: 7, starts: 60, gapMs: 300 },
    { name: 'batches, long churn', seed: 8, starts: 120, gapMs: 200 },
  ];
  for (const row of rows) {
    it(`${row.name}: waiting() answers as a pass over the members, through every change of phase`, () => {
      const rand = seededRandom(row.seed);
      const v = new FleetView<InstanceView & { batch?: number }>();
      const b = new Batches();
      v.onPhase((i, from) => b.moved(i.batch, from, i.phase));
      const byBatch = new Map<number, InstanceView[]>();
      const all: (InstanceView & { batch?: number })[] = [];
      let now = 0;
      const check = () => {
        for (const i of all) assert.equal(b.waiting(i.batch), passOver(byBatch.get(i.batch!)!), `batch ${i.batch}`);
      };
      for (let k = 0; k < row.starts; k++) {
        now += Math.floor(rand() * row.gapMs);
        const i: InstanceView & { batch?: number } = { id: `n${k}`, host: 'h1', revision: 'new', created: now, phase: 'starting', routed: false };
        v.add(i);
        i.batch = b.join(i.phase, now, 500);
        byBatch.set(i.batch, [...(byBatch.get(i.batch) ?? []), i]);
        all.push(i);
        for (let c = 0; c < 3; c++) {
          const x = all[Math.floor(rand() * all.length)]!;
          // Back to unready after ready, draining and put back, removed while starting: every way a member moves.
          if (rand() < 0.05) v.remove(x.id);
          else v.setPhase(x, PHASES[Math.floor(rand() * PHASES.length)]!);
        }
        check();
      }
    });
  }

  it('an instance of no batch (found at the start) waits for nothing', () => {
    assert.equal(new Batches().waiting(undefined), false);
  });

  it('opens a new batch only after the window', () => {
    const b = new Batches();
    assert.deepEqual([b.join('starting', 0, 500), b.join('starting', 500, 500), b.join('starting', 1001, 500)], [1, 1, 2]);
  });
});
