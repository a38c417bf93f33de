/**
 * The deploy benchmark: a reduced experiment matrix on real Docker +
 * nginx, in a few minutes, written to bench-out/ (report, charts, recordings,
 * and bench-out/summary.json), including:
 *
 *  - the naive control beside two proper rolling deploys (3 instances,
 *    ~10 GET/s and a POST stream): failures, window, duration;
 *  - the zero-failure high-load run: a proper deploy under ~400 GET/s and 8
 *    POST streams on keep-alive connections (resends after a reload closed a
 *    reused connection are counted, never hidden);
 *  - fleetroll's own overhead: measured deploy duration / the floor the
 *    timings imply (simulate's critical path: per wave drain + stop +
 *    start-to-ready + minReadySeconds). It should stay close to 1; what is
 *    above 1 is container create/start, readiness polling, nginx reloads and
 *    the controller's own loop;
 *  - fleetroll beside the proper hand-written script (the script control,
 *    src/experiment/scriptControl.ts) for batches of 1, 2 and 3 of six
 *    instances: fleetroll 0/b under both replacement policies against
 *    `script b=N`, printed as a ratio table and written to summary.json
 *    (`scriptComparison`) with the targets (fleetroll duration ≤ 0.6 ×
 *    the script's, window ≤ the script's + 1 s, reloads ≤ the script's, no
 *    failed request for either). The targets are reported, not enforced.
 *
 *   npx tsx bench/experiment.ts [--out bench-out]
 *
 * Exits 1 when a run had a failed request where none was expected or a deploy
 * failed; a missed script target does not change the exit status.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildDeps, readDefaultTemplate } from '../src/wiring.js';
import { fleetFromObject } from '../src/config/load.js';
import { ValidationError } from '../src/errors.js';
import { runExperiment } from '../src/experiment/experiment.js';
import { checkTargets, fmtStat, SCRIPT_TARGETS, type ExperimentSummary } from '../src/experiment/report.js';
import { parseExperimentSpec, type ExperimentSpecInput } from '../src/experiment/spec.js';

const outArg = process.argv.indexOf('--out');
const OUT = outArg > 0 ? (process.argv[outArg + 1] ?? 'bench-out') : 'bench-out';
/** Above this the overhead is flagged: the timings here are short, so fixed costs (docker run, reloads) weigh a lot. */
const OVERHEAD_FLAG = 2.0;

const fleet = { replicas: 3, drainSeconds: 2, warmupSeconds: 2, prestopSeconds: 1 };
const specs = [
  parseExperimentSpec(
    {
      name: 'bench-matrix',
      title: 'Benchmark: naive control vs rolling, 3 instances',
      repetitions: 1,
      fleet,
      load: { getPerSecond: 10, postConcurrency: 1, postDurationMs: 200 },
      strategies: [
        { name: 'naive', type: 'naive', intervalSeconds: 2 },
        { name: 'rolling 0/1', maxSurge: 0, maxUnavailable: 1, expectZeroFailures: true },
        { name: 'rolling 1/0', maxSurge: 1, maxUnavailable: 0, expectZeroFailures: true },
      ],
    },
    'bench/experiment.ts (matrix)',
  ),
  parseExperimentSpec(
    {
      name: 'bench-high-load',
      title: 'Benchmark: rolling 1/0 under high load, keep-alive clients',
      repetitions: 1,
      fleet,
      load: { getPerSecond: 400, postConcurrency: 8, postDurationMs: 200, keepAlive: true },
      strategies: [{ name: 'rolling 1/0, 400 GET/s keep-alive', maxSurge: 1, maxUnavailable: 0, expectZeroFailures: true }],
    },
    'bench/experiment.ts (high load)',
  ),
];

/**
 * Whether the fleet file takes `replacementPolicy` yet (the field lands with
 * another change): until it does, the TerminationComplete runs are skipped
 * with a note instead of failing the bench.
 */
