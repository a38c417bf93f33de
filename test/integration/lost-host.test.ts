/**
 * The fleet's first Docker host lost (its engine stopped, a second engine of
 * scripts/second-engine.sh standing in for the VM): with the state in etcd,
 * `history` and `status` still answer; with the volume, the error names the
 * host as the one holding the state and says to bring it back, then migrate.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { DockerRuntime } from '../../src/adapters/docker.js';
import { removeFleetState } from '../../src/adapters/fleetState.js';
import { LABELS } from '../../src/ports.js';
import { ensureImages, root, runCli, startLocalNginx, uniqueName, type LocalNginx } from './fixture.js';

const ENGINE = 'lh';
const engine = async (cmd: 'start' | 'stop') =>
  String((await execa('bash', [join(root, 'scripts/second-engine.sh'), cmd, ENGINE], { stdin: 'ignore' })).stdout).trim();
const prefix = `/fleetroll-lh-${randomBytes(3).toString('hex')}`;
const services = [uniqueName('it-lost-etcd'), uniqueName('it-lost-vol')];
let endpoint = '';
let etcd: string[] = [];
let dir = '';
const nginxes: LocalNginx[] = [];

before(async () => {
  await ensureImages();
  endpoint = (await engine('start')).split('\n')[0]!;
  etcd = String((await execa('bash', [join(root, 'scripts/etcd-cluster.sh'), 'start'])).stdout)
    .trim()
    .split(',');
  dir = mkdtempSync(join(tmpdir(), 'it-lost-'));
});

after(async () => {
  for (const n of nginxes) await n.stop().catch(() => {});
  await engine('start').catch(() => {});
  for (const rt of [new DockerRuntime({ name: ENGINE, docker: endpoint }), new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' })])
    for (const service of services) {
      for (const c of await rt.list({ [LABELS.service]: service }).catch(() => []))
        await rt.docker
          .getContainer(c.id)
          .remove({ force: true })
          .catch(() => {});
      await removeFleetState(rt.docker, service).catch(() => {});
    }
  await engine('stop').catch(() => {});
  await execa('etcdctl', ['--endpoints', etcd.join(','), 'del', '--prefix', prefix], { env: { ETCDCTL_API: '3' }, reject: false });
  rmSync(dir, { recursive: true, force: true });
});

/** A fleet of 2 on the second engine (first) and this machine's, behind an nginx on this machine. */
async function fleetFile(service: string, image: string, state: string): Promise<string> {
  const upstream = service.replace(/-/g, '_');
  let nginx = nginxes.find((n) => n.upstreamFile.includes(upstream));
  if (!nginx) {
    const d = mkdtempSync(join(dir, `${upstream}-`));
    nginx = await startLocalNginx(d, upstream, 1);
    nginxes.push(nginx);
  }
  const file = join(dir, `${service}-${image.split(':')[1]}.yaml`);
  writeFileSync(
    file,
    `service: ${service}
image: ${image}
replicas: 2
port: 8080
env: { WARMUP_SECONDS: "0.5" }
hosts:
  - { name: ${ENGINE}, docker: "${endpoint}", publishAddress: 127.0.0.1 }
  - { name: local, docker: "unix:///var/run/docker.sock", publishAddress: 127.0.0.1 }
probes: { readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 } }
strategy: { rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }
drainSeconds: 1
loadBalancers:
  - nginx: { exec: true, config: ${nginx.conf}, upstreamFile: ${nginx.upstreamFile}, upstream: ${upstream} }
${state}`,
  );
  return file;
}

describe('the first Docker host lost', { timeout: 600_000 }, () => {
  it('state in etcd: history lists every revision and status names the lost host; state in the volume: the error names the host that holds it and says to bring it back, then migrate', async () => {
    const [withEtcd, withVolume] = services as [string, string];
    const etcdState = `state: { etcd: { endpoints: [${etcd.join(', ')}], prefix: ${prefix} } }\n`;
    for (const image of ['fleetroll-example:1.0.0', 'fleetroll-example:1.1.0']) {
      const r = await runCli(['deploy', '-f', await fleetFile(withEtcd, image, etcdState)]);
      assert.equal(r.code, 0, r.stdout + r.stderr);
    }
    const v = await runCli(['deploy', '-f', await fleetFile(withVolume, 'fleetroll-example:1.0.0', '')]);
    assert.equal(v.code, 0, v.stdout + v.stderr);

    await engine('stop');
    const file = await fleetFile(withEtcd, 'fleetroll-example:1.1.0', etcdState);
    const history = await runCli(['history', '-f', file]);
    assert.equal(history.code, 0, history.stdout + history.stderr);
    assert.match(history.stdout, /\b1\b.*1\.0\.0/, history.stdout);
    assert.match(history.stdout, /\b2\b.*1\.1\.0/, history.stdout);
    const status = await runCli(['status', '-f', file]);
    assert.equal(status.code, 0, status.stdout + status.stderr);
    assert.match(status.stdout, new RegExp(`host ${ENGINE} does not answer \\(.*\\): its instances are not shown`), status.stdout);

    const volume = await runCli(['history', '-f', await fleetFile(withVolume, 'fleetroll-example:1.0.0', '')]);
    assert.equal(volume.code, 1, volume.stdout + volume.stderr);
    assert.match(volume.stderr, /it holds the fleet's state \(the volume fleetroll-state-it-lost-vol-\S+\)/);
    assert.match(volume.stderr, new RegExp(`hint: bring ${ENGINE} back; then move the state to etcd`));
  });
});
