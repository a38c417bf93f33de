/**
 * The experiment report: the Markdown/HTML document built from the
 * summary (summary.ts) and the runs, with its tables; its words and numbers
 * come from reportText.ts, the charts from reportCharts.ts, the script
 * comparison from scriptComparison.ts. The report's pieces are re-exported
 * here for the runner, the command and the benchmark.
 *
 * PURE: the caller writes the files and renders the chart specs.
 */
import type { Block } from './document.js';
import type { ExperimentSpec } from './specSchema.js';
import { percentText } from './specNames.js';
import type { ChartFile } from './reportCharts.js';
import { badVersionText, fmtStat, gateText, outcomes, outcomeText, sec, secOf, strategyText } from './reportText.js';
import { scriptComparisonTable } from './scriptComparison.js';
import { runLine, type ExperimentSummary, type RunOutcome } from './summary.js';

// The report's pieces, for the runner (experiment.ts), the command and the benchmark.
export { buildCharts, type ChartFile } from './reportCharts.js';
export { badVersionText, fmtStat } from './reportText.js';
export { checkTargets, scriptComparison, scriptComparisonTable, SCRIPT_TARGETS, type TargetCheck } from './scriptComparison.js';
export { runLine, type CellSummary, type ExperimentSummary, type RunLine, type RunOutcome, type ScriptComparisonRow } from './summary.js';

/**
 * The strategies against the bad version, one line per configuration:
 * what the analysis did, the failures split by who caused them, the
 * mixed-version window, how much traffic the bad version took, how long it
 * took to get it out, and nginx's own count of 5xx.
 */
export function badVersionTable(summary: ExperimentSummary): Block {
  return {
    kind: 'table',
    head: [
      'configuration',
      'analysis gate',
      'outcome',
      'requests',
      "failed: bad version's own / other",
      'mixed-version window (s)',
      'bad version answered (in the deploy)',
      'time to roll back (s): from deploy start / from its first 500',
      'bad version in traffic (s)',
      'access log: 5xx / dropped',
    ],
    align: ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: summary.cells.map((c) => {
      const a = c.aggregate;
      const nv = a.newVersion;
      const stopped = a.outcomes.stopped > 0;
      const notStopped = a.outcomes.completed > 0 ? 'not stopped' : 'n/a';
      const share = nv.sentInDeploy.median > 0 ? ` (${((100 * nv.answeredInDeploy.median) / nv.sentInDeploy.median).toFixed(0)}%)` : '';
      return [
        c.label,
        gateText(c),
        outcomeText(a),
        fmtStat(a.requests.total),
        `${fmtStat(nv.ownFailures)} / ${fmtStat(nv.otherFailures)}`,
        // Hundredths: a blue-green switch is tens of milliseconds.
        fmtStat(a.windowMs, 1000, 2),
        `${fmtStat(nv.answeredInDeploy)} of ${fmtStat(nv.sentInDeploy)}${share}${a.outcomes.completed > 0 ? ', then all' : ''}`,
        stopped ? `${sec(nv.stopMs)} / ${sec(nv.stopAfterFirstFailureMs)}` : notStopped,
        stopped ? sec(nv.exposureMs) : a.outcomes.completed > 0 ? 'not stopped' : 'n/a',
        a.health ? `${fmtStat(a.health.failed5xx)} / ${fmtStat(a.health.dropped)}` : 'n/a',
      ];
    }),
  };
}

function resultsTable(summary: ExperimentSummary): Block {
  return {
    kind: 'table',
    head: [
      'configuration',
      'runs',
      'requests',
      'failed',
      'retried',
      'mixed-version window (s)',
      'deploy duration (s)',
      'simulate: duration / window (s)',
      'overhead',
      'simulate calibrated (s)',
      'measured / calibrated',
      'min in service',
      'peak instances',
      'reloads',
    ],
    align: ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
    rows: summary.cells.map((c) => {
      const a = c.aggregate;
      return [
        c.label,
        String(a.runs),
        fmtStat(a.requests.total),
        fmtStat(a.requests.failed),
        fmtStat(a.requests.retried),
        sec(a.windowMs),
        sec(a.deployDurationMs),
        a.predicted ? `${secOf(a.predicted.durationMs)} / ${secOf(a.predicted.mixedVersionWindowMs)}` : 'n/a',
        a.overheadRatio ? `${fmtStat(a.overheadRatio, 1, 2)}×` : 'n/a',
        a.calibratedDurationMs ? sec(a.calibratedDurationMs) : 'n/a',
        a.calibratedRatio ? `${fmtStat(a.calibratedRatio, 1, 2)}×` : 'n/a',
        `${fmtStat(a.minCapacity)} of ${c.params.replicas}${a.predicted ? ` (sim ${a.predicted.lowestCapacity})` : ''}`,
        `${fmtStat(a.peakInstances)}${a.predicted ? ` (sim ${a.predicted.peakInstances})` : ''}`,
        `${fmtStat(a.reloads)}${a.predicted ? ` (sim ${a.predicted.reloads})` : ''}`,
      ];
    }),
  };
}

