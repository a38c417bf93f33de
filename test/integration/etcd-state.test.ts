/**
 * The fleet's state and lock in a real 3-member etcd (scripts/etcd-cluster.sh,
 * on 127.0.0.1) instead of a Docker volume and lock container: what a user
 * sees through the CLI (history, lock status, exit codes), what is left on
 * the engine (nothing of fleetroll's but the app and nginx), and the lease
 * that frees a SIGKILLed deployer's lock with no --force.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import Dockerode from 'dockerode';
import { execa } from 'execa';
import { LOCK_TTL_S } from '../../src/adapters/etcdState.js';
import { failedOf, root, runCli, startCliUntil, startLoad, useFleets } from './fixture.js';

const fleet = useFleets();
const docker = new Dockerode();
const script = join(root, 'scripts/etcd-cluster.sh');
/** Every test's keys under one prefix of its own, removed at the end. */
const prefix = `/fleetroll-it-${randomBytes(3).toString('hex')}`;
let endpoints: string[] = [];

const etcdctl = (...args: string[]) => execa('etcdctl', ['--endpoints', endpoints.join(','), ...args], { env: { ETCDCTL_API: '3' } });

before(async () => {
  endpoints = String((await execa('bash', [script, 'start'])).stdout)
    .trim()
    .split(',');
});

after(async () => {
  await etcdctl('del', '--prefix', prefix).catch(() => {});
});

