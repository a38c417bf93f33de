import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy } from '../../src/core/strategy.js';
import { addCosts, contentionLine, readCosts, typicalCosts, type CostSample, type StepCosts } from '../../src/core/stepCosts.js';
import { placeCosts, placesDiffer, type PlaceCosts } from '../../src/core/placeCosts.js';
import { simulateRollout, type SimulationTimings } from '../../src/sim/simulate.js';
import { placesText, pricedTimings, typicalText, type StateRead } from '../../src/cli/costs.js';
import { predictCalibrated } from '../../src/experiment/predict.js';
import type { Fleet } from '../../src/config/load.js';

const AT = '2026-12-03T06:00:00.000Z';
const costs = (samples: StepCosts['samples'], more: Partial<StepCosts> = {}): StepCosts => ({ deploys: 3, lastAt: AT, samples, ...more });
const fleetOf = (hosts: string[], lbs = 0): Fleet =>
  ({
    drainSeconds: 1,
    minReadySeconds: 0,
    probes: { readiness: { periodMs: 200 } },
    hosts: hosts.map((name) => ({ name })),
    loadBalancers: Array.from({ length: lbs }, () => ({ nginx: { mode: 'reload' } })),
  }) as unknown as Fleet;
const byPlace = (xs: readonly CostSample[], kind: CostSample['kind']) => {
  const out: Record<string, number[]> = {};
  for (const x of xs) if (x.kind === kind) (out[x.place] ??= []).push(x.ms);
  return out;
};
const reading = (c: StepCosts, loadBalancers?: string[]) => async (): Promise<StateRead> => ({
  state: { service: 's', nextRevision: 2, revisions: [], costs: c } as never,
  loadBalancers,
});

describe('place costs: each host and load balancer priced with its own samples', () => {
  const rows: { name: string; c: StepCosts; hosts: string[]; lbs?: string[]; want: Partial<Record<string, Record<string, unknown>>>; differ: boolean }[] = [
    {
      name: 'a slow host keeps its own stop; the median would price both at 1.1 s',
      c: costs({ stop: { a: [200, 200], b: [2000, 2000] } }),
      hosts: ['a', 'b'],
      want: { a: { stopMs: 200, own: ['stop'] }, b: { stopMs: 2000, own: ['stop'] } },
      differ: true,
    },
    {
      name: 'a host with no samples (added since) falls back to the all-places median',
      c: costs({ stop: { a: [200], b: [2000, 2000] }, ready: { a: [1000], b: [3000] } }),
      hosts: ['a', 'b', 'c'],
      want: { c: { stopMs: 2000, readyMs: 2000, own: [] }, b: { stopMs: 2000, readyMs: 3000, own: ['ready', 'stop'] } },
      differ: true,
    },
    {
      name: "a host whose starts all ran beside others: its own speed with the fleet's slope taken off",
      c: costs({ run: { a: [300, 400, 500], b: [900] } }, { inFlight: { a: [1, 2, 3], b: [3] } }),
      hosts: ['a', 'b'],
      // a's own line (100 per start beside it); b has none: 900 less twice the slope over every host's starts (209).
      want: { a: { runMs: 300, runQueuedMs: 100, own: ['run'] }, b: { runMs: 482, runQueuedMs: 209, own: ['run'] } },
      differ: true,
    },
    {
      name: 'hosts that cost the same: nothing to say beyond the medians',
      c: costs({ stop: { a: [500], b: [500] } }),
      hosts: ['a', 'b'],
      want: { a: { stopMs: 500 }, b: { stopMs: 500 } },
      differ: false,
    },
    {
      name: 'a load balancer with its own changes, and one without (the median)',
      c: costs({ change: { lb1: [300], lb2: [1500] } }),
      hosts: ['a'],
      lbs: ['lb1', 'lb2', 'lb3'],
      want: { lb1: { changeMs: 300, own: ['change'] }, lb2: { changeMs: 1500 }, lb3: { changeMs: 900, own: [] } },
      differ: true,
    },
    {
      name: 'a load balancer whose changes beside starts cost more: its own line (a change alone, and what each start beside it adds)',
      c: costs({ change: { lb1: [300, 300, 700, 700] } }, { busy: { lb1: [1, 1, 3, 3] } }),
      hosts: ['a'],
      lbs: ['lb1'],
      want: { lb1: { changeMs: 300, changeQueuedMs: 200, own: ['change'] } },
      differ: false,
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const p = placeCosts(r.c, r.hosts, r.lbs ?? [], typicalCosts(r.c));
      const all: Record<string, object> = { ...p.hosts, ...p.loadBalancers };
      for (const [place, want] of Object.entries(r.want))
        for (const [k, v] of Object.entries(want ?? {})) assert.deepEqual((all[place] as Record<string, unknown>)[k], v, `${place}.${k}`);
      assert.equal(placesDiffer(p), r.differ);
    });
  }
});

