/**
 * The experiment's metric code on hand-built recordings with known answers:
 * phases from events, failure attribution, capacity from events, measured
 * timings, the per-run metrics (window, prediction, overhead) and the
 * aggregation over repetitions.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy } from '../../src/core/strategy.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { aggregateRuns, runMetrics, stat, type RunMetrics } from '../../src/experiment/analysis.js';
import { attributeFailures, derivePhases, failureTime, type Phase, type RunnerEvent, type TimedEvent } from '../../src/experiment/phases.js';
import { capacityTimeline, measuredTimings, rangeOver, type CapacityPoint } from '../../src/experiment/timeline.js';
import type { RequestRecord } from '../../src/experiment/metrics.js';

const engine = (t: number, event: RolloutEvent): TimedEvent => ({ t, source: 'engine', event });
const runner = (t: number, event: RunnerEvent): TimedEvent => ({ t, source: 'runner', event });
const req = (t: number, status: number | undefined, version?: string, latencyMs = 5, error?: string, method: 'GET' | 'POST' = 'GET'): RequestRecord => ({
  t,
  method,
  path: method === 'GET' ? '/api/books' : '/api/orders',
  latencyMs,
  ...(status === undefined ? {} : { status }),
  ...(version === undefined ? {} : { version }),
  ...(error === undefined ? {} : { error }),
});

/**
 * fleetroll rolling 2 replicas o1, o2 to n1, n2 with maxSurge 1 / maxUnavailable 0,
 * drainSeconds 2: wave 1 starts n1; wave 2 drains and stops o1, then starts n2;
 * wave 3 drains and stops o2. Deploy from 1000 to 10500 ms, probes until 11500.
 */
const ENGINE_RUN: TimedEvent[] = [
  runner(1000, { type: 'deploy-start' }),
  engine(1100, { type: 'observed', instances: 2, byRevision: { old: 2 }, revision: 'new' }),
  engine(1100, { type: 'wave', index: 1, start: 1, stop: [] }),
  engine(1400, { type: 'started', name: 'n1', host: 'local' }),
  engine(2400, { type: 'ready', name: 'n1' }),
  engine(2400, { type: 'wave', index: 2, start: 1, stop: ['o1'] }),
  runner(2700, { type: 'reload', lb: 0, up: ['n1', 'o2'], down: ['o1'], count: 1 }),
  engine(2700, { type: 'upstream', action: 'drain', down: ['o1'], up: ['n1'], reloads: 1 }),
  engine(2700, { type: 'draining', names: ['o1'], seconds: 2 }),
  engine(5700, { type: 'stopped', name: 'o1', host: 'local' }),
  engine(6000, { type: 'started', name: 'n2', host: 'local' }),
  engine(7000, { type: 'ready', name: 'n2' }),
  engine(7000, { type: 'wave', index: 3, start: 0, stop: ['o2'] }),
  runner(7300, { type: 'reload', lb: 0, up: ['n1', 'n2'], down: ['o2'], count: 2 }),
  engine(7300, { type: 'upstream', action: 'drain', down: ['o2'], up: ['n2'], reloads: 2 }),
  engine(7300, { type: 'draining', names: ['o2'], seconds: 2 }),
  engine(10300, { type: 'stopped', name: 'o2', host: 'local' }),
  engine(10400, { type: 'verified', name: 'n1', version: '1.1.0' }),
  engine(10400, { type: 'verified', name: 'n2', version: '1.1.0' }),
  engine(10400, { type: 'complete', revision: 'new', version: '1.1.0' }),
  runner(10500, { type: 'deploy-end', outcome: 'complete' }),
];

/** The naive control on the same fleet: kill o1, start n1, reload, pause 1 s; then o2. */
const NAIVE_RUN: TimedEvent[] = [
  runner(1000, { type: 'deploy-start' }),
  engine(1000, { type: 'wave', index: 1, start: 1, stop: ['o1'] }),
  engine(1200, { type: 'stopped', name: 'o1', host: 'local' }),
  engine(1600, { type: 'started', name: 'n1', host: 'local' }),
  runner(1900, { type: 'reload', lb: 0, up: ['n1', 'o2'], down: [], count: 1 }),
  engine(2900, { type: 'wave', index: 2, start: 1, stop: ['o2'] }),
  engine(3100, { type: 'stopped', name: 'o2', host: 'local' }),
  engine(3500, { type: 'started', name: 'n2', host: 'local' }),
  runner(3800, { type: 'reload', lb: 0, up: ['n1', 'n2'], down: [], count: 2 }),
  runner(4800, { type: 'deploy-end', outcome: 'complete' }),
];

/**
 * The script control on the same fleet, batch 1, drainSeconds 2: per batch mark
 * down and reload, drain, stop, start, poll until ready, reload with it up.
 */
const SCRIPT_RUN: TimedEvent[] = [
  runner(1000, { type: 'deploy-start' }),
  engine(1000, { type: 'wave', index: 1, start: 1, stop: ['o1'] }),
  runner(1300, { type: 'reload', lb: 0, up: ['o2'], down: ['o1'], count: 1 }),
  engine(1300, { type: 'upstream', action: 'drain', down: ['o1'], up: [], reloads: 1 }),
  engine(1300, { type: 'draining', names: ['o1'], seconds: 2 }),
  engine(4300, { type: 'stopped', name: 'o1', host: 'local' }),
  engine(4600, { type: 'started', name: 'n1', host: 'local' }),
  engine(5600, { type: 'ready', name: 'n1' }),
  runner(5900, { type: 'reload', lb: 0, up: ['n1', 'o2'], down: [], count: 2 }),
  engine(5900, { type: 'upstream', action: 'enable', down: [], up: ['n1'], reloads: 2 }),
  engine(5900, { type: 'wave', index: 2, start: 1, stop: ['o2'] }),
  runner(6200, { type: 'reload', lb: 0, up: ['n1'], down: ['o2'], count: 3 }),
  engine(6200, { type: 'upstream', action: 'drain', down: ['o2'], up: [], reloads: 3 }),
  engine(6200, { type: 'draining', names: ['o2'], seconds: 2 }),
  engine(9200, { type: 'stopped', name: 'o2', host: 'local' }),
  engine(9500, { type: 'started', name: 'n2', host: 'local' }),
  engine(10500, { type: 'ready', name: 'n2' }),
  runner(10800, { type: 'reload', lb: 0, up: ['n1', 'n2'], down: [], count: 4 }),
  engine(10800, { type: 'upstream', action: 'enable', down: [], up: ['n2'], reloads: 4 }),
  runner(10800, { type: 'deploy-end', outcome: 'complete' }),
];

