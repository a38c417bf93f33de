/**
 * The deploy benchmark (issue 6): a reduced experiment matrix on real Docker +
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
 *    the controller's own loop.
 *
 *   npx tsx bench/experiment.ts [--out bench-out]
 *
 * Exits 1 when the high-load run had a failed request or a deploy failed.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { buildDeps, readDefaultTemplate } from '../src/cli/wiring.js';
import { runExperiment } from '../src/experiment/experiment.js';
import { fmtStat, type ExperimentSummary } from '../src/experiment/report.js';
import { parseExperimentSpec } from '../src/experiment/spec.js';

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
const medianRatio = ratios.length === 0 ? null : ratios.length % 2 ? ratios[ratios.length >> 1]! : (ratios[ratios.length / 2 - 1]! + ratios[ratios.length / 2]!) / 2;
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
console.log(`\nfleetroll overhead (measured duration / floor implied by the timings): median ${medianRatio?.toFixed(2) ?? 'n/a'}x over ${ratios.length} rolling configuration(s)`);
console.log(
  `high load: ${highLoad.aggregate.requests.total.median} requests, ${highLoad.aggregate.requests.failed.max} failed, ${highLoad.aggregate.requests.retried.median} resent after a reload closed a reused keep-alive connection`,
);

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
        byConfiguration: cells.filter((c) => c.aggregate.overheadRatio).map((c) => ({ experiment: c.experiment, configuration: c.label, measuredMs: Math.round(c.aggregate.deployDurationMs.median), floorMs: c.aggregate.predicted?.durationMs, ratio: c.aggregate.overheadRatio?.median })),
      },
      highLoad: { requests: highLoad.aggregate.requests.total.median, failed: highLoad.aggregate.requests.failed.max, retried: highLoad.aggregate.requests.retried.median, zeroFailures: highLoad.aggregate.requests.failed.max === 0 },
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
