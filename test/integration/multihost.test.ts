/**
 * A fleet across three Docker engines: this machine's and two more started by
 * scripts/second-engine.sh (own data-root, socket and bridge), standing in for
 * VMs. nginx runs on this machine (exec placement) and reaches instances on
 * the address each host publishes them on.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { DockerRuntime } from '../../src/adapters/docker.js';
import { removeFleetState } from '../../src/adapters/fleetState.js';
import { LABELS } from '../../src/ports.js';
import {
  answeredVersion,
  docker,
  ensureImages,
  failedOf,
  loadOf,
  root,
  runCli,
  startCliUntil,
  startLocalNginx,
  uniqueName,
  type LocalNginx,
  startLoad,
} from './fixture.js';

const ENGINES = ['h2', 'h3'];
const engine = (n: string) => execa('bash', [join(root, 'scripts/second-engine.sh'), 'start', n], { stdin: 'ignore' });
const endpoints = new Map<string, string>();
const runtimes = new Map<string, DockerRuntime>();
const service = uniqueName('it-multi');
let dir = '';
let conf = '';
let url = '';
let nginx: LocalNginx | undefined;

async function cleanupEngines(): Promise<void> {
  for (const rt of [new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' }), ...runtimes.values()]) {
    const list = await rt.list({ [LABELS.service]: service }).catch(() => []);
    await Promise.all(
      list.map((c) =>
        rt.docker
          .getContainer(c.id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
  }
  await removeFleetState(docker, service);
}

before(async () => {
  await ensureImages();
  for (const n of ENGINES) {
    const r = await engine(n);
    endpoints.set(n, String(r.stdout).trim());
    runtimes.set(n, new DockerRuntime({ name: n, docker: String(r.stdout).trim() }));
  }
  dir = mkdtempSync(join(tmpdir(), `${service}-`));
  nginx = await startLocalNginx(dir, 'multi_api', 2);
  conf = nginx.conf;
  url = nginx.url;
});

after(async () => {
  await nginx?.stop();
  for (const n of ENGINES) await engine(n).catch(() => {});
  await cleanupEngines();
});

interface FleetOpts {
  image: string;
  drainSeconds?: number;
  deadline?: number;
  replicas?: number;
  maxSurge?: number;
  maxUnavailable?: number;
  /**
   * Reach h3 through this endpoint instead (a slow link), listed before h2 so
   * that h3's work is queued first. (local stays first: the fleet's state lives there.)
   */
  slowH3?: string;
  /**
   * A directory on this machine (every engine here shares its filesystem): the
   * instances mount it and are ready only once `ready` exists in it
   * (READY_FILE), so a test holds the rollout until it has made its condition.
   */
  gate?: string;
}

function fleetFile(opts: FleetOpts): string {
  const line = (n: string, endpoint: string) => `  - { name: ${n}, docker: "${endpoint}", publishAddress: 127.0.0.1, maxInstances: 3 }`;
  const hosts = [
    '  - { name: local, docker: "unix:///var/run/docker.sock", publishAddress: 127.0.0.1 }',
    ...(opts.slowH3 ? [line('h3', opts.slowH3), line('h2', endpoints.get('h2')!)] : ENGINES.map((n) => line(n, endpoints.get(n)!))),
  ].join('\n');
  const text = `service: ${service}
image: ${opts.image}
replicas: ${opts.replicas ?? 6}
port: 8080
env: { WARMUP_SECONDS: "0.5", PRESTOP_SECONDS: "1"${opts.gate ? ', READY_FILE: /gate/ready' : ''} }
${opts.gate ? `volumes: ["${opts.gate}:/gate:ro"]\n` : ''}hosts:
${hosts}
probes:
  readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 }
strategy:
  rollingUpdate: { maxSurge: ${opts.maxSurge ?? 2}, maxUnavailable: ${opts.maxUnavailable ?? 0} }
drainSeconds: ${opts.drainSeconds ?? 1}
terminationGracePeriodSeconds: 10
progressDeadlineSeconds: ${opts.deadline ?? 60}
loadBalancers:
  - nginx: { exec: true, config: ${conf}, upstreamFile: ${dir}/upstream.conf, upstream: multi_api }
`;
  const f = join(dir, `fleet-${Math.random().toString(36).slice(2, 7)}.yaml`);
  writeFileSync(f, text);
  return f;
}

