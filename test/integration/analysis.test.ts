/**
 * The analysis gate on a real Docker engine and nginx, reading nginx's own
 * access log: a subtly bad version (BAD_ERROR_RATE: a share of its API
 * answers are 500s, readiness passes) is stopped by the analysis, as a
 * canary and as RollingUpdate's first wave (whose `deploy --json` says
 * `stoppedBy: "analysis"`), a slow one (BAD_LATENCY_MS) by maxLatencyRatio
 * as a canary, and the fleet ends on the stable
 * version. Every failed request is one the bad version answered itself:
 * none is caused by fleetroll (no connection error, no nginx 502, no failure
 * on the stable version).
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { describe, it } from 'node:test';
import { runCli, useFleets } from './fixture.js';

const fleet = useFleets();

interface Answer {
  status?: number;
  version?: string;
  error?: string;
}

/** GET `path` at about `perSecond`, each as another user (X-User), until stopped. */
function usersLoad(url: string, path: string, perSecond: number): { stop(): Promise<Answer[]> } {
  const answers: Answer[] = [];
  const inFlight = new Set<Promise<void>>();
  let n = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const req = http.get(`${url}${path}`, { agent: false, headers: { 'X-User': `user-${n++ % 500}` } }, (res) => {
        res.resume();
        res.on('end', () => {
          answers.push({ status: res.statusCode, version: String(res.headers['x-app-version'] ?? '') });
          resolve();
        });
      });
      req.setTimeout(5000, () => req.destroy(new Error('timeout')));
      req.on('error', (e: NodeJS.ErrnoException) => {
        answers.push({ error: e.code ?? e.message });
        resolve();
      });
    });
  const timer = setInterval(() => {
    const p = one();
    inFlight.add(p);
    void p.then(() => inFlight.delete(p));
  }, 1000 / perSecond);
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all(inFlight);
      return answers;
    },
  };
}

/** Failed requests fleetroll could be blamed for: anything but a 500 the bad version answered itself. */
const notTheApp = (answers: Answer[], bad: string) =>
  answers.filter((a) => a.error !== undefined || a.status === undefined || (a.status >= 400 && !(a.status === 500 && a.version === bad)));

// inconclusiveLimit: on a machine this busy the load may send fewer than minRequests to one new
// instance in an interval (9 of 10 at TEST_CONCURRENCY=10): a thin interval is measured again, so
// the gate decides on the bad version's errors, not on the test's own slowness.
const ANALYSIS = { interval: '4s', minRequests: 10, maxErrorRate: '5%', inconclusiveLimit: 3 };
const BAD = { BAD_ERROR_RATE: '0.3' };