async function fleetTakesReplacementPolicy(): Promise<boolean> {
  try {
    await fleetFromObject(
      {
        service: 'bench-probe',
        image: 'fleetroll-example:1.0.0',
        replicas: 1,
        port: 8080,
        hosts: [{ name: 'local', docker: 'unix:///var/run/docker.sock' }],
        loadBalancers: [{ nginx: { container: 'bench-probe-nginx', host: 'local', upstreamFile: '/etc/nginx/conf.d/upstream.conf', upstream: 'bench_probe' } }],
        replacementPolicy: 'TerminationComplete',
      },
      'bench/experiment.ts (replacementPolicy probe)',
    );
    return true;
  } catch (err) {
    if (err instanceof ValidationError) return false;
    throw err;
  }
}

const BATCHES = [1, 2, 3] as const;
const withComplete = await fleetTakesReplacementPolicy();
const scriptStrategies: ExperimentSpecInput['strategies'] = [
  ...BATCHES.map((b) => ({ type: 'script' as const, batch: b, expectZeroFailures: true })),
  ...BATCHES.map((b) => ({ maxSurge: 0, maxUnavailable: b, expectZeroFailures: true })),
  ...(withComplete
    ? BATCHES.map((b) => ({ maxSurge: 0, maxUnavailable: b, replacementPolicy: 'TerminationComplete' as const, expectZeroFailures: true }))
    : []),
];
specs.push(
  parseExperimentSpec(
    {
      name: 'bench-script-vs-fleetroll',
      title: 'Benchmark: the hand-written script vs fleetroll, batch 1-3 of six instances',
      repetitions: 1,
      fleet: { replicas: 6, drainSeconds: 2, warmupSeconds: 3, prestopSeconds: 2 },
      load: { getPerSecond: 20, postConcurrency: 2, postDurationMs: 200 },
      strategies: scriptStrategies,
    },
    'bench/experiment.ts (script vs fleetroll)',
  ),
);

const template = await readDefaultTemplate();
const started = Date.now();
const summaries: ExperimentSummary[] = [];
for (const spec of specs) {
  summaries.push(
    await runExperiment({
      spec,
      specFile: `bench/experiment.ts (${spec.name})`,
      outDir: join(OUT, spec.name),
      docker: 'unix:///var/run/docker.sock',
      namePrefix: `bench-${Math.random().toString(36).slice(2, 6)}`,
      makeDeps: (f) => buildDeps(f),
      template,
      log: (line) => process.stderr.write(`${line}\n`),
    }),
  );
}

const cells = summaries.flatMap((s) => s.cells.map((c) => ({ experiment: s.experiment.name, ...c })));
const ratios = cells.map((c) => c.aggregate.overheadRatio?.median).filter((x): x is number => x !== undefined);
ratios.sort((a, b) => a - b);
const medianRatio =
  ratios.length === 0 ? null : ratios.length % 2 ? ratios[ratios.length >> 1]! : (ratios[ratios.length / 2 - 1]! + ratios[ratios.length / 2]!) / 2;
const highLoad = summaries[1]!.cells[0]!;

console.log(`\nnode ${process.version}; ${cells.length} configurations in ${((Date.now() - started) / 1000).toFixed(0)} s; report and data in ${OUT}/\n`);
const rows = cells.map((c) => {
  const a = c.aggregate;
  return [
    c.label,
    fmtStat(a.requests.total),
    fmtStat(a.requests.failed),
    fmtStat(a.requests.retried),
    fmtStat(a.windowMs, 1000, 1),
    fmtStat(a.deployDurationMs, 1000, 1),
    a.predicted ? (a.predicted.durationMs / 1000).toFixed(1) : 'n/a',
    a.overheadRatio ? `${a.overheadRatio.median.toFixed(2)}x${a.overheadRatio.median > OVERHEAD_FLAG ? ' HIGH' : ''}` : 'n/a',
  ];
});
const head = ['configuration', 'requests', 'failed', 'retried', 'window s', 'duration s', 'floor s', 'overhead'];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
for (const r of [head, ...rows]) console.log(r.map((x, i) => x.padEnd(widths[i]!)).join('  '));
console.log(
  `\nfleetroll overhead (measured duration / floor implied by the timings): median ${medianRatio?.toFixed(2) ?? 'n/a'}x over ${ratios.length} rolling configuration(s)`,
);
console.log(
  `high load: ${highLoad.aggregate.requests.total.median} requests, ${highLoad.aggregate.requests.failed.max} failed, ${highLoad.aggregate.requests.retried.median} resent after a reload closed a reused keep-alive connection`,
);

