/**
 * `fleetroll deploy` on a real Docker engine behind a real nginx, under GET and
 * POST probes through nginx: what a user would see.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { LABELS } from '../../src/ports.js';
import { failedOf, moreRequests, runCli, sampleDuring, useFleets, startLoad } from './fixture.js';

const fleet = useFleets();

// Each row has its own fleet and nginx: two at a time.
describe('deploy: zero failed requests under load', { concurrency: 2 }, () => {
  // TerminationComplete: an instance being replaced counts until its container is gone, so the
  // containers alive never exceed replicas + maxSurge. TerminationStarted (the default): its
  // replacement starts as soon as it is marked down, so up to `replicas` more may be alive while they drain.
  type Policy = 'TerminationStarted' | 'TerminationComplete';
  const rows: { name: string; surge: number | string; unav: number | string; policy: Policy; maxAlive: number; minUp: number }[] = [
    { name: 'maxSurge 1, maxUnavailable 0, TerminationComplete', surge: 1, unav: 0, policy: 'TerminationComplete', maxAlive: 5, minUp: 4 },
    { name: 'maxSurge 0, maxUnavailable 1, TerminationComplete', surge: 0, unav: 1, policy: 'TerminationComplete', maxAlive: 4, minUp: 3 },
    { name: '25% / 25%, TerminationComplete', surge: '25%', unav: '25%', policy: 'TerminationComplete', maxAlive: 5, minUp: 3 },
    { name: '25% / 25%, TerminationStarted', surge: '25%', unav: '25%', policy: 'TerminationStarted', maxAlive: 5 + 4, minUp: 3 },
  ];
  for (const r of rows) {
    it(`4 instances, ${r.name}`, async () => {
      const f = await fleet('it-roll');
      const initial = await runCli(['deploy', '-f', f.fleetFile({ maxSurge: r.surge, maxUnavailable: r.unav })]);
      assert.equal(initial.code, 0, initial.stderr);
      assert.deepEqual((await f.versions()).sort(), ['1.0.0', '1.0.0', '1.0.0', '1.0.0']);

      const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 2 });
      await moreRequests(load, 5, 'requests before the rollout');
      const file = f.fleetFile({ maxSurge: r.surge, maxUnavailable: r.unav, replacementPolicy: r.policy });
      const { result, maxAlive, minUp, samples } = await sampleDuring(f, runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0', '--json']));
      await moreRequests(load, 5, 'requests after the rollout');
      const records = await load.stop();

      assert.equal(result.code, 0, result.stderr);
      const failed = failedOf(records);
      assert.ok(records.length > 50, `only ${records.length} requests went through`);
      assert.deepEqual(failed, [], `${failed.length} of ${records.length} requests failed`);
      assert.ok(records.some((x) => x.version === '1.1.0') && records.some((x) => x.version === '1.0.0'), 'both versions answered during the rollout');

      const out = JSON.parse(result.stdout) as { outcome: string; version: string; instances: { version: string }[]; reloads: number };
      assert.equal(out.outcome, 'complete');
      assert.deepEqual(
        out.instances.map((i) => i.version),
        ['1.1.0', '1.1.0', '1.1.0', '1.1.0'],
      );
      assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0', '1.1.0']);
      const containers = await f.instances();
      assert.equal(containers.length, 4, 'old containers are removed');
      assert.equal(new Set(containers.map((c) => c.labels[LABELS.revision])).size, 1);

      assert.ok(samples >= 20, `only ${samples} samples`);
      assert.ok(maxAlive <= r.maxAlive, `${maxAlive} instances alive > ${r.maxAlive} (${r.policy})`);
      assert.ok(minUp >= r.minUp, `${minUp} servers up in the upstream < replicas - maxUnavailable = ${r.minUp}`);
      const up = await f.upstream();
      assert.deepEqual([up.up, up.down], [4, 0], up.content);
    });
  }
});

describe('deploy: failures are caught and explained', () => {
  it('a version that reports the wrong version makes deploy exit 1 naming the instance', async () => {
    const f = await fleet('it-badver');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const bad = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0', env: { REPORT_VERSION: '9.9.9' } });
    const r = await runCli(['deploy', '-f', bad]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const names = (await f.instances()).map((i) => i.name);
    assert.match(r.stderr, /do not serve version 1\.1\.0/);
    assert.match(r.stderr, /reports version "9\.9\.9", expected "1\.1\.0"/);
    assert.ok(
      names.some((n) => r.stderr.includes(n)),
      `stderr names an instance: ${r.stderr}`,
    );
  });

  it('an upstream template that nginx rejects: nothing reloaded, the old file back, still serving', async () => {
    const f = await fleet('it-badtpl');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const before = await f.upstream();
    const template = join(f.dir, 'broken.tmpl');
    writeFileSync(template, 'upstream {{upstream}} {\n{{servers}}\n    no_such_directive on;\n}\n');
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0', template })]);
    await moreRequests(load, 5, 'requests after the failed deploy');
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /nginx -t/);
    assert.match(r.stderr, /unknown directive "no_such_directive"/);
    assert.equal((await f.upstream()).content, before.content, 'the upstream file is restored');
    assert.ok(records.length > 5);
    assert.deepEqual(
      records.filter((x) => x.status !== 200 && x.status !== 201),
      [],
      'nginx kept serving',
    );
  });

  it('a missing image or network fails preflight before anything changes', async () => {
    const f = await fleet('it-noimg');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 2 })])).code, 0);
    const before = (await f.instances()).map((i) => i.name).sort();
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2 }), '--image', 'fleetroll-example:0.0.404']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /preflight failed, nothing was changed/);
    assert.match(r.stderr, /image fleetroll-example:0\.0\.404 is not present on host local/);
    assert.deepEqual((await f.instances()).map((i) => i.name).sort(), before);

    const noNet = f.fleetFile({ replicas: 2, image: 'fleetroll-example:1.1.0' });
    writeFileSync(noNet, readFileSync(noNet, 'utf8').replace(`network: ${f.names.network}`, 'network: fleetroll-no-such-net'));
    const r2 = await runCli(['deploy', '-f', noNet]);
    assert.equal(r2.code, 1);
    assert.match(r2.stderr, /network fleetroll-no-such-net does not exist on host local/);
    assert.deepEqual((await f.instances()).map((i) => i.name).sort(), before);
  });
});
