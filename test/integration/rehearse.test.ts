/**
 * `fleetroll rehearse`, the main job, end to end through the built CLI, and
 * its control: a naive replacement that the same probes catch failing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { demoNames, teardown } from '../../src/experiment/rehearse.js';
import { docker, ensureImages, runCli, uniqueName } from './fixture.js';

const used: string[] = [];
before(async () => {
  await ensureImages();
});
after(async () => {
  for (const n of used) await teardown(docker, demoNames(n));
});

interface RehearseJson {
  ok: boolean;
  requests: { ok: number; failed: number; total: number; byMethod: Record<string, { ok: number; failed: number }> };
  versions: { expected: string; instances: { name: string; version: string }[] };
  mixedVersionWindowMs: number;
  durationMs: number;
}

describe('rehearse', () => {
  it('rolls a local fleet 1.0.0 -> 1.1.0 under load with zero failed requests', async () => {
    const name = uniqueName('it-reh');
    used.push(name);
    const r = await runCli(['rehearse', '--name', name, '--port', '0', '--drain', '1', '--json']);
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    const out = JSON.parse(r.stdout) as RehearseJson;
    assert.equal(out.ok, true);
    assert.equal(out.requests.failed, 0);
    assert.ok(out.requests.byMethod.GET!.ok > 50, JSON.stringify(out.requests));
    assert.ok(out.requests.byMethod.POST!.ok > 20, JSON.stringify(out.requests));
    assert.equal(out.versions.expected, '1.1.0');
    assert.deepEqual(
      out.versions.instances.map((i) => i.version),
      ['1.1.0', '1.1.0', '1.1.0'],
    );
    assert.ok(
      out.mixedVersionWindowMs > 0 && out.mixedVersionWindowMs < out.durationMs + 2000,
      `window ${out.mixedVersionWindowMs} ms, deploy ${out.durationMs} ms`,
    );
    assert.ok(out.durationMs > 1000);
    // Without --keep nothing is left behind.
    const left = await docker.listContainers({ all: true, filters: { label: [`fleetroll.service=${name}`] } });
    assert.deepEqual(left, []);
  });

  it('the control: a naive kill-and-start script, measured by the same probes', async (t) => {
    const name = uniqueName('it-naive');
    used.push(name);
    const r = await runCli(['rehearse', '--name', name, '--port', '0', '--naive', '--replicas', '4', '--post-concurrency', '8', '--json']);
    const out = JSON.parse(r.stdout) as RehearseJson;
    // Certain: the control replaced every instance, the probes counted every
    // request, and the verdict and exit code follow the failures counted.
    assert.deepEqual(
      out.versions.instances.map((i) => i.version),
      ['1.1.0', '1.1.0', '1.1.0', '1.1.0'],
    );
    assert.equal(out.requests.ok + out.requests.failed, out.requests.total);
    assert.ok(out.requests.total > 20, JSON.stringify(out.requests));
    assert.equal(out.ok, out.requests.failed === 0);
    assert.equal(r.code, out.requests.failed === 0 ? 0 : 1, r.stderr.slice(-3000));
    // Likely, not certain (SIGKILL with 8 POST loops in flight on 4 instances
    // almost always cuts some; a lucky run may cut none): reported.
    t.diagnostic(`naive control: ${out.requests.failed} of ${out.requests.total} requests failed`);
  });

  it('--keep leaves the fleet serving and --down removes it', async () => {
    const name = uniqueName('it-keep');
    used.push(name);
    const r = await runCli(['rehearse', '--name', name, '--port', '0', '--drain', '0', '--get-rate', '5', '--keep']);
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    const url = /curl (http:\/\/127\.0\.0\.1:\d+)\/api\/version/.exec(r.stdout)?.[1];
    assert.ok(url, r.stdout);
    const res = await fetch(`${url}/api/version`);
    assert.equal(await res.text(), '1.1.0');
    const down = await runCli(['rehearse', '--name', name, '--down']);
    assert.equal(down.code, 0, down.stderr);
    assert.match(down.stdout, /removed 4 container\(s\)/);
    const left = await docker.listContainers({ all: true, filters: { label: [`fleetroll.demo=${name}`] } });
    assert.deepEqual(left, []);
  });

  it('says what is missing when Docker is not reachable', async () => {
    const r = await runCli(['rehearse', '--docker', 'unix:///tmp/fleetroll-no-such.sock', '--port', '0']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /unix:\/\/\/tmp\/fleetroll-no-such\.sock/);
    assert.match(r.stderr, /dockerd|setup-host/);
  });
});
