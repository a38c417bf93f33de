/**
 * Readiness and verification beyond HTTP, on simulated hosts and a virtual
 * clock: a worker with no port and no load balancer rolls with every
 * strategy, ready from an exec or Docker's healthcheck (through the real
 * adapters/probes.ts prober on the simulated runtimes), and `version: false`
 * verifies image IDs and revision labels instead of an endpoint. Also the
 * probes: block's schema and the rule for when `port` is required. The TCP
 * probe against real sockets is in test/local/worker.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildProber } from '../../src/adapters/probes.js';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import { deploy } from '../../src/engine/rollout.js';
import { revisionOf } from '../../src/engine/revision.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { RolloutFailedError, ValidationError } from '../../src/errors.js';
import { LABELS, type ProbeTarget, type Runtime } from '../../src/ports.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { SimWorld, simImageId } from '../../src/sim/ports.js';
import { SimRuntime } from '../../src/sim/runtime.js';

const OLD_REVISION = 'worker-old';

async function workerFleet(over: Record<string, unknown> = {}): Promise<Fleet> {
  return fleetFromObject(
    {
      service: 'queue-worker',
      image: 'worker:1.1.0',
      replicas: 4,
      hosts: [{ name: 'h1' }, { name: 'h2' }],
      probes: { readiness: { exec: ['pg_isready', '-q'], periodMs: 100 }, version: false },
      drainSeconds: 0,
      progressDeadlineSeconds: 60,
      ...over,
    },
    'worker.yaml',
  );
}

/** SimRuntime that records the probes it answers, and may lie about one container's image. */
class CountingRuntime extends SimRuntime {
  readonly execs: { id: string; cmd: readonly string[] }[] = [];
  readonly healths: string[] = [];
  staleImageFor: string | undefined;
  noImageHealthcheck = false;

  override async exec(id: string, cmd: readonly string[], timeoutMs: number): Promise<number> {
    this.execs.push({ id, cmd });
    return super.exec(id, cmd, timeoutMs);
  }
  override async health(id: string) {
    this.healths.push(id);
    return super.health(id);
  }
  override async containerImage(id: string): Promise<string | undefined> {
    const c = this.world.containers.get(id);
    if (c && c.name === this.staleImageFor) return 'sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef';
    return super.containerImage(id);
  }
  override async imageInfo(image: string) {
    const i = await super.imageInfo(image);
    return this.noImageHealthcheck ? { ...i, healthcheck: false } : i;
  }
  constructor(
    host: string,
    readonly world: SimWorld,
  ) {
    super(host, world);
  }
}

/** The revision a deploy records: the image is pinned to the build the simulated engine has (its ID, no registry digest). */
const pinnedRevision = (fleet: Fleet) => revisionOf({ ...fleet, digest: simImageId(fleet.image) });

async function rollWorker(fleet: Fleet, o: { stale?: string; noImageHealthcheck?: boolean; initial?: number } = {}) {
  const clock = new VirtualClock();
  const world = new SimWorld(clock, { startupMs: 2000, stopMs: 500, runMs: 100, reloadMs: 0, jitter: 0 }, () => 0.5);
  const runtimes = new Map(fleet.hosts.map((h) => [h.name, new CountingRuntime(h.name, world)] as const));
  for (const rt of runtimes.values()) {
    rt.staleImageFor = o.stale;
    rt.noImageHealthcheck = o.noImageHealthcheck === true;
  }
  const initial = o.initial ?? fleet.replicas;
  for (let i = 0; i < initial; i++) {
    const host = fleet.hosts[i % fleet.hosts.length]!.name;
    world.seed(
      host,
      `queue-worker-old-${i + 1}`,
      { [LABELS.managed]: 'true', [LABELS.service]: fleet.service, [LABELS.revision]: OLD_REVISION, [LABELS.version]: '1.0.0', [LABELS.created]: '0' },
      undefined,
      'worker:1.0.0',
    );
  }
  // Workers have no load balancer to hold capacity: count running, ready containers whenever one stops.
  let lowestReady = Number.POSITIVE_INFINITY;
  world.onEvent = (e) => {
    if (e.kind !== 'stopping' && e.kind !== 'exited') return;
    let n = 0;
    for (const c of world.containers.values()) if (c.state === 'running' && !c.stopping && clock.now() >= c.readyAt) n++;
    lowestReady = Math.min(lowestReady, n);
  };
  const events: RolloutEvent[] = [];
  let suffix = 0;
  const run = deploy(fleet, {
    runtimes,
    routers: [],
    prober: buildProber(fleet.probes, runtimes),
    clock,
    events: (e) => events.push(e),
    nameSuffix: () => String(++suffix).padStart(5, '0'),
    timing: { observeMs: 60_000 },
  });
  const result = await clock.run(run).then(
    (r) => ({ ok: true as const, r }),
    (err: unknown) => ({ ok: false as const, err }),
  );
  return { result, world, runtimes: [...runtimes.values()], events, lowestReady, clock };
}

