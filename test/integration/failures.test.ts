/**
 * Rollouts that fail, on a real Docker engine behind real nginx, under probes:
 * the fleet must stay serving and consistent, and the user must be told what
 * happened. Fleet state (containers, labels, upstream files) is checked after.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { putFile } from '../../src/adapters/docker.js';
import { LABELS } from '../../src/ports.js';
import { docker, explainFailed, failedOf, prober, runCli, startCliUntil, useFleets, startLoad } from './fixture.js';

const fleet = useFleets();

describe('failed rollouts leave the fleet serving', () => {
  it('a never-ready version with maxUnavailable 0: exit 1 after the deadline, zero failed requests, the old fleet intact', async () => {
    const f = await fleet('it-never');
    const oldRev = await f.at100();
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const r = await runCli([
      'deploy',
      '-f',
      f.fleetFile({
        replicas: 3,
        maxSurge: 1,
        maxUnavailable: 0,
        image: 'fleetroll-example:1.1.0',
        env: { BROKEN_NEVER_READY: '1' },
        progressDeadlineSeconds: 15,
      }),
    ]);
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    // 15 s, not 5: at CI load a new container once took over 5 s to answer its first probe, and the report then says "starting".
    assert.match(r.stderr, /made no progress for 15 s \(progressDeadlineSeconds\)/);
    assert.match(r.stderr, /readiness probe failing/);
    assert.match(r.stderr, /last log lines/);
    assert.deepEqual(failedOf(records), []);
    assert.ok(records.length > 30);
    const list = await f.instances();
    const old = list.filter((i) => i.labels[LABELS.revision] === oldRev);
    assert.equal(old.length, 3, 'every old instance is still there');
    assert.ok(old.every((i) => i.running));
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [3, 0], up.content);
    for (const o of old) assert.ok(up.content.includes(o.address ?? '?'), `${o.name} is in the upstream`);
    assert.deepEqual((await f.versions()).filter((v) => v === '1.0.0').length, 3);
  });

  it('the same with --auto-rollback: the fleet ends on the old revision only, zero failed requests', async () => {
    const f = await fleet('it-rollback');
    const oldRev = await f.at100();
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const r = await runCli([
      'deploy',
      '--auto-rollback',
      '-f',
      f.fleetFile({
        replicas: 3,
        maxSurge: 1,
        maxUnavailable: 0,
        image: 'fleetroll-example:1.1.0',
        env: { BROKEN_NEVER_READY: '1' },
        progressDeadlineSeconds: 5,
      }),
    ]);
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /made no progress/);
    assert.match(r.stderr, new RegExp(`rolled back \\(onFailure: rollback\\): every instance runs revision ${oldRev}`));
    assert.deepEqual(failedOf(records), []);
    const list = await f.instances();
    assert.equal(list.length, 3, list.map((i) => i.name).join(' '));
    assert.deepEqual(new Set(list.map((i) => i.labels[LABELS.revision])), new Set([oldRev]));
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0', '1.0.0']);
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [3, 0]);
  });

  it('a version that crashes 2 s after becoming ready (Docker restarting it): exit 1 at once, never back in nginx, never more than replicas + maxSurge running, no failed GET, the old fleet serving', async (t) => {
    const f = await fleet('it-crash');
    const oldRev = await f.at100(4);
    // A strict client: every GET on its own connection, a 1 s timeout, nothing resent.
    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 0, timeoutMs: 1000 });
    const t0 = Date.now();
    const loadStart = t0 - load.elapsed();
    // Running app containers, sampled through the deploy: never more than replicas + maxSurge.
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, (await f.instances()).filter((i) => i.running).length);
        await new Promise((res) => setTimeout(res, 100));
      }
    })();
    const r = await runCli([
      'deploy',
      '-f',
      f.fleetFile({
        replicas: 4,
        maxSurge: 1,
        maxUnavailable: 0,
        image: 'fleetroll-example:1.1.0',
        env: { CRASH_AFTER_READY_SECONDS: '2' },
        container: { restart: 'unless-stopped' },
        minReadySeconds: 5,
        progressDeadlineSeconds: 15,
      }),
    ]);
    sampling = false;
    await sampler;
    const seconds = (Date.now() - t0) / 1000;
    assert.ok(most <= 5, `at most replicas + maxSurge app containers running: ${most}`);
    const records = await load.stop();
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.stdout.match(/ready it-crash-/g)?.length, 1, `one instance became ready, once:\n${r.stdout}`);
    assert.doesNotMatch(r.stdout, /available it-crash-/, 'never available');
    assert.doesNotMatch(r.stdout, /drain and stop [1-9]/, 'no old instance was stopped');
    assert.match(r.stderr, /exited, exit code 1, \d+\.\d s after it became ready, within its monitor window \(5 s\)/);
    assert.match(r.stderr, /last log lines of it-crash-/);
    assert.doesNotMatch(r.stderr, /made no progress/, 'it did not wait for the deadline');
    // The reload after the one that put it in takes it out, with no nginx -t first: every ms of the test is a request sent to a dead address.
    const reloads = r.stdout.split('\n').filter((l) => /upstream: .*reloaded/.test(l));
    const putIn = reloads.findIndex((l) => /\(in: it-crash-/.test(l));
    assert.ok(putIn >= 0 && reloads[putIn + 1] !== undefined, `a reload put it in and one took it out:\n${r.stdout}`);
    assert.doesNotMatch(reloads[putIn + 1]!, /nginx -t \d+ ms/, 'its takedown skipped nginx -t');
    const list = await f.instances();
    assert.equal(list.filter((i) => i.labels[LABELS.revision] === oldRev && i.running).length, 4);
    const crashed = list.filter((i) => i.labels[LABELS.revision] !== oldRev);
    assert.equal(crashed.length, 1, 'the crashed instance is kept (stopped) for docker logs');
    assert.equal(crashed[0]!.running, false, 'and is stopped');
    const policy = (await docker.getContainer(crashed[0]!.id).inspect()).HostConfig.RestartPolicy?.Name;
    assert.equal(policy, 'no', 'its restart policy is switched off');
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [4, 0], up.content);
    const failed = failedOf(records);
    t.diagnostic(`exit after ${seconds.toFixed(1)} s; GETs: ${records.length}, failed: ${failed.length}`);
    assert.ok(records.length > 50, `${records.length} GETs`);
    // A GET in flight on it when it exits is reset, and nginx sends it to another instance (a GET is idempotent);
    // one sent to its address after that fails: its takedown skips nginx -t, so nothing is sent there.
    assert.equal(failed.length, 0, await explainFailed(f, records, loadStart));
  });

  it('Ctrl-C in the middle of a wave: exit 130, fleet consistent, a second deploy finishes the job', async () => {
    const f = await fleet('it-sigint');
    await f.at100(4);
    const file = f.fleetFile({ replicas: 4, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0', drainSeconds: 3 });
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const running = await startCliUntil(['deploy', '-f', file], /draining .* for 3 s/);
    running.child.kill('SIGINT');
    const { code, stdout, stderr } = await running.exited;
    // Read right after the exit: "consistent" is what the user finds at once, not after things settle.
    const upAfter = await f.upstream();
    const list = await f.instances();
    assert.equal(code, 130, stdout + stderr);
    assert.match(stderr, /interrupted after \d+ wave\(s\): the fleet is consistent/);
    assert.match(stderr, /run the same deploy again to continue/);
    assert.equal(upAfter.down, 0, `no instance left marked down:\n${upAfter.content}`);
    // Every running instance that passes readiness is in the upstream, none is down.
    const alive = list.filter((i) => i.running);
    const ready = [];
    for (const i of alive) if (await prober.ready(i.address ?? '')) ready.push(i);
    for (const i of ready) assert.ok(upAfter.content.includes(`${i.address}; # ${i.name}`), `${i.name} is ready and in the upstream:\n${upAfter.content}`);
    assert.ok(alive.length <= 5, 'never above replicas + maxSurge');

    const again = await runCli(['deploy', '-f', file]);
    const records = await load.stop();
    assert.equal(again.code, 0, again.stderr);
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0', '1.1.0']);
    assert.deepEqual(failedOf(records), []);
  });
});

describe('several load balancers', () => {
  it('one nginx with a broken config file: preflight fails, nothing reloaded, both files as before', async () => {
    const f = await fleet('it-ha');
    const lb2 = await f.addLoadBalancer('b');
    const lbs = [{ container: lb2.container, upstream: f.names.upstream }];
    const r0 = await runCli(['deploy', '-f', f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, extraLoadBalancers: lbs })]);
    assert.equal(r0.code, 0, r0.stderr);
    assert.match(r0.stdout, /\[2 reloads\]/, 'one reload per load balancer');
    const before = [await f.upstream(), await f.upstream(lb2.container)];
    assert.equal(before[0]?.content, before[1]?.content);
    // Break lb2's own config: its running config keeps serving, but nginx -t fails.
    await putFile(docker, lb2.container, '/etc/nginx/conf.d/default.conf', 'server { listen 80; location / { proxy_pass http://nowhere_at_all; } \n');
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const r = await runCli([
      'deploy',
      '-f',
      f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, extraLoadBalancers: lbs, image: 'fleetroll-example:1.1.0' }),
    ]);
    const records = await load.stop();
    assert.equal(r.code, 1);
    assert.match(r.stderr, /preflight failed, nothing was changed/);
    assert.match(r.stderr, new RegExp(`nginx ${lb2.container} on local: the current configuration fails`));
    assert.equal((await f.upstream()).content, before[0]?.content);
    assert.equal((await f.upstream(lb2.container)).content, before[1]?.content);
    assert.deepEqual(failedOf(records), []);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0']);
  });

  it('the new upstream fails nginx -t on one of two: every file restored, no reload anywhere', async () => {
    const f = await fleet('it-ha2');
    const lb2 = await f.addLoadBalancer('b');
    const r0 = await runCli([
      'deploy',
      '-f',
      f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, extraLoadBalancers: [{ container: lb2.container, upstream: f.names.upstream }] }),
    ]);
    assert.equal(r0.code, 0, r0.stderr);
    const before = [await f.upstream(), await f.upstream(lb2.container)];
    const broken = join(f.dir, 'broken.tmpl');
    writeFileSync(broken, 'upstream {{upstream}} {\n{{servers}}\n    not_a_directive;\n}\n');
    const r = await runCli([
      'deploy',
      '-f',
      f.fleetFile({
        replicas: 2,
        maxSurge: 1,
        maxUnavailable: 0,
        image: 'fleetroll-example:1.1.0',
        extraLoadBalancers: [{ container: lb2.container, upstream: f.names.upstream, template: broken }],
      }),
    ]);
    assert.equal(r.code, 1);
    assert.match(
      r.stderr,
      new RegExp(`nginx ${lb2.container} on local: the new upstream failed nginx -t; every upstream file was restored and nothing was reloaded`),
    );
    assert.equal((await f.upstream()).content, before[0]?.content, 'the first load balancer was restored too');
    assert.equal((await f.upstream(lb2.container)).content, before[1]?.content);
    // The first new instance became ready and the old one it replaces was marked for termination,
    // so (TerminationStarted) the second new one started at once; the upstream write that would have
    // put the first in and the old one down failed, so the drain was undone: both old instances still
    // serve, and the new ones serve no traffic anywhere.
    assert.deepEqual((await f.versions()).sort(), ['1.0.0', '1.0.0', '1.1.0', '1.1.0']);
  });
});
