/**
 * The fleet model behind `--metrics` (src/core/fleetModel.ts), its
 * Prometheus series (src/adapters/promMetrics.ts, scraped from the registry,
 * no server) and the live page's HTML (src/core/livePage.ts): what a run of
 * events makes of the fleet, and that names from users are escaped.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fleetMetrics } from '../../src/adapters/promMetrics.js';
import { parseListen } from '../../src/cli/metrics.js';
import type { AccessRecord } from '../../src/core/accessLog.js';
import {
  addTraffic,
  applyEvent,
  beginRollout,
  endRollout,
  instanceCounts,
  newFleetModel,
  observeFleet,
  recordHeal,
  setPhase,
  trafficRates,
  type FleetModel,
  type ModelEvent,
} from '../../src/core/fleetModel.js';
import { escapeHtml, renderPage, renderSections } from '../../src/core/livePage.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { ValidationError } from '../../src/errors.js';

// The model names the fields it reads; every RolloutEvent it handles must fit them (a compile-time check).
type Handled = Extract<RolloutEvent, { type: ModelEvent['type'] }>;
const fits = (e: Handled): ModelEvent => e;
void fits;

const OLD = 'aaaaaaaaaaaaaaaa';
const NEW = 'bbbbbbbbbbbbbbbb';
const LB = 'nginx web on local';
const T0 = 1_700_000_000_000;

/** Three old instances, all in the load balancer, and a rolling update to NEW begun. */
function fleetAtOld(): FleetModel {
  const m = newFleetModel('shop', { balancers: [LB] });
  observeFleet(
    m,
    [1, 2, 3].map((n) => ({ name: `shop-old-${n}`, host: 'local', revision: OLD, version: '1.0.0', address: `10.0.0.${n}:8080`, running: true })),
    T0,
    { [LB]: [1, 2, 3].map((n) => ({ name: `shop-old-${n}`, down: false })) },
  );
  return beginRollout(m, 'RollingUpdate', T0, '1.1.0');
}

const ev = (e: RolloutEvent) => e;
const fold = (m: FleetModel, events: RolloutEvent[]) => events.reduce((acc, e, i) => applyEvent(acc, e, T0 + (i + 1) * 100), m);
const phases = (m: FleetModel) => Object.fromEntries(Object.values(m.instances).map((i) => [i.name, `${i.revision === NEW ? 'new' : 'old'} ${i.phase}`]));

const FIRST_WAVE: RolloutEvent[] = [
  { type: 'observed', instances: 3, byRevision: { [OLD]: 3 }, revision: NEW },
  { type: 'wave', index: 1, start: 1, stop: ['shop-old-1'] },
  { type: 'upstream', action: 'drain', down: ['shop-old-1'], up: [], reloads: 1, balancers: { [LB]: 40 } },
  { type: 'started', name: 'shop-new-1', host: 'local', address: '10.0.0.9:8080' },
  { type: 'draining', names: ['shop-old-1'], seconds: 1 },
];

