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
 *   runs/<run>/calibrated-events.ndjson  the calibrated prediction's events, ms from the deploy's start
 *   runs/<run>/metrics.json         the run's metrics, phases and capacity timeline
 */
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join, relative } from 'node:path';
import { DockerRuntime } from '../adapters/docker.js';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../adapters/localImages.js';
import { aggregateRuns, runMetrics } from './analysis.js';
import type { TimedEvent } from './phases.js';
import { beyondNominal, predict, predictCalibrated } from './predict.js';
import { renderSvg } from './charts.js';
import { toHtml, toMarkdown } from './document.js';
import { perSecond, type RequestRecord } from './metrics.js';
import { demoNames, teardown } from './rehearse.js';
import { calibrate, firstDeployCosts, nominalOf, poolOf, rehearseRun, type Calibration, type ExperimentOptions, type RunImages } from './runSetup.js';
import { buildCharts, buildDocument, runLine, scriptComparison, type CellSummary, type ExperimentSummary, type RunOutcome } from './report.js';
import { expandCells, isBadVersion, planRuns, type Cell, type CellParams, type PlannedRun } from './spec.js';

export type { ExperimentOptions } from './runSetup.js';

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

/**
 * `calibration`: the step costs of the experiment's earlier deploys, beyond
 * their nominal timings (predict.ts beyondNominal), and how many measured
 * runs completed among them. This run's prediction is priced with them and
 * with the deploy that started its own fleet at `from` (which comes before
 * the measured one); its own costs are added after it.
 */