describe('start to ready against the warm-ups at once', () => {
  it('ready samples with warm-ups at once 1 and 4 give a line; typical costs take it', () => {
    const c = addCosts(
      undefined,
      [1000, 1020, 980]
        .map((ms): CostSample => ({ kind: 'ready', place: 'h1', ms, inFlight: 1 }))
        .concat([1600, 1600, 1600, 1600].map((ms) => ({ kind: 'ready', place: 'h1', ms, inFlight: 4 }))),
      AT,
    )!;
    assert.deepEqual(c.warming, { h1: [1, 1, 1, 4, 4, 4, 4] });
    assert.deepEqual(contentionLine(c, 'ready'), { aloneMs: 1000, queuedMs: 200 });
    const t = typicalCosts(c);
    assert.deepEqual([t.readyMs, t.readyQueuedMs], [1000, 200]);
    assert.match(typicalText(t), /start to ready 1\.00 s, \+ per warm-up beside it 0\.20 s/);
  });

  const stateRows: { name: string; v: unknown; want: StepCosts['warming'] }[] = [
    {
      name: 'an old state without warm-up counts reads (each warm-up taken as alone)',
      v: { deploys: 1, lastAt: AT, samples: { ready: { h1: [900, 950] } } },
      want: undefined,
    },
    {
      name: 'counts aligned with the ready samples are kept',
      v: { deploys: 1, lastAt: AT, samples: { ready: { h1: [900, 950] } }, warming: { h1: [1, 3] } },
      want: { h1: [1, 3] },
    },
    {
      name: 'counts that do not line up are dropped, host by host',
      v: { deploys: 1, lastAt: AT, samples: { ready: { h1: [900, 950], h2: [700] } }, warming: { h1: [1], h2: [2] } },
      want: { h2: [2] },
    },
    { name: 'what is not a count is dropped', v: { deploys: 1, lastAt: AT, samples: { ready: { h1: [900] } }, warming: { h1: [0] } }, want: undefined },
  ];
  for (const r of stateRows) {
    it(r.name, () => {
      const c = readCosts(r.v)!;
      assert.deepEqual(c.samples.ready?.h1, [900, 950].slice(0, c.samples.ready?.h1?.length));
      assert.deepEqual(c.warming, r.want);
    });
  }

  it('an old state without counts gains aligned counts as a deploy adds ready samples', () => {
    const c = addCosts({ deploys: 1, lastAt: AT, samples: { ready: { h1: [900, 950] } } }, [{ kind: 'ready', place: 'h1', ms: 1500, inFlight: 3 }], AT)!;
    assert.deepEqual(c.warming, { h1: [1, 1, 3] });
  });

  const base: SimulationTimings = { startupMs: 1000, drainMs: 200, stopMs: 100, minReadyMs: 0, jitter: 0, seed: 1, startupQueuedMs: 300 };
  const readies = (r: Awaited<ReturnType<typeof simulateRollout>>) => (r.deploy.costs ?? []).filter((c) => c.kind === 'ready').map((c) => [c.inFlight, c.ms]);

  it('simulate: 4 starting together on one host warm up longer than 1 alone; the recorder counts them', async () => {
    const together = await simulateRollout(resolveStrategy({ replicas: 4, strategy: { rollingUpdate: { maxSurge: '100%', maxUnavailable: 0 } } }), base);
    const alone = await simulateRollout(resolveStrategy({ replicas: 1, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }), base);
    // 1000 + 3 × 300 warming, seen at the next probe (every 250 ms): the line finds 333 per warm-up beside it, the probe's wait included.
    assert.deepEqual(readies(together), [
      [4, 2000],
      [4, 2000],
      [4, 2000],
      [4, 2000],
    ]);
    assert.deepEqual(readies(alone), [[1, 1000]]);
    const t = typicalCosts(addCosts(undefined, [...together.deploy.costs!, ...alone.deploy.costs!], AT)!);
    assert.deepEqual([t.readyMs, t.readyQueuedMs], [1000, 333]);
  });

  it('simulate: a warm-up that starts while others warm slows them too (each priced by the most at once while it warmed)', async () => {
    const r = await simulateRollout(resolveStrategy({ replicas: 3, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 1 } } }), {
      ...base,
      startupQueuedMs: 300,
    });
    for (const [k, ms] of readies(r)) assert.ok((ms as number) >= 1000 + 300 * ((k as number) - 1), `${String(k)} at once: ${String(ms)} ms`);
  });

  it('without warm-up contention recorded, simulate is as before (no startupQueuedMs key)', async () => {
    const p = await pricedTimings({}, fleetOf(['a']), reading(costs({ ready: { a: [1100] } })));
    assert.equal(p.timings.startupQueuedMs, undefined);
    assert.equal(p.timings.startupMs, 1000);
  });

  it("an experiment's first deploy (all warming at once) prices a rolling wave's warm-up near alone, not at the contended median", async () => {
    const s = resolveStrategy({ replicas: 6, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } });
    const t = { startupMs: 1000, drainMs: 200, stopMs: 100, minReadyMs: 0 };
    // Offsets beyond the nominal warm-up: 6 at once took 1.1 s more each.
    const first: CostSample[] = Array.from({ length: 6 }, () => ({ kind: 'ready', place: 'h1', ms: 1100, inFlight: 6 }));
    const contended = await predictCalibrated(s, t, first, 200);
    const median = await predictCalibrated(
      s,
      t,
      first.map((c) => ({ ...c, inFlight: 1 })),
      200,
    );
    assert.ok(contended!.durationMs < median!.durationMs - 5000, `${contended!.durationMs} vs ${median!.durationMs}`);
  });
});