describe('derivePhases', () => {
  const rows: { name: string; events: TimedEvent[]; o: Parameters<typeof derivePhases>[1]; want: Phase[] }[] = [
    {
      name: 'engine: per wave marking down, draining, stopping, starting, waiting for readiness; then verifying',
      events: ENGINE_RUN,
      o: { deployStartMs: 1000, deployEndMs: 10500, startMs: 0, endMs: 11500, mode: 'engine' },
      want: [
        { name: 'before deploy', startMs: 0, endMs: 1000 },
        { name: 'observing', startMs: 1000, endMs: 1100 },
        { name: 'wave 1: starting', startMs: 1100, endMs: 1400 },
        { name: 'wave 1: waiting for readiness', startMs: 1400, endMs: 2400 },
        { name: 'wave 2: marking down', startMs: 2400, endMs: 2700 },
        { name: 'wave 2: draining', startMs: 2700, endMs: 4700 },
        { name: 'wave 2: stopping', startMs: 4700, endMs: 5700 },
        { name: 'wave 2: starting', startMs: 5700, endMs: 6000 },
        { name: 'wave 2: waiting for readiness', startMs: 6000, endMs: 7000 },
        { name: 'wave 3: marking down', startMs: 7000, endMs: 7300 },
        { name: 'wave 3: draining', startMs: 7300, endMs: 9300 },
        { name: 'wave 3: stopping', startMs: 9300, endMs: 10300 },
        { name: 'wave 3: waiting for readiness', startMs: 10300, endMs: 10400 },
        { name: 'verifying', startMs: 10400, endMs: 10500 },
        { name: 'after deploy', startMs: 10500, endMs: 11500 },
      ],
    },
    {
      name: 'engine with drainSeconds 0 (no draining event): the reload that marks down ends "marking down"',
      events: [
        engine(100, { type: 'wave', index: 1, start: 1, stop: ['o1'] }),
        engine(400, { type: 'upstream', action: 'drain', down: ['o1'], up: [], reloads: 1 }),
        engine(900, { type: 'stopped', name: 'o1', host: 'local' }),
        engine(1200, { type: 'started', name: 'n1', host: 'local' }),
      ],
      o: { deployStartMs: 50, deployEndMs: 2000, startMs: 0, endMs: 2000, mode: 'engine' },
      want: [
        { name: 'before deploy', startMs: 0, endMs: 50 },
        { name: 'observing', startMs: 50, endMs: 100 },
        { name: 'wave 1: marking down', startMs: 100, endMs: 400 },
        { name: 'wave 1: stopping', startMs: 400, endMs: 900 },
        { name: 'wave 1: starting', startMs: 900, endMs: 1200 },
        { name: 'wave 1: waiting for readiness', startMs: 1200, endMs: 2000 },
      ],
    },
    {
      name: 'Recreate: one wave stops everything, then starts everything',
      events: [
        engine(100, { type: 'wave', index: 1, start: 2, stop: ['o1', 'o2'] }),
        engine(400, { type: 'upstream', action: 'drain', down: ['o1', 'o2'], up: [], reloads: 1 }),
        engine(400, { type: 'draining', names: ['o1', 'o2'], seconds: 1 }),
        engine(2300, { type: 'stopped', name: 'o2', host: 'local' }),
        engine(2400, { type: 'stopped', name: 'o1', host: 'local' }),
        engine(2700, { type: 'started', name: 'n1', host: 'local' }),
        engine(2750, { type: 'started', name: 'n2', host: 'local' }),
      ],
      o: { deployStartMs: 0, deployEndMs: 4000, startMs: 0, endMs: 4500, mode: 'engine' },
      want: [
        { name: 'observing', startMs: 0, endMs: 100 },
        { name: 'wave 1: marking down', startMs: 100, endMs: 400 },
        { name: 'wave 1: draining', startMs: 400, endMs: 1400 },
        { name: 'wave 1: stopping', startMs: 1400, endMs: 2400 },
        { name: 'wave 1: starting', startMs: 2400, endMs: 2750 },
        { name: 'wave 1: waiting for readiness', startMs: 2750, endMs: 4000 },
        { name: 'after deploy', startMs: 4000, endMs: 4500 },
      ],
    },
    {
      name: 'naive control: killing, starting, reloading nginx, pause per instance',
      events: NAIVE_RUN,
      o: { deployStartMs: 1000, deployEndMs: 4800, startMs: 0, endMs: 5800, mode: 'naive' },
      want: [
        { name: 'before deploy', startMs: 0, endMs: 1000 },
        { name: 'naive 1: killing', startMs: 1000, endMs: 1200 },
        { name: 'naive 1: starting', startMs: 1200, endMs: 1600 },
        { name: 'naive 1: reloading nginx', startMs: 1600, endMs: 1900 },
        { name: 'naive 1: pause', startMs: 1900, endMs: 2900 },
        { name: 'naive 2: killing', startMs: 2900, endMs: 3100 },
        { name: 'naive 2: starting', startMs: 3100, endMs: 3500 },
        { name: 'naive 2: reloading nginx', startMs: 3500, endMs: 3800 },
        { name: 'naive 2: pause', startMs: 3800, endMs: 4800 },
        { name: 'after deploy', startMs: 4800, endMs: 5800 },
      ],
    },
    {
      name: "script control: the engine's phases per batch, then re-enabling once the whole batch is ready",
      events: SCRIPT_RUN,
      o: { deployStartMs: 1000, deployEndMs: 10800, startMs: 0, endMs: 11800, mode: 'script' },
      want: [
        { name: 'before deploy', startMs: 0, endMs: 1000 },
        { name: 'batch 1: marking down', startMs: 1000, endMs: 1300 },
        { name: 'batch 1: draining', startMs: 1300, endMs: 3300 },
        { name: 'batch 1: stopping', startMs: 3300, endMs: 4300 },
        { name: 'batch 1: starting', startMs: 4300, endMs: 4600 },
        { name: 'batch 1: waiting for readiness', startMs: 4600, endMs: 5600 },
        { name: 'batch 1: re-enabling', startMs: 5600, endMs: 5900 },
        { name: 'batch 2: marking down', startMs: 5900, endMs: 6200 },
        { name: 'batch 2: draining', startMs: 6200, endMs: 8200 },
        { name: 'batch 2: stopping', startMs: 8200, endMs: 9200 },
        { name: 'batch 2: starting', startMs: 9200, endMs: 9500 },
        { name: 'batch 2: waiting for readiness', startMs: 9500, endMs: 10500 },
        { name: 'batch 2: re-enabling', startMs: 10500, endMs: 10800 },
        { name: 'after deploy', startMs: 10800, endMs: 11800 },
      ],
    },
    {
      name: 'blue-green switched back by the analysis: the phases its messages announce; the old set\'s drain is "kept", and never ends in a stop',
      events: [
        engine(100, { type: 'wave', index: 1, start: 2, stop: [] }),
        engine(300, { type: 'started', name: 'n1', host: 'local' }),
        engine(1200, { type: 'switch', instances: 2, prePromotion: false }),
        engine(1200, { type: 'wave', index: 2, start: 0, stop: ['o1', 'o2'] }),
        engine(1500, { type: 'switched', kept: 2, seconds: 10 }),
        engine(1500, { type: 'draining', names: ['o1', 'o2'], seconds: 10 }),
        engine(5600, { type: 'info', message: 'analysis after the switch, measurement 1 (4 s): fail: error rate 20% on 1.1.0 over 4 s' }),
        engine(5600, { type: 'switchingBack', cause: 'analysis' }),
        engine(5900, { type: 'stopped', name: 'n1', host: 'local' }),
        engine(6000, { type: 'rollingBack', revision: 'abc', image: 'img:1.0.0', version: '1.0.0' }),
      ],
      o: { deployStartMs: 0, deployEndMs: 12000, startMs: 0, endMs: 13000, mode: 'engine' },
      want: [
        { name: 'observing', startMs: 0, endMs: 100 },
        { name: 'wave 1: starting', startMs: 100, endMs: 1200 },
        { name: 'wave 2: marking down', startMs: 1200, endMs: 1500 },
        { name: 'old set kept (scaleDownDelaySeconds)', startMs: 1500, endMs: 5600 },
        { name: 'switching back', startMs: 5600, endMs: 6000 },
        { name: 'rolling back', startMs: 6000, endMs: 12000 },
        { name: 'after deploy', startMs: 12000, endMs: 13000 },
      ],
    },
    {
      name: 'canary stopped by its analysis: weight, analysis, abort',
      events: [
        engine(100, { type: 'canaryStep', index: 1, kind: 'setWeight', weight: 25, instances: 1 }),
        engine(100, { type: 'wave', index: 1, start: 1, stop: [] }),
        engine(400, { type: 'started', name: 'c1', host: 'local' }),
        engine(1400, { type: 'ready', name: 'c1' }),
        engine(1800, { type: 'canaryStep', index: 2, kind: 'analysis', weight: 25 }),
        engine(5800, { type: 'canaryAborted', reason: 'the analysis failed' }),
        engine(7000, { type: 'stopped', name: 'c1', host: 'local' }),
      ],
      o: { deployStartMs: 0, deployEndMs: 7200, startMs: 0, endMs: 8000, mode: 'engine' },
      want: [
        { name: 'observing', startMs: 0, endMs: 100 },
        { name: 'wave 1: starting', startMs: 100, endMs: 400 },
        { name: 'wave 1: waiting for readiness', startMs: 400, endMs: 1800 },
        { name: 'canary analysis at 25%', startMs: 1800, endMs: 5800 },
        { name: 'aborting the canary', startMs: 5800, endMs: 7200 },
        { name: 'after deploy', startMs: 7200, endMs: 8000 },
      ],
    },
    {
      name: 'events outside the deploy are ignored; a deploy with no events is all "observing"',
      events: [engine(50, { type: 'wave', index: 1, start: 1, stop: [] }), engine(3000, { type: 'started', name: 'x', host: 'local' })],
      o: { deployStartMs: 100, deployEndMs: 2000, startMs: 0, endMs: 2500, mode: 'engine' },
      want: [
        { name: 'before deploy', startMs: 0, endMs: 100 },
        { name: 'observing', startMs: 100, endMs: 2000 },
        { name: 'after deploy', startMs: 2000, endMs: 2500 },
      ],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(derivePhases(row.events, row.o), row.want);
    });
  }
});

