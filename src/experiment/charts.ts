/**
 * Charts of an experiment, as Vega-Lite specs rendered to SVG headless (no
 * browser, no canvas): vega-lite compiles the spec to Vega, and a Vega View
 * with renderer 'none' produces the SVG markup.
 *
 * The spec builders are pure (data in, spec out); only renderSvg runs Vega.
 */
import type { TopLevelSpec } from 'vega-lite';
import type { CapacityPoint } from './timeline.js';
import type { SecondBucket } from './metrics.js';

const FONT = 'Helvetica, Arial, sans-serif';
const CONFIG = {
  font: FONT,
  view: { stroke: '#ddd' },
  axis: { labelFontSize: 11, titleFontSize: 12, grid: true, gridColor: '#eee' },
  legend: { labelFontSize: 11, titleFontSize: 12, labelLimit: 260 },
  title: { fontSize: 14, anchor: 'start' as const, subtitleColor: '#555' },
};

/** Colours that read the same in every chart: old version blue, new green, failures red. */
function versionColors(from: string, to: string): { domain: string[]; range: string[] } {
  return { domain: [from, to, 'other', 'failed', 'retried'], range: ['#4c78a8', '#54a24b', '#bab0ac', '#e45756', '#f58518'] };
}

export interface VersionsChartInput {
  title: string;
  subtitle?: string;
  from: string;
  to: string;
  buckets: readonly SecondBucket[];
  /** ms since the probes started */
  deployStartMs: number;
  deployEndMs: number;
}

/**
 * Responses per second by the version that answered, stacked, with failed
 * requests on top in red: the per-second breakdown of the rolling-deployments
 * article as a chart. Bucketed by send time.
 */
export function versionsPerSecondSpec(i: VersionsChartInput): TopLevelSpec {
  const rows: { start: number; end: number; series: string; count: number; order: number }[] = [];
  const colors = versionColors(i.from, i.to);
  for (const b of i.buckets) {
    const start = b.t / 1000;
    const add = (series: string, count: number) => {
      if (count > 0) rows.push({ start, end: start + 1, series, count, order: colors.domain.indexOf(series) });
    };
    let other = 0;
    for (const [v, n] of Object.entries(b.byVersion)) {
      if (v === i.from || v === i.to) add(v, n);
      else other += n;
    }
    add('other', other);
    add('failed', b.failed);
  }
  const marks = [
    { t: i.deployStartMs / 1000, label: 'deploy starts' },
    { t: i.deployEndMs / 1000, label: 'deploy ends' },
  ];
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: { text: i.title, ...(i.subtitle ? { subtitle: i.subtitle } : {}) },
    width: 640,
    height: 200,
    config: CONFIG,
    layer: [
      {
        data: { values: rows },
        mark: { type: 'bar', stroke: 'white', strokeWidth: 0.5 },
        encoding: {
          x: { field: 'start', type: 'quantitative', bin: { binned: true, step: 1 }, title: 'seconds since the probes started' },
          x2: { field: 'end' },
          y: { field: 'count', type: 'quantitative', stack: 'zero', title: 'responses per second' },
          color: { field: 'series', type: 'nominal', title: 'answered by', scale: { domain: colors.domain.slice(0, 4), range: colors.range.slice(0, 4) } },
          order: { field: 'order', type: 'quantitative' },
          tooltip: [{ field: 'start' }, { field: 'series' }, { field: 'count' }],
        },
      },
      {
        data: { values: marks },
        mark: { type: 'rule', color: '#333', strokeDash: [4, 3] },
        encoding: { x: { field: 't', type: 'quantitative' } },
      },
      {
        data: { values: marks },
        mark: { type: 'text', align: 'left', dx: 3, dy: -4, baseline: 'top', fontSize: 10, color: '#333' },
        encoding: { x: { field: 't', type: 'quantitative' }, y: { value: 0 }, text: { field: 'label' } },
      },
    ],
  };
}

export interface CapacitySeries {
  cell: string;
  run: string;
  points: readonly CapacityPoint[];
  deployStartMs: number;
  deployEndMs: number;
  /** The recording ends here: the last step is drawn up to it. */
  endMs: number;
}

/**
 * Capacity over time, one panel per configuration, every repetition a line:
 * servers in service in nginx (solid) and containers alive (dashed), on a
 * time axis starting at each run's deploy start so repetitions line up.
 */
