import { resolve } from 'node:path';
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { SERVICE_RE } from '../../config/schema.js';
import { ExitCode, fieldError, ReportedFailure } from '../../errors.js';
import { runExperiment } from '../../experiment/experiment.js';
import { fmtStat, type ExperimentSummary } from '../../experiment/report.js';
import { assertPlannable, loadExperimentSpec } from '../../experiment/spec.js';
import { parseCount } from '../args.js';
import { dockerEndpointOption, jsonOption } from '../options.js';
import { table, type Out } from '../output.js';
import { buildDeps, readDefaultTemplate } from '../../wiring.js';

const secs = (s: Parameters<typeof fmtStat>[0]) => fmtStat(s, 1000, 1);

function printExperiment(s: ExperimentSummary, out: Out): void {
  out.line('');
  out.line(`${s.experiment.title}: ${s.experiment.from} -> ${s.experiment.to}, median (min–max) over ${s.experiment.repetitions} repetition(s)`);
  out.line(
    table(
      ['configuration', 'requests', 'failed', 'retried', 'window s', 'duration s', 'simulate s', 'overhead', 'min in service', 'peak', 'reloads'],
      s.cells.map((c) => {
        const a = c.aggregate;
        return [
          c.label,
          fmtStat(a.requests.total),
          fmtStat(a.requests.failed),
          fmtStat(a.requests.retried),
          secs(a.windowMs),
          secs(a.deployDurationMs),
          a.predicted ? (a.predicted.durationMs / 1000).toFixed(1) : 'n/a',
          a.overheadRatio ? `${fmtStat(a.overheadRatio, 1, 2)}x` : 'n/a',
          `${fmtStat(a.minCapacity)}/${c.params.replicas}`,
          fmtStat(a.peakInstances),
          fmtStat(a.reloads),
        ];
      }),
      '  ',
    ),
  );
  if (s.experiment.badVersion) {
    out.line('');
    out.line(
      `against the bad version (${s.experiment.to}): failed = its own 500s / any other failure; time to roll back = to its last answer, from the deploy start / from its first 500`,
    );
    out.line(
      table(
        ['configuration', 'outcome', 'failed own/other', 'window s', 'bad answered (in deploy)', 'roll back s', 'in traffic s', 'log 5xx/dropped'],
        s.cells.map((c) => {
          const a = c.aggregate;
          const nv = a.newVersion;
          const stopped = a.outcomes.stopped > 0;
          return [
            c.label,
            (['completed', 'stopped', 'failed'] as const)
              .filter((k) => a.outcomes[k] > 0)
              .map((k) => `${k}${a.outcomes[k] < a.runs ? ` ${a.outcomes[k]}` : ''}`)
              .join(', '),
            `${fmtStat(nv.ownFailures)}/${fmtStat(nv.otherFailures)}`,
            fmtStat(a.windowMs, 1000, 2),
            `${fmtStat(nv.answeredInDeploy)} of ${fmtStat(nv.sentInDeploy)}`,
            stopped ? `${secs(nv.stopMs)} / ${secs(nv.stopAfterFirstFailureMs)}` : 'not stopped',
            stopped ? secs(nv.exposureMs) : '-',
            a.health ? `${fmtStat(a.health.failed5xx)}/${fmtStat(a.health.dropped)}` : 'n/a',
          ];
        }),
        '  ',
      ),
    );
  }
  const failing = s.cells.flatMap((c) =>
    c.aggregate.failuresByPhase
      .filter((f) => f.failed.max > 0)
      .map((f) => [
        c.label,
        f.phase,
        fmtStat(f.failed),
        Object.entries(f.byStatus)
          .filter(([, v]) => v.max > 0)
          .map(([k, v]) => `${k} × ${fmtStat(v)}`)
          .join(', '),
      ]),
  );
  if (failing.length > 0) {
    out.line('');
    out.line('failed requests by deploy phase (per run):');
    out.line(table(['configuration', 'phase', 'failed', 'outcomes'], failing, '  '));
  }
  out.line('');
  out.line(`report: ${resolve(s.outDir, s.files.report)}`);
  out.line(`        ${resolve(s.outDir, s.files.html)}`);
  out.line(`data:   ${resolve(s.outDir, s.files.summary)}, ${resolve(s.outDir, 'runs')}/`);
  if (!s.ok) out.line(`\nresult: PROBLEMS: ${s.problems.join('; ')}`);
}