describe('failureTime and attributeFailures', () => {
  const phases: Phase[] = derivePhases(ENGINE_RUN, { deployStartMs: 1000, deployEndMs: 10500, startMs: 0, endMs: 11500, mode: 'engine' });

  const rows: { name: string; records: RequestRecord[]; want: ReturnType<typeof attributeFailures> }[] = [
    { name: 'no failures, no retries: nothing listed', records: [req(100, 200, '1.0.0'), req(3000, 201, '1.0.0', 200, undefined, 'POST')], want: [] },
    {
      name: 'a 502 is pinned on when it arrived (sent + latency)',
      records: [req(2690, 502, undefined, 20)],
      want: [{ phase: 'wave 2: draining', failed: 1, byStatus: { '502': 1 }, retried: 0 }],
    },
    {
      name: 'a timeout is pinned on when it was sent, not when the probe gave up',
      records: [req(5650, undefined, undefined, 5000, 'timeout')],
      want: [{ phase: 'wave 2: stopping', failed: 1, byStatus: { 'error:timeout': 1 }, retried: 0 }],
    },
    {
      name: 'a reset arriving just after the stop lands in "starting"; phases listed in order',
      records: [req(5600, undefined, undefined, 150, 'ECONNRESET', 'POST'), req(1500, undefined, undefined, 3, 'ECONNREFUSED')],
      want: [
        { phase: 'wave 1: waiting for readiness', failed: 1, byStatus: { 'error:ECONNREFUSED': 1 }, retried: 0 },
        { phase: 'wave 2: starting', failed: 1, byStatus: { 'error:ECONNRESET': 1 }, retried: 0 },
      ],
    },
    {
      name: 'exactly on a boundary belongs to the phase that starts there',
      records: [req(4695, 503, '1.0.0', 5)],
      want: [{ phase: 'wave 2: stopping', failed: 1, byStatus: { '503': 1 }, retried: 0 }],
    },
    {
      name: 'a retried request is counted where it was sent, and as failed only if the resend failed too',
      records: [
        { ...req(2705, 200, '1.1.0'), retried: true, retryError: 'ECONNRESET' },
        { ...req(7310, undefined, undefined, 2, 'ECONNRESET'), retried: true, retryError: 'ECONNRESET' },
      ],
      want: [
        { phase: 'wave 2: draining', failed: 0, byStatus: {}, retried: 1 },
        { phase: 'wave 3: draining', failed: 1, byStatus: { 'error:ECONNRESET': 1 }, retried: 1 },
      ],
    },
    {
      name: 'after the recording ends: the last phase; before it starts: the first',
      records: [req(11490, undefined, undefined, 900, 'ECONNRESET'), req(-1, 502, undefined, 0)],
      want: [
        { phase: 'before deploy', failed: 1, byStatus: { '502': 1 }, retried: 0 },
        { phase: 'after deploy', failed: 1, byStatus: { 'error:ECONNRESET': 1 }, retried: 0 },
      ],
    },
    {
      name: 'a 200 whose body was cut off is a failure, keyed by its error',
      records: [req(8000, 200, '1.0.0', 10, 'aborted')],
      want: [{ phase: 'wave 3: draining', failed: 1, byStatus: { 'error:aborted': 1 }, retried: 0 }],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      assert.deepEqual(attributeFailures(row.records, phases), row.want);
    });
  }

  it('failureTime: arrival for answers and resets, send time for timeouts', () => {
    assert.equal(failureTime(req(100, 502, undefined, 30)), 130);
    assert.equal(failureTime(req(100, undefined, undefined, 30, 'ECONNRESET')), 130);
    assert.equal(failureTime(req(100, undefined, undefined, 5000, 'timeout')), 100);
  });

  it('no phases: nothing to attribute to', () => {
    assert.deepEqual(attributeFailures([req(0, 502)], []), []);
  });
});