describe('a worker with no port and no load balancer rolls with every strategy', () => {
  const rows: { name: string; over: Record<string, unknown>; minReady: number }[] = [
    { name: 'RollingUpdate 1/0, exec readiness', over: { strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } } }, minReady: 4 },
    { name: 'RollingUpdate 0/2, exec readiness', over: { strategy: { rollingUpdate: { maxSurge: 0, maxUnavailable: 2 } } }, minReady: 2 },
    { name: 'Recreate, exec readiness', over: { strategy: { type: 'Recreate' } }, minReady: 0 },
    { name: 'BlueGreen, exec readiness', over: { strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 0 } } }, minReady: 4 },
    {
      name: 'RollingUpdate 25%/25%, healthcheck readiness',
      over: { probes: { readiness: { healthcheck: true, periodMs: 100 }, version: false } },
      minReady: 3,
    },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      const fleet = await workerFleet(row.over);
      assert.equal(fleet.port, undefined);
      const { result, world, runtimes, events, lowestReady } = await rollWorker(fleet);
      assert.ok(result.ok, result.ok ? '' : String((result.err as Error).message));
      const revision = pinnedRevision(fleet);
      const left = [...world.containers.values()];
      assert.equal(left.length, 4, 'replicas containers left');
      assert.ok(
        left.every((c) => c.labels[LABELS.revision] === revision && c.state === 'running'),
        'only the new revision runs',
      );
      assert.ok(
        left.every((c) => c.imageId.endsWith('worker:1.1.0')),
        'from the new image',
      );
      assert.equal(events.filter((e) => e.type === 'verified').length, 4, 'every instance verified');
      assert.ok(
        result.r.instances.every((i) => i.address === '' || i.address === undefined),
        'no addresses: nothing connects to a worker',
      );
      assert.ok(lowestReady >= row.minReady, `ready workers fell to ${lowestReady} (< ${row.minReady})`);
      const execs = runtimes.flatMap((r) => r.execs);
      const healths = runtimes.flatMap((r) => r.healths);
      if ('healthcheck' in ((row.over.probes as { readiness?: object } | undefined)?.readiness ?? {})) {
        assert.equal(execs.length, 0);
        assert.ok(healths.length >= 4, 'Docker health asked');
        assert.ok(
          healths.every((id) => id.startsWith('sim-')),
          'asked by Docker id',
        );
      } else {
        assert.ok(execs.length >= 4, 'the exec probe ran');
        assert.ok(
          execs.every((x) => x.id.startsWith('sim-') && x.cmd.join(' ') === 'pg_isready -q'),
          'the argument array, by Docker id',
        );
      }
    });
  }

  it('a worker that never gets ready hits the progress deadline, named in the failure', async () => {
    const fleet = await workerFleet({ progressDeadlineSeconds: 10, probes: { readiness: { exec: ['false'], periodMs: 100 }, version: false } });
    const clock = new VirtualClock();
    const world = new SimWorld(clock, { startupMs: 2000, stopMs: 500, runMs: 100, reloadMs: 0, jitter: 0 }, () => 0.5, {
      neverReady: new Set([fleet.version]),
    });
    const runtimes = new Map(fleet.hosts.map((h) => [h.name, new SimRuntime(h.name, world)] as const));
    const err = await clock
      .run(deploy(fleet, { runtimes, routers: [], prober: buildProber(fleet.probes, runtimes), clock, timing: { observeMs: 60_000 } }))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof RolloutFailedError, String(err));
    assert.match(err.message, /progressDeadlineSeconds/);
    assert.match(err.message, /queue-worker-[0-9a-f]{7}-[0-9a-z]{5} on h1: readiness probe failing/);
  });

  it('one that Docker keeps restarting is named a crash loop, with its restart count', async () => {
    const fleet = await workerFleet({ progressDeadlineSeconds: 10, probes: { readiness: { exec: ['false'], periodMs: 100 }, version: false } });
    const clock = new VirtualClock();
    const world = new SimWorld(clock, { startupMs: 2000, stopMs: 500, runMs: 100, reloadMs: 0, jitter: 0 }, () => 0.5, {
      neverReady: new Set([fleet.version]),
    });
    const runtimes = loopingRuntimes(fleet, world, 5);
    const err = await clock
      .run(deploy(fleet, { runtimes, routers: [], prober: buildProber(fleet.probes, runtimes), clock, timing: { observeMs: 60_000 } }))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof RolloutFailedError, String(err));
    assert.match(err.message, /queue-worker-[0-9a-f]{7}-[0-9a-z]{5} on h1: readiness probe failing \(restarted 5 times by Docker: a crash loop\)/);
  });
});

