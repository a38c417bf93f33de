/**
 * The hand-written script control beside fleetroll: each script
 * configuration paired with the fleetroll configuration that replaces the
 * same batch on the same settings, the targets fleetroll must meet against
 * it (bench/experiment.ts checks them), and its table in the report.
 */
import type { Block } from './document.js';
import type { CellParams } from './matrix.js';
import { num, secOf } from './reportText.js';
import type { CellSummary, ScriptComparisonRow } from './summary.js';

const sameParams = (a: CellParams, b: CellParams) => (Object.keys(a) as (keyof CellParams)[]).every((k) => a[k] === b[k]);

/**
 * Pairs every `script` configuration of batch b with every RollingUpdate
 * configuration that resolves to maxSurge 0 / maxUnavailable b on the same
 * settings (replicas, timings, load): the same job done by hand and by
 * fleetroll. In spec order: script by script, then fleetroll by fleetroll.
 */
export function scriptComparison(cells: readonly CellSummary[]): ScriptComparisonRow[] {
  const rows: ScriptComparisonRow[] = [];
  for (const s of cells) {
    if (s.strategy.type !== 'script' || s.strategy.batch === undefined) continue;
    const b = s.strategy.batch;
    for (const f of cells) {
      if (f.strategy.type !== 'RollingUpdate' || f.resolved?.maxSurge !== 0 || f.resolved.maxUnavailable !== b || !sameParams(s.params, f.params)) continue;
      const fa = f.aggregate;
      const sa = s.aggregate;
      rows.push({
        batch: b,
        script: s.label,
        fleetroll: f.label,
        ...(f.strategy.replacementPolicy ? { replacementPolicy: f.strategy.replacementPolicy } : {}),
        durationMs: { fleetroll: fa.deployDurationMs.median, script: sa.deployDurationMs.median },
        durationRatio: sa.deployDurationMs.median > 0 ? Math.round((fa.deployDurationMs.median / sa.deployDurationMs.median) * 1000) / 1000 : null,
        windowMs: { fleetroll: fa.windowMs.median, script: sa.windowMs.median },
        reloads: { fleetroll: fa.reloads.median, script: sa.reloads.median },
        failed: { fleetroll: fa.requests.failed.max, script: sa.requests.failed.max },
        deployErrors: { fleetroll: fa.deployErrors, script: sa.deployErrors },
      });
    }
  }
  return rows;
}

/** What fleetroll should achieve against the script (the targets; for information, never asserted). */
export const SCRIPT_TARGETS = { durationRatio: 0.6, windowSlackMs: 1000 } as const;

export interface TargetCheck {
  /** fleetroll's duration ≤ 0.6 × the script's */
  duration: boolean;
  /** fleetroll's mixed-version window ≤ the script's + 1 s */
  window: boolean;
  /** fleetroll reloads nginx no more often than the script */
  reloads: boolean;
  /** no failed request and no failed deploy for either */
  zeroFailures: boolean;
}

export function checkTargets(r: ScriptComparisonRow): TargetCheck {
  return {
    duration: r.durationRatio !== null && r.durationRatio <= SCRIPT_TARGETS.durationRatio,
    window: r.windowMs.fleetroll <= r.windowMs.script + SCRIPT_TARGETS.windowSlackMs,
    reloads: r.reloads.fleetroll <= r.reloads.script,
    zeroFailures: r.failed.fleetroll === 0 && r.failed.script === 0 && r.deployErrors.fleetroll === 0 && r.deployErrors.script === 0,
  };
}

const pair = (x: { fleetroll: number; script: number }, f: (v: number) => string) => `${f(x.fleetroll)} / ${f(x.script)}`;

export function scriptComparisonTable(rows: readonly ScriptComparisonRow[]): Block {
  return {
    kind: 'table',
    head: [
      'batch',
      'fleetroll',
      'script',
      'duration (s) fleetroll / script',
      'ratio',
      'mixed-version window (s) fleetroll / script',
      'reloads fleetroll / script',
      'failed fleetroll / script',
    ],
    align: ['r', 'l', 'l', 'r', 'r', 'r', 'r', 'r'],
    rows: rows.map((r) => [
      String(r.batch),
      r.fleetroll,
      r.script,
      pair(r.durationMs, secOf),
      r.durationRatio === null ? 'n/a' : `${r.durationRatio.toFixed(2)}×`,
      pair(r.windowMs, secOf),
      pair(r.reloads, (v) => num(v, 0)),
      pair(r.failed, (v) => num(v, 0)),
    ]),
  };
}
