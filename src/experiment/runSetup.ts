/**
 * One run of an experiment, set up: the rehearsal it is under load, the
 * nominal timings `simulate` is given for it, and the pools of step costs
 * its calibrated prediction is priced with, one per nginx mode. A
 * calibration run (the spec's `calibrationRun`) is one such run made before
 * the first measured run of a mode, so that run is priced by a deploy like
 * itself, not only by the deploy that started its fleet.
 */
import type { Fleet } from '../config/load.js';
import type { DockerRuntime } from '../adapters/docker.js';
import type { CostSample } from '../core/stepCosts.js';
import type { DeployDeps } from '../engine/rollout.js';
import { withNginxMode } from '../sim/simulate.js';
import { beyondNominal, type NominalTimings } from './predict.js';
import { runUnderLoad, teardown, demoNames, type UnderLoadResult } from './rehearse.js';
import { badVersionEnv, type CellParams, type ExperimentSpec, type PlannedRun } from './spec.js';

export interface ExperimentOptions {
  spec: ExperimentSpec;
  /** As given on the command line; shown in the report. */
  specFile: string;
  outDir: string;
  docker: string;
  /** Prefix of each run's service name (the fleet of run 3 is `<prefix>-3`). */
  namePrefix: string;
  makeDeps: (fleet: Fleet) => Promise<DeployDeps>;
  template: string;
  /** Progress lines for people. */
  log: (line: string) => void;
  /** Aborted: finish the run in progress, skip the rest, and still write the report. */
  signal?: AbortSignal | undefined;
}

export interface RunImages {
  reload: string;
  dynamic?: string | undefined;
}

/** The nginx mode a run's fleet uses: a change in one prices nothing in the other (a reload against a peers file). */
export const modeOf = (p: CellParams): 'reload' | 'dynamic' => (p.dynamicNginx ? 'dynamic' : 'reload');

/** The step costs that price a mode's predictions: beyond each run's nominal timings (predict.ts beyondNominal). */
export interface CostPool {
  samples: CostSample[];
  /** Measured runs whose deploy completed among them. */
  runs: number;
  /** The calibration run among them, when one was made and its deploy completed. */
  calibrationRun?: { label: string; deployMs: number } | undefined;
  /** A calibration run was made (once per mode, whatever its outcome). */
  calibrationTried?: boolean;
}

export interface Calibration {
  byMode: Partial<Record<'reload' | 'dynamic', CostPool>>;
}

export const poolOf = (c: Calibration, p: CellParams): CostPool => (c.byMode[modeOf(p)] ??= { samples: [], runs: 0 });

/** The timings the run was configured with, as `simulate` is given them. */
export function nominalOf(p: CellParams, toFleet: Fleet): NominalTimings {
  return withNginxMode(
    {
      startupMs: p.warmupSeconds * 1000,
      drainMs: p.drainSeconds * 1000,
      stopMs: p.prestopSeconds * 1000,
      minReadyMs: p.minReadySeconds * 1000,
      jitter: 0,
      seed: 1,
    },
    toFleet,
  );
}