const comparison = summaries[2]!.scriptComparison.map((r) => ({ ...r, met: checkTargets(r) }));
const mark = (ok: boolean) => (ok ? 'met' : 'MISSED');
console.log(
  `\nfleetroll beside the hand-written script (six instances; targets: duration ≤ ${SCRIPT_TARGETS.durationRatio} × script, window ≤ script + ${SCRIPT_TARGETS.windowSlackMs / 1000} s, reloads ≤ script, no failed request)`,
);
const cmpHead = ['b', 'fleetroll', 'duration s f/s', 'ratio', 'window s f/s', 'reloads f/s', 'failed f/s', 'duration', 'window', 'reloads', 'zero failures'];
const cmpRows = comparison.map((r) => [
  String(r.batch),
  r.fleetroll,
  `${(r.durationMs.fleetroll / 1000).toFixed(1)} / ${(r.durationMs.script / 1000).toFixed(1)}`,
  r.durationRatio === null ? 'n/a' : `${r.durationRatio.toFixed(2)}x`,
  `${(r.windowMs.fleetroll / 1000).toFixed(1)} / ${(r.windowMs.script / 1000).toFixed(1)}`,
  `${r.reloads.fleetroll} / ${r.reloads.script}`,
  `${r.failed.fleetroll} / ${r.failed.script}`,
  mark(r.met.duration),
  mark(r.met.window),
  mark(r.met.reloads),
  mark(r.met.zeroFailures),
]);
const cmpWidths = cmpHead.map((h, i) => Math.max(h.length, ...cmpRows.map((r) => (r[i] ?? '').length)));
for (const r of [cmpHead, ...cmpRows]) console.log(r.map((x, i) => x.padEnd(cmpWidths[i]!)).join('  '));
if (!withComplete) console.log('replacementPolicy TerminationComplete: skipped, the fleet file does not take replacementPolicy yet');

const problems = summaries.flatMap((s) => s.problems);
await mkdir(OUT, { recursive: true });
await writeFile(
  join(OUT, 'summary.json'),
  `${JSON.stringify(
    {
      date: new Date().toISOString(),
      node: process.version,
      overhead: {
        median: medianRatio,
        flagAbove: OVERHEAD_FLAG,
        byConfiguration: cells
          .filter((c) => c.aggregate.overheadRatio)
          .map((c) => ({
            experiment: c.experiment,
            configuration: c.label,
            measuredMs: Math.round(c.aggregate.deployDurationMs.median),
            floorMs: c.aggregate.predicted?.durationMs,
            ratio: c.aggregate.overheadRatio?.median,
          })),
      },
      highLoad: {
        requests: highLoad.aggregate.requests.total.median,
        failed: highLoad.aggregate.requests.failed.max,
        retried: highLoad.aggregate.requests.retried.median,
        zeroFailures: highLoad.aggregate.requests.failed.max === 0,
      },
      scriptComparison: {
        targets: SCRIPT_TARGETS,
        rows: comparison,
        allMet: comparison.length > 0 && comparison.every((r) => Object.values(r.met).every(Boolean)),
        ...(withComplete ? {} : { skipped: 'replacementPolicy TerminationComplete: the fleet file does not take replacementPolicy yet' }),
      },
      cells: cells.map((c) => ({ experiment: c.experiment, configuration: c.label, aggregate: c.aggregate })),
      reports: summaries.map((s) => join(s.outDir, s.files.report)),
      ok: problems.length === 0,
      problems,
    },
    null,
    2,
  )}\n`,
);
if (problems.length > 0) {
  console.log(`\nPROBLEMS: ${problems.join('; ')}`);
  process.exitCode = 1;
}