describe('fleet model: events → instances per phase, reloads, outcome', () => {
  const rows: { name: string; events: RolloutEvent[]; want: Record<string, string>; reloads: number; outcome?: string }[] = [
    {
      name: 'the starting observation: routed and running instances are available',
      events: [],
      want: { 'shop-old-1': 'old available', 'shop-old-2': 'old available', 'shop-old-3': 'old available' },
      reloads: 0,
    },
    {
      name: 'first wave: one old draining, one new starting, one reload',
      events: FIRST_WAVE,
      want: { 'shop-old-1': 'old draining', 'shop-old-2': 'old available', 'shop-old-3': 'old available', 'shop-new-1': 'new starting' },
      reloads: 1,
    },
    {
      name: 'drained, ready, stopped, in the upstream, available',
      events: [
        ...FIRST_WAVE,
        { type: 'drained', name: 'shop-old-1', reason: 'idle', ms: 300 },
        { type: 'ready', name: 'shop-new-1' },
        { type: 'stopped', name: 'shop-old-1', host: 'local' },
        { type: 'upstream', action: 'enable', down: [], up: ['shop-new-1'], reloads: 2, balancers: { [LB]: 40 } },
        { type: 'available', name: 'shop-new-1' },
      ],
      want: { 'shop-old-2': 'old available', 'shop-old-3': 'old available', 'shop-new-1': 'new available' },
      reloads: 2,
    },
    {
      name: 'a reload-free change (mode: dynamic) is not a reload; a restore is not a change',
      events: [
        { type: 'observed', instances: 3, byRevision: { [OLD]: 3 }, revision: NEW },
        { type: 'upstream', action: 'drain', down: ['shop-old-1'], up: [], reloads: 0, balancers: { [LB]: 5 }, reloadFree: true },
        { type: 'upstream', action: 'restore', down: [], up: [], reloads: 0 },
      ],
      want: { 'shop-old-1': 'old draining', 'shop-old-2': 'old available', 'shop-old-3': 'old available' },
      reloads: 0,
    },
    {
      name: 'complete: success',
      events: [...FIRST_WAVE, { type: 'complete', revision: NEW, version: '1.1.0' }],
      want: { 'shop-old-1': 'old draining', 'shop-old-2': 'old available', 'shop-old-3': 'old available', 'shop-new-1': 'new starting' },
      reloads: 1,
      outcome: 'success',
    },
    {
      name: 'failed, then rolled back and complete: rolled_back',
      events: [
        ...FIRST_WAVE,
        { type: 'failed', reason: 'progress deadline exceeded' },
        { type: 'rollingBack', revision: OLD, image: 'shop:1.0.0', version: '1.0.0' },
        { type: 'observed', instances: 4, byRevision: { [OLD]: 3, [NEW]: 1 }, revision: OLD },
        { type: 'complete', revision: OLD, version: '1.0.0' },
      ],
      want: { 'shop-old-1': 'old draining', 'shop-old-2': 'old available', 'shop-old-3': 'old available', 'shop-new-1': 'new starting' },
      reloads: 1,
      outcome: 'rolled_back',
    },
    { name: 'paused', events: [...FIRST_WAVE, { type: 'failed', reason: 'paused' }], want: {}, reloads: 1, outcome: 'paused' },
    {
      name: 'a canary aborted',
      events: [...FIRST_WAVE, { type: 'failed', reason: 'canary aborted: analysis failed' }],
      want: {},
      reloads: 1,
      outcome: 'rolled_back',
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const m = fold(fleetAtOld(), r.events);
      if (Object.keys(r.want).length > 0) assert.deepEqual(phases(m), r.want);
      assert.equal(m.reloads[LB], r.reloads);
      assert.equal(m.rollout?.outcome, r.outcome);
    });
  }

  it('the load balancer follows the upstream events; a stopped instance leaves it', () => {
    const m = fold(fleetAtOld(), [
      ...FIRST_WAVE,
      { type: 'upstream', action: 'enable', down: [], up: ['shop-new-1'], reloads: 2, balancers: { [LB]: 1 } },
      { type: 'stopped', name: 'shop-old-1', host: 'local' },
    ]);
    assert.deepEqual(m.balancers[LB], { 'shop-old-2': 'up', 'shop-old-3': 'up', 'shop-new-1': 'up' });
  });

  it('the instances gauge: every phase per (host, revision), zeros included', () => {
    const rows = instanceCounts(fold(fleetAtOld(), FIRST_WAVE)).filter((r) => r.count > 0);
    assert.deepEqual(rows, [
      { host: 'local', revision: OLD, phase: 'available', count: 2 },
      { host: 'local', revision: OLD, phase: 'draining', count: 1 },
      { host: 'local', revision: NEW, phase: 'starting', count: 1 },
    ]);
    assert.equal(instanceCounts(fleetAtOld()).length, 7, 'one (host, revision): seven phases');
  });

  it("endRollout: the caller's outcome wins; the version named at the start labels the new revision", () => {
    const m = fold(fleetAtOld(), [...FIRST_WAVE, { type: 'failed', reason: 'hook postWave failed' }]);
    assert.equal(m.versions[NEW], '1.1.0');
    const ended = endRollout(m, T0 + 5000, 'interrupted');
    assert.deepEqual([ended?.outcome, ended?.strategy, ended?.endedMs, m.rollout], ['interrupted', 'RollingUpdate', T0 + 5000, undefined]);
  });

  it('watch: phases and heals it reports itself', () => {
    const m = fleetAtOld();
    setPhase(m, 'shop-old-2', 'failed', T0 + 1);
    setPhase(m, 'shop-old-9', 'creating', T0 + 2, { host: 'local', revision: OLD });
    recordHeal(recordHeal(m, 'exited'), 'exited');
    assert.deepEqual([m.instances['shop-old-2']?.phase, m.instances['shop-old-9']?.phase, m.heals], ['failed', 'creating', { exited: 2 }]);
  });
});

