/**
 * The script control (the article's rolling.sh in batches) against in-memory
 * ports: which upstream it writes when, the events it emits, and that it gives
 * up after progressDeadlineSeconds. The real thing runs in
 * test/integration/experiment.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import { parseUpstreamServers } from '../../src/core/upstream.js';
import type { DeployDeps } from '../../src/engine/rollout.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { revisionOf } from '../../src/engine/revision.js';
import { scriptRollout } from '../../src/experiment/scriptControl.js';
import { LABELS, type InstanceInfo, type InstanceSpec, type Prober, type Router, type Runtime } from '../../src/ports.js';

const TEMPLATE = 'upstream {{upstream}} {\n{{servers}}\n}\n';

async function fleetAt(version: string, o: { drainSeconds?: number; progressDeadlineSeconds?: number } = {}): Promise<Fleet> {
  return fleetFromObject(
    {
      service: 'shop',
      image: `shop:${version}`,
      replicas: 4,
      port: 8080,
      hosts: [{ name: 'local', docker: 'unix:///var/run/docker.sock', network: 'shop-net' }],
      drainSeconds: o.drainSeconds ?? 2,
      progressDeadlineSeconds: o.progressDeadlineSeconds ?? 60,
      terminationGracePeriodSeconds: 10,
      loadBalancers: [{ nginx: { container: 'shop-nginx', host: 'local', upstreamFile: '/etc/nginx/conf.d/upstream.conf', upstream: 'shop' } }],
    },
    'fleet.yaml',
  );
}

/** One host's containers in memory; `log` records every call in order. */
class FakeRuntime implements Runtime {
  readonly host = 'local';
  readonly containers = new Map<string, InstanceInfo>();
  readonly log: string[] = [];
  stopTimeouts: number[] = [];
  private ip = 10;
  add(name: string, revision: string, created: number): void {
    this.containers.set(name, {
      id: name,
      name,
      host: 'local',
      labels: { [LABELS.service]: 'shop', [LABELS.managed]: 'true', [LABELS.revision]: revision, [LABELS.created]: String(created) },
      state: 'running',
      running: true,
      address: `10.0.0.${this.ip++}:8080`,
    });
  }
  async ping() {}
  async inspect(id: string) {
    return this.containers.get(id);
  }
  async list(labels: Record<string, string>) {
    return [...this.containers.values()].filter((c) => Object.entries(labels).every(([k, v]) => c.labels[k] === v));
  }
  async run(spec: InstanceSpec) {
    this.log.push(`run ${spec.name}`);
    const info: InstanceInfo = {
      id: spec.name,
      name: spec.name,
      host: 'local',
      labels: spec.labels,
      state: 'running',
      running: true,
      address: `10.0.0.${this.ip++}:8080`,
    };
    this.containers.set(spec.name, info);
    return info;
  }
  async stop(id: string, timeoutSeconds: number) {
    this.log.push(`stop ${id}`);
    this.stopTimeouts.push(timeoutSeconds);
    const c = this.containers.get(id);
    if (c) this.containers.set(id, { ...c, running: false, state: 'exited', address: undefined });
  }
  async remove(id: string) {
    this.log.push(`remove ${id}`);
    this.containers.delete(id);
  }
  async imageExists() {
    return true;
  }
  async networkExists() {
    return true;
  }
  async saveImage(): Promise<NodeJS.ReadableStream> {
    throw new Error('not used');
  }
  async pullImage() {
    return undefined;
  }
  async loadImage() {}
  async logs() {
    return '';
  }
  async specOf() {
    return undefined;
  }
  async health() {
    return 'none' as const;
  }
  async exec() {
    return 0;
  }
  async imageInfo() {
    return undefined;
  }
  async containerImage() {
    return undefined;
  }
}

async function setup(o: { drainSeconds?: number; progressDeadlineSeconds?: number; readyAfterPolls?: number } = {}) {
  const from = await fleetAt('1.0.0', o);
  const to = await fleetAt('1.1.0', o);
  const rt = new FakeRuntime();
  ['old-a', 'old-b', 'old-c', 'old-d'].forEach((n, i) => rt.add(n, revisionOf(from), 1000 + i));
  let now = 0;
  const sleeps: number[] = [];
  /** What each reload loaded: "up" names and "down" names, in order. */
  const loaded: { up: string[]; down: string[] }[] = [];
  let file = '';
  const router: Router = {
    name: 'fake nginx',
    check: async () => {},
    read: async () => file,
    writeAndTest: async (content) => {
      rt.log.push('write');
      file = content;
    },
    reload: async () => {
      rt.log.push('reload');
      const servers = parseUpstreamServers(file);
      loaded.push({ up: servers.filter((s) => !s.down).map((s) => s.name), down: servers.filter((s) => s.down).map((s) => s.name) });
    },
  };
  const polls = new Map<string, number>();
  const prober: Prober = {
    ready: async ({ address = '' }) => {
      const n = (polls.get(address) ?? 0) + 1;
      polls.set(address, n);
      return n > (o.readyAfterPolls ?? 0);
    },
    version: async () => '1.1.0',
  };
  const events: RolloutEvent[] = [];
  let suffix = 0;
  const deps: DeployDeps = {
    runtimes: new Map([['local', rt]]),
    routers: [{ router, template: TEMPLATE, upstream: 'shop' }],
    prober,
    clock: { now: () => now, sleep: async (ms) => void (sleeps.push(ms), (now += ms)), timer: () => ({ cancel: () => {} }) },
    events: (e) => events.push(e),
    nameSuffix: () => `n${++suffix}`,
  };
  return { to, rt, deps, events, loaded, sleeps };
}