/** Runtimes whose inspect reports what a container its restart policy brought back again and again shows: `restarts` restarts. */
function loopingRuntimes(fleet: { hosts: readonly { name: string }[] }, world: SimWorld, restarts: number): Map<string, SimRuntime> {
  class Looping extends SimRuntime {
    override async inspect(id: string) {
      const i = await super.inspect(id);
      return i && { ...i, restartCount: restarts };
    }
  }
  return new Map(fleet.hosts.map((h) => [h.name, new Looping(h.name, world)] as const));
}

describe('the deadline report names a crash loop whatever the probe said last', () => {
  it('a probe whose answer changes after the report was written: the restart count still joins its line', async () => {
    const fleet = await workerFleet({ progressDeadlineSeconds: 10, probes: { readiness: { exec: ['false'], periodMs: 100 }, version: false } });
    const clock = new VirtualClock();
    const world = new SimWorld(clock, { startupMs: 2000, stopMs: 500, runMs: 100, reloadMs: 0, jitter: 0 }, () => 0.5, {
      neverReady: new Set([fleet.version]),
    });
    const runtimes = loopingRuntimes(fleet, world, 2);
    // Every answer differs (a refused connection, then another): as a real probe's error text does.
    let n = 0;
    const prober = {
      ready: async () => {
        throw new Error(`connect ECONNREFUSED (probe ${++n})`);
      },
      version: async () => fleet.version,
    };
    const err = await clock.run(
      deploy(fleet, { runtimes, routers: [], prober, clock, timing: { observeMs: 60_000 } }).then(
        () => undefined,
        (e: unknown) => e,
      ),
    );
    assert.ok(err instanceof RolloutFailedError, String(err));
    assert.match(err.message, /on h1: readiness probe error: connect ECONNREFUSED \(probe \d+\) \(restarted 2 times by Docker: a crash loop\)/);
  });
});

describe('version: false verifies image ID, revision label and readiness', () => {
  it('an instance running a stale build of the tag fails the rollout, named with both image IDs', async () => {
    const fleet = await workerFleet();
    const name = `queue-worker-${pinnedRevision(fleet).slice(0, 7)}-00002`;
    const { result } = await rollWorker(fleet, { stale: name });
    assert.equal(result.ok, false);
    const err = (result as { err: unknown }).err;
    assert.ok(err instanceof RolloutFailedError, String(err));
    assert.match(err.message, /1 of 4 instance\(s\) do not run revision/);
    assert.match(err.message, new RegExp(`${name} on h2: runs image sha256:0123456789ab, but worker:1\\.1\\.0 is sha256:sim-worker:1\\.1\\.0 on host h2`));
  });

  it('the right image on every instance passes, with one verified event each', async () => {
    const fleet = await workerFleet();
    const { result, events } = await rollWorker(fleet);
    assert.ok(result.ok);
    assert.deepEqual(
      events
        .filter((e) => e.type === 'verified')
        .map((e) => (e as { name: string }).name)
        .sort(),
      result.r.instances.map((i) => i.name).sort(),
    );
  });
});

