/**
 * The report's charts: vega-lite specs (charts.ts) filled with the runs'
 * numbers, one file each; the caller renders and writes them.
 */
import type { TopLevelSpec } from 'vega-lite';
import { capacitySpec, failuresSpec, versionsPerSecondSpec, windowDurationSpec, type FailuresRow, type WindowDurationRow } from './charts.js';
import { secOf } from './reportText.js';
import type { ExperimentSummary, RunOutcome } from './summary.js';
import type { CapacityPoint } from './timeline.js';

export interface ChartFile {
  file: string;
  title: string;
  spec: TopLevelSpec;
}

export function buildCharts(summary: ExperimentSummary, runs: readonly RunOutcome[]): ChartFile[] {
  const e = summary.experiment;
  const order = summary.cells.map((c) => c.label);
  const charts: ChartFile[] = [];
  const wd: WindowDurationRow[] = [];
  for (const c of summary.cells) {
    const a = c.aggregate;
    wd.push({
      cell: c.label,
      metric: 'mixed-version window',
      kind: 'measured',
      value: a.windowMs.median / 1000,
      min: a.windowMs.min / 1000,
      max: a.windowMs.max / 1000,
    });
    wd.push({
      cell: c.label,
      metric: 'deploy duration',
      kind: 'measured',
      value: a.deployDurationMs.median / 1000,
      min: a.deployDurationMs.min / 1000,
      max: a.deployDurationMs.max / 1000,
    });
    if (a.predicted) {
      wd.push({ cell: c.label, metric: 'mixed-version window', kind: 'predicted by simulate', value: a.predicted.mixedVersionWindowMs / 1000 });
      wd.push({ cell: c.label, metric: 'deploy duration', kind: 'predicted by simulate', value: a.predicted.durationMs / 1000 });
    }
  }
  charts.push({
    file: 'charts/window-duration.svg',
    title: 'Mixed-version window and deploy duration',
    spec: windowDurationSpec(wd, `${e.title}: mixed-version window and deploy duration`, order),
  });

  const labelOf = new Map(summary.cells.map((c) => [c.id, c.label]));
  charts.push({
    file: 'charts/capacity.svg',
    title: 'Capacity over time',
    spec: capacitySpec(
      runs.map((r) => ({
        cell: labelOf.get(r.cellId) ?? r.cellId,
        run: r.id,
        points: r.metrics.capacity as CapacityPoint[],
        deployStartMs: r.deployStartMs,
        deployEndMs: r.deployEndMs,
        endMs: r.loadEndMs,
      })),
      `${e.title}: capacity over time`,
      order,
    ),
  });

  const fr: FailuresRow[] = [];
  for (const c of summary.cells) {
    const totals: Record<string, number> = {};
    for (const r of runs.filter((x) => x.cellId === c.id)) {
      for (const m of Object.values(r.metrics.requests.byMethod))
        for (const [k, n] of Object.entries(m.byStatus)) if (!/^[23]\d\d$/.test(k)) totals[k] = (totals[k] ?? 0) + n;
      if (r.metrics.requests.retried > 0) totals['retried (keep-alive)'] = (totals['retried (keep-alive)'] ?? 0) + r.metrics.requests.retried;
    }
    for (const [outcome, count] of Object.entries(totals)) fr.push({ cell: c.label, outcome, count });
  }
  if (fr.length > 0)
    charts.push({
      file: 'charts/failures.svg',
      title: 'Failed and retried requests',
      spec: failuresSpec(fr, `${e.title}: failed and retried requests`, order),
    });

  for (const r of runs) {
    charts.push({
      file: `charts/versions-${r.id}.svg`,
      title: `Versions answering per second: ${r.label}, repetition ${r.repetition}`,
      spec: versionsPerSecondSpec({
        title: `${r.label} (repetition ${r.repetition}): responses per second by version`,
        subtitle: `${r.metrics.requests.total} requests, ${r.metrics.requests.failed} failed, ${r.metrics.requests.retried} retried; mixed-version window ${secOf(r.metrics.windowMs)} s; deploy ${secOf(r.metrics.deployDurationMs)} s`,
        from: e.from,
        to: e.to,
        buckets: r.buckets,
        deployStartMs: r.deployStartMs,
        deployEndMs: r.deployEndMs,
      }),
    });
  }
  return charts;
}
