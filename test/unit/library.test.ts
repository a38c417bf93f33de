/**
 * The library's API (src/index.ts) without Docker: plan, simulate and
 * validate give what the CLI's commands compute, bad input is a
 * ValidationError naming the field (exit code 2) before anything is reached,
 * and deployWith runs the engine on ports the caller brings (here the
 * simulated hosts, with a prober of the caller's own).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  deploy,
  deployWith,
  ExitCode,
  FleetrollError,
  fleetFromObject,
  loadFleet,
  plan,
  RolloutFailedError,
  simulate,
  validate,
  ValidationError,
  type Fleet,
  type Prober,
  type ProbeTarget,
  type RolloutEvent,
} from '../../src/index.js';
import { planStrategy } from '../../src/core/plan.js';
import { LABELS } from '../../src/ports.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { SimProber, SimWorld } from '../../src/sim/ports.js';
import { SimRuntime } from '../../src/sim/runtime.js';
import { simulateRollout } from '../../src/sim/simulate.js';

const example = (name: string) => fileURLToPath(new URL(`../../examples/${name}`, import.meta.url));

describe('plan, simulate and validate do what the CLI does', () => {
  it('plan of a fleet file: the waves `plan -f examples/fleet.yaml --json` prints', async () => {
    const r = await plan(example('fleet.yaml'));
    assert.equal(r.plan.type, 'RollingUpdate');
    assert.deepEqual(r.plan.type === 'RollingUpdate' ? r.plan.rolling.waves : undefined, [
      [3, 0],
      [3, 1],
      [2, 2],
      [1, 3],
      [0, 3],
    ]);
    assert.equal(r.strategy.sources.maxSurge, 'strategy');
  });

  it('plan with an override, as `--max-unavailable 1`', async () => {
    const r = await plan(example('fleet.yaml'), { overrides: { maxUnavailable: '1' } });
    assert.deepEqual(r.plan.type === 'RollingUpdate' ? r.plan.rolling.waves : undefined, [
      [3, 0],
      [2, 2],
      [0, 3],
    ]);
  });

  it('plan from a replica count alone, as `plan --replicas 10`', async () => {
    const r = await plan({ replicas: 10 });
    assert.deepEqual([r.strategy.maxSurge, r.strategy.maxUnavailable], [3, 2]);
    assert.deepEqual(r.plan.type === 'RollingUpdate' ? r.plan.rolling.waves : undefined, [
      [10, 0],
      [8, 5],
      [3, 10],
      [0, 10],
    ]);
  });

  it('plan of a canary fleet: its steps, as planStrategy gives them for the loaded fleet', async () => {
    const r = await plan(example('canary.yaml'));
    const fleet = await loadFleet(example('canary.yaml'));
    assert.deepEqual(r.plan, planStrategy(fleet.strategy, { prePromotion: false }));
    assert.equal(r.plan.type, 'Canary');
  });

  it("simulate of a fleet file: the CLI's nominal defaults (startup 3 s, stop 1 s, the fleet's drain and probe period)", async () => {
    const fleet = await loadFleet(example('fleet.yaml'));
    const want = await simulateRollout(fleet.strategy, {
      startupMs: 3000,
      drainMs: 2000,
      stopMs: 1000,
      minReadyMs: 0,
      jitter: 0,
      seed: 1,
      periodMs: fleet.probes.readiness.periodMs,
    });
    const r = await simulate(example('fleet.yaml'));
    assert.deepEqual({ ...r, deploy: undefined }, { ...want, deploy: undefined });
    assert.deepEqual([r.durationMs, r.waves, r.peakInstances, r.lowestCapacity], [12050, 4, 6, 3]);
  });

  it('simulate passes every event with its virtual time', async () => {
    const seen: [RolloutEvent['type'], number][] = [];
    const r = await simulate({ replicas: 2, maxSurge: 1, maxUnavailable: 0 }, { timings: { startupMs: 500 }, onEvent: (e, at) => seen.push([e.type, at]) });
    assert.equal(seen.filter(([t]) => t === 'available').length, 2, 'each new instance became available');
    assert.deepEqual(seen.at(-1), ['complete', r.durationMs]);
  });

  it('validate: the fleet, and what `fleetroll validate` says of its nginx and access logs', async () => {
    const r = await validate(example('canary.yaml'));
    assert.equal(r.fleet.service, 'bookstore-api');
    assert.ok(
      r.notes.some((l) => l.startsWith('nginx (Canary), loadBalancers/0') && l.includes('hash $cookie_session consistent;')),
      r.notes.join('\n'),
    );
    assert.ok(
      r.notes.some((l) => l.startsWith('analysis: every 10 s') && l.endsWith('runs at canary step 3')),
      r.notes.join('\n'),
    );
    assert.deepEqual(r.warnings, []);
  });
});

describe('bad input: a ValidationError naming the field, exit code 2, nothing reached', () => {
  const loaded = () => loadFleet(example('fleet.yaml'));
  const rows: [string, () => Promise<unknown>, RegExp][] = [
    ['plan with a negative replica count', () => plan({ replicas: -1 }), /^replicas: must be a whole number from 0 to 10000, got -1$/],
    ['plan with a malformed maxSurge', () => plan({ replicas: 4, maxSurge: '25 %' }), /^maxSurge: .*got "25 %"/],
    ['plan of something that is no fleet', () => plan(42 as unknown as string), /^fleet: must be a fleet file's path/],
    ['simulate with a jitter above 1', () => simulate({ replicas: 3 }, { timings: { jitter: 2 } }), /^timings\/jitter: must be a fraction from 0 to 1, got 2$/],
    [
      'simulate with a negative startup',
      () => simulate({ replicas: 3 }, { timings: { startupMs: -1 } }),
      /^timings\/startupMs: must be a number of milliseconds, 0 or more, got -1$/,
    ],
    [
      'simulate with overrides beside a replica count',
      () => simulate({ replicas: 3 }, { overrides: { maxSurge: '1' } }),
      /^overrides: apply to a fleet file's path only/,
    ],
    [
      'deploy with a negative lock wait',
      () => deploy(example('fleet.yaml'), { lockWaitMs: -1 }),
      /^lockWaitMs: must be a number of milliseconds, 0 or more, got -1$/,
    ],
    [
      'deploy with a replicas override',
      () => deploy(example('fleet.yaml'), { overrides: { replicas: 5 } as never }),
      /^overrides\/replicas: is for plan and simulate only/,
    ],
    [
      'deploy of a loaded fleet with overrides',
      async () => deploy(await loaded(), { overrides: { image: 'fleetroll-example:1.1.0' } }),
      /^overrides: apply to a fleet file's path only/,
    ],
    ['deploy with an invalid image', () => deploy(example('fleet.yaml'), { overrides: { image: 'Bad Image!' } }), /--image: /],
    ['validate of a missing file', () => validate(example('nope.yaml')), /cannot read fleet file .*nope\.yaml: no such file/],
  ];
  for (const [name, call, message] of rows) {
    it(name, async () => {
      const err = await call().then(
        () => assert.fail('resolved'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof FleetrollError, String(err));
      assert.equal(err.exitCode, ExitCode.invalidInput, err.message);
      assert.match(err.message, message);
      if (!name.includes('missing file')) assert.ok(err instanceof ValidationError);
    });
  }
});

describe('deployWith: the engine on ports the caller brings', () => {
  async function shopFleet(): Promise<Fleet> {
    return fleetFromObject(
      {
        service: 'shop',
        image: 'shop:1.1.0',
        replicas: 3,
        port: 8080,
        hosts: [{ name: 'h1' }, { name: 'h2' }],
        probes: { readiness: { path: '/ready', periodMs: 100 } },
        strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } },
        drainSeconds: 0,
        progressDeadlineSeconds: 30,
      },
      'shop.yaml',
    );
  }

  /** Simulated hosts with 3 × shop 1.0.0 running, and the caller's prober in front of the simulated one. */
  async function roll(ready: (simulated: boolean, version: string | undefined) => boolean) {
    const fleet = await shopFleet();
    const clock = new VirtualClock();
    const world = new SimWorld(clock, { startupMs: 1000, stopMs: 200, runMs: 50, reloadMs: 0, jitter: 0 }, () => 0.5);
    const runtimes = new Map(fleet.hosts.map((h) => [h.name, new SimRuntime(h.name, world)] as const));
    for (let i = 0; i < 3; i++) {
      world.seed(
        `h${(i % 2) + 1}`,
        `shop-old-${i + 1}`,
        { [LABELS.managed]: 'true', [LABELS.service]: 'shop', [LABELS.revision]: 'old', [LABELS.version]: '1.0.0', [LABELS.created]: '0' },
        8080,
        'shop:1.0.0',
      );
    }
    const sim = new SimProber(world);
    const asked = new Set<string>();
    const prober: Prober = {
      ready: async (t: ProbeTarget) => {
        asked.add(t.id);
        return ready(await sim.ready(t), world.containers.get(t.id)?.labels[LABELS.version]);
      },
      version: (address) => sim.version(address),
    };
    const events: RolloutEvent[] = [];
    const run = deployWith(fleet, { runtimes, routers: [], prober, clock, events: (e) => events.push(e), timing: { observeMs: 60_000 } });
    const outcome = await clock.run(run).then(
      (r) => ({ ok: true as const, r }),
      (err: unknown) => ({ ok: false as const, err }),
    );
    return { outcome, asked, events, world };
  }

  it('a prober of its own decides readiness: the fleet rolls to 1.1.0', async () => {
    const { outcome, asked, events, world } = await roll((simulated) => simulated);
    assert.ok(outcome.ok, outcome.ok ? '' : String(outcome.err));
    assert.deepEqual(
      outcome.r.instances.map((i) => i.version),
      ['1.1.0', '1.1.0', '1.1.0'],
    );
    assert.deepEqual(
      [...world.containers.values()].map((c) => c.labels[LABELS.version]),
      ['1.1.0', '1.1.0', '1.1.0'],
    );
    assert.ok(asked.size >= 3, `the caller's prober was asked of ${asked.size} instance(s)`);
    assert.equal(events.filter((e) => e.type === 'verified').length, 3);
  });

  it('a prober that never says ready: the rollout fails at its deadline, the old instances still running', async () => {
    const { outcome, world } = await roll((simulated, version) => simulated && version === '1.0.0');
    assert.ok(!outcome.ok, 'the rollout failed');
    assert.ok(outcome.err instanceof RolloutFailedError, String(outcome.err));
    assert.match(outcome.err.message, /progressDeadlineSeconds|deadline/);
    assert.equal([...world.containers.values()].filter((c) => c.labels[LABELS.version] === '1.0.0' && c.state === 'running').length, 3);
  });
});
