import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom } from '../../src/core/random.js';
import { resolveStrategy } from '../../src/core/strategy.js';
import {
  addCosts,
  costsText,
  FLEET,
  median,
  Overlaps,
  readCosts,
  runLine,
  typicalCosts,
  type CostSample,
  type Overlap,
  type StepCosts,
} from '../../src/core/stepCosts.js';
import { deploy } from '../../src/engine/rollout.js';
import { StepCostRecorder } from '../../src/engine/stepCosts.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { calibratedTimings, simulatedFleet, simulateRollout, type SimulationTimings } from '../../src/sim/simulate.js';
import { pricedTimings } from '../../src/cli/costs.js';
import type { Fleet } from '../../src/config/load.js';

const AT = '2026-12-03T06:00:00.000Z';
const run = (place: string, ms: number): CostSample => ({ kind: 'run', place, ms });

describe('step costs: what the state keeps', () => {
  const rows: { name: string; previous: unknown; samples: CostSample[]; keep?: number; want: StepCosts | undefined }[] = [
    { name: 'nothing before, nothing now: nothing kept', previous: undefined, samples: [], want: undefined },
    {
      name: 'a first deploy',
      previous: undefined,
      samples: [run('h1', 300), run('h1', 320.4), { kind: 'change', place: 'lb1', ms: 250 }],
      want: { deploys: 1, lastAt: AT, samples: { run: { h1: [300, 320] }, change: { lb1: [250] } }, inFlight: { h1: [1, 1] }, busy: { lb1: [1] } },
    },
    {
      name: 'a change keeps the starts beside it, aligned with its samples',
      previous: { deploys: 1, lastAt: AT, samples: { change: { lb1: [250] } }, busy: { lb1: [1] } },
      samples: [{ kind: 'change', place: 'lb1', ms: 700, inFlight: 3 }],
      want: { deploys: 2, lastAt: AT, samples: { change: { lb1: [250, 700] } }, busy: { lb1: [1, 3] } },
    },
    {
      name: 'a deploy adds its samples after the kept ones, and only the newest are kept',
      previous: { deploys: 3, lastAt: '2026-12-01T00:00:00.000Z', samples: { run: { h1: [1, 2, 3] }, stop: { h2: [900] } } },
      samples: [run('h1', 4), run('h1', 5)],
      keep: 4,
      want: { deploys: 4, lastAt: AT, samples: { run: { h1: [2, 3, 4, 5] }, stop: { h2: [900] } }, inFlight: { h1: [1, 1, 1, 1] } },
    },
    {
      name: 'a deploy without samples (nothing to do) changes nothing',
      previous: { deploys: 2, lastAt: AT, samples: { run: { h1: [7] } } },
      samples: [],
      want: { deploys: 2, lastAt: AT, samples: { run: { h1: [7] } } },
    },
    {
      name: 'state from elsewhere: what is not a finite, non-negative number is dropped',
      previous: { deploys: 1, lastAt: AT, samples: { run: { h1: [1, 'x', -3, null, 2] }, bogus: { h1: [1] }, stop: 'no' } },
      samples: [{ kind: 'stop', place: 'h1', ms: Number.NaN }, run('h2', 9)],
      want: { deploys: 2, lastAt: AT, samples: { run: { h1: [1, 2], h2: [9] } }, inFlight: { h1: [1, 1], h2: [1] } },
    },
    {
      name: 'unreadable state is started afresh',
      previous: { deploys: 'many', samples: {} },
      samples: [run('h1', 3)],
      want: { deploys: 1, lastAt: AT, samples: { run: { h1: [3] } }, inFlight: { h1: [1] } },
    },
  ];
  for (const r of rows) it(r.name, () => assert.deepEqual(addCosts(r.previous, r.samples, AT, r.keep), r.want));

  it('each create + start keeps the starts in flight beside it, aligned with the samples; unknown counts are 1', () => {
    const previous = { deploys: 1, lastAt: AT, samples: { run: { h1: [400, 410] } } };
    const c = addCosts(
      previous,
      [
        { kind: 'run', place: 'h1', ms: 700, inFlight: 3 },
        { kind: 'run', place: 'h2', ms: 500 },
      ],
      AT,
      2,
    )!;
    assert.deepEqual(c.samples.run, { h1: [410, 700], h2: [500] });
    assert.deepEqual(c.inFlight, { h1: [1, 3], h2: [1] });
    assert.deepEqual(readCosts({ ...c, inFlight: { h1: [1], h2: [0] } })?.inFlight, undefined, 'counts that do not line up, or are not counts, are dropped');
  });

  const line: { name: string; run: Record<string, number[]>; inFlight?: Record<string, number[]>; want: ReturnType<typeof runLine> }[] = [
    { name: 'starts alone only: no line (the median says it all)', run: { h1: [400, 500] }, want: undefined },
    { name: 'starts beside others only: no line', run: { h1: [700, 800] }, inFlight: { h1: [2, 3] }, want: undefined },
    {
      name: 'alone and beside others: the median alone, and what each other start adds',
      run: { h1: [400, 420, 380, 500, 600, 700] },
      inFlight: { h1: [1, 1, 1, 2, 3, 4] },
      want: { aloneMs: 400, queuedMs: 100 },
    },
    {
      name: 'starts beside others that were no slower: nothing added (never below 0)',
      run: { h1: [500, 400, 420] },
      inFlight: { h1: [1, 2, 3] },
      want: { aloneMs: 500, queuedMs: 0 },
    },
  ];
  it('create + start with only starts beside others and a start alone assumed: what each other one added, by the median', () => {
    assert.deepEqual(runLine({ deploys: 1, lastAt: AT, samples: { run: { h1: [1100, 1300, 800] } }, inFlight: { h1: [4, 4, 3] } }, 500), {
      aloneMs: 500,
      queuedMs: 200,
    });
  });
  for (const r of line)
    it(`create + start against the starts in flight: ${r.name}`, () =>
      assert.deepEqual(runLine({ deploys: 1, lastAt: AT, samples: { run: r.run }, ...(r.inFlight ? { inFlight: r.inFlight } : {}) }), r.want));

  it('readCosts refuses what is not costs', () => {
    for (const v of [null, 3, 'x', { deploys: 0, lastAt: AT, samples: {} }, { deploys: 1, lastAt: 'yesterday', samples: {} }, { deploys: 1, lastAt: AT }])
      assert.equal(readCosts(v), undefined, JSON.stringify(v));
  });

  it('the median of odd and even counts', () => {
    assert.equal(median([5, 1, 3]), 3);
    assert.equal(median([4, 1, 3, 2]), 2.5);
  });

  it('typical costs: the median of each kind over all its places, with the counts; the text names deploys and the last', () => {
    const c: StepCosts = { deploys: 12, lastAt: AT, samples: { run: { h1: [100, 300], h2: [200] }, change: { lb1: [400, 600] }, verify: { fleet: [50] } } };
    assert.deepEqual(typicalCosts(c), { runMs: 200, changeMs: 500, verifyMs: 50, counts: { run: 3, change: 2, verify: 1 } });
    assert.equal(costsText(c), 'costs from 12 deploys, last on 2026-12-03 06:00 UTC');
  });
});

