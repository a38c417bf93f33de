/**
 * Endings in one place. Stopping cleanly (interrupt, pause, failure, a
 * strategy's own: a switch back, a canary abort): nothing new is started or
 * terminated; instances still draining are put back in service where that
 * keeps the fleet within its counts; what is in flight (starts, stops, a
 * reload) finishes; nginx gets a last write; then the run ends with the
 * reason. A success ends the same way once the last write is in force.
 */
import type { Fleet } from '../config/load.js';
import { holdsTerminating, isTerminating } from '../core/decide.js';
import { FleetrollError, InterruptedError, PausedError, RolloutFailedError } from '../errors.js';
import type { ControllerResult, RolloutContext } from './context.js';
import type { Ending } from './instance.js';
import type { Lifecycle } from './lifecycle.js';
import type { StrategyDriver } from './strategies/driver.js';

export class Endings {
  private done!: { resolve: (r: ControllerResult) => void; reject: (e: unknown) => void };

  constructor(
    private readonly ctx: RolloutContext,
    private readonly life: Lifecycle,
    private readonly driver: () => StrategyDriver,
  ) {}

  /** Where the run's outcome goes. */
  settleInto(done: { resolve: (r: ControllerResult) => void; reject: (e: unknown) => void }): void {
    this.done = done;
  }

  fail(err: unknown): void {
    this.end({ kind: 'failed', error: hostFailure(this.ctx.d.fleet, err) });
  }

  /** Stop making progress; undo drains not yet stopped; end once what is in flight has landed. */
  end(e: Ending): void {
    const { ctx } = this;
    if (ctx.finished) return;
    if (!ctx.ending) {
      ctx.ending = e;
      // Undo drains where that keeps within replicas + maxSurge; under
      // TerminationStarted a drained instance's replacement may already run,
      // and then its drain is finished instead (it is stopped, not left down).
      const s = ctx.d.fleet.strategy;
      let counted = ctx.instances().filter((i) => !isTerminating(i.phase) && !i.stopFailed).length;
      const now = ctx.now();
      for (const inst of ctx.view.values()) {
        if (inst.phase !== 'draining') continue;
        if (this.driver().keepsDraining(inst, e, now)) continue;
        // With nginx refusing every change, nothing can be drained: what is still routed goes back whatever the count.
        if (!holdsTerminating(s) && counted >= s.maxTotal && !(ctx.traffic.broken && ctx.traffic.routes(inst.address))) continue;
        counted++;
        this.life.putBack(inst, true);
      }
      ctx.traffic.release();
      ctx.traffic.request();
    } else if (e.kind === 'failed' && ctx.ending.kind !== 'failed') {
      ctx.ending = e;
    }
    ctx.schedule();
  }

  /** Ends the run once nothing is in flight and nginx is idle. */
  maybeEnd(): void {
    const { ctx } = this;
    const ending = ctx.ending!;
    const busy = ctx.view.count('starting') + ctx.view.count('draining') + ctx.view.count('stopping') > 0 || this.awaitsFirstReadiness(ending);
    if (busy || !ctx.traffic.idle || this.driver().inFlight() || ctx.settling) return;
    ctx.settling = true;
    // nginx refused the config: a last write would be refused too.
    const trafficBroken = ending.kind === 'failed' && ending.error instanceof RolloutFailedError && ending.error.details.nginxTestFailed === true;
    const settle = trafficBroken ? Promise.resolve() : ctx.traffic.settle();
    settle.then(
      () => this.close(ending),
      (err: unknown) => this.close(ending.kind === 'failed' ? ending : { kind: 'failed', error: err }),
    );
  }

  /**
   * Asked to stop (Ctrl-C, pause), a new instance already started but not yet
   * ready is part of the wave in flight: it is given until the progress
   * deadline to become ready and go into nginx, so that the run does not end
   * with a container that serves nowhere (the deadline timer wakes the run
   * then). A failure ends without waiting.
   */
  private awaitsFirstReadiness(ending: Ending): boolean {
    const { ctx } = this;
    if (ending.kind !== 'interrupted' && ending.kind !== 'paused') return false;
    if (ctx.now() >= ctx.lastProgress + ctx.deadlineMs) return false;
    return ctx.instances().some((i) => i.revision === ctx.revision && i.phase === 'unready' && i.firstReadyAt === undefined);
  }

