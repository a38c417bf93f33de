/**
 * A worker on the real engine: no port, no load balancer, readiness from
 * Docker's healthcheck (an image with a HEALTHCHECK built here) or from an
 * exec inside the container, and `version: false` verification (image ID,
 * revision label, readiness). Deployed 1.0.0 → 1.1.0 with the built CLI.
 * Every object is named probes-* and removed by label afterwards.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { removeFleetState } from '../../src/adapters/fleetState.js';
import { teardown, demoNames } from '../../src/experiment/rehearse.js';
import { LABELS } from '../../src/ports.js';
import { guard } from '../support/wait.js';
import { docker, ensureImages, runCli, runtime, uniqueName } from './fixture.js';

/** On the images this file builds, so they are removed by label. */
const IMAGE_LABEL = 'probes-test';
const HEALTHY = "fetch('http://127.0.0.1:8080/health/ready').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))";

/** fleetroll-example:<v> plus a HEALTHCHECK that asks the app's own readiness from inside (the base image has no shell: exec form). */
async function buildHealthcheckImage(version: string): Promise<string> {
  const tag = `probes-worker:${version}`;
  const dir = mkdtempSync(join(tmpdir(), 'probes-image-'));
  try {
    writeFileSync(
      join(dir, 'Dockerfile'),
      `FROM fleetroll-example:${version}\nHEALTHCHECK --interval=1s --timeout=20s --start-period=10s --retries=3 CMD ${JSON.stringify(['node', '-e', HEALTHY])}\n`,
    );
    await execa('docker', ['build', '--quiet', '--label', `${IMAGE_LABEL}=1`, '--tag', tag, dir], { env: { DOCKER_BUILDKIT: '0' } });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return tag;
}

const services: string[] = [];
const dir = mkdtempSync(join(tmpdir(), 'probes-fleets-'));

function workerFile(service: string, image: string, readiness: Record<string, unknown>, strategy: string): string {
  const file = join(dir, `${service}-${image.replace(/[:/]/g, '_')}.yaml`);
  writeFileSync(
    file,
    `service: ${service}
image: ${image}
replicas: 3
env: { WARMUP_SECONDS: "0.5", PRESTOP_SECONDS: "0" }
hosts:
  - { name: local, docker: "unix:///var/run/docker.sock" }
probes:
  readiness: ${JSON.stringify({ periodMs: 200, timeoutMs: 20000, ...readiness })}
  version: false
${strategy}
drainSeconds: 0
terminationGracePeriodSeconds: 5
progressDeadlineSeconds: 120
`,
  );
  return file;
}

async function containersOf(service: string) {
  return runtime.list({ [LABELS.service]: service, [LABELS.managed]: 'true' });
}

/** Deploys `from`, then `to` with --image; checks that only the new revision's containers run, from the new image ID, and the old ones are gone. */
async function rollWorker(service: string, from: string, to: string, readiness: Record<string, unknown>, strategy: string) {
  const first = await runCli(['deploy', '-f', workerFile(service, from, readiness, strategy), '--json']);
  assert.equal(first.code, 0, first.stderr);
  const before = await containersOf(service);
  assert.equal(before.length, 3);
  assert.ok(
    before.every((c) => c.running && c.address === undefined),
    'running, and no address: nothing connects to a worker',
  );

  const second = await runCli(['deploy', '-f', workerFile(service, from, readiness, strategy), '--image', to, '--json']);
  assert.equal(second.code, 0, second.stderr);
  const out = JSON.parse(second.stdout) as { outcome: string; version: string; revision: string; instances: { name: string; version: string }[] };
  assert.equal(out.outcome, 'complete');
  assert.deepEqual(
    out.instances.map((i) => i.version),
    ['1.1.0', '1.1.0', '1.1.0'],
  );

  const now = await containersOf(service);
  assert.equal(now.length, 3, 'old containers are removed');
  assert.ok(
    now.every((c) => c.running && c.labels[LABELS.revision] === out.revision && c.labels[LABELS.version] === '1.1.0'),
    'only the new revision runs',
  );
  assert.deepEqual(now.map((c) => c.name).sort(), out.instances.map((i) => i.name).sort());
  const want = (await runtime.imageInfo(to))?.id;
  assert.ok(want?.startsWith('sha256:'));
  for (const c of now) assert.equal(await runtime.containerImage(c.id), want, `${c.name} runs ${to}`);
  for (const c of before) assert.equal(await runtime.inspect(c.id), undefined, `old ${c.name} is gone`);
  return { before, now, out };
}

describe('a worker with no port and no load balancer, version: false', { concurrency: 2 }, () => {
  before(async () => {
    await ensureImages();
    await buildHealthcheckImage('1.0.0');
    await buildHealthcheckImage('1.1.0');
  });
  after(async () => {
    for (const s of services) {
      await teardown(docker, demoNames(s)).catch(() => {});
      await removeFleetState(docker, s).catch(() => {});
    }
    const images = await docker.listImages({ filters: { label: [`${IMAGE_LABEL}=1`] } });
    for (const i of images)
      await docker
        .getImage(i.Id)
        .remove({ force: true })
        .catch(() => {});
    rmSync(dir, { recursive: true, force: true });
  });

  it("readiness { healthcheck: true } from the image's HEALTHCHECK, rolling 1/0", async () => {
    const service = uniqueName('probes-hc');
    services.push(service);
    const { now } = await rollWorker(
      service,
      'probes-worker:1.0.0',
      'probes-worker:1.1.0',
      { healthcheck: true },
      'strategy:\n  rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }',
    );
    for (const c of now) assert.equal(await runtime.health(c.id), 'healthy', `${c.name} healthy by Docker`);
  });

  it('readiness { exec: [node, -e, ...] } inside the container, Recreate', async () => {
    const service = uniqueName('probes-ex');
    services.push(service);
    const { now } = await rollWorker(
      service,
      'fleetroll-example:1.0.0',
      'fleetroll-example:1.1.0',
      { exec: ['node', '-e', HEALTHY] },
      'strategy:\n  type: Recreate',
    );
    for (const c of now) assert.equal(await runtime.exec(c.id, ['node', '-e', HEALTHY], guard(30_000)), 0); // a hang guard: node -e took over 5 s in a container at load 30
    assert.equal(await runtime.health(now[0]!.id), 'none', 'the plain example image has no healthcheck');
  });

  it('readiness { healthcheck: true } on an image without HEALTHCHECK fails at preflight, nothing started', async () => {
    const service = uniqueName('probes-nohc');
    services.push(service);
    const r = await runCli(['deploy', '-f', workerFile(service, 'fleetroll-example:1.0.0', { healthcheck: true }, '')]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /preflight failed, nothing was changed/);
    assert.match(r.stderr, /image fleetroll-example:1\.0\.0 on host local defines no HEALTHCHECK and the fleet sets no healthcheck/);
    assert.deepEqual(await containersOf(service), []);
  });

  it('validate names port and why when a worker asks for an HTTP probe', async () => {
    const file = join(dir, 'probes-bad.yaml');
    writeFileSync(file, 'service: probes-bad\nimage: fleetroll-example:1.0.0\nreplicas: 1\nprobes:\n  readiness: { exec: ["true"] }\n');
    const r = await runCli(['validate', '-f', file]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /port: is required .*probes\/version asks GET \/api\/version \(set version: false/);
  });
});