async function runOne(
  o: ExperimentOptions,
  run: PlannedRun,
  runtime: DockerRuntime,
  images: RunImages,
  total: number,
  calibration: Calibration,
): Promise<RunOutcome> {
  const { cell } = run;
  const p = cell.params;
  const name = `${o.namePrefix}-${run.index}`;
  const startedAt = new Date().toISOString();
  o.log(`run ${run.index}/${total}: ${cell.label}, repetition ${run.repetition} (fleet ${name})`);
  const r = await rehearseRun(o, run, name, runtime, images);
  const strategy = cell.resolved ? r.toFleet.strategy : undefined;
  const nominal = nominalOf(p, r.toFleet);
  const pool = poolOf(calibration, p);
  // The deploy that started this run's fleet at `from` came before the measured one: a calibration run the experiment makes anyway.
  const first = firstDeployCosts(r, nominal);
  const earlierRuns = pool.runs;
  // The calibrated prediction's own events, on its virtual clock from the deploy's start: what to set beside the measured ones when they differ.
  const predictedEvents: unknown[] = [];
  const calibrated = strategy
    ? await predictCalibrated(strategy, nominal, [...pool.samples, ...first], r.toFleet.probes.readiness.periodMs, r.toFleet.analysis, (e, at) =>
        predictedEvents.push({ t: at, ...e }),
      )
    : undefined;
  const pricedBy = pool.samples.length;
  pool.samples.push(...first);
  if (strategy && r.deploy && !r.deployError) {
    pool.samples.push(...beyondNominal(r.deploy.costs ?? [], nominal));
    pool.runs++;
  }
  const metrics = runMetrics({
    predicted: strategy ? await predict(strategy, nominal, r.toFleet.analysis) : undefined,
    calibrated: calibrated && { ...calibrated, fromRuns: earlierRuns, ...(pool.calibrationRun ? { fromCalibrationRun: true } : {}) },
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
    health: r.health,
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
  if (calibrated) {
    await writeFile(join(dir, 'calibrated-events.ndjson'), toNdjson(predictedEvents));
    // What priced it (beyond the run's nominal timings), so a prediction can be made again and questioned.
    await writeFile(
      join(dir, 'calibration-costs.json'),
      `${JSON.stringify({ strategy, analysis: r.toFleet.analysis ?? null, nominal, periodMs: r.toFleet.probes.readiness.periodMs, samples: [...pool.samples.slice(0, pricedBy), ...first] })}\n`,
    );
  }
  // A deploy the analysis stopped is rolled back: every instance should be on `from` again.
  const wrongVersions = r.versions.instances.filter((i) => i.version !== r.versions.expected).map((i) => `${i.name}: ${i.version}`);
  const outcome: RunOutcome = {
    id: run.id,
    index: run.index,
    cellId: cell.id,
    label: cell.label,
    repetition: run.repetition,
    startedAt,
    metrics,
    deployError: r.deployError,
    expectedVersion: r.versions.expected,
    wrongVersions,
    buckets: perSecond(r.records),
    deployStartMs: r.deployStartMs,
    deployEndMs: r.deployEndMs,
    loadEndMs: r.loadEndMs,
    files: {
      requests,
      events: rel('events.ndjson'),
      metrics: rel('metrics.json'),
      ...(calibrated ? { calibratedEvents: rel('calibrated-events.ndjson') } : {}),
    },
  };
  await writeFile(
    join(dir, 'metrics.json'),
    `${JSON.stringify({ id: run.id, cell: cell.id, label: cell.label, repetition: run.repetition, startedAt, deployStartMs: r.deployStartMs, deployEndMs: r.deployEndMs, loadEndMs: r.loadEndMs, initial: r.initial, deployError: r.deployError ?? null, versions: r.versions, metrics }, null, 2)}\n`,
  );
  const m = metrics;
  const bad = isBadVersion(p)
    ? `  bad version: answered ${m.newVersion.answeredInDeploy} of ${m.newVersion.sentInDeploy} requests in the deploy, ${m.newVersion.ownFailures} of its own failed, ${m.newVersion.otherFailures} other failures; ` +
      (m.newVersion.stopped ? `stopped ${((m.newVersion.stopMs ?? 0) / 1000).toFixed(1)} s after the deploy started` : 'not stopped') +
      '\n'
    : '';
  o.log(
    `  ${m.outcome === 'stopped' ? 'STOPPED by the analysis; ' : ''}${m.requests.total} requests, ${m.requests.failed} failed, ${m.requests.retried} retried; window ${(m.windowMs / 1000).toFixed(1)} s; deploy ${(m.deployDurationMs / 1000).toFixed(1)} s` +
      `${m.predicted ? ` (simulate ${(m.predicted.durationMs / 1000).toFixed(1)} s${m.overheadRatio !== null ? `, overhead ${m.overheadRatio.toFixed(2)}×` : ''})` : ''}` +
      `${m.calibrated ? ` (calibrated on ${m.calibrated.fromRuns ? `${m.calibrated.fromRuns} earlier run${m.calibrated.fromRuns === 1 ? '' : 's'}, ` : ''}${m.calibrated.fromCalibrationRun ? 'the calibration run, ' : ''}the fleet's first deploy: ${(m.calibrated.durationMs / 1000).toFixed(1)} s${m.calibratedRatio !== null ? `, ${m.calibratedRatio.toFixed(2)}×` : ''})` : ''}; min in service ${m.minCapacity}, peak ${m.peakInstances}, ${m.reloads} reloads` +
      (r.deployError ? `\n  deploy ${m.outcome === 'stopped' ? 'stopped' : 'FAILED'}: ${r.deployError.split('\n')[0]}` : ''),
  );
  if (bad) o.log(bad.trimEnd());
  return outcome;
}

/**
 * The failed requests the rollout caused: every failed request, but with a
 * bad version not those it answered itself (its 500s are the experiment's
 * input).
 */
const rolloutFailures = (r: RunOutcome, bad: boolean) => (bad ? r.metrics.newVersion.otherFailures : r.metrics.requests.failed);

/** expectZeroFailures: no failed request caused by the rollout in any run. */
function zeroFailuresHeld(runs: readonly RunOutcome[], bad: boolean): boolean {
  return runs.every((r) => rolloutFailures(r, bad) === 0);
}

/**
 * What makes the command exit 1, per configuration: a deploy that failed for
 * a reason other than the analysis; a deploy the analysis stopped when the
 * new version was good, or when the strategy says expectStopped: false; a
 * completed deploy when it says expectStopped: true; instances not on the
 * version the deploy should have left (`to`, or `from` after a stop); an
 * expectZeroFailures that did not hold.
 */
export function cellProblems(
  c: Pick<Cell, 'label' | 'strategy'> & { params: Pick<CellParams, 'badErrorRate' | 'badLatencyMs'> },
  runs: readonly RunOutcome[],
): string[] {
  const problems: string[] = [];
  const bad = isBadVersion(c.params);
  const count = (o: RunOutcome['metrics']['outcome']) => runs.filter((r) => r.metrics.outcome === o).length;
  const failed = count('failed');
  const stopped = count('stopped');
  const completed = count('completed');
  if (failed > 0) problems.push(`${c.label}: ${failed} deploy(s) failed`);
  if (stopped > 0 && (c.strategy.expectStopped === false || (!bad && c.strategy.expectStopped !== true))) {
    problems.push(`${c.label}: the analysis stopped ${stopped} deploy(s) of ${bad ? 'the new version' : 'a good version'}`);
  }
  if (completed > 0 && c.strategy.expectStopped === true)
    problems.push(`${c.label}: ${completed} deploy(s) completed; the analysis was expected to stop the new version`);
  if (c.strategy.type !== 'naive') {
    const wrong = runs.filter((r) => r.wrongVersions.length > 0);
    if (wrong.length > 0)
      problems.push(`${c.label}: ${wrong.length} run(s) ended with instances not serving ${[...new Set(wrong.map((r) => r.expectedVersion))].join(' or ')}`);
  }
  if (c.strategy.expectZeroFailures === true && !zeroFailuresHeld(runs, bad)) {
    const worst = Math.max(...runs.map((r) => rolloutFailures(r, bad)));
    problems.push(`${c.label}: expected zero failed requests${bad ? " other than the bad version's own" : ''}, got ${worst} in the worst run`);
  }
  return problems;
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
  const images = {
    reload: await ensureNginxBaseImage(imageOpts),
    dynamic: cells.some((c) => c.params.dynamicNginx) ? await ensureNginxBaseImage({ ...imageOpts, lua: true }) : undefined,
  };

  await mkdir(o.outDir, { recursive: true });
  // Only what an earlier run of this command wrote; nothing else in the directory is touched.
  for (const sub of ['runs', 'charts']) await rm(join(o.outDir, sub), { recursive: true, force: true });
  await mkdir(join(o.outDir, 'charts'), { recursive: true });

  const outcomes: RunOutcome[] = [];
  const calibration: Calibration = { byMode: {} };
  for (const run of planned) {
    if (o.signal?.aborted) {
      o.log(`interrupted: skipping the remaining ${planned.length - outcomes.length} run(s)`);
      break;
    }
    try {
      await calibrate(o, run, runtime, images, calibration);
      outcomes.push(await runOne(o, run, runtime, images, planned.length, calibration));
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
    const aggregate = aggregateRuns(
      mine.map((r) => r.metrics),
      deployErrors,
    );
    problems.push(...cellProblems(c, mine));
    const expect = c.strategy.expectZeroFailures === true;
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
        ...(c.fleetStrategy ? { fleet: c.fleetStrategy } : {}),
        ...(c.analysis ? { analysis: c.analysis } : {}),
        gate: c.gate ?? null,
        expectStopped: c.strategy.expectStopped,
      },
      resolved: c.resolved ? { maxSurge: c.resolved.maxSurge, maxUnavailable: c.resolved.maxUnavailable } : null,
      params: c.params,
      varying: c.varying,
      runs: mine.map((r) => r.id),
      aggregate,
      expectZeroFailures: expect,
      expectationMet: expect ? zeroFailuresHeld(mine, isBadVersion(c.params)) : null,
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
      load: {
        timeoutMs: o.spec.load.timeoutMs,
        beforeSeconds: o.spec.load.beforeSeconds,
        afterSeconds: o.spec.load.afterSeconds,
        users: o.spec.load.users,
        resend: o.spec.load.resend,
      },
      badVersion: o.spec.badVersion ? { errorRate: o.spec.badVersion.errorRate ?? 0, latencyMs: o.spec.badVersion.latencyMs ?? 0 } : null,
      analysis: o.spec.analysis ?? null,
      startedAt,
      finishedAt: new Date().toISOString(),
      machine: { node: process.version, platform: `${process.platform}/${process.arch}`, cpus: cpus().length },
      calibrationRuns: (['reload', 'dynamic'] as const).flatMap((mode) => {
        const c = calibration.byMode[mode]?.calibrationRun;
        return c ? [{ mode, ...c }] : [];
      }),
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