describe('capacityTimeline', () => {
  const rows: { name: string; events: TimedEvent[]; initial: string[]; want: CapacityPoint[]; min: number; peak: number; from: number; to: number }[] = [
    {
      name: 'engine 1/0: never below 2 in service, 3 containers at the peak',
      events: ENGINE_RUN,
      initial: ['o1', 'o2'],
      want: [
        { t: 0, up: 2, alive: 2 },
        { t: 1400, up: 2, alive: 3 },
        { t: 5700, up: 2, alive: 2 },
        { t: 6000, up: 2, alive: 3 },
        { t: 10300, up: 2, alive: 2 },
      ],
      min: 2,
      peak: 3,
      from: 1000,
      to: 10500,
    },
    {
      name: 'Recreate: everything marked down at once, then back one by one',
      events: [
        engine(500, { type: 'upstream', action: 'drain', down: ['o1', 'o2'], up: [], reloads: 1 }),
        engine(1500, { type: 'stopped', name: 'o1', host: 'local' }),
        engine(1600, { type: 'stopped', name: 'o2', host: 'local' }),
        engine(1700, { type: 'started', name: 'n1', host: 'local' }),
        engine(1750, { type: 'started', name: 'n2', host: 'local' }),
        engine(2500, { type: 'upstream', action: 'enable', down: [], up: ['n1'], reloads: 2 }),
        engine(2600, { type: 'upstream', action: 'enable', down: [], up: ['n2'], reloads: 3 }),
      ],
      initial: ['o1', 'o2'],
      want: [
        { t: 0, up: 2, alive: 2 },
        { t: 500, up: 0, alive: 2 },
        { t: 1500, up: 0, alive: 1 },
        { t: 1600, up: 0, alive: 0 },
        { t: 1700, up: 0, alive: 1 },
        { t: 1750, up: 0, alive: 2 },
        { t: 2500, up: 1, alive: 2 },
        { t: 2600, up: 2, alive: 2 },
      ],
      min: 0,
      peak: 2,
      from: 0,
      to: 3000,
    },
    {
      name: 'naive: a killed instance is out at once (still listed), the reload snapshot brings the new one in',
      events: NAIVE_RUN,
      initial: ['o1', 'o2'],
      want: [
        { t: 0, up: 2, alive: 2 },
        { t: 1200, up: 1, alive: 1 },
        { t: 1600, up: 1, alive: 2 },
        { t: 1900, up: 2, alive: 2 },
        { t: 3100, up: 1, alive: 1 },
        { t: 3500, up: 1, alive: 2 },
        { t: 3800, up: 2, alive: 2 },
      ],
      min: 1,
      peak: 2,
      from: 1000,
      to: 4800,
    },
    {
      name: 'an instance listed up after it was stopped does not count; a failed write (restore) changes nothing',
      events: [
        engine(100, { type: 'stopped', name: 'o1', host: 'local' }),
        engine(200, { type: 'upstream', action: 'enable', down: [], up: ['o1'], reloads: 1 }),
        engine(300, { type: 'upstream', action: 'restore', down: ['o2'], up: [], reloads: 1 }),
        runner(400, { type: 'reload', lb: 0, up: ['o1', 'o2'], down: [], count: 2 }),
      ],
      initial: ['o1', 'o2'],
      want: [
        { t: 0, up: 2, alive: 2 },
        { t: 100, up: 1, alive: 1 },
      ],
      min: 1,
      peak: 2,
      from: 0,
      to: 500,
    },
    {
      name: 'changes at the same instant collapse into one point',
      events: [
        engine(100, { type: 'stopped', name: 'o1', host: 'local' }),
        engine(100, { type: 'started', name: 'n1', host: 'local' }),
        runner(100, { type: 'reload', lb: 0, up: ['n1', 'o2'], down: [], count: 1 }),
      ],
      initial: ['o1', 'o2'],
      want: [
        { t: 0, up: 2, alive: 2 },
        { t: 100, up: 2, alive: 2 },
      ],
      min: 2,
      peak: 2,
      from: 50,
      to: 500,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const got = capacityTimeline(row.events, row.initial);
      assert.deepEqual(got, row.want);
      assert.equal(rangeOver(got, 'up', row.from, row.to).min, row.min, 'lowest in service during the deploy');
      assert.equal(rangeOver(got, 'alive', row.from, row.to).max, row.peak, 'peak containers during the deploy');
    });
  }

  it('rangeOver counts the value in force at the start and ignores steps outside the range', () => {
    const pts: CapacityPoint[] = [
      { t: 0, up: 3, alive: 3 },
      { t: 100, up: 1, alive: 5 },
      { t: 200, up: 2, alive: 4 },
      { t: 900, up: 0, alive: 9 },
    ];
    assert.deepEqual(rangeOver(pts, 'up', 150, 800), { min: 1, max: 2 });
    assert.deepEqual(rangeOver(pts, 'alive', 150, 800), { min: 4, max: 5 });
    assert.deepEqual(rangeOver(pts, 'up', 0, 50), { min: 3, max: 3 });
    assert.deepEqual(rangeOver([], 'up', 0, 50), { min: 0, max: 0 });
  });
});

