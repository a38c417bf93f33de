/**
 * What a run should take, predicted: `simulate` (the engine itself on
 * simulated ports and a virtual clock) run with the run's nominal timings.
 * It runs the whole controller, so it is kept out of the pure analysis of
 * what was measured (analysis.ts), which only reads the prediction it is given.
 */
import type { Fleet } from '../config/load.js';
import type { ResolvedStrategy } from '../core/strategy.js';
import { addCosts, fitLine, median, runLine, type CostKind, type CostSample, type TypicalCosts } from '../core/stepCosts.js';
import { calibratedTimings, simulateRollout, type SimulationResult, type SimulationSetup } from '../sim/simulate.js';

/** The timings a run was configured with: what `simulate` is given to predict it. */
export interface NominalTimings {
  /** The app's warm-up: from start to readiness passing. */
  startupMs: number;
  drainMs: number;
  /** Graceful stop: the app keeps serving this long after SIGTERM (PRESTOP_SECONDS). */
  stopMs: number;
  minReadyMs: number;
  /** The dynamic nginx mode (sim/simulate withNginxMode): a drain ends when its requests do. */
  idleDrainMs?: number | undefined;
}

/** This machine's typical fixed costs, for the nominal prediction: docker run to a running container, and an nginx change in a container. */
const NOMINAL_RUN_MS = 500;
const NOMINAL_RELOAD_MS = 300;
/** The dynamic mode's change here: the peers file in, the status read back (median 189 ms under load, measured by the dynamic-mode experiment). */
const NOMINAL_PEERS_CHANGE_MS = 190;
const nominalChangeMs = (t: NominalTimings) => (t.idleDrainMs !== undefined ? NOMINAL_PEERS_CHANGE_MS : NOMINAL_RELOAD_MS);

export type Prediction = Pick<SimulationResult, 'durationMs' | 'waves' | 'peakInstances' | 'lowestCapacity' | 'mixedVersionWindowMs' | 'reloads'>;

/**
 * `simulate` (the engine itself on simulated ports) with the nominal timings,
 * the fleet's analysis settings (a gate that passes) and this machine's typical fixed costs: ~0.5 s from docker run to a running
 * container, ~0.3 s for an nginx in a container to take a new upstream (write, nginx -t, reload, in force).
 */
export async function predict(strategy: ResolvedStrategy, t: NominalTimings, analysis?: Fleet['analysis']): Promise<Prediction> {
  // simulate's access logs say the new version is as healthy as the old: an analysis costs its measurements' time and passes.
  const r = await simulateRollout(strategy, { ...t, jitter: 0, seed: 1, runMs: NOMINAL_RUN_MS, reloadMs: nominalChangeMs(t) }, analysis ? { analysis } : {});
  return {
    durationMs: r.durationMs,
    waves: r.waves,
    peakInstances: r.peakInstances,
    lowestCapacity: r.lowestCapacity,
    mixedVersionWindowMs: r.mixedVersionWindowMs,
    reloads: r.reloads,
  };
}

/**
 * One run's step costs beyond what its configuration sets (the app's warm-up
 * and prestop): what the configurations of an experiment share, so the costs
 * of a run with a 1 s warm-up price one with a 5 s warm-up.
 */
export function beyondNominal(samples: readonly CostSample[], t: NominalTimings): CostSample[] {
  return samples.map((s) => (s.kind === 'ready' ? { ...s, ms: s.ms - t.startupMs } : s.kind === 'stop' ? { ...s, ms: s.ms - t.stopMs } : s));
}

/**
 * `simulate` priced with the costs measured in earlier runs of the same
 * experiment (beyondNominal samples, so an offset may be negative where a run
 * beat its nominal timing) on top of this run's own nominal timings: the
 * median of each kind. Undefined without any earlier sample.
 */
export async function predictCalibrated(
  strategy: ResolvedStrategy,
  t: NominalTimings,
  extra: readonly CostSample[],
  periodMs: number,
  analysis?: Fleet['analysis'],
  events?: SimulationSetup['events'],
): Promise<Prediction | undefined> {
  if (extra.length === 0) return undefined;
  const of = (kind: CostKind, plus = 0) => {
    const xs = extra.filter((s) => s.kind === kind).map((s) => s.ms);
    return xs.length ? Math.max(0, Math.round(median(xs) + plus)) : undefined;
  };
  // create + start is not an offset: its line over the starts in flight comes from the samples as they are.
  const runs = addCosts(
    undefined,
    extra.filter((s) => s.kind === 'run'),
    new Date(0).toISOString(),
    Number.MAX_SAFE_INTEGER,
  );
  // Without a start alone yet (only the first deploy's, all at once), this machine's typical one: a start alone is never the contended median.
  const line = runs ? runLine(runs, NOMINAL_RUN_MS) : undefined;
  // Start to ready and the nginx change are offsets, so their lines are fitted from the samples directly (addCosts keeps no
  // negative ms, and core/stepCosts.ts contentionPoints reads the stored form): [others beside it, ms] per sample.
  const pointsOf = (kind: CostKind) => extra.filter((s) => s.kind === kind).map((s) => [Math.max(1, s.inFlight ?? 1) - 1, s.ms] as const);
  // Start to ready against the warm-ups at once. Without a warm-up alone yet, one alone is assumed to cost beyond its
  // nominal warm-up only the wait for the next probe.
  const ready = fitLine(pointsOf('ready'), Math.round(periodMs / 2));
  const readyMs = ready ? Math.max(0, ready.aloneMs + t.startupMs) : of('ready', t.startupMs);
  // An nginx change against the starts beside it (they share the engine and the cores): a wave's mark-down goes with its starts.
  const change = fitLine(pointsOf('change'));
  const typical: TypicalCosts = {
    runMs: line?.aloneMs ?? of('run'),
    runQueuedMs: line?.queuedMs,
    readyMs,
    readyQueuedMs: ready?.queuedMs,
    stopMs: of('stop', t.stopMs),
    changeMs: change?.aloneMs ?? of('change'),
    changeQueuedMs: change?.queuedMs,
    prepareMs: of('prepare'),
    verifyMs: of('verify'),
    reportMs: of('report'),
    drainMs: of('drain'),
    counts: {},
  };
  const timings = calibratedTimings({ ...t, jitter: 0, seed: 1, periodMs, runMs: NOMINAL_RUN_MS, reloadMs: nominalChangeMs(t) }, typical);
  const r = await simulateRollout(strategy, timings, { ...(analysis ? { analysis } : {}), ...(events ? { events } : {}) });
  return {
    durationMs: r.durationMs,
    waves: r.waves,
    peakInstances: r.peakInstances,
    lowestCapacity: r.lowestCapacity,
    mixedVersionWindowMs: r.mixedVersionWindowMs,
    reloads: r.reloads,
  };
}