export function capacitySpec(series: readonly CapacitySeries[], title: string, cellOrder: readonly string[]): TopLevelSpec {
  const rows: { cell: string; run: string; t: number; value: number; metric: string }[] = [];
  for (const s of series) {
    const from = s.deployStartMs - 1000;
    const points = s.points.filter((p) => p.t <= s.endMs);
    // The value in force at the left edge, then every step, then the value up to the end.
    let atStart = points[0];
    for (const p of points) if (p.t <= from) atStart = p;
    const steps = [...(atStart ? [{ ...atStart, t: from }] : []), ...points.filter((p) => p.t > from)];
    const last = steps[steps.length - 1];
    if (last) steps.push({ ...last, t: Math.min(s.endMs, s.deployEndMs + 1000) });
    for (const p of steps) {
      const t = Math.round(p.t - s.deployStartMs) / 1000;
      rows.push({ cell: s.cell, run: s.run, t, value: p.up, metric: 'in service (nginx upstream)' });
      rows.push({ cell: s.cell, run: s.run, t, value: p.alive, metric: 'containers alive' });
    }
  }
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: { text: title, subtitle: 'servers nginx sends traffic to (solid) and containers alive (dashed); one line per repetition' },
    config: CONFIG,
    data: { values: rows },
    facet: {
      row: {
        field: 'cell',
        type: 'nominal',
        title: null,
        sort: [...cellOrder],
        header: { labelAngle: 0, labelAlign: 'left', labelAnchor: 'start', labelOrient: 'top', labelFontSize: 12, labelFontWeight: 'bold' },
      },
    },
    spec: {
      width: 640,
      height: 110,
      mark: { type: 'line', interpolate: 'step-after', strokeWidth: 1.6 },
      encoding: {
        x: { field: 't', type: 'quantitative', title: 'seconds since the deploy started' },
        y: { field: 'value', type: 'quantitative', title: 'instances', scale: { zero: true }, axis: { tickMinStep: 1, format: 'd' } },
        color: {
          field: 'metric',
          type: 'nominal',
          title: null,
          scale: { domain: ['in service (nginx upstream)', 'containers alive'], range: ['#4c78a8', '#f58518'] },
        },
        strokeDash: {
          field: 'metric',
          type: 'nominal',
          legend: null,
          scale: {
            domain: ['in service (nginx upstream)', 'containers alive'],
            range: [
              [1, 0],
              [5, 3],
            ],
          },
        },
        detail: { field: 'run', type: 'nominal' },
      },
    },
    resolve: { scale: { x: 'shared', y: 'shared' } },
  };
}

export interface WindowDurationRow {
  cell: string;
  metric: 'mixed-version window' | 'deploy duration';
  kind: 'measured' | 'predicted by simulate';
  /** seconds; the median for measured */
  value: number;
  min?: number;
  max?: number;
}

/**
 * The mixed-version window and the deploy duration per configuration:
 * measured (median, with a min-max bar over repetitions) beside what
 * `simulate` predicts from the same timings.
 */
export function windowDurationSpec(rows: readonly WindowDurationRow[], title: string, cellOrder: readonly string[]): TopLevelSpec {
  const kinds = ['measured', 'predicted by simulate'];
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: { text: title, subtitle: 'measured: median of the repetitions, bar = min to max; predicted: simulate with the nominal timings' },
    config: CONFIG,
    data: { values: [...rows] },
    facet: {
      column: {
        field: 'metric',
        type: 'nominal',
        title: null,
        sort: ['mixed-version window', 'deploy duration'],
        header: { labelFontSize: 12, labelFontWeight: 'bold' },
      },
    },
    spec: {
      width: Math.max(180, 70 * cellOrder.length),
      height: 220,
      layer: [
        {
          mark: { type: 'bar' },
          encoding: {
            x: { field: 'cell', type: 'nominal', title: null, sort: [...cellOrder], axis: { labelAngle: -30, labelLimit: 160 } },
            xOffset: { field: 'kind', type: 'nominal', sort: kinds },
            y: { field: 'value', type: 'quantitative', title: 'seconds' },
            color: { field: 'kind', type: 'nominal', title: null, scale: { domain: kinds, range: ['#4c78a8', '#bab0ac'] } },
            tooltip: [
              { field: 'cell' },
              { field: 'kind' },
              { field: 'value', format: '.1f' },
              { field: 'min', format: '.1f' },
              { field: 'max', format: '.1f' },
            ],
          },
        },
        {
          transform: [{ filter: 'isValid(datum.min)' }],
          mark: { type: 'rule', color: '#222', strokeWidth: 1.5 },
          encoding: {
            x: { field: 'cell', type: 'nominal', sort: [...cellOrder] },
            xOffset: { field: 'kind', type: 'nominal', sort: kinds },
            y: { field: 'min', type: 'quantitative' },
            y2: { field: 'max' },
          },
        },
      ],
    },
    resolve: { scale: { y: 'independent' } },
  };
}

export interface FailuresRow {
  cell: string;
  outcome: string;
  /** total over the repetitions */
  count: number;
}

/** Failed (and retried) requests per configuration by outcome, totals over the repetitions. */
export function failuresSpec(rows: readonly FailuresRow[], title: string, cellOrder: readonly string[]): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v5.json',
    title: { text: title, subtitle: 'totals over all repetitions; "retried (keep-alive)": resent once, counted as failed only if the resend failed' },
    config: CONFIG,
    width: Math.max(240, 80 * cellOrder.length),
    height: 200,
    data: { values: [...rows] },
    mark: { type: 'bar' },
    encoding: {
      x: { field: 'cell', type: 'nominal', title: null, sort: [...cellOrder], scale: { domain: [...cellOrder] }, axis: { labelAngle: -30, labelLimit: 160 } },
      y: { field: 'count', type: 'quantitative', title: 'requests (all repetitions)', stack: 'zero', axis: { tickMinStep: 1, format: 'd' } },
      color: { field: 'outcome', type: 'nominal', title: 'outcome' },
      tooltip: [{ field: 'cell' }, { field: 'outcome' }, { field: 'count' }],
    },
  };
}

/** Renders a Vega-Lite spec to SVG markup, headless. */
export async function renderSvg(spec: TopLevelSpec): Promise<string> {
  // Loaded here, not with the module: only the experiment's report renders charts.
  const [vega, vl] = await Promise.all([import('vega'), import('vega-lite')]);
  const compiled = vl.compile(spec).spec;
  const view = new vega.View(vega.parse(compiled), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}