describe('stat (median, min, max)', () => {
  const rows: { name: string; values: number[]; want: ReturnType<typeof stat> }[] = [
    { name: 'no values: undefined', values: [], want: undefined },
    { name: 'one value', values: [7], want: { median: 7, min: 7, max: 7, n: 1 } },
    { name: 'odd count: the middle one, input order does not matter', values: [9, 1, 4], want: { median: 4, min: 1, max: 9, n: 3 } },
    { name: 'even count: mean of the middle two', values: [4, 1, 3, 10], want: { median: 3.5, min: 1, max: 10, n: 4 } },
    { name: 'repeats', values: [2, 2, 2, 5, 2], want: { median: 2, min: 2, max: 5, n: 5 } },
  ];
  for (const row of rows) it(row.name, () => assert.deepEqual(stat(row.values), row.want));
});

describe('measuredTimings', () => {
  it('start-to-ready, end-of-drain-to-stopped, decision to mark-down in force, ready to in nginx, removed to next start', () => {
    // o1 decided at 2400, marked down in force at 2700; n1 ready at 2400, in at 2700; o1 gone at 5700, n2 started at 6000.
    assert.deepEqual(measuredTimings(ENGINE_RUN), {
      startToReadyMs: [1000, 1000],
      stopMs: [1000, 1000],
      decisionToReloadMs: [300, 300],
      readyToInNginxMs: [300, 300],
      removedToStartedMs: [300],
    });
  });
  it('without a drain pause the stop is timed from the wave; naive has no readiness and never marks down', () => {
    assert.deepEqual(measuredTimings(NAIVE_RUN), {
      startToReadyMs: [],
      stopMs: [200, 200],
      decisionToReloadMs: [],
      readyToInNginxMs: [],
      removedToStartedMs: [400, 400],
    });
  });
});

