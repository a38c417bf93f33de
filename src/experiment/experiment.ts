/**
 * `fleetroll experiment`: runs the matrix of an experiment spec, one rollout
 * under load per run on a fresh local fleet, records everything, and writes
 * the report.
 *
 * Output directory:
 *   summary.json                    aggregated metrics per configuration, one line per run
 *   report.md, index.html           the report (tables, charts, method)
 *   charts/*.svg                    Vega-Lite charts rendered headless
 *   runs/<run>/requests.ndjson|csv  every request the probes sent
 *   runs/<run>/events.ndjson        the deploy's events and the runner's markers, same clock
 *   runs/<run>/metrics.json         the run's metrics, phases and capacity timeline
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join, relative } from 'node:path';
import type { Fleet } from '../config/load.js';
import { DockerRuntime } from '../adapters/docker.js';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../adapters/localImages.js';
import type { DeployDeps } from '../engine/rollout.js';
import { aggregateRuns, predict, runMetrics, type TimedEvent } from './analysis.js';
import { renderSvg } from './charts.js';
import { toHtml, toMarkdown } from './document.js';
import { perSecond, type RequestRecord } from './metrics.js';
import { demoNames, runUnderLoad, teardown } from './rehearse.js';
import { buildCharts, buildDocument, runLine, scriptComparison, type CellSummary, type ExperimentSummary, type RunOutcome } from './report.js';
import { expandCells, planRuns, type ExperimentSpec, type PlannedRun } from './spec.js';

export interface ExperimentOptions {
  spec: ExperimentSpec;
  /** As given on the command line; shown in the report. */
  specFile: string;
  outDir: string;
  docker: string;
  /** Prefix of each run's service name (the fleet of run 3 is `<prefix>-3`). */
  namePrefix: string;
  makeDeps: (fleet: Fleet) => Promise<DeployDeps>;
  template: string;
  /** Progress lines for people. */
  log: (line: string) => void;
  /** Aborted: finish the run in progress, skip the rest, and still write the report. */
  signal?: AbortSignal | undefined;
}

const CSV_COLUMNS = ['t', 'method', 'path', 'status', 'error', 'latencyMs', 'version', 'retried', 'retryError'] as const;