describe('readiness { healthcheck: true } needs a healthcheck', () => {
  it('an image without HEALTHCHECK and no fleet healthcheck fails at preflight, nothing changed', async () => {
    const fleet = await workerFleet({ probes: { readiness: { healthcheck: true }, version: false } });
    const { result, world } = await rollWorker(fleet, { noImageHealthcheck: true });
    assert.equal(result.ok, false);
    const err = (result as { err: unknown }).err as Error;
    assert.match(err.message, /preflight failed, nothing was changed/);
    assert.match(err.message, /image worker:1\.1\.0 on host h1 defines no HEALTHCHECK and the fleet sets no healthcheck/);
    assert.ok(
      [...world.containers.values()].every((c) => c.labels[LABELS.revision] === OLD_REVISION),
      'the old fleet untouched',
    );
  });

  it("the fleet's own healthcheck stands in for the image's", async () => {
    const fleet = { ...(await workerFleet({ probes: { readiness: { healthcheck: true }, version: false } })), healthcheck: { test: ['CMD', 'true'] } } as Fleet;
    const { result } = await rollWorker(fleet, { noImageHealthcheck: true });
    assert.ok(result.ok, result.ok ? '' : String((result.err as Error).message));
  });
});

async function issues(raw: Record<string, unknown>): Promise<readonly { path: string; message: string }[]> {
  try {
    await fleetFromObject({ service: 'w', image: 'w:1', replicas: 1, ...raw }, 'fleet.yaml');
    return [];
  } catch (err) {
    if (err instanceof ValidationError) return err.issues;
    throw err;
  }
}

const LB = [{ nginx: { container: 'n', upstreamFile: '/etc/nginx/conf.d/u.conf', upstream: 'w' } }];

describe('port is required only where something connects to the app', () => {
  const rows: { name: string; raw: Record<string, unknown>; want: RegExp | undefined }[] = [
    { name: 'exec readiness, version false, no load balancer', raw: { probes: { readiness: { exec: ['true'] }, version: false } }, want: undefined },
    { name: 'healthcheck readiness, version false', raw: { probes: { readiness: { healthcheck: true }, version: false } }, want: undefined },
    { name: 'a port given makes everything fine', raw: { port: 80, loadBalancers: LB }, want: undefined },
    {
      name: 'the defaults (HTTP readiness and version)',
      raw: {},
      want: /^is required .*probes\/readiness is an HTTP GET of \/health\/ready; probes\/version asks GET \/api\/version/,
    },
    {
      name: 'load balancers',
      raw: { loadBalancers: LB, probes: { readiness: { exec: ['true'] }, version: false } },
      want: /load balancers \(loadBalancers: 1\) that send traffic to it/,
    },
    { name: 'tcp: true', raw: { probes: { readiness: { tcp: true }, version: false } }, want: /TCP connect to the app port/ },
    { name: 'tcp to another port', raw: { probes: { readiness: { tcp: { port: 5432 } }, version: false } }, want: /TCP connect to the container/ },
    {
      name: 'an HTTP version probe',
      raw: { probes: { readiness: { exec: ['true'] } } },
      want: /^is required .*probes\/version asks GET \/api\/version \(set version: false/,
    },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const got = await issues(r.raw);
      if (r.want === undefined) return assert.deepEqual(got, []);
      assert.equal(got.length, 1, JSON.stringify(got));
      assert.equal(got[0]!.path, 'port');
      assert.match(got[0]!.message, r.want);
    });
  }
});