/** What fleetroll left on this engine for the service: containers and volumes other than the app's and nginx's. */
async function leftOnEngine(service: string): Promise<string[]> {
  const containers = await docker.listContainers({ all: true });
  const volumes = (await docker.listVolumes()).Volumes ?? [];
  return [
    ...containers.flatMap((c) => c.Names.map((n) => n.replace(/^\//, ''))).filter((n) => n.startsWith('fleetroll-') && n.includes(service)),
    ...volumes.map((v) => v.Name).filter((n) => n.startsWith('fleetroll-') && n.includes(service)),
  ];
}

describe('state: { etcd } — the fleet state and lock in etcd', { timeout: 600_000 }, () => {
  it('two deploys keep their history in etcd and leave no state volume or lock container on the engine; lock status and history read etcd', async () => {
    const f = await fleet('it-etcd');
    const state = { etcd: { endpoints, prefix } };
    const first = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, state })]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const second = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0', state })]);
    assert.equal(second.code, 0, second.stdout + second.stderr);
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0']);
    assert.deepEqual(await leftOnEngine(f.names.service), [], 'no fleetroll state volume, state container or lock container');
    const keys = String((await etcdctl('get', '--prefix', '--keys-only', `${prefix}/${f.names.service}/`)).stdout)
      .split('\n')
      .filter(Boolean)
      .sort();
    assert.deepEqual(
      keys,
      [`${prefix}/${f.names.service}/identity`, `${prefix}/${f.names.service}/journal`, `${prefix}/${f.names.service}/state`],
      'the state, journal and identity in etcd, the lock released',
    );
    const history = await runCli(['history', '-f', f.fleetFile({ replicas: 2, state })]);
    assert.equal(history.code, 0, history.stderr);
    assert.match(history.stdout, /\b1\b.*1\.0\.0/);
    assert.match(history.stdout, /\b2\b.*1\.1\.0/);
    // Another environment's fleet file: the same service name and prefix, other hosts.
    const other = f.fleetFile({ replicas: 2, state });
    writeFileSync(other, readFileSync(other, 'utf8').replace('name: local,', 'name: staging,').replace('host: local', 'host: staging'));
    const refused = await runCli(['history', '-f', other]);
    assert.equal(refused.code, 2, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /holds the state of a fleet \S+ on other hosts \(local=unix:\/\/\/var\/run\/docker\.sock\).*need two prefixes/);
    const lock = await runCli(['lock', 'status', '-f', f.fleetFile({ replicas: 2, state })]);
    assert.equal(lock.code, 0, lock.stderr);
    assert.match(lock.stdout, /not locked|free|no lock/i, lock.stdout);
  });

  it('two deploys started together: one exits 0, the other 3 naming the holder', async () => {
    const f = await fleet('it-etcd2');
    const state = { etcd: { endpoints, prefix } };
    const file = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, state });
    const [a, b] = await Promise.all([runCli(['deploy', '-f', file]), runCli(['deploy', '-f', file])]);
    assert.deepEqual([a.code, b.code].sort(), [0, 3], `${a.stdout}${a.stderr}\n---\n${b.stdout}${b.stderr}`);
    const loser = a.code === 3 ? a : b;
    assert.match(loser.stderr, /is locked by \S+@\S+ \(pid \d+/);
  });

  it('a deployer SIGKILLed while it holds the lock: its lease runs out within its TTL and the next deploy runs, no --force', async (t) => {
    const f = await fleet('it-etcd3');
    const state = { etcd: { endpoints, prefix } };
    const slow = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, drainSeconds: 30, state });
    const running = await startCliUntil(['deploy', '-f', slow], /wave 1/);
    running.child.kill('SIGKILL');
    await running.exited.catch(() => undefined);
    const killedAt = Date.now();
    // Watched in etcd itself: a deploy on this machine would take over at once (the holder's pid is gone here),
    // but one on another machine can only wait for the lease.
    const lockKey = `${prefix}/${f.names.service}/lock`;
    const held = async () => String((await etcdctl('get', '--print-value-only', lockKey)).stdout).trim() !== '';
    assert.ok(await held(), 'the killed deployer still holds the lock');
    while (await held()) {
      assert.ok(Date.now() - killedAt < (LOCK_TTL_S + 10) * 1000, `the lock is still held ${Date.now() - killedAt} ms after the kill`);
      await new Promise((res) => setTimeout(res, 200));
    }
    const freedMs = Date.now() - killedAt;
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, state })]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    t.diagnostic(`the lock came free ${freedMs} ms after the kill (lease ${LOCK_TTL_S} s)`);
    assert.ok(freedMs > 2000, `not before its lease could run out (${freedMs} ms)`);
  });

  it('a fleet on the volume moved to etcd: refused without state migrate (exit 2), then migrated with every revision, deployed on, and not migrated back over a different state', async () => {
    const f = await fleet('it-etcdmig');
    const state = { etcd: { endpoints, prefix } };
    const plain = (image: string) => f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image });
    const withEtcd = (image: string) => f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image, state });
    for (const image of ['fleetroll-example:1.0.0', 'fleetroll-example:1.1.0']) {
      const r = await runCli(['deploy', '-f', plain(image)]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
    }
    const before = (await f.instances()).map((i) => i.id).sort();
    const silent = await runCli(['deploy', '-f', withEtcd('fleetroll-example:1.0.0')]);
    assert.equal(silent.code, 2, silent.stdout + silent.stderr);
    assert.match(silent.stderr, /holds no state for it-etcdmig-\S+, but the Docker volume fleetroll-state-\S+ on local does/);
    assert.match(silent.stderr, /fleetroll state migrate -f <fleet> --to etcd/);
    assert.deepEqual((await f.instances()).map((i) => i.id).sort(), before, 'nothing was changed');

    const moved = await runCli(['state', 'migrate', '-f', withEtcd('fleetroll-example:1.0.0'), '--to', 'etcd']);
    assert.equal(moved.code, 0, moved.stdout + moved.stderr);
    assert.match(
      moved.stdout,
      /copied the state of \S+ from the Docker volume fleetroll-state-\S+ on local to etcd \S+: revision\(s\) 1, 2, the journal \(\d+ entries\); verified/,
    );
    const again = await runCli(['state', 'migrate', '-f', withEtcd('fleetroll-example:1.0.0'), '--to', 'etcd']);
    assert.equal(again.code, 0, again.stdout + again.stderr);
    assert.match(again.stdout, /already holds the same state .*nothing was written/);

    const third = await runCli(['undo', '-f', withEtcd('fleetroll-example:1.1.0')]);
    assert.equal(third.code, 0, third.stdout + third.stderr);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0'], 'undo went back to revision 1, known from the migrated history');
    const history = await runCli(['history', '-f', withEtcd('fleetroll-example:1.1.0')]);
    assert.match(history.stdout, /\b3\b.*1\.0\.0/, history.stdout);

    const back = await runCli(['state', 'migrate', '-f', withEtcd('fleetroll-example:1.1.0'), '--to', 'volume']);
    assert.equal(back.code, 2, back.stdout + back.stderr);
    assert.match(back.stderr, /already holds a different state for \S+ \(revisions 1, 2\): nothing was changed/);
  });

  it('undo with the etcd leader SIGKILLed just before: exit 0, no failed GET, the history kept', async (t) => {
    const f = await fleet('it-etcdlead');
    const state = { etcd: { endpoints, prefix } };
    for (const image of ['fleetroll-example:1.0.0', 'fleetroll-example:1.1.0']) {
      const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image, state })]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
    }
    const leader = String((await execa('bash', [script, 'leader'])).stdout).trim();
    await execa('bash', [script, 'kill', leader]);
    try {
      const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 0, timeoutMs: 1000 });
      const r = await runCli(['undo', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, state })]);
      const records = await load.stop();
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0']);
      t.diagnostic(`leader ${leader} killed; undo: ${records.length} GETs, ${failedOf(records).length} failed`);
      assert.ok(records.length > 20, `${records.length} GETs`);
      assert.deepEqual(failedOf(records), []);
      const history = await runCli(['history', '-f', f.fleetFile({ replicas: 2, state })]);
      assert.match(history.stdout, /\b3\b.*1\.0\.0/, history.stdout);
    } finally {
      // The killed member rejoins, for the tests after this one.
      await execa('bash', [script, 'start']);
    }
  });

  it('etcd loses its quorum mid-rollout: the rollout stops after its step with the fleet consistent and says so (exit 1); resume continues it once etcd is back', async (t) => {
    const f = await fleet('it-etcdq');
    const state = { etcd: { endpoints, prefix } };
    const at = (image: string) => f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, image, drainSeconds: 3, state });
    const first = await runCli(['deploy', '-f', at('fleetroll-example:1.0.0')]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const running = await startCliUntil(['deploy', '-f', at('fleetroll-example:1.1.0')], /wave 1/);
    const killedAt = Date.now();
    // Two of three members: no quorum, so the deployer's lease is renewed no more.
    await execa('bash', [script, 'kill', 'm1']);
    await execa('bash', [script, 'kill', 'm2']);
    let r: { code: number | null; stdout: string; stderr: string };
    try {
      r = await running.exited;
    } finally {
      await execa('bash', [script, 'start']);
    }
    t.diagnostic(`the deploy ended ${Date.now() - killedAt} ms after the quorum was lost`);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /lost the fleet's lock: etcd has not renewed its lease for \d+\.\d s .*stopping after the step in progress/);
    assert.match(r.stderr, /lost the fleet's lock: .*The rollout stopped after its step in progress and changed nothing after it/);
    assert.match(r.stderr, /fleetroll resume -f <fleet> continues the rollout/);
    const up = await f.upstream();
    assert.equal(up.down, 0, `no server left marked down:\n${up.content}`);
    assert.ok(up.up >= 3, `at least replicas in service:\n${up.content}`);

    const resumed = await runCli(['resume', '-f', at('fleetroll-example:1.1.0')]);
    assert.equal(resumed.code, 0, resumed.stdout + resumed.stderr);
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
  });

  it('two watches: one leads and status names it; the leader SIGKILLed, then an app instance: the other heals, whole within 20 s, never more than replicas + 1 app containers', async (t) => {
    const f = await fleet('it-etcdw');
    const state = { etcd: { endpoints, prefix } };
    const file = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, state });
    const first = await runCli(['deploy', '-f', file]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const args = ['watch', '-f', file, '--interval', '2s', '--settle', '1s'];
    const leader = await startCliUntil(args, /watch: watching /);
    const standby = await startCliUntil(args, /watch: waiting: another watch/);
    try {
      const status = await runCli(['status', '-f', file]);
      assert.match(status.stdout, new RegExp(`watch: running \\(\\S+@\\S+, pid ${leader.child.pid}\\)`), status.stdout);
      leader.child.kill('SIGKILL');
      await leader.exited.catch(() => undefined);
      const victim = (await f.instances()).find((i) => i.running)!;
      const killedAt = Date.now();
      await docker.getContainer(victim.id).kill({ signal: 'SIGKILL' });
      let most = 0;
      let wholeMs: number | undefined;
      while (Date.now() - killedAt < 30_000) {
        const list = await f.instances();
        const running = list.filter((i) => i.running);
        most = Math.max(most, running.length);
        const up = await f.upstream();
        if (running.length === 2 && up.up === 2 && up.down === 0 && /healed \(/.test(standby.stdout())) {
          wholeMs = Date.now() - killedAt;
          break;
        }
        await new Promise((res) => setTimeout(res, 200));
      }
      t.diagnostic(`whole ${wholeMs} ms after the instance was killed (the leader killed just before); at most ${most} app containers running`);
      assert.ok(wholeMs !== undefined && wholeMs <= 20_000, `whole within 20 s: ${wholeMs} ms\n${standby.stdout()}`);
      assert.ok(most <= 3, `never more than replicas + 1 running: ${most}`);
      assert.match(standby.stdout(), /watch: (took over from a watch that is gone|watching )/);
    } finally {
      standby.child.kill('SIGTERM');
      await standby.exited.catch(() => undefined);
      leader.child.kill('SIGKILL');
    }
  });

  it('blue-green undo inside scaleDownDelaySeconds with the state in etcd: the offer and the ask are etcd keys, the switch-back quick, nothing created on the engine', async (t) => {
    const f = await fleet('it-etcdbg');
    const state = { etcd: { endpoints, prefix } };
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, type: 'BlueGreen', state })])).code, 0);
    const file = f.fleetFile({ replicas: 2, type: 'BlueGreen', scaleDownDelaySeconds: 60, image: 'fleetroll-example:1.1.0', state });
    const running = await startCliUntil(['deploy', '-f', file], /switched: the old set/);
    // The rollout offers just after it says so.
    const offerKey = `${prefix}/${f.names.service}/switchback/offer`;
    for (let i = 0; i < 50 && String((await etcdctl('get', '--print-value-only', offerKey)).stdout).trim() === ''; i++)
      await new Promise((res) => setTimeout(res, 100));
    assert.match(String((await etcdctl('get', '--print-value-only', offerKey)).stdout), /"rollout"/, 'the offer is a key in etcd');
    const t0 = Date.now();
    const undo = await runCli(['undo', '-f', file]);
    const undoMs = Date.now() - t0;
    const deployed = await running.exited;
    assert.equal(undo.code, 0, undo.stdout + undo.stderr);
    assert.match(undo.stdout, /switched back/, undo.stdout);
    assert.equal(deployed.code, 1, deployed.stdout + deployed.stderr);
    assert.match(deployed.stderr, /rolled back \(undo\)/);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0']);
    t.diagnostic(`undo (node's start included) took ${undoMs} ms`);
    assert.deepEqual(await leftOnEngine(f.names.service), [], 'no offer, ask or lock container on the engine');
    const left = String((await etcdctl('get', '--prefix', '--keys-only', `${prefix}/${f.names.service}/switchback/`)).stdout).trim();
    assert.equal(left, '', 'the offer and the ask withdrawn');
  });

  it('etcd that does not answer: exit 1 before any change, naming the endpoints tried', async () => {
    const f = await fleet('it-etcd4');
    const state = { etcd: { endpoints: ['http://127.0.0.1:1'], prefix } };
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, state })]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /etcd at http:\/\/127\.0\.0\.1:1/);
    assert.match(r.stderr, /check that the etcd cluster runs/);
    assert.deepEqual(await f.instances(), [], 'nothing was started');
  });

  it('a state block that is not valid: exit 2 naming the field', async () => {
    const f = await fleet('it-etcd5');
    const r = await runCli(['validate', '-f', f.fleetFile({ replicas: 2, state: { etcd: { endpoints: ['10.0.0.5:2379'] } } })]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /state\/etcd\/endpoints\/0: must be an etcd client URL/);
  });
});
