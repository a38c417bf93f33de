/**
 * Strategies and hooks on a real fleet: Recreate, instances that exited
 * before the rollout, and the hooks (postWave, preDeploy) failing.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { docker, failedOf, runCli, useFleets, startLoad } from './fixture.js';
import { FleetStateStore } from '../../src/adapters/fleetState.js';

const fleet = useFleets();

describe('strategy and hooks, for real', () => {
  it('Recreate: all out, all stopped, all started, all back in', async (t) => {
    const f = await fleet('it-recreate');
    await f.at100();
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 0 });
    const loadStart = Date.now() - load.elapsed();
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, type: 'Recreate', image: 'fleetroll-example:1.1.0' })]);
    const records = await load.stop();
    assert.equal(r.code, 0, r.stderr);
    // Recreate: all three old ones terminated first; the new ones start only once all are gone.
    assert.match(r.stdout, /wave 1: start 0, drain and stop 3/);
    assert.match(r.stdout, /wave 2: start 3, drain and stop 0/);
    assert.match(r.stdout, /mode: recreate/);
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
    assert.equal((await f.instances()).length, 3);
    const ok = records.filter((x) => x.status === 200);
    const lastOld = Math.max(...ok.filter((x) => x.version === '1.0.0').map((x) => x.t + x.latencyMs));
    const firstNew = Math.min(...ok.filter((x) => x.version === '1.1.0').map((x) => x.t));
    assert.ok(lastOld < firstNew, `never two versions at once: last 1.0.0 answer at ${lastOld} ms, first 1.1.0 at ${firstNew} ms`);
    // Recreate's downtime: requests fail only in the gap between the two versions, none while one serves.
    const failed = failedOf(records);
    t.diagnostic(`recreate downtime: ${failed.length} of ${records.length} requests failed, gap ${Math.round(firstNew - lastOld)} ms`);
    // The gap ends when the reload that puts the new set in is in force (the journal's own record of
    // it), not at the first new answer: until every old worker has gone, one still serves its open
    // keep-alive connections with the all-down config, and a request on one got a 502 after a
    // request on a new worker had been answered by 1.1.0.
    const reloads = (await new FleetStateStore(docker, f.names.service, 'local').journal()).filter((e) => e.step === 'reload' && e.phase === 'end');
    const upOf = (e: (typeof reloads)[number]) => (e.detail?.up as string[] | undefined) ?? [];
    const allDown = reloads.findIndex((e) => upOf(e).length === 0);
    const backIn = reloads.slice(allDown + 1).find((e) => upOf(e).length > 0);
    assert.ok(allDown >= 0 && backIn, `the journal has the all-down reload and the one that put the new set in: ${JSON.stringify(reloads)}`);
    const backInAt = Date.parse(backIn.at) - loadStart;
    t.diagnostic(`the new set in force ${Math.round(backInAt - firstNew)} ms after the first new answer was asked for`);
    const outside = failed.filter((x) => x.t + x.latencyMs < lastOld - 1000 || x.t > backInAt + 20);
    assert.deepEqual(outside, [], 'a request failed while a version was serving');
  });

  it('an old instance that has already exited is replaced first', async () => {
    const f = await fleet('it-unhealthy');
    await f.at100();
    const [victim] = await f.instances();
    assert.ok(victim);
    await docker.getContainer(victim.id).kill();
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, maxSurge: 0, maxUnavailable: 1, image: 'fleetroll-example:1.1.0' })]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`wave 1: start 1, drain and stop 1 \\(${victim.name}\\)`));
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
  });

  it('an instance of the target revision that exited before the rollout (a host restart) is removed and replaced, not waited for', async () => {
    const f = await fleet('it-exited-new');
    await f.at100();
    const [victim] = await f.instances();
    assert.ok(victim);
    await docker.getContainer(victim.id).stop({ t: 1 });
    // The same spec again: before, the exited instance counted as an unready new one and the rollout hung until its deadline.
    const r = await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, progressDeadlineSeconds: 20 })]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, new RegExp(`removed ${victim.name} on local: already exited when this rollout began`));
    const list = await f.instances();
    assert.deepEqual([list.length, list.every((i) => i.running), list.some((i) => i.name === victim.name)], [3, true, false]);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0', '1.0.0']);
  });

  it('a postWave hook that fails stops the rollout (exit 1) with its output; preDeploy failing changes nothing', async () => {
    const f = await fleet('it-hooks');
    await f.at100();
    const gate = [
      process.execPath,
      '-e',
      'console.log("error rate check, wave " + process.env.FLEETROLL_WAVE + " of " + process.env.FLEETROLL_SERVICE); process.exit(Number(process.env.FLEETROLL_WAVE) >= 2 ? 3 : 0)',
    ];
    const r = await runCli([
      'deploy',
      '-f',
      f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0', hooks: { postWave: gate, timeoutSeconds: 10 } }),
    ]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /hooks\.postWave .* exited with 3: the rollout stopped after wave 2/);
    assert.match(r.stderr, new RegExp(`error rate check, wave 2 of ${f.names.service}`));
    assert.match(r.stdout, /hook postWave\| error rate check, wave 1/);
    // Wave 1 started one new instance, wave 2 replaced an old one; the gate stopped wave 3.
    assert.deepEqual((await f.versions()).sort(), ['1.0.0', '1.0.0', '1.1.0', '1.1.0']);

    const pre = [process.execPath, '-e', 'process.exit(1)'];
    const before = (await f.instances()).map((i) => i.name).sort();
    const r2 = await runCli([
      'deploy',
      '-f',
      f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, image: 'fleetroll-example:1.1.0', hooks: { preDeploy: pre } }),
    ]);
    assert.equal(r2.code, 1);
    assert.match(r2.stderr, /hooks\.preDeploy .* exited with 1: nothing was changed/);
    assert.deepEqual((await f.instances()).map((i) => i.name).sort(), before);
  });
});