const newName = (to: Fleet, n: number) => `shop-${revisionOf(to).slice(0, 7)}-n${n}`;

describe('scriptRollout: rolling.sh in batches', () => {
  it('batch 2 of 4: mark down, drain, stop both, start two, poll, re-enable; per batch', async () => {
    const { to, rt, deps, events, loaded, sleeps } = await setup({ readyAfterPolls: 1 });
    await scriptRollout(to, deps, { batch: 2 });
    const [n1, n2, n3, n4] = [1, 2, 3, 4].map((n) => newName(to, n));
    assert.deepEqual(loaded, [
      { up: ['old-c', 'old-d'], down: ['old-a', 'old-b'] },
      { up: [n1, n2, 'old-c', 'old-d'].sort(), down: [] },
      { up: [n1, n2].sort(), down: ['old-c', 'old-d'] },
      { up: [n1, n2, n3, n4].sort(), down: [] },
    ]);
    assert.deepEqual(rt.log, [
      'write',
      'reload',
      'stop old-a',
      'stop old-b',
      'remove old-a',
      'remove old-b',
      `run ${n1}`,
      `run ${n2}`,
      'write',
      'reload',
      'write',
      'reload',
      'stop old-c',
      'stop old-d',
      'remove old-c',
      'remove old-d',
      `run ${n3}`,
      `run ${n4}`,
      'write',
      'reload',
    ]);
    assert.deepEqual(new Set(rt.stopTimeouts), new Set([10]), 'graceful stop with terminationGracePeriodSeconds');
    // drain 2 s, then one poll found them not ready: one 1 s pause; per batch.
    assert.deepEqual(sleeps, [2000, 1000, 2000, 1000]);
    assert.deepEqual(
      events.map((e) =>
        e.type === 'upstream'
          ? `upstream ${e.action} down=${e.down.join(',')} up=${e.up.length} reloads=${e.reloads}`
          : e.type === 'wave'
            ? `wave ${e.index} ${e.stop.join(',')} start ${e.start}`
            : `${e.type}${'name' in e ? ` ${e.name}` : ''}`,
      ),
      [
        'wave 1 old-a,old-b start 2',
        'upstream drain down=old-a,old-b up=0 reloads=1',
        'draining',
        'stopped old-a',
        'stopped old-b',
        `started ${n1}`,
        `started ${n2}`,
        `ready ${n1}`,
        `ready ${n2}`,
        'upstream enable down= up=2 reloads=2',
        'wave 2 old-c,old-d start 2',
        'upstream drain down=old-c,old-d up=0 reloads=3',
        'draining',
        'stopped old-c',
        'stopped old-d',
        `started ${n3}`,
        `started ${n4}`,
        `ready ${n3}`,
        `ready ${n4}`,
        'upstream enable down= up=2 reloads=4',
      ],
    );
    const labels = [...rt.containers.values()].map((c) => c.labels[LABELS.revision]);
    assert.deepEqual(labels, [revisionOf(to), revisionOf(to), revisionOf(to), revisionOf(to)]);
  });

  it('a batch that does not divide the fleet: the last batch is smaller; no drain pause with drainSeconds 0', async () => {
    const { to, deps, events, sleeps } = await setup({ drainSeconds: 0 });
    await scriptRollout(to, deps, { batch: 3 });
    assert.deepEqual(
      events.filter((e) => e.type === 'wave').map((e) => (e.type === 'wave' ? e.stop : [])),
      [['old-a', 'old-b', 'old-c'], ['old-d']],
    );
    assert.equal(events.filter((e) => e.type === 'draining').length, 0);
    assert.deepEqual(sleeps, []);
  });

  it('gives up after progressDeadlineSeconds with an error, the batch left marked down', async () => {
    const { to, deps, events, loaded, sleeps } = await setup({ readyAfterPolls: Number.POSITIVE_INFINITY, progressDeadlineSeconds: 5, drainSeconds: 0 });
    await assert.rejects(scriptRollout(to, deps, { batch: 1, pollSeconds: 2 }), /did not become ready within 5 s \(progressDeadlineSeconds\)/);
    assert.deepEqual(sleeps, [2000, 2000, 2000]);
    assert.equal(events.at(-1)?.type, 'failed');
    assert.equal(loaded.length, 1, 'only the mark-down reload happened');
  });
});