describe('the analysis gate, from the access log', () => {
  it('canary: 30% errors on the canary are caught by the first measurement; the canary is removed, stable serves alone', async (t) => {
    const f = await fleet('it-gate');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const load = usersLoad(f.url, '/api/books', 40);
    const file = f.fleetFile({
      replicas: 3,
      type: 'Canary',
      canary: { stickyKey: 'header:X-User', steps: [{ setWeight: 50 }, { analysis: {} }, { setWeight: 100 }] },
      analysis: ANALYSIS,
      image: 'fleetroll-example:1.1.0',
      env: BAD,
    });
    const r = await runCli(['deploy', '-f', file]);
    const answers = await load.stop();

    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /canary aborted \(the analysis failed\)/);
    assert.match(r.stderr, /error rate \d+(\.\d+)?% on 1\.1\.0 over [\d.]+ s \(\d+ of \d+ requests\), limit 5%/);
    assert.deepEqual((await f.versions()).sort(), ['1.0.0', '1.0.0', '1.0.0']);
    assert.equal((await f.instances()).length, 3, 'the canary is gone');
    assert.deepEqual(notTheApp(answers, '1.1.0'), [], 'no request failed because of the rollout');
    const served = answers.filter((a) => a.version === '1.1.0');
    t.diagnostic(
      `the bad version served ${served.length} of ${answers.length} requests (${served.filter((a) => a.status === 500).length} of them 500s) before the analysis stopped it`,
    );
    assert.ok(served.length > 0, 'the canary did take traffic');
  });

  it('RollingUpdate: the first wave is the canary; the gate catches it and the rollout rolls back', async (t) => {
    const f = await fleet('it-gater');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const load = usersLoad(f.url, '/api/books', 40);
    const r = await runCli([
      'deploy',
      '--json',
      '-f',
      f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, analysis: ANALYSIS, image: 'fleetroll-example:1.1.0', env: BAD }),
    ]);
    const answers = await load.stop();

    assert.equal(r.code, 1, r.stdout + r.stderr);
    // --json: a script can tell the gate's stop from any other failure without reading the message.
    const outcome = JSON.parse(r.stdout) as { outcome: string; stoppedBy?: string; message: string };
    assert.deepEqual([outcome.outcome, outcome.stoppedBy], ['failed', 'analysis'], r.stdout);
    assert.match(outcome.message, /analysis after the first wave: analysis failed/);
    assert.match(outcome.message, /rolled back/);
    assert.deepEqual((await f.versions()).sort(), ['1.0.0', '1.0.0', '1.0.0']);
    assert.deepEqual(notTheApp(answers, '1.1.0'), [], 'no request failed because of the rollout');
    const served = answers.filter((a) => a.version === '1.1.0');
    t.diagnostic(`the bad version served ${served.length} of ${answers.length} requests before the gate stopped it`);
    assert.ok(served.length < answers.length / 2, 'stopped before it served most of the traffic');
  });

  // The delay is added to whatever stable's latency is, and the gate divides one by the other: with a
  // limit of 2× the canary is caught while stable's p99 stays under the delay itself. 300 ms was not
  // enough with the whole suite running (stable's p99 163 ms, canary 479 ms: 2.94×, under a limit of
  // 3×), nor was 1.5 s against 3× on a loaded clean-clone CI (stable 1135 ms, canary 2683 ms: 2.36×).
  it('canary: a version 1.5 s slower (no errors) is caught by maxLatencyRatio; the canary is removed, nothing failed', async (t) => {
    const f = await fleet('it-gatel');
    assert.equal((await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0 })])).code, 0);
    const load = usersLoad(f.url, '/api/books', 40);
    const file = f.fleetFile({
      replicas: 3,
      type: 'Canary',
      canary: { stickyKey: 'header:X-User', steps: [{ setWeight: 50 }, { analysis: {} }, { setWeight: 100 }] },
      analysis: { interval: '4s', minRequests: 10, maxLatencyRatio: 2 },
      image: 'fleetroll-example:1.1.0',
      env: { BAD_LATENCY_MS: '1500' },
    });
    const r = await runCli(['deploy', '-f', file]);
    const answers = await load.stop();

    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /canary aborted \(the analysis failed\)/);
    const figures = /p99 latency (\d+(?:\.\d+)?) ms on 1\.1\.0 vs (\d+(?:\.\d+)?) ms on stable[^:]*: ([\d.]+)×, limit 2×/.exec(r.stderr);
    assert.ok(figures, r.stderr);
    t.diagnostic(
      `latency gate: canary p99 ${figures[1]} ms vs stable ${figures[2]} ms (${figures[3]}×, limit 2×); the slow version served ${answers.filter((a) => a.version === '1.1.0').length} of ${answers.length} requests`,
    );
    assert.ok(Number(figures[1]) >= 1500, `the canary's p99 (${figures[1]} ms) includes the 1500 ms it adds`);
    assert.deepEqual((await f.versions()).sort(), ['1.0.0', '1.0.0', '1.0.0']);
    assert.equal((await f.instances()).length, 3, 'the canary is gone');
    assert.deepEqual(notTheApp(answers, 'none'), [], 'a slow version answers; nothing failed');
  });
});
