/**
 * What the parts of the engine around the controller need to know of a
 * strategy before its driver exists: where an `analysis:` block gates the
 * rollout, and whether every upstream file carries a forced route. Asked
 * here so rollout.ts and preflight.ts never name a strategy type.
 */
import type { ResolvedStrategy } from '../../core/strategy.js';
import type { ForceKey } from '../../core/upstream.js';

export interface StrategyTraits {
  /**
   * Where the fleet's `analysis:` block is judged: after the blue-green
   * switch, on the first wave's new instances (a rolling update's free
   * canary), in the canary's own analysis steps, or nowhere (Recreate).
   */
  analysisGate: 'afterSwitch' | 'firstWave' | 'canarySteps' | 'none';
  /** The header or cookie that forces a side (canary.force): nginx.conf must proxy to its route variable. */
  forcedRoute: ForceKey | undefined;
}

export function strategyTraits(s: ResolvedStrategy): StrategyTraits {
  switch (s.type) {
    case 'BlueGreen':
      return { analysisGate: 'afterSwitch', forcedRoute: undefined };
    case 'Canary':
      return { analysisGate: 'canarySteps', forcedRoute: s.canary.force };
    case 'RollingUpdate':
      return { analysisGate: 'firstWave', forcedRoute: undefined };
    case 'Recreate':
      return { analysisGate: 'none', forcedRoute: undefined };
  }
}