describe('runMetrics', () => {
  // Requests: old answers until 5690, new ones from 2800 on, one 502 while draining, one retried GET.
  const records: RequestRecord[] = [
    req(500, 200, '1.0.0'),
    req(2795, 200, '1.1.0'),
    req(3000, 502, undefined, 10),
    { ...req(3100, 200, '1.0.0'), retried: true, retryError: 'ECONNRESET' },
    req(5400, 201, '1.0.0', 290, undefined, 'POST'),
    req(9000, 200, '1.1.0'),
  ];
  const strategy = resolveStrategy({ replicas: 2, cli: { maxSurge: 1, maxUnavailable: 0 } });
  const predicted = { durationMs: 8000, waves: 3, peakInstances: 3, lowestCapacity: 2, mixedVersionWindowMs: 4000, reloads: 2 };
  const m = runMetrics({
    predicted,
    records,
    events: ENGINE_RUN,
    deployStartMs: 1000,
    deployEndMs: 10500,
    loadEndMs: 11500,
    initial: ['o1', 'o2'],
    from: '1.0.0',
    to: '1.1.0',
    mode: 'engine',
    strategy,
    timings: { startupMs: 1000, drainMs: 2000, stopMs: 1000, minReadyMs: 0 },
  });

  it('window: first new answer (2800) to last old answer (the POST answered at 5690)', () => {
    assert.deepEqual(m.mixedVersionWindow, { startMs: 2800, endMs: 5690, windowMs: 2890 });
    assert.equal(m.windowMs, 2890);
  });
  it('requests, retries and the failure by phase', () => {
    assert.equal(m.requests.total, 6);
    assert.equal(m.requests.failed, 1);
    assert.equal(m.requests.retried, 1);
    assert.deepEqual(m.failuresByPhase, [{ phase: 'wave 2: draining', failed: 1, byStatus: { '502': 1 }, retried: 1 }]);
  });
  it('duration, waves and reloads from the events; capacity; measured timings', () => {
    assert.equal(m.deployDurationMs, 9500);
    assert.equal(m.waves, 3);
    assert.equal(m.reloads, 2);
    assert.equal(m.minCapacity, 2);
    assert.equal(m.peakInstances, 3);
    assert.deepEqual(m.measured.startToReadyMs, { median: 1000, min: 1000, max: 1000, n: 2 });
  });
  it('the prediction given (simulate, computed by the runner) is kept, and the overhead ratio is 9.5 / 8', () => {
    assert.deepEqual(m.predicted, predicted);
    assert.equal(m.overheadRatio, 1.188);
    assert.equal(m.calibrated, null, 'none given: no calibrated prediction');
    assert.equal(m.calibratedRatio, null);
  });
  it('a calibrated prediction given is kept with its ratio, 9.5 / 9.1', () => {
    const c = runMetrics({
      predicted,
      calibrated: { ...predicted, durationMs: 9100, fromRuns: 2 },
      records,
      events: ENGINE_RUN,
      deployStartMs: 1000,
      deployEndMs: 10500,
      loadEndMs: 11500,
      initial: ['o1', 'o2'],
      from: '1.0.0',
      to: '1.1.0',
      mode: 'engine',
      strategy,
      timings: { startupMs: 1000, drainMs: 2000, stopMs: 1000, minReadyMs: 0 },
    });
    assert.equal(c.calibrated?.fromRuns, 2);
    assert.equal(c.calibratedRatio, 1.044);
  });
  it('the naive control gets no prediction and no overhead ratio', () => {
    const n = runMetrics({
      records,
      events: NAIVE_RUN,
      deployStartMs: 1000,
      deployEndMs: 4800,
      loadEndMs: 5800,
      initial: ['o1', 'o2'],
      from: '1.0.0',
      to: '1.1.0',
      mode: 'naive',
      timings: { startupMs: 1000, drainMs: 0, stopMs: 0, minReadyMs: 0 },
    });
    assert.equal(n.predicted, null);
    assert.equal(n.overheadRatio, null);
    assert.equal(n.reloads, 2);
    assert.equal(n.waves, 2);
    assert.equal(n.minCapacity, 1);
  });
  it("the script control: no prediction, but reloads, waves, capacity and timings counted like the engine's", () => {
    const sc = runMetrics({
      records,
      events: SCRIPT_RUN,
      deployStartMs: 1000,
      deployEndMs: 10800,
      loadEndMs: 11800,
      initial: ['o1', 'o2'],
      from: '1.0.0',
      to: '1.1.0',
      mode: 'script',
      timings: { startupMs: 1000, drainMs: 2000, stopMs: 1000, minReadyMs: 0 },
    });
    assert.equal(sc.predicted, null);
    assert.equal(sc.overheadRatio, null);
    assert.deepEqual([sc.reloads, sc.waves, sc.minCapacity, sc.peakInstances], [4, 2, 1, 2]);
    assert.deepEqual(sc.measured.startToReadyMs, { median: 1000, min: 1000, max: 1000, n: 2 });
    assert.deepEqual(sc.measured.stopMs, { median: 1000, min: 1000, max: 1000, n: 2 });
    assert.deepEqual(sc.failuresByPhase, [{ phase: 'batch 1: draining', failed: 1, byStatus: { '502': 1 }, retried: 1 }]);
  });
});