const record = (o: Partial<AccessRecord> & { timeMs: number }): AccessRecord => ({
  status: 200,
  method: 'GET',
  uri: '/',
  requestTimeMs: 1,
  upstreamAddr: [],
  upstreamStatus: [],
  upstreamTimeMs: [],
  upstreamHeaderTimeMs: [],
  ...o,
});

describe('fleet model: traffic from the access log', () => {
  it("per revision by the final attempt's address, per second by answering version; a stopped instance keeps its requests", () => {
    const m = fold(fleetAtOld(), FIRST_WAVE);
    addTraffic(m, [
      record({ timeMs: T0 + 1100, upstreamAddr: ['10.0.0.1:8080'], appVersion: '1.0.0' }),
      record({ timeMs: T0 + 1200, upstreamAddr: ['10.0.0.1:8080', '10.0.0.9:8080'], upstreamStatus: [502, 200], appVersion: '1.1.0' }),
      record({ timeMs: T0 + 2100, upstreamAddr: ['10.0.0.9:8080'], status: 500, appVersion: '1.1.0' }),
      record({ timeMs: T0 + 2200, upstreamAddr: ['shop_upstream'], status: 502 }),
    ]);
    applyEvent(m, ev({ type: 'stopped', name: 'shop-old-1', host: 'local' }), T0 + 2500);
    addTraffic(m, [record({ timeMs: T0 + 2300, upstreamAddr: ['10.0.0.1:8080'], appVersion: '1.0.0' })]);
    assert.deepEqual(m.totals, { [OLD]: { requests: 2, errors5xx: 0 }, [NEW]: { requests: 2, errors5xx: 1 }, '': { requests: 1, errors5xx: 1 } });
    assert.deepEqual(
      m.traffic.map((t) => t.byVersion),
      [
        { '1.0.0': 1, '1.1.0': 1 },
        { '1.1.0': 1, '1.0.0': 1 },
      ],
    );
    const rates = trafficRates(m, T0 + 3000, 2);
    assert.deepEqual(rates[NEW], { requests: 1, errors5xx: 0.5 });
  });
});

describe('Prometheus series (scraped from the registry)', () => {
  it('instances, heals, reloads, rollouts, durations, health and traffic, with their labels', async () => {
    const m = fold(fleetAtOld(), [...FIRST_WAVE, { type: 'complete', revision: NEW, version: '1.1.0' }]);
    addTraffic(m, [record({ timeMs: T0 + 1100, upstreamAddr: ['10.0.0.9:8080'], status: 503 })]);
    const metrics = fleetMetrics(
      () => m,
      () => T0 + 2500,
    );
    const before = await metrics.registry.metrics();
    assert.match(before, /^fleetroll_heals_total\{service="shop",reason="exited"\} 0$/m, 'the heals series exists before any heal');
    metrics.heal('unready');
    const ended = endRollout(m, T0 + 12_000);
    assert.ok(ended);
    metrics.rolloutEnded(ended);
    metrics.deployHealth({
      sources: ['x'],
      window: { start: '', end: '', durationMs: 12_000 },
      requests: 120,
      failed5xx: 1,
      dropped: 0,
      clientClosed: 0,
      mixedVersionWindowMs: 4500,
      firstNewResponseAt: null,
      lastOldResponseAt: null,
      firstNewInstance: { name: 'shop-new-1', address: '10.0.0.9:8080', requests: 40, errors: 1, errorRate: 0.025 } as never,
      unattributed: 0,
      garbage: 0,
    });
    const text = await metrics.registry.metrics();
    const want = [
      `fleetroll_instances{service="shop",host="local",revision="${OLD}",phase="available"} 2`,
      `fleetroll_instances{service="shop",host="local",revision="${OLD}",phase="draining"} 1`,
      `fleetroll_instances{service="shop",host="local",revision="${NEW}",phase="starting"} 1`,
      `fleetroll_instances{service="shop",host="local",revision="${NEW}",phase="failed"} 0`,
      'fleetroll_heals_total{service="shop",reason="unready"} 1',
      `fleetroll_nginx_reloads_total{service="shop",load_balancer="${LB}"} 1`,
      'fleetroll_rollouts_total{service="shop",strategy="RollingUpdate",outcome="success"} 1',
      'fleetroll_rollout_duration_seconds_bucket{le="20",service="shop",outcome="success"} 1',
      'fleetroll_rollout_duration_seconds_sum{service="shop",outcome="success"} 12',
      'fleetroll_rollout_in_progress{service="shop"} 0',
      'fleetroll_last_deploy_requests{service="shop"} 120',
      'fleetroll_last_deploy_failed_requests{service="shop"} 1',
      'fleetroll_last_deploy_mixed_version_seconds{service="shop"} 4.5',
      'fleetroll_last_deploy_first_new_instance_error_ratio{service="shop"} 0.025',
      `fleetroll_requests_total{service="shop",revision="${NEW}"} 1`,
      `fleetroll_requests_5xx_total{service="shop",revision="${NEW}"} 1`,
      `fleetroll_request_rate{service="shop",revision="${NEW}"} 0.1`,
      '# TYPE fleetroll_rollout_duration_seconds histogram',
    ];
    for (const line of want) assert.ok(text.split('\n').includes(line), `${line}\nin:\n${text}`);
  });
});