/** Every setting of every configuration; the bad version's columns only when the spec has one. */
export function configurationsTable(summary: ExperimentSummary): Block {
  const bad = summary.experiment.badVersion !== null;
  return {
    kind: 'table',
    head: [
      'configuration',
      'strategy',
      'analysis gate',
      'replicas',
      'drain (s)',
      'warm-up (s)',
      'minReady (s)',
      'prestop (s)',
      'GET/s',
      'POST streams',
      'POST (ms)',
      'connections',
      'nginx',
      ...(bad ? ['bad version: 500s', 'bad version: added (ms)'] : []),
    ],
    align: ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l', 'l', ...(bad ? (['r', 'r'] as const) : [])],
    rows: summary.cells.map((c) => [
      c.label,
      strategyText(c),
      gateText(c),
      String(c.params.replicas),
      String(c.params.drainSeconds),
      String(c.params.warmupSeconds),
      String(c.params.minReadySeconds),
      String(c.params.prestopSeconds),
      String(c.params.getPerSecond),
      String(c.params.postConcurrency),
      String(c.params.postDurationMs),
      c.params.keepAlive
        ? summary.experiment.load.resend === false
          ? 'keep-alive, strict (a reset is a failure)'
          : 'keep-alive (resend once on a reused connection)'
        : 'new connection per request',
      c.params.dynamicNginx ? 'dynamic (Lua, no reload)' : 'reload',
      ...(bad ? [percentText(c.params.badErrorRate), String(c.params.badLatencyMs)] : []),
    ]),
  };
}