  private close(ending: Ending): void {
    const { ctx } = this;
    ctx.shutdown();
    const all = ctx.instances();
    const fresh = all.filter((i) => i.revision === ctx.revision).length;
    const inService = all.filter((i) => i.phase === 'ready' || i.phase === 'available').length;
    const where = `${all.length - fresh} old and ${fresh} new instance(s), ${inService} in service, none left marked down`;
    const own = this.driver().closing(ending, where);
    if (own !== undefined) this.done.reject(own);
    else if (ending.kind === 'paused') {
      ctx.emit({ type: 'failed', reason: 'paused' });
      ctx.d.journal('paused', 'end', { waves: ctx.waves });
      this.done.reject(new PausedError(`paused after ${ctx.waves} wave(s) (fleetroll pause): ${where}`));
    } else if (ending.kind === 'interrupted') {
      ctx.emit({ type: 'failed', reason: 'interrupted' });
      ctx.d.journal('interrupted', 'end', { waves: ctx.waves });
      this.done.reject(
        new InterruptedError(
          `interrupted after ${ctx.waves} wave(s): the fleet is consistent, ${where}`,
          'run the same deploy again to continue from here (or deploy the previous image to go back)',
        ),
      );
    } else if (ending.kind === 'failed') {
      this.done.reject(ending.error);
    } else {
      this.done.reject(new RolloutFailedError(`the rollout ended (${ending.kind}) with no strategy to report it: ${where}`, 'report this as a bug'));
    }
  }

  /** The fleet is complete: once the last write is in force, the run succeeds. */
  async finishOk(): Promise<void> {
    const { ctx } = this;
    if (ctx.settling || ctx.finished) return;
    ctx.settling = true;
    try {
      await ctx.traffic.settle();
    } catch (err) {
      ctx.settling = false;
      this.fail(err);
      return;
    }
    if (ctx.ending) {
      // Something failed while the last write went out.
      ctx.settling = false;
      ctx.schedule();
      return;
    }
    ctx.shutdown();
    this.done.resolve({ instances: ctx.instances(), waves: ctx.waves, reloads: ctx.traffic.reloads, ...this.driver().result() });
  }

  /** progressDeadlineSeconds passed with no progress: what never became available, and why. */
  deadlineFailure(): RolloutFailedError {
    const { ctx } = this;
    const fleet = ctx.d.fleet;
    const all = ctx.instances();
    const stuck = all.filter((i) => i.revision === ctx.revision && i.phase !== 'available');
    const lines = stuck.map((i) => `${i.id} on ${i.host}: ${i.lastProbe}`);
    const old = all.filter((i) => i.revision !== ctx.revision);
    const serving = all.filter(
      (i) => i.phase === 'ready' || i.phase === 'available' || (i.phase === 'draining' && (i.before === 'ready' || i.before === 'available')),
    ).length;
    ctx.emit({ type: 'failed', reason: 'progress deadline exceeded' });
    return new RolloutFailedError(
      `rollout of ${fleet.service} to ${fleet.version} made no progress for ${fleet.progressDeadlineSeconds} s (progressDeadlineSeconds) and is marked failed. ` +
        `The fleet is left as it is: ${serving} instance(s) in service, ${old.length} of the old revision.\n` +
        `  instances that never became available:\n    ${lines.join('\n    ') || '(none started)'}`,
      'fix the image and deploy again (the rollout continues from here), or deploy the previous image to go back',
      { stuck: stuck.map((i) => i.id) },
    );
  }
}

/** A host or nginx that fails mid-rollout (unreachable engine, refused call) fails the rollout like a deadline does, so onFailure applies. */
export function hostFailure(fleet: Pick<Fleet, 'service' | 'version'>, err: unknown): unknown {
  if (
    err instanceof FleetrollError &&
    !(err instanceof RolloutFailedError) &&
    !(err instanceof InterruptedError) &&
    !(err instanceof PausedError) &&
    err.exitCode === 1
  ) {
    return new RolloutFailedError(
      `rollout of ${fleet.service} to ${fleet.version} stopped: ${err.message}`,
      'the instances on the other hosts keep serving; fix the host and deploy again to continue',
      { code: err.code },
    );
  }
  return err;
}
