/**
 * `fleetroll plan`: the waves of a rollout from a fleet entirely on the old
 * revision to one entirely on the new, assuming every new instance becomes
 * ready together at the end of each wave. For BlueGreen and Canary
 * (planStrategy), the steps of the rollout with the instances alive and the
 * traffic share after each; a canary's final rolling update is planned by
 * planRollout, the one rolling algorithm.
 *
 * PURE.
 */
import { availableOf, isComplete, planWave, totalOf, type FleetCounts } from './rolling.js';
import { blueGreenSteps, canarySchedule } from './strategySteps.js';
import { finalRollingUpdate, type BlueGreenStrategy, type CanaryStrategy, type ResolvedStrategy, type RollingStrategy } from './strategy.js';

export interface PlannedWave {
  /** 1-based wave number. */
  index: number;
  started: number;
  stopped: number;
  /** Instances per revision after the wave: [old, new]. */
  after: [number, number];
  /** Available instances (in service) at the wave's lowest and highest point. */
  capacity: { min: number; max: number };
  /**
   * Containers alive at the wave's peak, under the strategy's
   * replacementPolicy. TerminationComplete: starts wait for stops, so never
   * above maxTotal. TerminationStarted: the wave's starts begin while the
   * instances it replaces (and, at worst, the previous wave's) still drain.
   */
  peakAlive: number;
}

export interface Plan {
  replicas: number;
  maxSurge: number;
  maxUnavailable: number;
  minAvailable: number;
  maxTotal: number;
  replacementPolicy: ResolvedStrategy['replacementPolicy'];
  /** [old, new] instance counts: the start, then one entry after each wave. */
  waves: [number, number][];
  details: PlannedWave[];
}

const OLD = 'old';
const NEW = 'new';

/**
 * The waves of a rolling update (or Recreate). `from` starts it elsewhere
 * than [replicas, 0]: old and new instances alive, all available (a canary's
 * last step leaves its canaries and the whole stable set).
 */
export function planRollout(s: ResolvedStrategy, from: { old: number; new: number } = { old: s.replicas, new: 0 }): Plan {
  let c: FleetCounts = {
    replicas: s.replicas,
    current: { revision: NEW, total: from.new, available: from.new },
    old: [{ revision: OLD, total: from.old, available: from.old }],
  };
  const pair = (x: FleetCounts): [number, number] => [x.old[0]?.total ?? 0, x.current.total];
  const waves: [number, number][] = [pair(c)];
  const details: PlannedWave[] = [];
  // A valid strategy finishes in at most 2 * replicas + 2 waves (each wave
  // either starts or stops at least one instance); the bound only guards a bug.
  const limit = 2 * s.replicas + 4;
  let prevStopped = 0;
  while (!isComplete(c) && details.length < limit) {
    const w = planWave(c, s);
    if (w.steps.length === 0) break;
    const before = availableOf(c);
    const totalBefore = totalOf(c);
    const stopped = w.stopOld.reduce((a, b) => a + b.count, 0) + w.stopNew;
    c = w.after;
    // The new instances of this wave all become ready (and available) at its end.
    const ready: FleetCounts = { ...c, current: { ...c.current, available: c.current.total } };
    details.push({
      index: details.length + 1,
      started: w.start,
      stopped,
      after: pair(c),
      capacity: { min: w.minAvailableDuring, max: Math.max(before, availableOf(ready)) },
      peakAlive:
        s.replacementPolicy === 'TerminationStarted' ? Math.max(totalOf(ready), totalBefore + w.start + prevStopped) : Math.max(w.peakTotal, totalOf(ready)),
    });
    prevStopped = stopped;
    waves.push(pair(c));
    c = ready;
  }
  return {
    replicas: s.replicas,
    maxSurge: s.maxSurge,
    maxUnavailable: s.maxUnavailable,
    minAvailable: s.minAvailable,
    maxTotal: s.maxTotal,
    replacementPolicy: s.replacementPolicy,
    waves,
    details,
  };
}

/** One step of a blue-green or canary rollout, as plan shows it. */
export type PlannedStepAction =
  /** BlueGreen: start the whole new set out of traffic; wait until every new instance is available. */
  | { kind: 'startNew' }
  /** BlueGreen: write the new set into the preview upstream (one reload per load balancer). */
  | { kind: 'preview'; upstream: string }
  /** BlueGreen: run hooks.prePromotion; a failure keeps traffic on the old set. */
  | { kind: 'prePromotion' }
  /** BlueGreen with autoPromote false: wait for `fleetroll promote`. */
  | { kind: 'awaitPromote' }
  /** BlueGreen: every upstream to the new set, one rewrite and one reload per load balancer. */
  | { kind: 'switch' }
  /** BlueGreen: the old set stays, out of traffic; `fleetroll undo` inside it is one reload. */
  | { kind: 'scaleDownDelay'; seconds: number }
  /** BlueGreen: drain and stop the old set. */
  | { kind: 'removeOld' }
  | { kind: 'setWeight'; weight: number; path: string }
  /** seconds null: until `fleetroll promote` (or `abort`). */
  | { kind: 'pause'; seconds: number | null; path: string }
  | { kind: 'analysis'; overrides: Record<string, unknown>; path: string };