function csvField(v: unknown): string {
  if (v === undefined) return '';
  const s = String(v);
  return /[",\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

export function recordsToCsv(records: readonly RequestRecord[]): string {
  const lines = [CSV_COLUMNS.join(',')];
  for (const r of records) lines.push(CSV_COLUMNS.map((c) => csvField(r[c])).join(','));
  return `${lines.join('\n')}\n`;
}

export function toNdjson(items: readonly unknown[]): string {
  return items.map((i) => JSON.stringify(i)).join('\n') + (items.length ? '\n' : '');
}

/** Events flattened for NDJSON: `{"t":1523.4,"source":"engine","type":"wave",...}`. */
export function eventLines(events: readonly TimedEvent[]): unknown[] {
  return events.map((e) => ({ t: Math.round(e.t * 1000) / 1000, source: e.source, ...e.event }));
}

async function runOne(o: ExperimentOptions, run: PlannedRun, runtime: DockerRuntime, nginxImage: string, total: number): Promise<RunOutcome> {
  const { cell } = run;
  const p = cell.params;
  const name = `${o.namePrefix}-${run.index}`;
  const startedAt = new Date().toISOString();
  o.log(`run ${run.index}/${total}: ${cell.label}, repetition ${run.repetition} (fleet ${name})`);
  const r = await runUnderLoad(
    {
      name,
      docker: o.docker,
      replicas: p.replicas,
      maxSurge: cell.strategy.maxSurge === undefined ? undefined : String(cell.strategy.maxSurge),
      maxUnavailable: cell.strategy.maxUnavailable === undefined ? undefined : String(cell.strategy.maxUnavailable),
      recreate: cell.strategy.type === 'Recreate',
      replacementPolicy: cell.strategy.replacementPolicy,
      naive: cell.strategy.type === 'naive',
      naiveIntervalMs: (cell.strategy.intervalSeconds ?? 1) * 1000,
      script: cell.strategy.type === 'script' ? { batch: cell.strategy.batch ?? 1, pollSeconds: cell.strategy.pollSeconds } : undefined,
      from: o.spec.from,
      to: o.spec.to,
      getPerSecond: p.getPerSecond,
      postConcurrency: p.postConcurrency,
      orderDelayMs: p.postDurationMs,
      keepAlive: p.keepAlive,
      timeoutMs: o.spec.load.timeoutMs,
      beforeMs: o.spec.load.beforeSeconds * 1000,
      afterMs: o.spec.load.afterSeconds * 1000,
      drainSeconds: p.drainSeconds,
      warmupSeconds: p.warmupSeconds,
      minReadySeconds: p.minReadySeconds,
      prestopSeconds: p.prestopSeconds,
      port: 0,
      keep: false,
      events: () => {},
      log: () => {},
    },
    runtime,
    o.makeDeps,
    o.template,
    nginxImage,
  );
  const strategy = cell.strategy.type === 'RollingUpdate' || cell.strategy.type === 'Recreate' ? r.toFleet.strategy : undefined;
  const nominal = { startupMs: p.warmupSeconds * 1000, drainMs: p.drainSeconds * 1000, stopMs: p.prestopSeconds * 1000, minReadyMs: p.minReadySeconds * 1000 };
  const metrics = runMetrics({
    predicted: strategy ? await predict(strategy, nominal) : undefined,
    records: r.records,
    events: r.events,
    deployStartMs: r.deployStartMs,
    deployEndMs: r.deployEndMs,
    loadEndMs: r.loadEndMs,
    initial: r.initial,
    from: o.spec.from,
    to: o.spec.to,
    mode: cell.strategy.type === 'naive' || cell.strategy.type === 'script' ? cell.strategy.type : 'engine',
    strategy: cell.resolved ? r.toFleet.strategy : undefined,
    timings: { startupMs: p.warmupSeconds * 1000, drainMs: p.drainSeconds * 1000, stopMs: p.prestopSeconds * 1000, minReadyMs: p.minReadySeconds * 1000 },
  });

  const dir = join(o.outDir, 'runs', run.id);
  await mkdir(dir, { recursive: true });
  const rel = (f: string) => relative(o.outDir, join(dir, f)).split('\\').join('/');
  const requests: string[] = [];
  if (o.spec.records.includes('ndjson')) {
    await writeFile(join(dir, 'requests.ndjson'), toNdjson(r.records));
    requests.push(rel('requests.ndjson'));
  }
  if (o.spec.records.includes('csv')) {
    await writeFile(join(dir, 'requests.csv'), recordsToCsv(r.records));
    requests.push(rel('requests.csv'));
  }
  await writeFile(join(dir, 'events.ndjson'), toNdjson(eventLines(r.events)));
  const wrongVersions = r.versions.instances.filter((i) => i.version !== o.spec.to).map((i) => `${i.name}: ${i.version}`);
  const outcome: RunOutcome = {
    id: run.id,
    index: run.index,
    cellId: cell.id,
    label: cell.label,
    repetition: run.repetition,
    startedAt,
    metrics,
    deployError: r.deployError,
    wrongVersions,
    buckets: perSecond(r.records),
    deployStartMs: r.deployStartMs,
    deployEndMs: r.deployEndMs,
    loadEndMs: r.loadEndMs,
    files: { requests, events: rel('events.ndjson'), metrics: rel('metrics.json') },
  };
  await writeFile(
    join(dir, 'metrics.json'),
    `${JSON.stringify({ id: run.id, cell: cell.id, label: cell.label, repetition: run.repetition, startedAt, deployStartMs: r.deployStartMs, deployEndMs: r.deployEndMs, loadEndMs: r.loadEndMs, initial: r.initial, deployError: r.deployError ?? null, versions: r.versions, metrics }, null, 2)}\n`,
  );
  const m = metrics;
  o.log(
    `  ${m.requests.total} requests, ${m.requests.failed} failed, ${m.requests.retried} retried; window ${(m.windowMs / 1000).toFixed(1)} s; deploy ${(m.deployDurationMs / 1000).toFixed(1)} s` +
      `${m.predicted ? ` (simulate ${(m.predicted.durationMs / 1000).toFixed(1)} s, overhead ${m.overheadRatio?.toFixed(2)}×)` : ''}; min in service ${m.minCapacity}, peak ${m.peakInstances}, ${m.reloads} reloads` +
      (r.deployError ? `\n  deploy FAILED: ${r.deployError.split('\n')[0]}` : ''),
  );
  return outcome;
}

/** Runs the experiment and writes everything to outDir. Resolves with what summary.json holds. */
export async function runExperiment(o: ExperimentOptions): Promise<ExperimentSummary> {
  const startedAt = new Date().toISOString();
  const cells = expandCells(o.spec);
  const planned = planRuns(cells, o.spec.repetitions);
  const runtime = new DockerRuntime({ name: 'local', docker: o.docker });
  await runtime.ping();

  o.log(`${cells.length} configuration(s) × ${o.spec.repetitions} repetition(s) = ${planned.length} run(s); writing to ${o.outDir}`);
  o.log('building images (reused when up to date)');
  const imageOpts = { log: () => {}, ...(o.docker.startsWith('unix://') ? {} : { dockerHost: o.docker }) };
  const base = await ensureNodeBaseImage(imageOpts);
  for (const v of new Set([o.spec.from, o.spec.to])) await buildAppImage({ ...imageOpts, version: v, base });
  const nginxImage = await ensureNginxBaseImage(imageOpts);

  await mkdir(o.outDir, { recursive: true });
  // Only what an earlier run of this command wrote; nothing else in the directory is touched.
  for (const sub of ['runs', 'charts']) await rm(join(o.outDir, sub), { recursive: true, force: true });
  await mkdir(join(o.outDir, 'charts'), { recursive: true });

  const outcomes: RunOutcome[] = [];
  for (const run of planned) {
    if (o.signal?.aborted) {
      o.log(`interrupted: skipping the remaining ${planned.length - outcomes.length} run(s)`);
      break;
    }
    try {
      outcomes.push(await runOne(o, run, runtime, nginxImage, planned.length));
    } catch (err) {
      // Whatever went wrong, leave nothing of this run behind.
      await teardown(runtime.docker, demoNames(`${o.namePrefix}-${run.index}`)).catch(() => {});
      throw err;
    }
  }

  const problems: string[] = [];
  const cellSummaries: CellSummary[] = [];
  for (const c of cells) {
    const mine = outcomes.filter((r) => r.cellId === c.id);
    if (mine.length === 0) continue;
    const deployErrors = mine.filter((r) => r.deployError !== undefined).length;
    const aggregate = aggregateRuns(mine.map((r) => r.metrics), deployErrors);
    const expect = c.strategy.expectZeroFailures === true;
    const met = expect ? aggregate.requests.failed.max === 0 : null;
    if (deployErrors > 0) problems.push(`${c.label}: ${deployErrors} deploy(s) failed`);
    if (c.strategy.type !== 'naive') {
      const wrong = mine.filter((r) => r.wrongVersions.length > 0).length;
      if (wrong > 0) problems.push(`${c.label}: ${wrong} run(s) ended with instances not serving ${o.spec.to}`);
    }
    if (met === false) problems.push(`${c.label}: expected zero failed requests, got ${aggregate.requests.failed.max} in the worst run`);
    cellSummaries.push({
      id: c.id,
      label: c.label,
      strategy: {
        name: c.strategy.name,
        type: c.strategy.type,
        maxSurge: c.strategy.maxSurge,
        maxUnavailable: c.strategy.maxUnavailable,
        replacementPolicy: c.strategy.replacementPolicy,
        intervalSeconds: c.strategy.intervalSeconds,
        batch: c.strategy.batch,
        pollSeconds: c.strategy.pollSeconds,
      },
      resolved: c.resolved ? { maxSurge: c.resolved.maxSurge, maxUnavailable: c.resolved.maxUnavailable } : null,
      params: c.params,
      varying: c.varying,
      runs: mine.map((r) => r.id),
      aggregate,
      expectZeroFailures: expect,
      expectationMet: met,
    });
  }
  if (outcomes.length < planned.length) problems.push(`only ${outcomes.length} of ${planned.length} run(s) ran (interrupted)`);

  const summary: ExperimentSummary = {
    experiment: {
      name: o.spec.name,
      title: o.spec.title ?? o.spec.name,
      description: o.spec.description,
      specFile: o.specFile,
      from: o.spec.from,
      to: o.spec.to,
      repetitions: o.spec.repetitions,
      load: { timeoutMs: o.spec.load.timeoutMs, beforeSeconds: o.spec.load.beforeSeconds, afterSeconds: o.spec.load.afterSeconds },
      startedAt,
      finishedAt: new Date().toISOString(),
      machine: { node: process.version, platform: `${process.platform}/${process.arch}`, cpus: cpus().length },
    },
    ok: problems.length === 0,
    problems,
    cells: cellSummaries,
    scriptComparison: scriptComparison(cellSummaries),
    runs: outcomes.map(runLine),
    outDir: o.outDir,
    files: { report: 'report.md', html: 'index.html', summary: 'summary.json', charts: [] },
  };

  o.log('rendering charts');
  const charts = buildCharts(summary, outcomes);
  for (const ch of charts) await writeFile(join(o.outDir, ch.file), await renderSvg(ch.spec));
  summary.files.charts = charts.map((c) => c.file);
  const blocks = buildDocument(summary, outcomes, o.spec, charts);
  await writeFile(join(o.outDir, 'report.md'), toMarkdown(blocks));
  await writeFile(join(o.outDir, 'index.html'), toHtml(`Experiment: ${summary.experiment.title}`, blocks));
  await writeFile(join(o.outDir, 'summary.json'), `${JSON.stringify(summary, null, 2)}\n`);
  return summary;
}