describe("step costs: read off a rollout's events", () => {
  it("create+start, start to ready, stop and each load balancer's change; a second readiness is not a warm-up", () => {
    let now = 0;
    const r = new StepCostRecorder({ now: () => now, sleep: async () => {} } as never);
    const at = (t: number, e: RolloutEvent) => {
      now = t;
      r.see(e);
    };
    at(300, { type: 'started', name: 'n1', host: 'h1', ms: 280 });
    at(2600, { type: 'ready', name: 'n1' });
    at(2700, { type: 'upstream', action: 'enable', down: [], up: ['n1'], reloads: 1, ms: 90, balancers: { a: 90, b: 60 } });
    at(5000, { type: 'ready', name: 'n1' });
    at(6000, { type: 'stopped', name: 'o1', host: 'h2', ms: 1200 });
    at(6100, { type: 'started', name: 'n2', host: 'h2' });
    at(6200, { type: 'upstream', action: 'restore', down: [], up: [], reloads: 1 });
    r.fixed('verify', 40);
    assert.deepEqual(r.samples, [
      { kind: 'run', place: 'h1', ms: 280 },
      { kind: 'ready', place: 'h1', ms: 2300, inFlight: 1 },
      { kind: 'change', place: 'a', ms: 90 },
      { kind: 'change', place: 'b', ms: 60 },
      { kind: 'stop', place: 'h2', ms: 1200 },
      { kind: 'verify', place: 'fleet', ms: 40 },
    ]);
  });

  it("the dynamic mode's drains that ended on idle are a drain cost; one cut at drainSeconds is not", () => {
    const r = new StepCostRecorder({ now: () => 0, sleep: async () => {} } as never);
    r.see({ type: 'drained', name: 'o1', reason: 'idle', ms: 180 });
    r.see({ type: 'drained', name: 'o2', reason: 'drainSeconds', ms: 2000 });
    assert.deepEqual(r.samples, [{ kind: 'drain', place: 'fleet', ms: 180 }]);
  });

  it('a simulated rollout yields the costs it was given: the controller measures what the ports cost', async () => {
    const s = resolveStrategy({ replicas: 3, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } });
    const r = await simulateRollout(s, { startupMs: 2000, drainMs: 500, stopMs: 700, minReadyMs: 0, jitter: 0, seed: 1, runMs: 300, reloadMs: 150 });
    const t = typicalCosts(addCosts(undefined, r.deploy.costs ?? [], AT)!);
    assert.equal(t.runMs, 300);
    assert.equal(t.stopMs, 700);
    assert.equal(t.changeMs, 150);
    // Ready is seen at the first probe (every 250 ms) at or after the warm-up.
    assert.ok(t.readyMs! >= 2000 && t.readyMs! <= 2250, String(t.readyMs));
    assert.equal(t.prepareMs, undefined, 'simulate has no preflight');
  });

  it('a change beside starts costs more: the controller counts the starts that shared the engine with it, and the line finds the slope again', async () => {
    // 0/2 with TerminationStarted: each wave's mark-down goes with its two starts; the last changes have none beside them.
    const s = resolveStrategy({ replicas: 6, strategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: 2 } } });
    const r = await simulateRollout(s, {
      startupMs: 1000,
      drainMs: 200,
      stopMs: 300,
      minReadyMs: 0,
      jitter: 0,
      seed: 1,
      runMs: 300,
      reloadMs: 250,
      reloadQueuedMs: 200,
    });
    const changes = (r.deploy.costs ?? []).filter((c) => c.kind === 'change').map((c) => [c.inFlight, c.ms]);
    assert.ok(
      changes.some(([k, ms]) => k === 3 && ms === 650),
      `a mark-down beside its wave's two starts: ${JSON.stringify(changes)}`,
    );
    assert.ok(
      changes.some(([k, ms]) => k === 1 && ms === 250),
      `a change with no start beside it: ${JSON.stringify(changes)}`,
    );
    const t = typicalCosts(addCosts(undefined, r.deploy.costs ?? [], AT)!);
    assert.deepEqual([t.changeMs, t.changeQueuedMs], [250, 200]);
    // Priced back: the same costs predict the same rollout.
    const again = await simulateRollout(s, calibratedTimings({ startupMs: 1000, drainMs: 200, stopMs: 300, minReadyMs: 0, jitter: 0, seed: 1 }, t));
    assert.ok(Math.abs(again.durationMs - r.durationMs) <= 300, `${again.durationMs} against ${r.durationMs}`);
  });

  it('every change counts exactly the starts that shared the engine with it: in flight when it began, or begun before it ended', async () => {
    const rows = [
      { name: '0/2 on 6, TerminationStarted', s: resolveStrategy({ replicas: 6, strategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: 2 } } }) },
      { name: '2/2 on 5', s: resolveStrategy({ replicas: 5, strategy: { rollingUpdate: { maxSurge: 2, maxUnavailable: 2 } } }) },
      { name: '1/0 on 4', s: resolveStrategy({ replicas: 4, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }) },
      {
        name: '25%/25% on 8 behind two load balancers',
        s: resolveStrategy({ replicas: 8, strategy: { rollingUpdate: { maxSurge: '25%', maxUnavailable: '25%' } } }),
        lbs: 2,
      },
    ];
    for (const row of rows) {
      for (const seed of [1, 2, 3, 4, 5]) {
        const starts: [number, number][] = [];
        const changes: { from: number; to: number; beside: number }[] = [];
        await simulateRollout(
          row.s,
          { startupMs: 1500, drainMs: 300, stopMs: 400, minReadyMs: 0, jitter: 0.6, seed, runMs: 300, reloadMs: 250, reloadQueuedMs: 120 },
          {
            ...(row.lbs ? { loadBalancers: row.lbs } : {}),
            events: (e, at) => {
              if (e.type === 'started') starts.push([at - (e.ms ?? 0), at]);
              if (e.type === 'upstream' && e.beside !== undefined) changes.push({ from: at - (e.ms ?? 0), to: at, beside: e.beside });
            },
          },
        );
        assert.ok(changes.length > 0, `${row.name}, seed ${seed}: changes seen`);
        for (const c of changes) {
          // Ties on the virtual clock may fall either way; strictly inside or across counts for sure.
          const sure = starts.filter(([b, e]) => (b < c.from && e > c.from) || (b > c.from && b < c.to)).length;
          const maybe = starts.filter(([b, e]) => (b <= c.from && e >= c.from) || (b >= c.from && b <= c.to)).length;
          assert.ok(
            Number.isInteger(c.beside) && c.beside >= sure && c.beside <= maybe,
            `${row.name}, seed ${seed}: the change ${c.from}-${c.to} counted ${c.beside} starts beside it; between ${sure} and ${maybe} ran beside it`,
          );
        }
      }
    }
  });

  it('prepare runs from when the deploy began for its caller to the first decision, not from preflight', async () => {
    const s = resolveStrategy({ replicas: 2, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } });
    const { clock, fleet, deps } = simulatedFleet(s, { startupMs: 1000, drainMs: 0, stopMs: 100, minReadyMs: 0, jitter: 0, seed: 1 });
    // The caller (runManaged, an experiment's runner) began 1,234 ms before it called deploy(): the lock, the state, its deps.
    const r = await clock.run(deploy(fleet, deps, { startedAtMs: clock.now() - 1234 }));
    assert.deepEqual(
      (r.costs ?? []).filter((c) => c.kind === 'prepare'),
      [{ kind: 'prepare', place: FLEET, ms: 1234 }],
    );
    const plain = await simulateRollout(s, { startupMs: 1000, drainMs: 0, stopMs: 100, minReadyMs: 0, jitter: 0, seed: 1 });
    assert.deepEqual(
      (plain.deploy.costs ?? []).filter((c) => c.kind === 'prepare'),
      [],
      'a simulation told nothing records none',
    );
  });

  it('starts side by side on one host all slow down together, each by what every other one adds; the line finds it again', async () => {
    const timings = { startupMs: 1000, drainMs: 500, stopMs: 700, minReadyMs: 0, jitter: 0, seed: 1, runMs: 300, runQueuedMs: 120 };
    const together = await simulateRollout(resolveStrategy({ replicas: 4, strategy: { rollingUpdate: { maxSurge: '100%', maxUnavailable: 0 } } }), timings);
    const alone = await simulateRollout(resolveStrategy({ replicas: 2, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }), timings);
    const runs = (r: typeof alone) => (r.deploy.costs ?? []).filter((c) => c.kind === 'run');
    assert.deepEqual(
      runs(together).map((c) => [c.inFlight, c.ms]),
      [
        [4, 660],
        [4, 660],
        [4, 660],
        [4, 660],
      ],
    );
    assert.deepEqual(
      runs(alone).map((c) => [c.inFlight, c.ms]),
      [
        [1, 300],
        [1, 300],
      ],
    );
    const t = typicalCosts(addCosts(undefined, [...runs(alone), ...runs(together)], AT)!);
    assert.deepEqual([t.runMs, t.runQueuedMs], [300, 120]);
  });

  it('Overlaps: each item keeps the most in progress at once while it ran, per key', () => {
    const o = new Overlaps();
    const a = o.begin('h1');
    const b = o.begin('h1');
    const other = o.begin('h2');
    o.end('h1', a);
    const c = o.begin('h1');
    o.end('h1', b);
    o.end('h1', c);
    o.end('h2', other);
    assert.deepEqual([a.max, b.max, c.max, other.max], [2, 2, 2, 1]);
  });

  // Against the pass it replaces: every begin raising each live item's count.
  const overlapRows = [
    { name: 'mostly begins', seed: 1, steps: 400, beginShare: 0.7 },
    { name: 'begins and ends alike', seed: 2, steps: 600, beginShare: 0.5 },
    { name: 'mostly ends (runs that empty and start again)', seed: 3, steps: 600, beginShare: 0.35 },
  ];
  for (const row of overlapRows) {
    it(`Overlaps, ${row.name}: every item's max, read while it runs and after, is the most in progress at once while it ran`, () => {
      const rand = seededRandom(row.seed);
      const o = new Overlaps();
      const live = new Map<string, Set<{ item: Overlap; max: number }>>();
      const all: { key: string; item: Overlap; ref: { item: Overlap; max: number }; ended: boolean }[] = [];
      for (let k = 0; k < row.steps; k++) {
        const key = rand() < 0.8 ? 'h1' : 'h2';
        const running = all.filter((x) => !x.ended && x.key === key);
        if (rand() < row.beginShare || running.length === 0) {
          const item = o.begin(key);
          const set = live.get(key) ?? new Set();
          live.set(key, set);
          const ref = { item, max: 0 };
          set.add(ref);
          for (const x of set) x.max = Math.max(x.max, set.size);
          all.push({ key, item, ref, ended: false });
        } else {
          const x = running[Math.floor(rand() * running.length)]!;
          o.end(key, x.item);
          if (rand() < 0.1) o.end(key, x.item);
          live.get(key)?.delete(x.ref);
          x.ended = true;
        }
        for (const x of all) assert.equal(x.item.max, x.ref.max);
      }
    });
  }
});

