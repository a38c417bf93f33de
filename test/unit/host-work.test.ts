import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { HostWork, mapBounded } from '../../src/engine/hostWork.js';

/** A piece of work that finishes when the test says so, recording when it ran. */
function gate(log: string[], name: string) {
  let open!: () => void;
  let fail!: (e: Error) => void;
  const done = new Promise<void>((res, rej) => {
    open = res;
    fail = rej;
  });
  return {
    work: async () => {
      log.push(`start ${name}`);
      await done;
      log.push(`end ${name}`);
      return name;
    },
    open: () => open(),
    fail: (e: Error) => fail(e),
  };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('HostWork: parallel between hosts, bounded, ordered on each host', () => {
  it('with perHost 1, runs pieces on one host one after another, in the order given', async () => {
    const log: string[] = [];
    const hw = new HostWork(4, 1);
    const a = gate(log, 'a1');
    const b = gate(log, 'a2');
    const pa = hw.run('a', a.work);
    const pb = hw.run('a', b.work);
    await tick();
    assert.deepEqual(log, ['start a1'], 'the second piece waits for the first');
    a.open();
    await pa;
    await tick();
    assert.deepEqual(log, ['start a1', 'end a1', 'start a2']);
    b.open();
    assert.equal(await pb, 'a2');
  });

  it('starts pieces on one host in the order given, at most perHost at once', async () => {
    const log: string[] = [];
    const hw = new HostWork(4, 2);
    const gates = ['s1', 's2', 's3'].map((n) => gate(log, n));
    const runs = gates.map((g) => hw.run('a', g.work));
    await tick();
    assert.deepEqual(log, ['start s1', 'start s2'], 'two side by side, the third waits');
    gates[1]!.open();
    await runs[1];
    await tick();
    assert.deepEqual(log, ['start s1', 'start s2', 'end s2', 'start s3']);
    for (const g of gates) g.open();
    await Promise.all(runs);
  });

  it('runs pieces on different hosts at the same time: a slow host does not hold up the others', async () => {
    const log: string[] = [];
    const hw = new HostWork(4);
    const slow = gate(log, 'slow');
    const fast = gate(log, 'fast');
    const ps = hw.run('h1', slow.work);
    const pf = hw.run('h2', fast.work);
    await tick();
    assert.deepEqual(log.sort(), ['start fast', 'start slow']);
    fast.open();
    await pf;
    assert.ok(log.includes('end fast') && !log.includes('end slow'), 'the fast host finished while the slow one was still at work');
    slow.open();
    await ps;
    assert.equal(hw.peak, 2);
  });

  it('never has more hosts at work than the limit, and hands a freed turn to the host that waited longest', async () => {
    const log: string[] = [];
    const hw = new HostWork(2);
    const gates = ['h1', 'h2', 'h3', 'h4'].map((h) => ({ h, g: gate(log, h) }));
    const runs = gates.map(({ h, g }) => hw.run(h, g.work));
    await tick();
    assert.deepEqual(log, ['start h1', 'start h2']);
    gates[1]!.g.open();
    await runs[1];
    await tick();
    assert.deepEqual(log, ['start h1', 'start h2', 'end h2', 'start h3']);
    for (const { g } of gates) g.open();
    await Promise.all(runs);
    assert.equal(hw.peak, 2);
  });

  it('a host keeps its turn while it has work queued, then hands it on', async () => {
    const log: string[] = [];
    const hw = new HostWork(1, 1);
    const a1 = gate(log, 'a1');
    const b1 = gate(log, 'b1');
    const a2 = gate(log, 'a2');
    const runs = [hw.run('a', a1.work), hw.run('b', b1.work), hw.run('a', a2.work)];
    a1.open();
    a2.open();
    await tick();
    await tick();
    assert.deepEqual(log.slice(0, 4), ['start a1', 'end a1', 'start a2', 'end a2'], 'a finishes its queue before b gets the turn');
    b1.open();
    await Promise.all(runs);
    assert.deepEqual(log.slice(4), ['start b1', 'end b1']);
  });

  it('a failed piece rejects its own promise and the next piece on that host still runs', async () => {
    const log: string[] = [];
    const hw = new HostWork(1, 1);
    const bad = gate(log, 'bad');
    const next = gate(log, 'next');
    const pBad = hw.run('h1', bad.work);
    const pNext = hw.run('h1', next.work);
    bad.fail(new Error('engine went away'));
    await assert.rejects(pBad, /engine went away/);
    next.open();
    assert.equal(await pNext, 'next');
  });

  for (const [name, limit] of [
    ['zero', 0],
    ['negative', -1],
    ['fraction', 1.5],
  ] as const) {
    it(`refuses a limit that is ${name}`, () => {
      assert.throws(() => new HostWork(limit), /limit must be a positive integer/);
      assert.throws(() => new HostWork(1, limit), /perHost must be a positive integer/);
    });
  }
});

describe('mapBounded: reads across hosts, a few at a time', () => {
  it('keeps the order of results and never has more than the limit in flight', async () => {
    let inFlight = 0;
    let peak = 0;
    const out = await mapBounded([30, 10, 20, 5, 1], 2, async (ms) => {
      inFlight++;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, ms));
      inFlight--;
      return ms * 2;
    });
    assert.deepEqual(out, [60, 20, 40, 10, 2]);
    assert.equal(peak, 2);
  });

  it('an empty list needs no calls', async () => {
    assert.deepEqual(await mapBounded([], 3, () => Promise.reject(new Error('called'))), []);
  });
});

describe('HostWork: long queues on one host start in the order given', () => {
  // The queue is taken from a moving head and compacted now and then: its order must survive that.
  const rows = [
    { name: 'a queue shorter than a compaction', queued: 100, perHost: 1, requeueEvery: 0 },
    { name: 'a queue several compactions long', queued: 5000, perHost: 8, requeueEvery: 0 },
    { name: 'pieces queued while earlier ones run, across compactions', queued: 3000, perHost: 3, requeueEvery: 7 },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      const hw = new HostWork(1, row.perHost);
      const started: number[] = [];
      const expected: number[] = [];
      const all: Promise<unknown>[] = [];
      let next = 0;
      const queue = (): void => {
        const k = next++;
        expected.push(k);
        all.push(
          hw.run('a', async () => {
            started.push(k);
            if (row.requeueEvery > 0 && k % row.requeueEvery === 0 && next < row.queued * 2) queue();
          }),
        );
      };
      for (let k = 0; k < row.queued; k++) queue();
      while (all.length > 0) await Promise.all(all.splice(0));
      assert.deepEqual(started, expected);
    });
  }
});
