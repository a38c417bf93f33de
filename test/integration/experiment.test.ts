/**
 * `fleetroll experiment` end to end through the built CLI: a tiny matrix (the
 * naive control and a 1/0 rolling deploy of 2 instances, keep-alive probes)
 * on real Docker + nginx, then the report files and the JSON it prints.
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
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-experiment-'));

before(async () => {
  await ensureImages();
});
after(async () => {
  for (const n of [1, 2]) await teardown(docker, demoNames(`${prefix}-${n}`));
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
    assert.deepEqual(s.cells.map((c) => c.label), ['naive', 'rolling']);
    const [naive, rolling] = s.cells;
    assert.ok(naive && rolling);

    // The rolling deploy: zero failures held, never below 2 in service, one extra instance, simulate beside it.
    const a = rolling.aggregate;
    assert.equal(a.runs, 1);
    assert.ok(a.requests.total.median > 60, `requests ${a.requests.total.median}`);
    assert.equal(a.requests.failed.max, 0);
    assert.equal(rolling.expectationMet, true);
    assert.equal(a.minCapacity.min, 2);
    assert.equal(a.peakInstances.max, 3);
    assert.equal(a.reloads.median, 2);
    assert.ok(a.windowMs.median > 0 && a.windowMs.median < a.deployDurationMs.median + 1000, `window ${a.windowMs.median} ms`);
    assert.ok(a.predicted, 'simulate predicted the rolling deploy');
    assert.deepEqual({ peak: a.predicted.peakInstances, lowest: a.predicted.lowestCapacity, reloads: a.predicted.reloads }, { peak: 3, lowest: 2, reloads: 2 });
    assert.ok(a.predicted.durationMs > 0);
    // The floor the timings imply is a real lower bound.
    assert.ok(a.overheadRatio && a.overheadRatio.median > 1, `overhead ${JSON.stringify(a.overheadRatio)}`);

    // The naive control: one of two instances out at a time, no prediction.
    assert.equal(naive.aggregate.minCapacity.min, 1);
    assert.equal(naive.aggregate.predicted, null);
    assert.equal(naive.aggregate.overheadRatio, null);
    assert.equal(naive.aggregate.reloads.median, 2);
    // Failures, if any, are each pinned on a naive phase.
    const naiveRun = s.runs.find((x) => x.cell === naive.id)!;
    assert.equal(naiveRun.failuresByPhase.reduce((n, p) => n + p.failed, 0), naiveRun.requests.failed);
    for (const p of naiveRun.failuresByPhase) assert.match(p.phase, /^(naive \d+: (killing|starting|reloading nginx|pause)|after deploy)$/);

    // Files: report, page, charts, summary, and per run every request and the events.
    const md = readFileSync(join(out, 'report.md'), 'utf8');
    for (const text of ['# Experiment: Tiny experiment', '## Results', '| rolling |', '| naive |', '## Failed requests by deploy phase', '## Keep-alive retries', '![Capacity over time](charts/capacity.svg)']) {
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
      const events = readFileSync(join(out, run.files.events), 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { t: number; type: string });
      const types = events.map((e) => e.type);
      for (const t of ['load-start', 'deploy-start', 'wave', 'stopped', 'started', 'reload', 'deploy-end', 'load-stop']) assert.ok(types.includes(t), `events has ${t}`);
      assert.ok(existsSync(join(out, run.files.metrics)));
    }

    // Every fleet was torn down.
    for (const n of [1, 2]) {
      const left = await docker.listContainers({ all: true, filters: { label: [`fleetroll.service=${prefix}-${n}`] } });
      assert.deepEqual(left, []);
      const nginx = await docker.listContainers({ all: true, filters: { label: [`fleetroll.demo=${prefix}-${n}`] } });
      assert.deepEqual(nginx, []);
    }
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