describe('step costs: simulate priced with them', () => {
  const base: SimulationTimings = { startupMs: 3000, drainMs: 2000, stopMs: 1000, minReadyMs: 0, jitter: 0, seed: 1, periodMs: 250 };
  it('each recorded kind replaces its nominal value; start to ready loses half a probe period; fixed costs add up', () => {
    assert.deepEqual(
      calibratedTimings(base, { runMs: 310, readyMs: 2425, stopMs: 1500, changeMs: 800, prepareMs: 900, verifyMs: 100, reportMs: 300, counts: {} }),
      { ...base, runMs: 310, startupMs: 2300, stopMs: 1500, reloadMs: 800, testMs: 0, fixedMs: 1300 },
    );
    assert.deepEqual(calibratedTimings(base, { counts: {} }), base);
  });

  it("a recorded drain prices the dynamic mode's idle drains (half a count poll off); in reload mode it prices nothing", () => {
    assert.equal(calibratedTimings({ ...base, idleDrainMs: 200 }, { drainMs: 125, counts: {} }).idleDrainMs, 100);
    assert.equal(calibratedTimings(base, { drainMs: 125, counts: {} }).idleDrainMs, undefined);
  });

  it('a calibrated prediction is the rollout the recorded costs make: a run with those costs measures what it predicts', async () => {
    const s = resolveStrategy({ replicas: 5, strategy: { rollingUpdate: { maxSurge: 2, maxUnavailable: 2 } } });
    // "Measured": a simulated fleet whose Docker and nginx cost what a busy machine's do.
    const real = await simulateRollout(s, { ...base, startupMs: 2000, stopMs: 1500, runMs: 400, reloadMs: 1300 });
    const costs = addCosts(undefined, real.deploy.costs ?? [], AT)!;
    const nominal = await simulateRollout(s, { ...base, startupMs: 2000, stopMs: 1500 });
    const calibrated = await simulateRollout(s, calibratedTimings({ ...base, startupMs: 2000, stopMs: 1500 }, typicalCosts(costs)));
    const ratio = real.durationMs / calibrated.durationMs;
    assert.ok(real.durationMs / nominal.durationMs > 1.3, `nominal is off: ${real.durationMs} vs ${nominal.durationMs}`);
    assert.ok(ratio > 0.95 && ratio < 1.05, `calibrated ${calibrated.durationMs} vs measured ${real.durationMs}`);
  });
});

