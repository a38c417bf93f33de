/**
 * Canary on a real Docker engine and nginx: the weight measured from what
 * users get is close to the weight set, each user (a sticky header) stays on
 * one version while the weight holds, `fleetroll promote` finishes with the
 * rolling update, and `fleetroll abort` puts all traffic back on stable and
 * removes the canary, with no failed request; canary.force sends testers
 * (X-Canary: always / never) to the side they ask for.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { execIn, getFile, putFile } from '../../src/adapters/docker.js';
import { AccessLogParser } from '../../src/core/accessLog.js';
import { askUsers, asUser, docker, failedOf, moreRequests, runCli, startCliUntil, startLoad, useFleets } from './fixture.js';

const fleet = useFleets();

const CANARY = { stickyKey: 'header:X-User', steps: [{ setWeight: 25 }, { pause: {} }] };

describe('canary, for real', () => {
  it('setWeight 25 holds about 25% of users, each on one version; promote finishes the rollout; nothing failed', async (t) => {
    const f = await fleet('it-can');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 4, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const file = f.fleetFile({ replicas: 4, type: 'Canary', canary: CANARY, image: 'fleetroll-example:1.1.0' });
    const running = await startCliUntil(['deploy', '-f', file], /paused at 25%/);

    const askedFrom = Date.now();
    const answers = await askUsers(f.url, 200);
    const askedTo = Date.now();
    const onCanary = [...answers.values()].filter((v) => v[0] === '1.1.0').length;
    const switched = [...answers.entries()].filter(([, v]) => v[0] !== v[1]);
    t.diagnostic(
      `setWeight 25: ${onCanary} of 200 users on the canary (${(onCanary / 2).toFixed(1)}%), ${switched.length} changed version between two requests`,
    );
    assert.deepEqual(switched, [], 'every user stays on one version while the weight holds');
    assert.ok(Math.abs(onCanary / 2 - 25) <= 10, `${onCanary / 2}% of users on the canary at weight 25`);
    // nginx's own access log says the same: the share of /api/version answers the new version gave.
    const log = (await getFile(docker, f.names.nginx, '/var/log/nginx/fleetroll.log')) ?? '';
    const logged = new AccessLogParser()
      .parse(log.split('\n'))
      .filter((r) => r.uri === '/api/version' && r.timeMs >= askedFrom - 1000 && r.timeMs <= askedTo + 1000);
    const logShare = (100 * logged.filter((r) => r.appVersion === '1.1.0').length) / Math.max(1, logged.length);
    t.diagnostic(`access log: ${logged.length} requests, ${logShare.toFixed(1)}% answered by the canary`);
    assert.ok(logged.length >= 400, `the access log has the ${logged.length} requests`);
    assert.ok(Math.abs(logShare - onCanary / 2) <= 1, `access log ${logShare.toFixed(1)}% vs users ${onCanary / 2}%`);

    assert.equal((await runCli(['promote', '-f', file])).code, 0);
    const done = await running.exited;
    await moreRequests(load, 5, 'requests after the rollout');
    const records = await load.stop();
    assert.equal(done.code, 0, done.stdout + done.stderr);
    assert.match(done.stdout, /promoted \(fleetroll promote\)/);
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} requests failed`);
    assert.deepEqual((await f.versions()).sort(), Array(4).fill('1.1.0'));
    const up = await f.upstream();
    assert.doesNotMatch(up.content, /^\s*hash \$|weight=\d/m, 'the finished fleet is balanced as before, without the split');
  });

  it('fleetroll abort: all traffic back on stable in one reload, the canary removed, nothing failed', async () => {
    const f = await fleet('it-canab');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    const file = f.fleetFile({ replicas: 3, type: 'Canary', canary: CANARY, image: 'fleetroll-example:1.1.0' });
    const running = await startCliUntil(['deploy', '-f', file], /paused at 25%/);
    assert.ok((await askUsers(f.url, 40)).size > 0);
    assert.equal((await runCli(['abort', '-f', file])).code, 0);
    const done = await running.exited;
    const abortedAt = load.elapsed();
    await moreRequests(load, 5, 'requests after the abort');
    const records = await load.stop();
    assert.equal(done.code, 1, done.stdout + done.stderr);
    assert.match(done.stderr, /canary aborted \(fleetroll abort\): all traffic is back on the stable revision/);
    assert.deepEqual(failedOf(records), []);
    const users = await askUsers(f.url, 40);
    assert.deepEqual([...new Set([...users.values()].flat())], ['1.0.0'], 'only stable answers');
    assert.ok(records.filter((r) => r.t > abortedAt).every((r) => r.version === '1.0.0'));
    assert.equal((await f.instances()).length, 3, 'the canary is gone');
    const up = await f.upstream();
    assert.doesNotMatch(up.content, /^\s*hash \$|weight=\d/m);
  });

  it('canary.force: with nginx.conf proxying to $fleetroll_<upstream>_route, X-Canary: always reaches the canary, never stable, everyone else the split; nothing failed', async (t) => {
    const f = await fleet('it-canf');
    const canary = { ...CANARY, force: 'header:X-Canary' };
    // The first deploy with force set writes the map; only then may nginx.conf name its variable.
    const first = await runCli([
      'deploy',
      '-f',
      f.fleetFile({ replicas: 4, maxSurge: 1, maxUnavailable: 0, type: 'Canary', canary: { ...canary, steps: [{ setWeight: 50 }] } }),
    ]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    // nginx.conf still proxies to the main upstream: the deploy says the header is ignored, and how to change that.
    assert.match(first.stdout, new RegExp(`warning: .*canary\\.force is set, but no proxy_pass in its config uses \\$fleetroll_${f.names.upstream}_route`));
    const conf = (await getFile(docker, f.names.nginx, '/etc/nginx/conf.d/default.conf')) ?? '';
    const routed = conf.replace(`proxy_pass http://${f.names.upstream};`, `proxy_pass http://$fleetroll_${f.names.upstream}_route;`);
    assert.notEqual(routed, conf, 'the rehearsal nginx.conf proxies to the upstream');
    await putFile(docker, f.names.nginx, '/etc/nginx/conf.d/default.conf', routed);
    const reload = await execIn(docker, f.names.nginx, ['nginx', '-s', 'reload']);
    assert.equal(reload.exitCode, 0, reload.stderr);
    // Now through the variable: the load runs from before the canary to after the promote.
    const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
    await moreRequests(load, 5, 'requests through the forced route');
    const file = f.fleetFile({ replicas: 4, type: 'Canary', canary, image: 'fleetroll-example:1.1.0' });
    const running = await startCliUntil(['deploy', '-f', file], /paused at 25%/);

    const versions = async (more: Record<string, string>) => [...new Set([...(await askUsers(f.url, 40, more)).values()].flat())].sort();
    assert.deepEqual(await versions({ 'X-Canary': 'always' }), ['1.1.0'], 'testers with X-Canary: always are all on the canary');
    assert.deepEqual(await versions({ 'X-Canary': 'never' }), ['1.0.0'], 'X-Canary: never keeps them on stable');
    const split = await askUsers(f.url, 200);
    const onCanary = [...split.values()].filter((v) => v[0] === '1.1.0').length;
    t.diagnostic(
      `forced: 80 of 80 requests (40 users, twice) on the canary with always, 80 of 80 on stable with never; without the header ${onCanary} of 200 users on the canary at weight 25`,
    );
    assert.ok(Math.abs(onCanary / 2 - 25) <= 10, `${onCanary / 2}% of users without the header on the canary at weight 25`);
    assert.deepEqual(
      [...split.entries()].filter(([, v]) => v[0] !== v[1]),
      [],
      'the split stays sticky',
    );

    assert.equal((await runCli(['promote', '-f', file])).code, 0);
    const done = await running.exited;
    assert.equal(done.code, 0, done.stdout + done.stderr);
    assert.doesNotMatch(done.stdout, /canary\.force is set, but/, 'nginx.conf proxies to the route now: no warning');
    await moreRequests(load, 5, 'requests after the rollout');
    const records = await load.stop();
    t.diagnostic(`load through $fleetroll_${f.names.upstream}_route: ${failedOf(records).length} of ${records.length} requests failed`);
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} requests failed`);
    // Everything is on the new revision: "always" reaches it, "never" (no stable left) falls back to the main upstream.
    assert.deepEqual(await versions({ 'X-Canary': 'always' }), ['1.1.0']);
    assert.deepEqual(await versions({ 'X-Canary': 'never' }), ['1.1.0']);
    const up = await f.upstream();
    assert.match(up.content, new RegExp(`^map \\$http_x_canary \\$fleetroll_${f.names.upstream}_route \\{`, 'm'), 'the map stays for the next deploy');
  });
});
