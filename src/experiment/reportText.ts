/**
 * How the report writes its numbers and its configurations in words: a
 * Stat as "median (min–max)", a strategy, its analysis gate, the outcome of
 * its runs, the bad version.
 */
import type { StrategyInput } from '../core/strategy.js';
import type { CellAggregate, DeployOutcome, Stat } from './analysis.js';
import { percentText } from './specNames.js';
import type { CellSummary, ExperimentSummary } from './summary.js';

/** Fixed decimals; for counts (0 digits) a median halfway between two runs keeps its .5. */
export const num = (x: number, digits: number) => (digits === 0 && !Number.isInteger(x) ? x.toFixed(1) : x.toFixed(digits));

/** "9.6" for one value or an exact repeat; "9.6 (9.1–10.2)" as median (min–max) otherwise. */
export function fmtStat(s: Stat | null | undefined, scale = 1, digits = 0): string {
  if (!s) return 'n/a';
  const f = (x: number) => num(x / scale, digits);
  return s.n <= 1 || f(s.min) === f(s.max) ? f(s.median) : `${f(s.median)} (${f(s.min)}–${f(s.max)})`;
}
export const sec = (s: Stat | null | undefined) => fmtStat(s, 1000, 1);
export const secOf = (ms: number) => (ms / 1000).toFixed(1);

export function outcomes(map: Record<string, Stat>, onlyFailures: boolean): string {
  const entries = Object.entries(map).filter(([k, s]) => s.max > 0 && (!onlyFailures || !/^[23]\d\d$/.test(k)));
  return entries.length === 0 ? '–' : entries.map(([k, s]) => `${k} × ${fmtStat(s)}`).join(', ');
}

/** "25% → analysis" for a canary's steps as the fleet got them. */
function canarySteps(fleet: StrategyInput | undefined): string {
  const steps = (fleet?.canary?.steps ?? []) as readonly Record<string, unknown>[];
  return steps
    .map((st) =>
      st.setWeight !== undefined
        ? `${String(st.setWeight)}%`
        : st.analysis !== undefined
          ? 'analysis'
          : st.pause !== undefined
            ? `pause ${String((st.pause as { duration?: unknown }).duration)}`
            : '?',
    )
    .join(' → ');
}

export function strategyText(c: CellSummary): string {
  if (c.strategy.type === 'BlueGreen') {
    const delay = c.strategy.fleet?.blueGreen?.scaleDownDelaySeconds;
    return `BlueGreen: the whole new set beside the old one, one reload switches; old set kept ${delay ?? 30} s (scaleDownDelaySeconds)`;
  }
  if (c.strategy.type === 'Canary') {
    return `Canary: ${canarySteps(c.strategy.fleet)} (sticky on ${c.strategy.fleet?.canary?.stickyKey ?? 'X-User'}), then a rolling update maxSurge ${c.strategy.maxSurge ?? '25%'} (${c.resolved?.maxSurge}), maxUnavailable ${c.strategy.maxUnavailable ?? '25%'} (${c.resolved?.maxUnavailable})`;
  }
  if (c.strategy.type === 'naive') return `naive control (kill, start, reload; ${c.strategy.intervalSeconds ?? 1} s pause)`;
  if (c.strategy.type === 'script')
    return `script control, batch ${c.strategy.batch} (mark down + reload, drain, stop, start, poll readiness every ${c.strategy.pollSeconds ?? 1} s, re-enable + reload)`;
  if (c.strategy.type === 'Recreate') return 'Recreate';
  const policy = c.strategy.replacementPolicy ? `, replacementPolicy ${c.strategy.replacementPolicy}` : '';
  return `maxSurge ${c.strategy.maxSurge ?? '25%'} (${c.resolved?.maxSurge}), maxUnavailable ${c.strategy.maxUnavailable ?? '25%'} (${c.resolved?.maxUnavailable})${policy}`;
}

/** "after the first wave: error rate ≤ 5%, every 4s, at least 10 requests" or "none". */
export function gateText(c: CellSummary): string {
  if (!c.strategy.gate) return c.strategy.type === 'naive' || c.strategy.type === 'script' ? 'none (a control)' : 'none';
  const a =
    c.strategy.analysis ??
    ((c.strategy.fleet?.canary?.steps as readonly Record<string, unknown>[] | undefined)?.find((st) => st.analysis !== undefined)?.analysis as
      Record<string, unknown> | undefined);
  if (!a) return c.strategy.gate;
  const limits = [
    a.maxErrorRate !== undefined ? `error rate ≤ ${String(a.maxErrorRate)}` : '',
    a.maxErrorRateIncrease !== undefined ? `error rate ≤ stable + ${String(a.maxErrorRateIncrease)}` : '',
    a.maxLatencyRatio !== undefined ? `p99 ≤ ${String(a.maxLatencyRatio)}× stable` : '',
  ].filter(Boolean);
  const every = a.interval !== undefined ? `, measured every ${String(a.interval)}` : '';
  const min = a.minRequests !== undefined ? `, at least ${String(a.minRequests)} requests` : '';
  return `${c.strategy.gate}: ${limits.join(', ')}${every}${min}`;
}

const OUTCOME_TEXT: Record<DeployOutcome, string> = { completed: 'completed', stopped: 'stopped by the analysis', failed: 'FAILED' };

/** "stopped by the analysis" or "completed 2, stopped by the analysis 1". */
export function outcomeText(a: CellAggregate): string {
  const parts = (Object.keys(OUTCOME_TEXT) as DeployOutcome[]).filter((k) => a.outcomes[k] > 0);
  return parts.length === 1 ? OUTCOME_TEXT[parts[0]!] : parts.map((k) => `${OUTCOME_TEXT[k]} ${a.outcomes[k]}`).join(', ');
}

/**
 * "20% of its API answers are 500s, 300 ms added to each"; a list names its
 * values ("2%, 5% or 20% ..."): the matrix has one configuration per value.
 */
export function badVersionText(b: NonNullable<ExperimentSummary['experiment']['badVersion']>): string {
  const rates = [b.errorRate].flat();
  const latencies = [b.latencyMs].flat();
  const alternatives = (xs: string[]) => (xs.length > 1 ? `${xs.slice(0, -1).join(', ')} or ${xs[xs.length - 1]}` : (xs[0] ?? ''));
  const what = [
    rates.some((r) => r > 0) ? `${alternatives(rates.map(percentText))} of its API answers are 500s` : '',
    latencies.some((ms) => ms > 0) ? `${alternatives(latencies.map(String))} ms added to each` : '',
  ].filter(Boolean);
  return `${what.join(', ')}${rates.length > 1 || latencies.length > 1 ? ', one configuration per value' : ''}`;
}