async function perHost(): Promise<Record<string, number>> {
  const all = [new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' }), ...runtimes.values()];
  const out: Record<string, number> = {};
  for (const rt of all) out[rt.host] = (await rt.list({ [LABELS.service]: service })).filter((c) => c.running).length;
  return out;
}

async function versions(): Promise<string[]> {
  const all = [new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' }), ...runtimes.values()];
  const v: string[] = [];
  for (const rt of all) for (const c of await rt.list({ [LABELS.service]: service })) v.push(await answeredVersion(c.address ?? ''));
  return v.sort();
}

/** The rollout events of a `--log-format json` run, in order. */
function events(stdout: string): Record<string, unknown>[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => (JSON.parse(l) as { event?: Record<string, unknown> }).event)
    .filter((e): e is Record<string, unknown> => e !== undefined);
}

const startedHosts = (stdout: string) =>
  events(stdout)
    .filter((e) => e.type === 'started')
    .map((e) => String(e.host));

/**
 * A TCP endpoint in front of an engine's socket that holds every chunk sent
 * to the engine for delayMs: a far-away or overloaded host, as the deploy
 * machine sees it.
 */
async function slowLink(socketPath: string, delayMs: number): Promise<{ endpoint: string; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const engine = connect(socketPath);
    sockets.add(client).add(engine);
    client.on('data', (chunk) => setTimeout(() => engine.write(chunk), delayMs));
    engine.pipe(client);
    const end = () => {
      client.destroy();
      engine.destroy();
    };
    client.on('error', end).on('close', end);
    engine.on('error', end).on('close', end);
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', res));
  const port = (server.address() as { port: number }).port;
  return {
    endpoint: `tcp://127.0.0.1:${port}`,
    close: () =>
      new Promise((res) => {
        for (const s of sockets) s.destroy();
        server.close(() => res());
      }),
  };
}

/**
 * Brings the fleet to `replicas` × `image` with every engine up, whatever
 * the test before left (nothing, or a fleet already there: then the deploy
 * has nothing to do). Each test starts from the state it names, so any one
 * of them runs alone (--test-name-pattern) or in any order.
 */
async function fleetAt(image: string, replicas = 6): Promise<void> {
  for (const n of ENGINES) await engine(n);
  const r = await runCli(['deploy', '-f', fleetFile({ image, replicas })]);
  assert.equal(r.code, 0, `bringing the fleet to ${replicas} × ${image}: ${r.stdout}${r.stderr}`);
}

describe('a fleet across three Docker hosts', () => {
  it('copies the image to hosts that lack it, spreads instances evenly, and rolls 6 instances with zero failed requests', async () => {
    // No fleet and no app image on h2 and h3, so the rollout has to bring it.
    await cleanupEngines();
    for (const rt of runtimes.values()) {
      for (const tag of ['fleetroll-example:1.0.0', 'fleetroll-example:1.1.0'])
        await rt.docker
          .getImage(tag)
          .remove({ force: true })
          .catch(() => {});
    }
    const first = await runCli(['deploy', '-f', fleetFile({ image: 'fleetroll-example:1.0.0' })]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    for (const n of ENGINES) assert.match(first.stdout, new RegExp(`copied image fleetroll-example:1\\.0\\.0 to host ${n}: [\\d.]+ MB`));
    assert.deepEqual(await perHost(), { local: 2, h2: 2, h3: 2 });

    const load = startLoad(url, { getPerSecond: 10, postConcurrency: 2 });
    const r = await runCli(['deploy', '-f', fleetFile({ image: 'fleetroll-example:1.1.0' })]);
    const records = await load.stop();
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
    assert.ok(records.length > 80);
    assert.deepEqual(await versions(), Array(6).fill('1.1.0'));
    assert.deepEqual(await perHost(), { local: 2, h2: 2, h3: 2 });
    for (const c of await runtimes.get('h2')!.list({ [LABELS.service]: service }))
      assert.match(c.address ?? '', /^127\.0\.0\.1:\d+$/, 'published on the host address');
  });

  it('a slow host does not hold up the others; --host-parallelism 1 makes host work serial', async () => {
    // h3 behind a link that delays every request to its engine by 800 ms.
    const link = await slowLink(endpoints.get('h3')!.replace('unix://', ''), 800);
    try {
      await fleetAt('fleetroll-example:1.1.0');
      const opts = { slowH3: link.endpoint, maxSurge: 3, maxUnavailable: 0 };
      // 6 × 1.1.0 on 2/2/2. Wave 1 starts one new instance per host, queued local, h3, h2.
      const load = startLoad(url, { getPerSecond: 10, postConcurrency: 2 });
      const parallel = await runCli(['deploy', '-f', fleetFile({ ...opts, image: 'fleetroll-example:1.0.0' }), '--log-format', 'json']);
      const records = await load.stop();
      assert.equal(parallel.code, 0, parallel.stdout + parallel.stderr);
      assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
      assert.deepEqual(await versions(), Array(6).fill('1.0.0'));
      assert.deepEqual(await perHost(), { local: 2, h2: 2, h3: 2 });
      // The first step starts one new instance per host, queued local, h3, h2; the controller goes on
      // deciding while h3 is slow, so later starts may come in between: look at each host's first start.
      const started = startedHosts(parallel.stdout);
      const firstStart = (h: string) => started.indexOf(h);
      assert.ok(
        ['h2', 'h3', 'local'].every((h) => firstStart(h) >= 0),
        `every host started one: ${started.join(', ')}`,
      );
      assert.ok(firstStart('h2') < firstStart('h3'), `h2 queued after h3 but started first, as hosts work in parallel: ${started.join(', ')}`);

      const serial = await runCli([
        'deploy',
        '-f',
        fleetFile({ ...opts, image: 'fleetroll-example:1.1.0' }),
        '--host-parallelism',
        '1',
        '--log-format',
        'json',
      ]);
      assert.equal(serial.code, 0, serial.stdout + serial.stderr);
      const serialStarts = startedHosts(serial.stdout);
      const order = [...new Set(serialStarts)];
      assert.deepEqual(order, ['local', 'h3', 'h2'], `one host at a time, in the order queued: ${serialStarts.join(', ')}`);
      assert.deepEqual(await perHost(), { local: 2, h2: 2, h3: 2 });
      assert.deepEqual(await versions(), Array(6).fill('1.1.0'));
    } finally {
      await link.close();
    }
  });

  it('scaling replicas up and down is a rollout step: under load, spread kept even, nothing failed', async () => {
    await fleetAt('fleetroll-example:1.1.0');
    const load = startLoad(url, { getPerSecond: 10, postConcurrency: 2 });
    const up = await runCli(['deploy', '-f', fleetFile({ image: 'fleetroll-example:1.1.0', replicas: 9 }), '--log-format', 'json']);
    assert.equal(up.code, 0, up.stdout + up.stderr);
    assert.deepEqual(await perHost(), { local: 3, h2: 3, h3: 3 });
    // As in Kubernetes, a finished fleet scales in one step: 3 starts (under
    // replicas + maxSurge = 11), nothing stopped.
    const wavesOf = (stdout: string) =>
      events(stdout)
        .filter((e) => e.type === 'wave')
        .map((w) => ({ start: w.start, stops: (w.stop as string[]).length }));
    assert.deepEqual(wavesOf(up.stdout), [{ start: 3, stops: 0 }]);
    const down = await runCli(['deploy', '-f', fleetFile({ image: 'fleetroll-example:1.1.0', replicas: 3 }), '--log-format', 'json']);
    const records = await load.stop();
    assert.equal(down.code, 0, down.stdout + down.stderr);
    // 6 drained out of nginx, then stopped, in one step (availability stays ≥ 3).
    assert.deepEqual(wavesOf(down.stdout), [{ start: 0, stops: 6 }]);
    assert.deepEqual(await perHost(), { local: 1, h2: 1, h3: 1 }, 'stops taken from the fullest hosts first');
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
    assert.deepEqual(await versions(), Array(3).fill('1.1.0'));
  });

  it('a host that goes away mid-rollout: the rollout fails naming it, the other hosts keep serving', async () => {
    await fleetAt('fleetroll-example:1.1.0');
    const file = fleetFile({ image: 'fleetroll-example:1.0.0', drainSeconds: 2 });
    const running = await startCliUntil(['deploy', '-f', file], /wave 2:/);
    await execa('bash', [join(root, 'scripts/second-engine.sh'), 'stop', 'h3'], { stdin: 'ignore' });
    const { code, stdout, stderr } = await running.exited;
    assert.equal(code, 1, stdout + stderr);
    assert.match(stderr, /h3/);
    assert.match(stderr, /the instances on the other hosts keep serving|is not reachable|unreachable/i);
    // What is left on local and h2 answers through nginx.
    const records = await loadOf(url, 30);
    assert.deepEqual(failedOf(records), []);
  });

  it('onFailure rollback with a host gone: rolls back on the hosts that answer and says which one was left', async (t) => {
    await fleetAt('fleetroll-example:1.1.0');
    // The rollout's first new instances stay unready until h3 is really gone: stopping an engine
    // takes seconds on a busy machine, and a rollout that went on meanwhile met the loss of h3
    // in its rollback instead.
    const gate = mkdtempSync(join(tmpdir(), `${service}-gate-`));
    chmodSync(gate, 0o755);
    t.after(() => rmSync(gate, { recursive: true, force: true }));
    const running = await startCliUntil(['deploy', '-f', fleetFile({ image: 'fleetroll-example:1.0.0', drainSeconds: 2, gate }), '--auto-rollback'], /wave 1:/);
    await execa('bash', [join(root, 'scripts/second-engine.sh'), 'stop', 'h3'], { stdin: 'ignore' });
    writeFileSync(join(gate, 'ready'), '');
    chmodSync(join(gate, 'ready'), 0o644);
    const { code, stdout, stderr } = await running.exited;
    assert.equal(code, 1, stdout + stderr);
    assert.match(stdout, /host h3 does not answer: rolling back on local, h2 only/);
    assert.match(stderr, /rolled back \(onFailure: rollback\): every instance on local, h2 runs revision \w+ \(fleetroll-example:1\.1\.0/);
    assert.match(stderr, /host h3 did not answer: its instances were left as they are and out of nginx/);
    const reachable = [new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' }), runtimes.get('h2')!];
    const left: string[] = [];
    for (const rt of reachable) for (const c of await rt.list({ [LABELS.service]: service })) left.push(await answeredVersion(c.address ?? ''));
    assert.ok(left.length >= 4, `instances left on local and h2: ${left.length}`);
    assert.deepEqual(left, Array(left.length).fill('1.1.0'));
    const records = await loadOf(url, 30);
    assert.deepEqual(failedOf(records), []);
  });
});