export type PlannedStep = PlannedStepAction & {
  /** 1-based step number. */
  index: number;
  /** Instances alive after the step: old (stable) and new (canary) revision. */
  old: number;
  new: number;
  /** Instances the step starts, and drains and stops (of either revision). */
  started: number;
  stopped: number;
  /** Percent of requests the new revision serves after the step. */
  trafficNewPercent: number;
  /** Containers alive at the step's peak. */
  alive: number;
};

export interface BlueGreenPlan {
  type: 'BlueGreen';
  replicas: number;
  steps: PlannedStep[];
  /** [old, new] instance counts: the start, after the new set started, after the old one is gone. */
  waves: [number, number][];
  peakAlive: number;
}

export interface CanaryPlan {
  type: 'Canary';
  replicas: number;
  steps: PlannedStep[];
  /** The rolling update after the last step, from [stable, canaries] as that step left them. */
  rolling: Plan;
  peakAlive: number;
}

export type StrategyPlan = { type: 'RollingUpdate'; rolling: Plan } | { type: 'Recreate'; rolling: Plan } | BlueGreenPlan | CanaryPlan;

export interface PlanOptions {
  /** The fleet has hooks.prePromotion (BlueGreen runs it before the switch). */
  prePromotion?: boolean | undefined;
}

/** The plan of any strategy: rolling waves, or blue-green / canary steps. */
export function planStrategy(s: ResolvedStrategy, o: PlanOptions = {}): StrategyPlan {
  switch (s.type) {
    case 'BlueGreen':
      return planBlueGreen(s, o);
    case 'Canary':
      return planCanary(s);
    default:
      return { type: s.type, rolling: planRollout(s satisfies RollingStrategy) };
  }
}

/**
 * Blue-green: N new instances start while the N old ones serve alone (2N
 * alive, 100% old); [preview; prePromotion hook; wait for promote]; one
 * switch (100% new); the old set kept scaleDownDelaySeconds; then removed.
 */
export function planBlueGreen(s: BlueGreenStrategy, o: PlanOptions = {}): BlueGreenPlan {
  const n = s.replicas;
  const bg = s.blueGreen;
  if (n === 0) return { type: 'BlueGreen', replicas: 0, steps: [], waves: [[0, 0]], peakAlive: 0 };
  const steps: PlannedStep[] = [];
  const add = (a: PlannedStepAction, x: Omit<PlannedStep, keyof PlannedStepAction | 'index'>) =>
    steps.push({ index: steps.length + 1, ...a, ...x } as PlannedStep);
  const beside = { old: n, new: n, started: 0, stopped: 0, alive: 2 * n };
  // The engine's driver walks the same steps (core/strategySteps.ts).
  for (const kind of blueGreenSteps(s, o)) {
    if (kind === 'startNew') add({ kind }, { ...beside, started: n, trafficNewPercent: 0 });
    else if (kind === 'preview') add({ kind, upstream: bg.previewUpstream ?? '' }, { ...beside, trafficNewPercent: 0 });
    else if (kind === 'prePromotion' || kind === 'awaitPromote') add({ kind }, { ...beside, trafficNewPercent: 0 });
    else if (kind === 'switch') add({ kind }, { ...beside, trafficNewPercent: 100 });
    else if (kind === 'scaleDownDelay') add({ kind, seconds: bg.scaleDownDelaySeconds }, { ...beside, trafficNewPercent: 100 });
    else add({ kind }, { ...beside, old: 0, stopped: n, trafficNewPercent: 100 });
  }
  return {
    type: 'BlueGreen',
    replicas: n,
    steps,
    waves: [
      [n, 0],
      [n, n],
      [0, n],
    ],
    peakAlive: 2 * n,
  };
}

/**
 * Canary: the stable set keeps every replica while each step sets the
 * canary count its weight needs (canaryInstancesFor: a fixed canaryReplicas,
 * else ceil(weight × replicas), at least one from the first step on); pauses
 * and analyses hold it. Then a rolling update replaces the stable set,
 * planned by planRollout from where the last step left the fleet.
 */
export function planCanary(s: CanaryStrategy): CanaryPlan {
  const n = s.replicas;
  const rollingStrategy = finalRollingUpdate(s);
  if (n === 0) return { type: 'Canary', replicas: 0, steps: [], rolling: planRollout(rollingStrategy), peakAlive: 0 };
  const steps: PlannedStep[] = [];
  let canaries = 0;
  // The engine's canary driver walks the same schedule (core/strategySteps.ts).
  for (const { step, weight, instances: target } of canarySchedule(s)) {
    const action: PlannedStepAction = step.kind === 'pause' ? { kind: 'pause', seconds: step.seconds ?? null, path: step.path } : step;
    steps.push({
      index: steps.length + 1,
      ...action,
      old: n,
      new: target,
      started: Math.max(0, target - canaries),
      stopped: Math.max(0, canaries - target),
      trafficNewPercent: weight,
      alive: n + Math.max(canaries, target),
    } as PlannedStep);
    canaries = target;
  }
  const rolling = planRollout(rollingStrategy, { old: n, new: canaries });
  const peakAlive = Math.max(...steps.map((x) => x.alive), ...rolling.details.map((w) => w.peakAlive));
  return { type: 'Canary', replicas: n, steps, rolling, peakAlive };
}

export { placement } from './placement.js';