describe("runMetrics against a bad version: outcome, the new version's figures, the time to roll back", () => {
  // A canary answers from 2005 to 5605 (two of its answers 500s, the first at 3005), stable throughout; one 502 nobody answered.
  const records: RequestRecord[] = [
    ...Array.from({ length: 40 }, (_, i) => req(500 + i * 200, 200, '1.0.0')),
    ...Array.from({ length: 10 }, (_, i) => req(2000 + i * 400, i === 2 || i === 6 ? 500 : 200, '1.1.0')),
    req(6500, 502),
  ];
  const base = {
    records,
    deployStartMs: 1000,
    deployEndMs: 7000,
    loadEndMs: 8500,
    initial: ['o1', 'o2'],
    from: '1.0.0',
    to: '1.1.0',
    mode: 'engine' as const,
    timings: { startupMs: 1000, drainMs: 1000, stopMs: 1000, minReadyMs: 0 },
  };
  const end = (outcome: 'complete' | 'failed' | 'stopped') => [runner(1000, { type: 'deploy-start' }), runner(7000, { type: 'deploy-end', outcome })];
  const predicted = { durationMs: 5000, waves: 2, peakInstances: 3, lowestCapacity: 2, mixedVersionWindowMs: 0, reloads: 2 };
  const stopped = runMetrics({ ...base, events: end('stopped'), predicted, health: { unavailable: 'no access log' } });

  it("outcome from the runner's deploy-end event", () => {
    assert.equal(stopped.outcome, 'stopped');
    assert.equal(runMetrics({ ...base, events: end('complete') }).outcome, 'completed');
    assert.equal(runMetrics({ ...base, events: end('failed') }).outcome, 'failed');
    assert.equal(runMetrics({ ...base, events: [] }).outcome, 'completed', 'no deploy-end: completed');
  });
  it("failed split: the bad version's own 500s and the 502", () => {
    assert.deepEqual([stopped.requests.failed, stopped.newVersion.ownFailures, stopped.newVersion.otherFailures], [3, 2, 1]);
    assert.deepEqual([stopped.newVersion.answered, stopped.newVersion.answeredInDeploy, stopped.newVersion.sentInDeploy], [10, 10, 41]);
  });
  it('stopped: to its last answer (5605) from the deploy start (1000), from its first 500 (2805), from its first answer (2005)', () => {
    assert.deepEqual(
      {
        stopped: stopped.newVersion.stopped,
        stopMs: stopped.newVersion.stopMs,
        afterFirstFailure: stopped.newVersion.stopAfterFirstFailureMs,
        exposure: stopped.newVersion.exposureMs,
      },
      { stopped: true, stopMs: 4605, afterFirstFailure: 2800, exposure: 3600 },
    );
  });
  it('the mixed-version window is the time the canary answered beside stable, not until the end of the recording', () => {
    assert.equal(stopped.windowMs, 3600);
    assert.deepEqual(stopped.mixedVersionSpans, [{ startMs: 2005, endMs: 5605 }]);
    assert.equal(stopped.mixedVersionWindow?.windowMs, 6300, 'first new to last old, kept for reference');
  });
  it('simulate predicts a rollout that passes: no overhead ratio for a stopped one; the health report is kept as given', () => {
    assert.deepEqual(stopped.predicted, predicted);
    assert.equal(stopped.overheadRatio, null);
    assert.deepEqual(stopped.health, { unavailable: 'no access log' });
  });
  it('completed: no time to roll back', () => {
    const done = runMetrics({ ...base, events: end('complete') });
    assert.deepEqual(
      [done.newVersion.stopped, done.newVersion.stopMs, done.newVersion.stopAfterFirstFailureMs, done.newVersion.exposureMs, done.health],
      [false, null, null, null, null],
    );
  });
});

