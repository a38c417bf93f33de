/**
 * `fleetroll experiment` end to end through the built CLI: a tiny matrix (the
 * naive control and a 1/0 rolling deploy of 2 instances, keep-alive probes)
 * on real Docker + nginx, then the report files and the JSON it prints; the
 * script control (the hand-written rolling script, batch 2) on 4 instances
 * under load; and a canary with analysis beside a rolling update without a
 * gate against a bad version (a quarter of its API answers are 500s).
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { demoNames, teardown } from '../../src/experiment/rehearse.js';
import type { ExperimentSummary } from '../../src/experiment/report.js';
import { docker, ensureImages, runCli, uniqueName } from './fixture.js';

const prefix = uniqueName('it-exp');
const scriptPrefix = uniqueName('it-exs');
const badPrefix = uniqueName('it-exb');
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-experiment-'));

before(async () => {
  await ensureImages();
});
after(async () => {
  for (const n of [1, 2]) await teardown(docker, demoNames(`${prefix}-${n}`));
  await teardown(docker, demoNames(`${scriptPrefix}-1`));
  for (const n of [1, 2]) await teardown(docker, demoNames(`${badPrefix}-${n}`));
});

const SPEC = `# a tiny experiment for the integration test
name: tiny
title: Tiny experiment
repetitions: 1
fleet: { replicas: 2, drainSeconds: 0.5, warmupSeconds: 0.5, prestopSeconds: 0.5 }
load: { getPerSecond: 20, postConcurrency: 1, postDurationMs: 100, keepAlive: true, beforeSeconds: 1, afterSeconds: 0.5 }
strategies:
  - { type: naive, intervalSeconds: 0.5 }
  - { name: rolling, maxSurge: 1, maxUnavailable: 0, expectZeroFailures: true }
records: [ndjson, csv]
`;

describe('experiment', () => {
  it('runs a tiny matrix end to end and writes the report, charts, recordings and JSON', async () => {
    const spec = join(dir, 'tiny.yaml');
    writeFileSync(spec, SPEC);
    const out = join(dir, 'out');
    const r = await runCli(['experiment', '-f', spec, '--out', out, '--name', prefix, '--json']);
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    assert.match(r.stderr, /run 1\/2: naive/, 'progress goes to stderr with --json');

    const s = JSON.parse(r.stdout) as ExperimentSummary;
    assert.equal(s.ok, true, s.problems.join('; '));
    assert.deepEqual(
      s.cells.map((c) => c.label),
      ['naive', 'rolling'],
    );
    const [naive, rolling] = s.cells;
    assert.ok(naive && rolling);

    // The rolling deploy: zero failures held, never below 2 in service, one extra instance, simulate beside it.
    const a = rolling.aggregate;
    assert.equal(a.runs, 1);
    assert.ok(a.requests.total.median > 60, `requests ${a.requests.total.median}`);
    assert.equal(a.requests.failed.max, 0);
    assert.equal(rolling.expectationMet, true);
    assert.equal(a.minCapacity.min, 2);
    // The surge was used (2 + 1) and the bound held (maxSurge 1 and TerminationStarted: at most 2 + 1 + 1). Whether the second
    // new instance is alive while the first old one still drains depends on how long its create + start takes against the
    // drain (0.5 s) and pre-stop (0.5 s): with the mark-down's nginx change 150-250 ms shorter (conf.d bind-mounted), 3 and 4 both occur.
    assert.ok(a.peakInstances.max >= 3 && a.peakInstances.max <= 4, `peak ${a.peakInstances.max}`);
    assert.equal(a.reloads.median, 2);
    assert.ok(a.windowMs.median > 0 && a.windowMs.median < a.deployDurationMs.median + 1000, `window ${a.windowMs.median} ms`);
    assert.ok(a.predicted, 'simulate predicted the rolling deploy');
    assert.deepEqual({ peak: a.predicted.peakInstances, lowest: a.predicted.lowestCapacity, reloads: a.predicted.reloads }, { peak: 4, lowest: 2, reloads: 2 });
    assert.ok(a.predicted.durationMs > 0);
    // The floor the timings imply is a real lower bound.
    assert.ok(a.overheadRatio && a.overheadRatio.median > 1, `overhead ${JSON.stringify(a.overheadRatio)}`);
    // The only engine run is calibrated all the same: by a calibration run of the same configuration made before it
    // (after the naive control, which is not one), and by the deploy that started its own fleet.
    assert.equal(a.calibratedDurationMs?.n, 1, 'a calibrated prediction');
    assert.ok(a.calibratedRatio && a.calibratedRatio.median > 0, JSON.stringify(a.calibratedRatio));
    assert.match(r.stderr, /run 1\/2: naive[\s\S]*calibration run \(reload mode\): rolling, not measured[\s\S]*run 2\/2: rolling/);
    assert.match(r.stderr, /calibrated on the calibration run, the fleet's first deploy: [0-9.]+ s/);
    assert.deepEqual(
      s.experiment.calibrationRuns?.map((c) => [c.mode, c.label]),
      [['reload', 'rolling']],
    );
    assert.ok((s.experiment.calibrationRuns?.[0]?.deployMs ?? 0) > 0);
    assert.equal(s.runs.length, 2, 'the calibration run is not a reported run');

    // The naive control: one of two instances out at a time, no prediction.
    assert.equal(naive.aggregate.minCapacity.min, 1);
    assert.equal(naive.aggregate.predicted, null);
    assert.equal(naive.aggregate.overheadRatio, null);
    assert.equal(naive.aggregate.reloads.median, 2);
    // Failures, if any, are each pinned on a naive phase.
    const naiveRun = s.runs.find((x) => x.cell === naive.id)!;
    assert.equal(
      naiveRun.failuresByPhase.reduce((n, p) => n + p.failed, 0),
      naiveRun.requests.failed,
    );
    for (const p of naiveRun.failuresByPhase) assert.match(p.phase, /^(naive \d+: (killing|starting|reloading nginx|pause)|after deploy)$/);

    // Files: report, page, charts, summary, and per run every request and the events.
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    for (const text of [
      '# Experiment: Tiny experiment',
      '## Results',
      '| rolling |',
      '| naive |',
      '## Failed requests by deploy phase',
      '## Keep-alive retries',
      '![Capacity over time](charts/capacity.svg)',
    ]) {
      assert.ok(md.includes(text), `report.md has ${text}`);
    }
    const html = readFileSync(join(out, 'index.html'), 'utf8');
    assert.match(html, /<img src="charts\/window-duration.svg"/);
    for (const chart of s.files.charts) {
      assert.ok(html.includes(`src="${chart}"`), `index.html shows ${chart}`);
      assert.match(readFileSync(join(out, chart), 'utf8'), /^<svg/, chart);
    }
    assert.ok(s.files.charts.includes('charts/capacity.svg'));
    assert.equal(s.files.charts.filter((c) => c.startsWith('charts/versions-')).length, 2);
    assert.deepEqual(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8')), s);

    for (const run of s.runs) {
      const lines = readFileSync(join(out, run.files.requests[0]!), 'utf8').trim().split('\n');
      assert.equal(lines.length, run.requests.total, 'one NDJSON line per request');
      const first = JSON.parse(lines[0]!) as { t: number; method: string; latencyMs: number };
      assert.equal(typeof first.t, 'number');
      const csv = readFileSync(join(out, run.files.requests[1]!), 'utf8').trim().split('\n');
      assert.equal(csv[0], 't,method,path,status,error,latencyMs,version,retried,retryError');
      assert.equal(csv.length, run.requests.total + 1);
      const events = readFileSync(join(out, run.files.events), 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { t: number; type: string });
      const types = events.map((e) => e.type);
      for (const t of ['load-start', 'deploy-start', 'wave', 'stopped', 'started', 'reload', 'deploy-end', 'load-stop'])
        assert.ok(types.includes(t), `events has ${t}`);
      assert.ok(existsSync(join(out, run.files.metrics)));
    }
    // The rolling run's calibrated prediction, event by event on its virtual clock: the same kinds of step as measured.
    const rollingRun = s.runs.find((x) => x.files.calibratedEvents !== undefined);
    assert.ok(rollingRun && s.runs.filter((x) => x.files.calibratedEvents).length === 1, 'only the engine run has a calibrated prediction');
    const predictedTypes = new Set(
      readFileSync(join(out, rollingRun.files.calibratedEvents!), 'utf8')
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { type: string }).type),
    );
    for (const t of ['wave', 'started', 'stopped', 'complete'])
      assert.ok(predictedTypes.has(t), `the prediction has ${t} events: ${[...predictedTypes].join(', ')}`);

    // Every fleet was torn down.
    for (const n of [1, 2]) {
      const left = await docker.listContainers({ all: true, filters: { label: [`fleetroll.service=${prefix}-${n}`] } });
      assert.deepEqual(left, []);
      const nginx = await docker.listContainers({ all: true, filters: { label: [`fleetroll.demo=${prefix}-${n}`] } });
      assert.deepEqual(nginx, []);
    }
  });

  it('the script control, batch 2 of 4 instances: no failed request, every instance on the new version, two reloads per batch, stops before starts', async () => {
    const spec = join(dir, 'script.yaml');
    writeFileSync(
      spec,
      `name: script-control
repetitions: 1
fleet: { replicas: 4, drainSeconds: 0.5, warmupSeconds: 0.5, prestopSeconds: 0.5 }
load: { getPerSecond: 20, postConcurrency: 1, postDurationMs: 100, beforeSeconds: 1, afterSeconds: 0.5 }
strategies:
  - { type: script, batch: 2, expectZeroFailures: true }
`,
    );
    const out = join(dir, 'script-out');
    const r = await runCli(['experiment', '-f', spec, '--out', out, '--name', scriptPrefix, '--json']);
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    const s = JSON.parse(r.stdout) as ExperimentSummary;
    assert.equal(s.ok, true, s.problems.join('; '));
    const [cell] = s.cells;
    const [run] = s.runs;
    assert.ok(cell && run);
    assert.equal(cell.label, 'script b=2');
    assert.equal(cell.strategy.type, 'script');

    assert.ok(run.requests.total > 20, `requests ${run.requests.total}`);
    assert.equal(run.requests.failed, 0, JSON.stringify(run.requests.byOutcome));
    assert.equal(cell.expectationMet, true);
    assert.equal(run.deployError, undefined);
    assert.deepEqual(run.wrongVersions, [], 'every instance reports the new version');

    const events = readFileSync(join(out, run.files.events), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { t: number; type: string; stop?: string[]; name?: string });
    const batches = events.filter((e) => e.type === 'wave');
    assert.equal(batches.length, 2, 'four instances in batches of two');
    assert.equal(run.reloads, 2 * batches.length, 'one reload to mark the batch down, one to put the new ones in');
    assert.equal(run.waves, 2);
    assert.equal(cell.aggregate.minCapacity.min, 2, 'never fewer than 4 - 2 in service');
    assert.equal(cell.aggregate.predicted, null, 'simulate does not model the script');

    // Per batch: its two old instances stop, and only then do its two new ones start.
    for (const [k, batch] of batches.entries()) {
      const next = batches[k + 1]?.t ?? Number.POSITIVE_INFINITY;
      const within = events.filter((e) => e.t >= batch.t && e.t < next);
      const stops = within.filter((e) => e.type === 'stopped');
      const starts = within.filter((e) => e.type === 'started');
      assert.deepEqual(stops.map((e) => e.name).sort(), [...(batch.stop ?? [])].sort(), `batch ${k + 1} stops its own instances`);
      assert.equal(starts.length, 2, `batch ${k + 1} starts two`);
      assert.ok(Math.max(...stops.map((e) => e.t)) <= Math.min(...starts.map((e) => e.t)), `batch ${k + 1}: stops before starts`);
      assert.equal(within.filter((e) => e.type === 'ready').length, 2, `batch ${k + 1}: both new instances reported ready`);
    }
  });

  it("a bad version: the canary's analysis stops it and the fleet ends on the old version; the rolling update without a gate ends on the bad one; no failure but its own 500s", async () => {
    const spec = join(dir, 'bad-version.yaml');
    writeFileSync(
      spec,
      `name: bad-version
repetitions: 1
badVersion: { errorRate: 25% }
analysis: { interval: 2s, minRequests: 5, maxErrorRate: 5% }
fleet: { replicas: 2, drainSeconds: 0.5, warmupSeconds: 0.5, prestopSeconds: 0.5 }
load: { getPerSecond: 20, postConcurrency: 1, postDurationMs: 100, beforeSeconds: 1, afterSeconds: 0.5 }
strategies:
  - name: canary
    type: Canary
    maxSurge: 1
    maxUnavailable: 0
    canary: { steps: [{ setWeight: 50 }, { analysis: {} }] }
    expectStopped: true
    expectZeroFailures: true
  - { name: rolling, maxSurge: 1, maxUnavailable: 0, analysis: false, expectStopped: false, expectZeroFailures: true }
`,
    );
    const out = join(dir, 'bad-version-out');
    const r = await runCli(['experiment', '-f', spec, '--out', out, '--name', badPrefix, '--json']);
    assert.equal(r.code, 0, r.stderr.slice(-3000));
    const s = JSON.parse(r.stdout) as ExperimentSummary;
    assert.equal(s.ok, true, s.problems.join('; '));
    assert.deepEqual(s.experiment.badVersion, { errorRate: 0.25, latencyMs: 0 });
    const canary = s.runs.find((x) => x.cell === s.cells[0]!.id)!;
    const rolling = s.runs.find((x) => x.cell === s.cells[1]!.id)!;

    // The canary: stopped by its analysis, everything back on 1.0.0, nothing failed but the bad version's own answers.
    assert.equal(canary.outcome, 'stopped', canary.deployError);
    assert.match(canary.deployError ?? '', /canary aborted \(the analysis failed\)/);
    assert.deepEqual(canary.wrongVersions, [], 'every instance runs 1.0.0 again');
    assert.ok(canary.newVersion.answered > 0, 'the canary took traffic before it was stopped');
    assert.equal(canary.newVersion.otherFailures, 0, JSON.stringify(canary.requests.byOutcome));
    assert.equal(canary.requests.failed, canary.newVersion.ownFailures, 'every failed request is a 500 the bad version answered');
    assert.ok(canary.newVersion.stopped && canary.newVersion.stopMs !== null && canary.newVersion.stopMs > 0);
    assert.ok(canary.health && !('unavailable' in canary.health), `the deploy read the access log: ${JSON.stringify(canary.health)}`);

    // The rolling update without a gate: nothing stopped it, every instance runs the bad version.
    assert.equal(rolling.outcome, 'completed', rolling.deployError);
    assert.deepEqual(rolling.wrongVersions, [], 'every instance runs 1.1.0');
    assert.equal(rolling.newVersion.otherFailures, 0, JSON.stringify(rolling.requests.byOutcome));
    assert.equal(rolling.newVersion.stopMs, null);

    const md = readFileSync(join(out, 'report.md'), 'utf8');
    assert.match(md, /### Against a bad version/);
    assert.match(md, /\| canary \| at canary step 2: error rate ≤ 5%, measured every 2s, at least 5 requests \| stopped by the analysis \|/);
  });

  it('rejects an invalid spec with exit 2, naming the field, before touching Docker', async () => {
    const spec = join(dir, 'bad.yaml');
    writeFileSync(spec, 'name: bad\nstrategies:\n  - { maxSurge: 0, maxUnavailable: 0 }\nload: { getPerSecond: -1 }\n');
    const r = await runCli(['experiment', '-f', spec, '--out', join(dir, 'bad-out')]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /load\/getPerSecond: must be a number from 0 to 2000, got -1/);
    assert.equal(existsSync(join(dir, 'bad-out')), false);
  });
});