/** The run's fleet started at `from`, rolled to `to` under the spec's load. */
export function rehearseRun(o: ExperimentOptions, run: PlannedRun, name: string, runtime: DockerRuntime, images: RunImages): Promise<UnderLoadResult> {
  const { cell } = run;
  const p = cell.params;
  return runUnderLoad(
    {
      name,
      docker: o.docker,
      replicas: p.replicas,
      maxSurge: cell.strategy.maxSurge === undefined ? undefined : String(cell.strategy.maxSurge),
      maxUnavailable: cell.strategy.maxUnavailable === undefined ? undefined : String(cell.strategy.maxUnavailable),
      recreate: cell.strategy.type === 'Recreate',
      replacementPolicy: cell.strategy.replacementPolicy,
      naive: cell.strategy.type === 'naive',
      naiveIntervalMs: (cell.strategy.intervalSeconds ?? 1) * 1000,
      script: cell.strategy.type === 'script' ? { batch: cell.strategy.batch ?? 1, pollSeconds: cell.strategy.pollSeconds } : undefined,
      from: o.spec.from,
      to: o.spec.to,
      getPerSecond: p.getPerSecond,
      postConcurrency: p.postConcurrency,
      orderDelayMs: p.postDurationMs,
      keepAlive: p.keepAlive,
      resend: o.spec.load.resend,
      nginxMode: modeOf(p),
      timeoutMs: o.spec.load.timeoutMs,
      beforeMs: o.spec.load.beforeSeconds * 1000,
      afterMs: o.spec.load.afterSeconds * 1000,
      drainSeconds: p.drainSeconds,
      warmupSeconds: p.warmupSeconds,
      minReadySeconds: p.minReadySeconds,
      prestopSeconds: p.prestopSeconds,
      port: 0,
      keep: false,
      events: () => {},
      log: () => {},
      // Engine deploys read nginx's access log: the analysis gate needs it, and every run keeps the deploy's health numbers.
      accessLog: true,
      strategy: cell.fleetStrategy,
      analysis: cell.analysis,
      toEnv: badVersionEnv(p),
      users: o.spec.load.users,
    },
    runtime,
    o.makeDeps,
    o.template,
    (p.dynamicNginx ? images.dynamic : undefined) ?? images.reload,
  );
}

/**
 * What the deploy that started a run's fleet at `from` (before the measured
 * one) says of the step costs, beyond their nominal part. Its start-to-ready
 * counts: every instance warmed up at once there, but each sample carries how
 * many warmed up beside it, so the contention line prices those as
 * contended. Its prepare does not: that deploy reads no access log and is
 * called without its deps in the measured time (84-92 ms against a measured
 * deploy's 390-420 ms), and in the pool it halved the median of what a
 * measured deploy spends before its first wave.
 */
export function firstDeployCosts(r: UnderLoadResult, nominal: NominalTimings): ReturnType<typeof beyondNominal> {
  return beyondNominal(
    (r.initialCosts ?? []).filter((c) => c.kind !== 'prepare'),
    nominal,
  );
}

/**
 * Before the first measured run of a mode, when the spec asks for it: the same
 * run once, unmeasured, its step costs (the deploy that started its fleet and
 * the rollout) added to the mode's pool. Without it the first run is priced
 * by its fleet's first deploy alone, which started every instance at once:
 * no start or warm-up alone to price a rolling wave by (an experiment's first
 * runs were 1.31-1.35 × their prediction, the later ones 0.96-1.06 ×).
 */
export async function calibrate(o: ExperimentOptions, run: PlannedRun, runtime: DockerRuntime, images: RunImages, calibration: Calibration): Promise<void> {
  const { cell } = run;
  const pool = poolOf(calibration, cell.params);
  if (!o.spec.calibrationRun || !cell.resolved || pool.calibrationTried || pool.runs > 0) return;
  pool.calibrationTried = true;
  const name = `${o.namePrefix}-cal`;
  o.log(`calibration run (${modeOf(cell.params)} mode): ${cell.label}, not measured; its step costs price the predictions (fleet ${name})`);
  let r: UnderLoadResult;
  try {
    r = await rehearseRun(o, run, name, runtime, images);
  } catch (err) {
    await teardown(runtime.docker, demoNames(name)).catch(() => {});
    throw err;
  }
  if (!r.deploy || r.deployError) {
    o.log(
      `  calibration run: the deploy did not complete (${(r.deployError ?? 'no result').split('\n')[0]}); the first run is priced by its fleet's first deploy`,
    );
    return;
  }
  const nominal = nominalOf(cell.params, r.toFleet);
  pool.samples.push(...firstDeployCosts(r, nominal), ...beyondNominal(r.deploy.costs ?? [], nominal));
  pool.calibrationRun = { label: cell.label, deployMs: Math.round(r.deployEndMs - r.deployStartMs) };
  o.log(`  calibration run: deploy ${((r.deployEndMs - r.deployStartMs) / 1000).toFixed(1)} s, ${pool.samples.length} step costs`);
}