describe('aggregateRuns', () => {
  /** A run with just the figures aggregation reads. */
  function fake(o: {
    outcomes: Record<string, number>;
    retried?: number;
    windowMs: number;
    durationMs: number;
    phases: string[];
    byPhase?: RunMetrics['failuresByPhase'];
    ratio?: number | null;
    minCapacity?: number;
    outcome?: RunMetrics['outcome'];
    own?: number;
    stopMs?: number;
    health?: RunMetrics['health'];
    calibratedMs?: number;
  }): RunMetrics {
    const total = Object.values(o.outcomes).reduce((a, b) => a + b, 0);
    const failed = Object.entries(o.outcomes)
      .filter(([k]) => !/^2/.test(k))
      .reduce((a, [, n]) => a + n, 0);
    return {
      outcome: o.outcome ?? 'completed',
      requests: {
        total,
        ok: total - failed,
        failed,
        retried: o.retried ?? 0,
        byMethod: { GET: { total, ok: total - failed, failed, retried: o.retried ?? 0, byStatus: o.outcomes } },
        latencyMs: { p50: 3, p95: 9, p99: total, max: 99 },
      },
      failuresByPhase: o.byPhase ?? [],
      phases: o.phases.map((name, i) => ({ name, startMs: i * 1000, endMs: (i + 1) * 1000 })),
      mixedVersionWindow: null,
      mixedVersionSpans: [],
      windowMs: o.windowMs,
      newVersion: {
        answered: 5,
        sentInDeploy: total,
        answeredInDeploy: 5,
        ownFailures: o.own ?? 0,
        otherFailures: failed - (o.own ?? 0),
        firstAnswerMs: 1000,
        lastAnswerMs: o.stopMs === undefined ? 9000 : 1000 + o.stopMs,
        firstOwnFailureMs: null,
        stopped: o.outcome === 'stopped',
        stopMs: o.stopMs ?? null,
        stopAfterFirstFailureMs: null,
        exposureMs: o.stopMs ?? null,
      },
      health: o.health ?? null,
      deployDurationMs: o.durationMs,
      waves: 3,
      reloads: 2,
      minCapacity: o.minCapacity ?? 2,
      peakInstances: 3,
      capacity: [],
      measured: { startToReadyMs: null, stopMs: null, decisionToReloadMs: null, readyToInNginxMs: null, removedToStartedMs: null },
      predicted: { durationMs: 8000, waves: 3, peakInstances: 3, lowestCapacity: 2, mixedVersionWindowMs: 6000, reloads: 3 },
      overheadRatio: o.ratio === undefined ? o.durationMs / 8000 : o.ratio,
      calibrated:
        o.calibratedMs === undefined
          ? null
          : { durationMs: o.calibratedMs, waves: 3, peakInstances: 3, lowestCapacity: 2, mixedVersionWindowMs: 6000, reloads: 3, fromRuns: 1 },
      calibratedRatio: o.calibratedMs === undefined ? null : o.durationMs / o.calibratedMs,
    };
  }
  const runs = [
    fake({
      outcomes: { '200': 10, '502': 2 },
      windowMs: 3000,
      durationMs: 9000,
      phases: ['before deploy', 'wave 1: draining', 'wave 2: stopping'],
      byPhase: [{ phase: 'wave 2: stopping', failed: 2, byStatus: { '502': 2 }, retried: 0 }],
      minCapacity: 1,
    }),
    fake({
      outcomes: { '200': 12 },
      retried: 3,
      windowMs: 2000,
      durationMs: 10_000,
      calibratedMs: 9000,
      phases: ['before deploy', 'wave 1: draining', 'wave 2: stopping'],
      byPhase: [{ phase: 'wave 1: draining', failed: 0, byStatus: {}, retried: 3 }],
    }),
    fake({
      outcomes: { '200': 11, 'error:ECONNRESET': 1 },
      retried: 1,
      windowMs: 2500,
      durationMs: 8000,
      calibratedMs: 8400,
      phases: ['before deploy', 'wave 1: draining', 'wave 2: stopping'],
      byPhase: [{ phase: 'wave 1: draining', failed: 1, byStatus: { 'error:ECONNRESET': 1 }, retried: 1 }],
    }),
  ];
  const a = aggregateRuns(runs, 1);

  it('median, min and max of each figure over the repetitions', () => {
    assert.equal(a.runs, 3);
    assert.equal(a.deployErrors, 1);
    assert.deepEqual(a.requests.total, { median: 12, min: 12, max: 12, n: 3 });
    assert.deepEqual(a.requests.failed, { median: 1, min: 0, max: 2, n: 3 });
    assert.deepEqual(a.requests.retried, { median: 1, min: 0, max: 3, n: 3 });
    assert.deepEqual(a.windowMs, { median: 2500, min: 2000, max: 3000, n: 3 });
    assert.deepEqual(a.deployDurationMs, { median: 9000, min: 8000, max: 10_000, n: 3 });
    assert.deepEqual(a.minCapacity, { median: 2, min: 1, max: 2, n: 3 });
    assert.deepEqual(a.overheadRatio, { median: 1.125, min: 1, max: 1.25, n: 3 });
    assert.deepEqual(a.predicted?.durationMs, 8000);
  });
  it('the calibrated prediction over the runs that had one (the first has no earlier run to price it with)', () => {
    assert.deepEqual(a.calibratedDurationMs, { median: 8700, min: 8400, max: 9000, n: 2 });
    assert.equal(a.calibratedRatio?.n, 2);
    assert.ok(Math.abs(a.calibratedRatio!.max - 10_000 / 9000) < 1e-9);
  });
  it('an outcome missing from a run counts 0 there', () => {
    assert.deepEqual(a.byOutcome, {
      '200': { median: 11, min: 10, max: 12, n: 3 },
      '502': { median: 0, min: 0, max: 2, n: 3 },
      'error:ECONNRESET': { median: 0, min: 0, max: 1, n: 3 },
    });
  });
  it('failures by phase: every phase that had a failure or retry in any run, in phase order, 0 where absent', () => {
    assert.deepEqual(a.failuresByPhase, [
      {
        phase: 'wave 1: draining',
        failed: { median: 0, min: 0, max: 1, n: 3 },
        retried: { median: 1, min: 0, max: 3, n: 3 },
        byStatus: { 'error:ECONNRESET': { median: 0, min: 0, max: 1, n: 3 } },
      },
      {
        phase: 'wave 2: stopping',
        failed: { median: 0, min: 0, max: 2, n: 3 },
        retried: { median: 0, min: 0, max: 0, n: 3 },
        byStatus: { '502': { median: 0, min: 0, max: 2, n: 3 } },
      },
    ]);
  });
  it("outcomes counted; the new version's figures over all runs, the times to roll back over the runs that stopped it", () => {
    const health = (failed5xx: number): RunMetrics['health'] => ({
      sources: ['x'],
      window: { start: 'a', end: 'b', durationMs: 1 },
      requests: 100,
      failed5xx,
      dropped: 0,
      clientClosed: 0,
      mixedVersionWindowMs: 50,
      firstNewResponseAt: null,
      lastOldResponseAt: null,
      firstNewInstance: null,
      unattributed: 0,
      garbage: 0,
    });
    const b = aggregateRuns([
      fake({ outcomes: { '200': 10, '500': 2 }, windowMs: 1, durationMs: 1, phases: [], outcome: 'stopped', own: 2, stopMs: 4000, health: health(2) }),
      fake({ outcomes: { '200': 10, '500': 4 }, windowMs: 1, durationMs: 1, phases: [], outcome: 'stopped', own: 3, stopMs: 5000, health: health(4) }),
      fake({
        outcomes: { '200': 10, '500': 9 },
        windowMs: 1,
        durationMs: 1,
        phases: [],
        outcome: 'completed',
        own: 9,
        health: { unavailable: 'no access log' },
      }),
    ]);
    assert.deepEqual(b.outcomes, { completed: 1, stopped: 2, failed: 0 });
    assert.deepEqual(b.newVersion.ownFailures, { median: 3, min: 2, max: 9, n: 3 });
    assert.deepEqual(b.newVersion.otherFailures, { median: 0, min: 0, max: 1, n: 3 });
    assert.deepEqual(b.newVersion.stopMs, { median: 4500, min: 4000, max: 5000, n: 2 });
    assert.deepEqual(b.health?.failed5xx, { median: 3, min: 2, max: 4, n: 2 }, 'over the runs with numbers');
    const none = aggregateRuns([fake({ outcomes: { '200': 1 }, windowMs: 0, durationMs: 1, phases: [] })]);
    assert.deepEqual([none.newVersion.stopMs, none.newVersion.exposureMs, none.health], [null, null, null]);
  });
  it('no overhead ratio when no run has one (the naive control)', () => {
    const n = aggregateRuns([fake({ outcomes: { '200': 1 }, windowMs: 0, durationMs: 1, phases: [], ratio: null })]);
    assert.equal(n.overheadRatio, null);
  });
});