describe('live page', () => {
  const EVIL = '<img src=x onerror="alert(1)">&\'';
  it('escapes every name and version that comes from users', () => {
    assert.equal(escapeHtml(EVIL), '&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;');
    const m = newFleetModel(`svc${EVIL}`, { balancers: [`lb${EVIL}`] });
    observeFleet(m, [{ name: `inst${EVIL}`, host: `host${EVIL}`, revision: `rev${EVIL}`, version: `v${EVIL}`, address: '10.0.0.1:80', running: true }], T0, {
      [`lb${EVIL}`]: [{ name: `inst${EVIL}`, down: false }],
    });
    beginRollout(m, `strategy${EVIL}`, T0, `ver${EVIL}`);
    applyEvent(m, ev({ type: 'canaryAborted', reason: `why${EVIL}` }), T0);
    addTraffic(m, [record({ timeMs: T0 - 1500, upstreamAddr: ['10.0.0.1:80'], appVersion: `app${EVIL}` })]);
    const html = renderPage(m, T0);
    assert.ok(!html.includes('<img'), 'no tag from a name survives');
    assert.ok(!/onerror="/.test(html), 'no attribute from a name survives');
    for (const what of ['svc', 'inst', 'host', 'lb', 'strategy', 'why', 'app']) assert.ok(html.includes(`${what}&lt;img`), `${what} is shown, escaped`);
  });

  it("shows each host's instances with revision, phase and address, the load balancer's servers and the rollout", () => {
    const m = fold(fleetAtOld(), [...FIRST_WAVE, { type: 'canaryStep', index: 1, kind: 'setWeight', weight: 25, instances: 1 }]);
    const s = renderSections(m, T0 + 5000);
    assert.match(s.hosts, /host local/);
    assert.match(
      s.hosts,
      /shop-new-1<\/td><td><span class="rev"[^>]*>1\.1\.0 · bbbbbbb<\/span><\/td><td><span class="phase starting">starting<\/span><\/td><td class="addr">10\.0\.0\.9:8080/,
    );
    assert.match(s.balancers, /shop-old-1<\/span> <span class="state">down/);
    assert.match(s.rollout, /RollingUpdate/);
    assert.match(s.rollout, /25% to the new revision/);
    assert.match(s.rollout, /<th>wave<\/th><td>1<\/td>/);
  });
});

describe('--metrics HOST:PORT', () => {
  const rows: { value: string; want?: { host: string; port: number } }[] = [
    { value: '127.0.0.1:9464', want: { host: '127.0.0.1', port: 9464 } },
    { value: '127.0.0.1:0', want: { host: '127.0.0.1', port: 0 } },
    { value: 'localhost:9464', want: { host: 'localhost', port: 9464 } },
    { value: '[::1]:9464', want: { host: '::1', port: 9464 } },
    { value: '9464' },
    { value: '127.0.0.1:65536' },
    { value: ':9464' },
    { value: 'http://127.0.0.1:9464' },
    { value: '127.0.0.1:94x' },
  ];
  for (const r of rows) {
    it(`${r.value} → ${r.want ? `${r.want.host} port ${r.want.port}` : 'refused'}`, () => {
      if (r.want) assert.deepEqual(parseListen('--metrics')(r.value), r.want);
      else
        assert.throws(
          () => parseListen('--metrics')(r.value),
          (e: unknown) => e instanceof ValidationError && /--metrics/.test(e.message) && /HOST:PORT/.test(e.message),
        );
    });
  }
});