describe('probes: block', () => {
  const bad: { name: string; probes: unknown; path: string; message: RegExp }[] = [
    {
      name: 'two kinds',
      probes: { readiness: { exec: ['true'], tcp: true } },
      path: 'probes/readiness',
      message: /set one of path \(HTTP GET\), healthcheck: true, tcp: true \(or \{ port: N \}\) or exec.*; got tcp and exec/,
    },
    {
      name: 'exec as a shell string',
      probes: { readiness: { exec: 'pg_isready -q' } },
      path: 'probes/readiness/exec',
      message: /argument array like \["pg_isready", "-q"\] \(no shell string\)/,
    },
    { name: 'empty exec', probes: { readiness: { exec: [] } }, path: 'probes/readiness/exec', message: /must name a program to run/ },
    { name: 'healthcheck: false', probes: { readiness: { healthcheck: false } }, path: 'probes/readiness/healthcheck', message: /must be true/ },
    {
      name: 'tcp port out of range',
      probes: { readiness: { tcp: { port: 70000 } } },
      path: 'probes/readiness/tcp/port',
      message: /port from 1 to 65535, got 70000/,
    },
    { name: 'version: true', probes: { version: true }, path: 'probes/version', message: /or false \(verify image and revision instead\), got true/ },
    { name: 'unknown readiness field', probes: { readiness: { command: ['x'] } }, path: 'probes/readiness', message: /unknown field "command"/ },
    {
      name: 'periodMs too small',
      probes: { readiness: { healthcheck: true, periodMs: 1 } },
      path: 'probes/readiness/periodMs',
      message: /from 10 to 60000, got 1/,
    },
  ];
  for (const r of bad) {
    it(`refuses ${r.name}`, async () => {
      const got = await issues({ port: 80, probes: r.probes });
      const hit = got.find((i) => i.path === r.path);
      assert.ok(hit, `expected an issue at ${r.path}, got ${JSON.stringify(got)}`);
      assert.match(hit.message, r.message);
    });
  }

  it('keeps the HTTP defaults and shape', async () => {
    const f = await fleetFromObject({ service: 'w', image: 'w:1', replicas: 1, port: 80 }, 'fleet.yaml');
    assert.deepEqual(f.probes, { readiness: { path: '/health/ready', periodMs: 250, timeoutMs: 1000 }, version: { path: '/api/version' } });
    const g = await fleetFromObject(
      { service: 'w', image: 'w:1', replicas: 1, port: 80, probes: { readiness: { tcp: { port: 5432 }, timeoutMs: 300 } } },
      'fleet.yaml',
    );
    assert.deepEqual(g.probes.readiness, { tcp: { port: 5432 }, periodMs: 250, timeoutMs: 300 });
  });

  it('a healthcheck readiness with the fleet healthcheck disabled is refused', async () => {
    const { probeIssues } = await import('../../src/config/probes.js');
    const probes = { readiness: { healthcheck: true as const, periodMs: 250, timeoutMs: 1000 }, version: false as const };
    assert.deepEqual(
      probeIssues({ probes, hosts: [], healthcheck: { disable: true } }).map((i) => i.path),
      ['probes/readiness/healthcheck'],
    );
    assert.deepEqual(probeIssues({ probes, hosts: [], healthcheck: { test: ['CMD', 'true'] } }), []);
  });

  it('tcp to another port is refused on hosts that publish only the app port', async () => {
    const got = await issues({ port: 80, hosts: [{ name: 'a' }, { name: 'b', publishAddress: '10.0.0.2' }], probes: { readiness: { tcp: { port: 5432 } } } });
    assert.deepEqual(
      got.map((i) => i.path),
      ['probes/readiness/tcp/port'],
    );
    assert.match(got[0]!.message, /host\(s\) b/);
  });
});

describe('the probes that need no connection', () => {
  const none = new Map<string, Runtime>();
  const t = (address?: string): ProbeTarget => ({ id: 'c1', host: 'local', address });

  it('an HTTP readiness without an address is not ready; version: false has no endpoint to ask', async () => {
    const p = buildProber({ readiness: { path: '/health/ready', periodMs: 100, timeoutMs: 500 }, version: false }, none);
    assert.equal(await p.ready(t(undefined)), false);
    await assert.rejects(p.version('127.0.0.1:9'), /no version endpoint \(probes\.version: false\)/);
  });

  it('a healthcheck or exec probe on an unknown host is an error naming it', async () => {
    const p = buildProber({ readiness: { healthcheck: true, periodMs: 100, timeoutMs: 500 }, version: false }, none);
    await assert.rejects(p.ready(t(undefined)), /no runtime for host local \(probing c1\)/);
  });
});