describe('simulate -f: each host priced with its own costs', () => {
  const strategy = resolveStrategy({ replicas: 4, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } });
  const fast = costs({ stop: { a: [200, 200], b: [200, 200] }, ready: { a: [1100], b: [1100] } });
  const slow = costs({ stop: { a: [200, 200], b: [2000, 2000] }, ready: { a: [1100], b: [1100] } });
  const stops = async (c: StepCosts, o: Parameters<typeof pricedTimings>[0] = {}) => {
    const p = await pricedTimings(o, fleetOf(['a', 'b']), reading(c));
    const r = await simulateRollout(strategy, p.timings, p.setup);
    return { p, r, byHost: byPlace(r.deploy.costs ?? [], 'stop') };
  };

  it("a slow host (b's stop 2 s, a's 0.2 s) makes the rollout longer than an all-fast fleet's, and only b's instances stop slow", async () => {
    const f = await stops(fast);
    const s = await stops(slow);
    assert.ok(s.r.durationMs > f.r.durationMs, `${s.r.durationMs} vs ${f.r.durationMs}`);
    assert.deepEqual(s.byHost.a, [200, 200]);
    assert.deepEqual(s.byHost.b, [2000, 2000]);
    assert.deepEqual(f.byHost.b, [200, 200]);
  });

  it("a flag wins over every host's own figure", async () => {
    const s = await stops(slow, { stop: 0.5, startup: 1 });
    assert.deepEqual([...(s.byHost.a ?? []), ...(s.byHost.b ?? [])], [500, 500, 500, 500]);
    assert.deepEqual(s.p.timings.hosts, { a: {}, b: {} });
  });

  it('load balancers priced by their recorded names; one without samples takes the median', async () => {
    const c = costs({ change: { 'nginx lb1 on a': [100], 'nginx lb2 on a': [900] } });
    const p = await pricedTimings({}, fleetOf(['a'], 3), reading(c, ['nginx lb1 on a', 'nginx lb2 on a', 'nginx lb3 on a']));
    assert.deepEqual(p.timings.loadBalancers, {
      'nginx lb1 on a': { reloadMs: 100 },
      'nginx lb2 on a': { reloadMs: 900 },
      'nginx lb3 on a': { reloadMs: 500 },
    });
    assert.deepEqual(p.setup?.loadBalancerNames, ['nginx lb1 on a', 'nginx lb2 on a', 'nginx lb3 on a']);
    const r = await simulateRollout(strategy, p.timings, p.setup);
    const changes = byPlace(r.deploy.costs ?? [], 'change');
    assert.deepEqual(Object.keys(changes).sort(), ['nginx lb1 on a', 'nginx lb2 on a', 'nginx lb3 on a']);
    assert.equal(changes['nginx lb1 on a']?.[0], 100);
  });

  it('what simulate -f prints for two hosts of different costs (docs/plan-and-simulate.md shows it)', async () => {
    const c = costs(
      {
        run: { a: [300, 310, 500], b: [320, 330] },
        ready: { a: [1100, 1700], b: [2600, 3200] },
        stop: { a: [200, 220], b: [2000, 2100] },
        change: { 'nginx lb on a': [400] },
      },
      { deploys: 3, lastAt: '2026-12-03T06:41:00.000Z', inFlight: { a: [1, 1, 2], b: [1, 1] }, warming: { a: [1, 2], b: [1, 2] } },
    );
    const typical = typicalCosts(c);
    const p: PlaceCosts = placeCosts(c, ['a', 'b', 'c'], ['nginx lb on a'], typical);
    assert.deepEqual(
      [`  ${typicalText(typical)} (medians)`, ...placesText(p).map((l) => `  ${l}`)],
      [
        '  create+start 0.32 s, + per start beside it 0.18 s, start to ready 1.85 s, + per warm-up beside it 0.60 s, stop 1.11 s, load-balancer change 0.40 s (medians)',
        '  host a: create+start 0.30 s + 0.20 s per start beside it, start to ready 1.10 s + 0.60 s per warm-up beside it, stop 0.21 s',
        '  host b: create+start 0.33 s + 0.18 s per start beside it, start to ready 2.60 s + 0.60 s per warm-up beside it, stop 2.05 s',
        '  host c: create+start 0.32 s + 0.18 s per start beside it (median), start to ready 1.85 s + 0.60 s per warm-up beside it (median), stop 1.11 s (median)',
        '  load balancer nginx lb on a: change 0.40 s',
      ],
    );
    // The page's prediction: 6 replicas at 1/0, drainSeconds 2, over hosts a, b and c.
    const fleet = { ...fleetOf(['a', 'b', 'c'], 1), drainSeconds: 2, probes: { readiness: { periodMs: 250 } } } as Fleet;
    const priced = await pricedTimings({}, fleet, reading(c, ['nginx lb on a']));
    const r = await simulateRollout(
      resolveStrategy({ replicas: 6, strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }),
      priced.timings,
      priced.setup,
    );
    assert.equal(r.durationMs, 15950);
  });
});