describe('step costs: where simulate and plan take their timings from', () => {
  const fleet = {
    drainSeconds: 1,
    minReadySeconds: 0,
    probes: { readiness: { periodMs: 200 } },
    hosts: [{ name: 'h1' }],
    loadBalancers: [],
  } as unknown as Fleet;
  const withCosts = async () => ({
    state: {
      service: 's',
      nextRevision: 2,
      revisions: [],
      costs: { deploys: 2, lastAt: AT, samples: { run: { h1: [400] }, ready: { h1: [2100] }, change: { lb: [700] } } },
    },
  });
  const rows: {
    name: string;
    o: Parameters<typeof pricedTimings>[0];
    fleet?: Fleet;
    read?: Parameters<typeof pricedTimings>[2];
    want: { source: string; text: RegExp; startupMs: number; runMs?: number; reloadMs?: number; idleDrainMs?: number };
  }[] = [
    { name: 'no fleet file: nominal', o: {}, want: { source: 'nominal', text: /no fleet file/, startupMs: 3000 } },
    {
      name: 'a fleet with recorded costs',
      o: {},
      fleet,
      read: withCosts,
      want: { source: 'recorded', text: /costs from 2 deploys, last on 2026-12-03 06:00 UTC/, startupMs: 2000, runMs: 400, reloadMs: 700 },
    },
    {
      name: 'a flag wins over a recorded cost',
      o: { startup: 1.5 },
      fleet,
      read: withCosts,
      want: { source: 'recorded', text: /costs from 2/, startupMs: 1500, runMs: 400, reloadMs: 700 },
    },
    { name: '--costs nominal', o: { costs: 'nominal' }, fleet, read: withCosts, want: { source: 'nominal', text: /--costs nominal/, startupMs: 3000 } },
    {
      name: 'a fleet never deployed',
      o: {},
      fleet,
      read: async () => ({ state: undefined }),
      want: { source: 'nominal', text: /no deploy of this fleet has recorded any yet/, startupMs: 3000 },
    },
    {
      name: 'a dynamic-mode fleet: drains end when idle, priced by its recorded drains',
      o: {},
      fleet: { ...fleet, loadBalancers: [{ nginx: { mode: 'dynamic' } }] } as unknown as Fleet,
      read: async () => ({
        state: { service: 's', nextRevision: 2, revisions: [], costs: { deploys: 1, lastAt: AT, samples: { drain: { fleet: [125, 175, 300] } } } },
      }),
      want: { source: 'recorded', text: /costs from 1 deploy/, startupMs: 3000, idleDrainMs: 150 },
    },
    {
      name: 'a dynamic-mode fleet never deployed: the nominal idle drain',
      o: {},
      fleet: { ...fleet, loadBalancers: [{ nginx: { mode: 'dynamic' } }] } as unknown as Fleet,
      read: async () => ({ state: undefined }),
      want: { source: 'nominal', text: /no deploy/, startupMs: 3000, idleDrainMs: 200 },
    },
    {
      name: 'state that cannot be read says why',
      o: {},
      fleet,
      read: async () => ({ error: 'connect ENOENT /var/run/docker.sock' }),
      want: { source: 'nominal', text: /cannot read the fleet's state: connect ENOENT/, startupMs: 3000 },
    },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const p = await pricedTimings(r.o, r.fleet, r.read);
      assert.equal(p.source, r.want.source);
      assert.match(p.text, r.want.text);
      assert.equal(p.timings.startupMs, r.want.startupMs);
      assert.equal(p.timings.runMs, r.want.runMs);
      assert.equal(p.timings.reloadMs, r.want.reloadMs);
      assert.equal(p.timings.idleDrainMs, r.want.idleDrainMs);
    });
  }

  it('--costs recorded without a fleet file is a field error', async () => {
    await assert.rejects(pricedTimings({ costs: 'recorded' }, undefined), (e: Error) => /--costs/.test(JSON.stringify(e)) || /--costs/.test(e.message));
  });
});