export function registerExperiment(program: CommandUnknownOpts, out: Out): void {
  program
    .command('experiment')
    .description('run a matrix of rollouts on local fleets under load; record every request and event; report with charts')
    .requiredOption('-f, --file <spec>', 'experiment spec (YAML or JSON), e.g. examples/experiments/01-naive-vs-rolling.yaml')
    .option('--out <dir>', 'output directory (default: experiments-out/<spec name>)')
    .addOption(jsonOption('print the aggregated metrics as JSON on stdout (progress goes to stderr)'))
    .option('--repetitions <n>', "override the spec's repetitions", parseCount('--repetitions', 1, 50))
    .addOption(dockerEndpointOption())
    .option('--name <prefix>', 'prefix of the fleets it creates (run N is <prefix>-N); default fx-<random>')
    .addHelpText(
      'after',
      `
Each run starts a fresh fleet (network, nginx, instances at the spec's "from"
version) on the local Docker engine, sends GET/POST probes through nginx for
the whole deploy, rolls to "to" (or runs the naive or the script control),
and tears down.

Writes to the output directory: report.md and index.html with SVG charts
(charts/), summary.json (what --json prints), and per run
runs/<run>/requests.ndjson (or .csv), events.ndjson and metrics.json.

With badVersion the new version answers a share of its API requests with
500s (and/or slower); strategies with an analysis gate read nginx's access
log and should stop it. The report adds failures split into the bad
version's own and any other, the time to roll back, and how many requests
the bad version answered.

Exit status: 0 when every deploy completed (or, with badVersion, was stopped
by the analysis), every instance ended on the version it should, and every
expectZeroFailures / expectStopped held; 1 otherwise (the report is written
either way); 2 for an invalid spec.

Examples:
  $ fleetroll experiment -f examples/experiments/01-naive-vs-rolling.yaml
  $ fleetroll experiment -f examples/experiments/03-four-replicas.yaml --repetitions 1 --json
  $ fleetroll experiment -f examples/experiments/05-strategies.yaml`,
    )
    .action(async (o) => {
      if (o.name !== undefined && !(SERVICE_RE.test(o.name) && o.name.length <= 50)) {
        throw fieldError('--name', `must be lowercase letters, digits and dashes (at most 50), got ${JSON.stringify(o.name)}`);
      }
      const spec = await loadExperimentSpec(o.file);
      if (o.repetitions !== undefined) {
        spec.repetitions = o.repetitions;
        assertPlannable(spec, o.file, '--repetitions');
      }
      const progress = o.json ? process.stderr : process.stdout;
      const log = (line: string) => progress.write(`${line}\n`);

      // First Ctrl-C: finish the run in progress (its fleet is torn down) and
      // report what ran; a second one exits at once.
      const abort = new AbortController();
      const onSignal = () => {
        if (abort.signal.aborted) process.exit(ExitCode.interrupted);
        abort.abort();
        log('stopping after the run in progress (Ctrl-C again to quit at once)');
      };
      process.on('SIGINT', onSignal);
      process.on('SIGTERM', onSignal);
      let summary: ExperimentSummary;
      try {
        summary = await runExperiment({
          spec,
          specFile: o.file,
          outDir: o.out ?? `experiments-out/${spec.name}`,
          docker: o.docker,
          namePrefix: o.name ?? `fx-${Math.random().toString(36).slice(2, 6)}`,
          makeDeps: (fleet) => buildDeps(fleet),
          template: await readDefaultTemplate(),
          log,
          signal: abort.signal,
        });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
      }
      if (o.json) out.json(summary);
      else printExperiment(summary, out);
      if (abort.signal.aborted) throw new ReportedFailure(ExitCode.interrupted);
      if (!summary.ok) throw new ReportedFailure();
    });
}
