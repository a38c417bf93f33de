/** The driver for a fleet's strategy, and its traits: the one place that chooses by strategy type. */
import type { RolloutContext } from '../context.js';
import type { Lifecycle } from '../lifecycle.js';
import { BlueGreenDriver } from './blueGreen.js';
import { CanaryDriver } from './canary.js';
import type { StrategyDriver } from './driver.js';
import { RollingDriver } from './rolling.js';

export type { StrategyDriver, WantedUpstream } from './driver.js';
export { strategyTraits, type StrategyTraits } from './traits.js';

export function driverFor(ctx: RolloutContext, life: Lifecycle): StrategyDriver {
  const s = ctx.d.fleet.strategy;
  switch (s.type) {
    case 'BlueGreen':
      return new BlueGreenDriver(ctx, life, s);
    case 'Canary':
      return new CanaryDriver(ctx, life, s);
    default:
      return new RollingDriver(ctx, life);
  }
}