export function buildDocument(summary: ExperimentSummary, runs: readonly RunOutcome[], spec: ExperimentSpec, charts: readonly ChartFile[]): Block[] {
  const e = summary.experiment;
  const b: Block[] = [];
  b.push({ kind: 'h1', text: `Experiment: ${e.title}` });
  if (e.description) b.push({ kind: 'p', text: e.description.trim() });
  b.push({
    kind: 'p',
    text: `Rolling ${e.from} → ${e.to}; ${summary.cells.length} configuration(s) × ${e.repetitions} repetition(s) = ${runs.length} run(s), each on a fresh local fleet behind nginx with load probes running through the whole deploy. Spec \`${e.specFile}\`; run ${e.startedAt} to ${e.finishedAt} on Node ${e.machine.node}, ${e.machine.platform}, ${e.machine.cpus} CPU(s).`,
  });
  if (!summary.ok) b.push({ kind: 'p', text: `**Problems:** ${summary.problems.join('; ')}` });

  b.push({ kind: 'h2', text: 'Results' });
  b.push({
    kind: 'p',
    text: 'Per configuration, over its repetitions: median (min–max) when they differ. "retried" counts requests resent once after a reused keep-alive connection was closed under them (see below); they are included in "requests" and counted as failed only if the resend failed too.',
  });
  b.push(resultsTable(summary));

  if (e.badVersion) {
    b.push({ kind: 'h3', text: 'Against a bad version' });
    b.push({
      kind: 'p',
      text: `The new version ${e.to} is subtly bad (\`badVersion\`: ${badVersionText(e.badVersion)}; readiness passes). Per configuration, median (min–max) over the repetitions. "failed" splits the failed requests into those the bad version answered itself (its 500s, with its X-App-Version) and every other failure (resets, timeouts, nginx's 502/504, the old version's errors): the second is what the rollout caused. "time to roll back" runs to the last answer the bad version gave, from the deploy's start and from its first 500; "in traffic" from its first answer to its last. A strategy that completed left the bad version serving everything. "access log" is nginx's own count over the deploy window (the deploy's health numbers), where the probes' count also covers the load before and after it.`,
    });
    b.push(badVersionTable(summary));
  }

  if (summary.scriptComparison.length > 0) {
    b.push({ kind: 'h3', text: 'fleetroll beside the hand-written script' });
    b.push({
      kind: 'p',
      text: "Each script control beside the fleetroll configuration that replaces the same batch (maxSurge 0 / maxUnavailable b) with the same settings: medians over the repetitions, failed requests in the worst run. ratio = fleetroll's deploy duration / the script's.",
    });
    b.push(scriptComparisonTable(summary.scriptComparison));
  }

  b.push({ kind: 'h3', text: 'Configurations' });
  b.push(configurationsTable(summary));

  b.push({ kind: 'h2', text: 'Failed requests by deploy phase' });
  const withFailures = summary.cells.filter((c) => c.aggregate.failuresByPhase.some((f) => f.failed.max > 0));
  if (withFailures.length === 0) b.push({ kind: 'p', text: `No request failed in any of the ${runs.length} run(s).` });
  else {
    b.push({
      kind: 'p',
      text: 'Each failure is pinned on the phase the deploy was in when the client saw it fail (a timeout: when it was sent). Counts per run, median (min–max).',
    });
    b.push({
      kind: 'table',
      head: ['configuration', 'phase', 'failed', 'outcomes'],
      align: ['l', 'l', 'r', 'l'],
      rows: withFailures.flatMap((c) =>
        c.aggregate.failuresByPhase.filter((f) => f.failed.max > 0).map((f) => [c.label, f.phase, fmtStat(f.failed), outcomes(f.byStatus, true)]),
      ),
    });
  }

  const retried = summary.cells.filter((c) => c.aggregate.requests.retried.max > 0);
  b.push({ kind: 'h2', text: 'Keep-alive retries' });
  const keepAliveCells = summary.cells.filter((c) => c.params.keepAlive);
  if (keepAliveCells.length === 0)
    b.push({ kind: 'p', text: 'No configuration used keep-alive connections: every request went out on a new connection and nothing was resent.' });
  else {
    b.push({
      kind: 'p',
      text: "Every nginx reload closes the idle client connections of its old workers; a request written on one at that instant meets a reset. Browsers and Go's http.Transport resend such a request once when the connection was reused and no byte of a response came back, and so do the keep-alive probes (`retried: true` in the request records). They are counted here, never hidden.",
    });
    if (retried.length === 0) b.push({ kind: 'p', text: 'No request needed a resend.' });
    else
      b.push({
        kind: 'table',
        head: ['configuration', 'phase', 'retried (per run)'],
        align: ['l', 'l', 'r'],
        rows: retried.flatMap((c) => c.aggregate.failuresByPhase.filter((f) => f.retried.max > 0).map((f) => [c.label, f.phase, fmtStat(f.retried)])),
      });
  }

  b.push({ kind: 'h2', text: 'Charts' });
  for (const ch of charts.filter((c) => !c.file.startsWith('charts/versions-'))) b.push({ kind: 'img', src: ch.file, alt: ch.title });
  b.push({ kind: 'h3', text: 'Versions answering per second' });
  b.push({
    kind: 'p',
    text: 'Successful responses per second by the version that answered (bucketed by send time), failures in red; dashed lines mark the deploy.',
  });
  for (const ch of charts.filter((c) => c.file.startsWith('charts/versions-'))) b.push({ kind: 'img', src: ch.file, alt: ch.title });

  b.push({ kind: 'h2', text: 'Runs' });
  b.push({
    kind: 'table',
    head: [
      'run',
      'requests',
      'failed',
      'retried',
      'outcomes',
      'window (s)',
      'duration (s)',
      'overhead',
      'min in service',
      'peak',
      'reloads',
      'start→ready (s)',
      'stop (s)',
      'recordings',
    ],
    align: ['l', 'r', 'r', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l'],
    rows: runs.map((r) => {
      const m = r.metrics;
      const line = runLine(r);
      return [
        r.id,
        String(m.requests.total),
        String(m.requests.failed),
        String(m.requests.retried),
        Object.entries(line.requests.byOutcome)
          .map(([k, n]) => `${k} × ${n}`)
          .join(', '),
        secOf(m.windowMs),
        secOf(m.deployDurationMs) + (m.outcome === 'stopped' ? ' (stopped by the analysis)' : r.deployError ? ' (deploy FAILED)' : ''),
        m.overheadRatio === null ? 'n/a' : `${m.overheadRatio.toFixed(2)}×`,
        String(m.minCapacity),
        String(m.peakInstances),
        String(m.reloads),
        sec(m.measured.startToReadyMs),
        sec(m.measured.stopMs),
        [...r.files.requests, r.files.events].map((f) => `[${f.split('/').pop()}](${f})`).join(' '),
      ];
    }),
  });

  b.push({ kind: 'h2', text: 'How the figures are measured' });
  b.push({
    kind: 'list',
    items: [
      "Every request the probes sent is in `runs/<run>/requests.ndjson` (time sent in ms since the probes started, method, path, status or error, latency, the `X-App-Version` that answered, `retried`); the deploy's events with the same clock are in `runs/<run>/events.ndjson`; `runs/<run>/metrics.json` has everything below per run.",
      'A request is ok when it got a 2xx/3xx and its whole body; anything else (5xx, reset, refused, timeout, a body cut off) is failed.',
      "**Mixed-version window**: the time during which both versions were answering, at the moments their answers arrived. Each version's answers (any status the app sent, a whole response) form spans; a gap longer than max(1 s, 5 × the median gap between that version's answers) ends a span (the version was out of traffic). The window is the total overlap of the old and the new version's spans: for a rollout that moves forward once, from the first answer by the new version to the last by the old one; for a canary taken out, the time it answered beside stable; for a blue-green switch and back, the overlap at each of the two switches, not the time in between. `mixedVersionWindow` in metrics.json keeps the first-new-to-last-old figure.",
      '**The new version** (`newVersion` in metrics.json): the requests sent during the deploy and how many of them it answered; the failed requests it answered itself (a 5xx with its `X-App-Version`: with `badVersion`, its own 500s) and every other failure. When the analysis stopped it (outcome "stopped": the deploy failed on the gate, the new version was taken out and the fleet rolled back), the **time to roll back** is measured to its last answer, from the deploy\'s start (`stopMs`) and from its first failed answer (`stopAfterFirstFailureMs`), and its **time in traffic** from its first answer to its last (`exposureMs`).',
      "**Access log** (`health` in metrics.json): the deploy reads nginx's fleetroll_json access log, as `fleetroll deploy` does with `accessLog:`: the analysis gate judges from it, and the deploy ends with its health numbers (requests, 5xx, dropped, its own mixed-version window, the first new instance's error rate). The naive and script controls do not deploy through the engine and have none.",
      '**Deploy duration**: from the call to deploy until it returned (for the naive control: until its last replacement and pause; for the script control: until its last batch was back in nginx).',
      "**The script control** is the proper hand-written rolling script (the article's `rolling.sh`) in batches of b: per batch it rewrites the upstream with the batch marked `down`, runs `nginx -t` and reloads; sleeps drainSeconds; stops the batch gracefully (side by side) and removes it; starts b new containers one after another on the same hosts; polls each one's readiness every pollSeconds (giving up after progressDeadlineSeconds); then rewrites the upstream with everything up and reloads again. It uses the same Docker, nginx and probe code as fleetroll and reports the same events, so its figures are measured the same way: two reloads per batch, one batch at a time. It is a control for experiments, not a way to deploy.",
      '**Phases** come from the timestamped events: per wave "marking down" (the reload that takes old instances out), "draining", "stopping", "starting", "waiting for readiness"; then "verifying". The script control has the same per batch ("batch N: ..."), then "re-enabling" (the reload that puts the ready batch in). The naive control: per instance "killing", "starting", "reloading nginx", "pause". Blue-green, canary and a rollback add what their messages announce: "switching to the new set", "old set kept (scaleDownDelaySeconds)", "switching back", "canary 25%", "canary analysis at 25%", "aborting the canary", "final rolling update", "rolling back".',
      '**Capacity**: servers nginx sends traffic to, tracked from the upstream events of the engine and the script control (and, for the naive control, from what each reload loaded), minus stopped containers. The naive control lists a new instance as soon as it starts, before it is ready.',
      "**Simulate** runs the same rolling algorithm on a virtual clock with the nominal timings: start-to-ready = warm-up, drain = drainSeconds, stop = prestop, minReadySeconds. Its duration is the floor the timings imply (per wave drain + stop + start-to-ready + minReadySeconds, with the overlaps the algorithm allows). **Overhead** = measured duration / that floor: container create/start, readiness polling, nginx reloads and fleetroll's own loop. simulate's access logs say the new version is healthy, so it predicts the rollout that passes its analysis; a deploy the analysis stopped has no overhead figure.",
      `**Simulate calibrated** runs the same with each step priced by the costs measured in this experiment's earlier deploys, beyond each configuration's own warm-up and prestop: the deploy that started each run's fleet, the earlier measured runs in the same nginx mode${
        e.calibrationRuns?.length
          ? `, and a calibration run made before the first measured one and not reported (${e.calibrationRuns.map((c) => `${c.mode} mode: ${c.label}, deploy ${(c.deployMs / 1000).toFixed(1)} s`).join('; ')})`
          : " (no calibration run was made: the first run is priced by its fleet's first deploy alone)"
      }. The prediction is made before the run it predicts.`,
      `Load: the probes start ${e.load.beforeSeconds} s before the deploy and stop ${e.load.afterSeconds} s after it; per-request timeout ${e.load.timeoutMs} ms. GETs go out on a fixed schedule (open loop), POSTs back to back per stream.`,
    ],
  });

  b.push({ kind: 'h2', text: 'Reproduce' });
  b.push({ kind: 'code', lang: 'sh', text: `npx fleetroll experiment -f ${e.specFile} --out ${summary.outDir}` });
  b.push({ kind: 'p', text: 'The spec as run:' });
  b.push({ kind: 'code', lang: 'json', text: JSON.stringify(spec, null, 2) });
  return b;
}
