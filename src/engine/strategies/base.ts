/**
 * What a driver does when it has nothing of its own to add: the rolling
 * decision alone, nginx listing every ready instance, drains of
 * drainSeconds. RollingUpdate and Recreate add only their postWave hooks;
 * BlueGreen and Canary override what they change.
 */
import type { Hold } from '../../core/decide.js';
import type { ResolvedStrategy } from '../../core/strategy.js';
import type { ControllerResult, RolloutContext } from '../context.js';
import type { Ending, Instance } from '../instance.js';
import type { Lifecycle } from '../lifecycle.js';
import type { UpstreamList } from '../upstreamList.js';
import type { Reconcile, StrategyDriver, WantedUpstream } from './driver.js';

export abstract class BaseDriver implements StrategyDriver {
  constructor(
    protected readonly ctx: RolloutContext,
    protected readonly life: Lifecycle,
  ) {}

  strategy(): ResolvedStrategy {
    return this.ctx.d.fleet.strategy;
  }
  abstract hold(): Hold | undefined;
  begin(): void {}
  waiting(): boolean {
    return false;
  }
  abstract reconcile(r: Reconcile): void;
  settled(): boolean {
    return true;
  }
  inFlight(): boolean {
    return false;
  }
  hidesNew(): boolean {
    return false;
  }
  wholeUpstream(): boolean {
    return false;
  }
  upstream(list: UpstreamList): WantedUpstream {
    return { servers: list };
  }
  reloading(_now: number): void {}
  reloaded(_now: number): void {}
  drainMsFor(_inst: Instance): number {
    return this.ctx.drainMs;
  }
  drained(names: string[]): void {
    this.ctx.emit({ type: 'draining', names, seconds: this.ctx.d.fleet.drainSeconds });
  }
  keepsDraining(_inst: Instance, _e: Ending, _now: number): boolean {
    return false;
  }
  closing(_e: Ending, _where: string): unknown {
    return undefined;
  }
  result(): Partial<ControllerResult> {
    return {};
  }
}
