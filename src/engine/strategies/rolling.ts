/**
 * RollingUpdate and Recreate: the rolling decision does the work; the driver
 * holds the fleet at each postWave boundary (the plan's waves) until the
 * hook passed, and runs the hook once the wave is in service in every nginx.
 */
import type { Hold } from '../../core/decide.js';
import { planRollout } from '../../core/plan.js';
import type { RolloutContext } from '../context.js';
import type { Lifecycle } from '../lifecycle.js';
import { BaseDriver } from './base.js';
import type { Reconcile } from './driver.js';

export class RollingDriver extends BaseDriver {
  /** postWave boundaries: [old, new] after each of plan's waves, and how many have passed. */
  private readonly boundaries: [number, number][];
  private passed = 0;
  private hookRunning = false;

  constructor(ctx: RolloutContext, life: Lifecycle) {
    super(ctx, life);
    this.boundaries = ctx.d.postWave ? planRollout(ctx.d.fleet.strategy).waves.slice(1) : [];
  }

  override begin(): void {
    // Boundaries the fleet is already past (a rollout continued) do not run the hook again.
    const newAvailable = this.ctx.instances().filter((i) => i.revision === this.ctx.revision && i.phase === 'available').length;
    while (this.passed < this.boundaries.length && (this.boundaries[this.passed]?.[1] ?? 0) <= newAvailable && newAvailable > 0) this.passed++;
  }

  hold(): Hold | undefined {
    const b = this.boundaries[this.passed];
    return b ? { minOld: b[0], maxNew: b[1] } : undefined;
  }

  override settled(): boolean {
    return !this.hookRunning && this.passed >= this.boundaries.length;
  }

  override inFlight(): boolean {
    return this.hookRunning;
  }

  reconcile({ newAvailable, oldAlive }: Reconcile): void {
    const { ctx } = this;
    const b = this.boundaries[this.passed];
    const run = ctx.d.postWave;
    if (!b || !run || this.hookRunning || newAvailable < b[1] || oldAlive > b[0]) return;
    // The wave is in service once nginx routes to all of it, not when it became available: the
    // reload that enables it may still be on its way (coalescing, or a slow load balancer), and
    // the gate after the first wave would measure traffic the new instances never got.
    const inService = ctx.inService(
      ctx.instances().filter((i) => i.revision === ctx.revision && i.phase === 'available'),
      (n) => `the reload that put the wave's ${n} new instance(s) into every load balancer was in force`,
    );
    // Not yet: the reload that enables them was requested when they became available; its confirmation schedules the next look.
    if (!inService) return;
    this.hookRunning = true;
    const index = this.passed + 1;
    run(index, ctx.instances(), inService).then(
      () => {
        this.hookRunning = false;
        this.passed++;
        ctx.schedule();
      },
      (err: unknown) => {
        this.hookRunning = false;
        ctx.end({ kind: 'failed', error: err });
      },
    );
  }
}
