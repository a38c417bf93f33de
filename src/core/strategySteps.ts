/**
 * The steps of blue-green and canary, pure: what `fleetroll plan` shows and
 * what the engine's drivers (engine/strategies/) walk through are the same
 * list, computed here once.
 *
 * PURE.
 */
import { canaryInstancesFor, type BlueGreenStrategy, type CanaryStep, type CanaryStrategy } from './strategy.js';

/** One step of a blue-green rollout, in order. */
export type BlueGreenStepKind = 'startNew' | 'preview' | 'prePromotion' | 'awaitPromote' | 'switch' | 'scaleDownDelay' | 'removeOld';

export interface BlueGreenOptions {
  /** The fleet has hooks.prePromotion (run before the switch). */
  prePromotion?: boolean | undefined;
  /** Nobody can promote (simulate, or no promote flag to read): autoPromote false switches anyway. */
  cannotPromote?: boolean | undefined;
}

/**
 * Blue-green: the whole new set starts out of traffic; [it goes into the
 * preview upstream; prePromotion runs; `fleetroll promote` is awaited]; one
 * switch; the old set is kept scaleDownDelaySeconds; then removed.
 */
export function blueGreenSteps(s: BlueGreenStrategy, o: BlueGreenOptions = {}): BlueGreenStepKind[] {
  const bg = s.blueGreen;
  return [
    'startNew',
    ...(bg.previewUpstream !== undefined ? (['preview'] as const) : []),
    ...(o.prePromotion ? (['prePromotion'] as const) : []),
    ...(!bg.autoPromote && !o.cannotPromote ? (['awaitPromote'] as const) : []),
    'switch',
    ...(bg.scaleDownDelaySeconds > 0 ? (['scaleDownDelay'] as const) : []),
    'removeOld',
  ];
}

/** During one canary step: the weight in force and the canary instances it needs. */
export interface CanaryStepTarget {
  step: CanaryStep;
  weight: number;
  instances: number;
}

/**
 * Each canary step with the weight it holds (a setWeight sets it; a pause or
 * an analysis keeps the last one, 0 before any) and the canary count that
 * weight needs (canaryInstancesFor).
 */
export function canarySchedule(s: CanaryStrategy): CanaryStepTarget[] {
  let weight = 0;
  return s.canary.steps.map((step) => {
    if (step.kind === 'setWeight') weight = step.weight;
    return { step, weight, instances: canaryInstancesFor(weight, s.replicas, s.canary.canaryReplicas) };
  });
}
