/**
 * Readiness in one place: what a probe answer means for an instance (ready,
 * unready again), the minReadySeconds timer that makes a ready instance
 * available, and the periodic look at which containers exited or came back
 * (probes only watch instances that are not yet available). Phases move
 * through the lifecycle.
 */
import { isTerminating } from '../core/decide.js';
import type { InstanceInfo } from '../ports.js';
import type { RolloutContext } from './context.js';
import { faultPoint } from './faults.js';
import type { Instance } from './instance.js';
import type { Lifecycle } from './lifecycle.js';

export class Availability {
  constructor(
    private readonly ctx: RolloutContext,
    private readonly life: Lifecycle,
  ) {}

  /** A probe answered for the instance named `id`. */
  probed(id: string, ok: boolean, detail: string): void {
    const { ctx } = this;
    const inst = ctx.view.get(id);
    if (!inst || isTerminating(inst.phase) || inst.phase === 'failed') return;
    // A probe failing after a restart says why it is being probed again.
    inst.lastProbe = !ok && inst.lastExit !== undefined ? `${detail} (after ${inst.lastExit})` : detail;
    if (!ok && inst.phase === 'unready') faultPoint('waiting-for-readiness');
    const now = ctx.now();
    if (ok && inst.phase === 'unready') {
      this.life.setPhase(inst, 'ready');
      inst.keptInTraffic = undefined;
      inst.readySince = now;
      ctx.emit({ type: 'ready', name: inst.id });
      ctx.d.journal('ready', 'end', { name: inst.id });
      ctx.progress();
      if (ctx.minReadyMs <= 0) this.becomeAvailable(inst);
      else {
        const since = inst.readySince;
        ctx.timer(ctx.minReadyMs, () => {
          if (inst.phase === 'ready' && inst.readySince === since) {
            this.becomeAvailable(inst);
            ctx.schedule();
          }
        });
      }
      ctx.traffic.request();
      this.life.holdForBatch(inst);
      ctx.schedule();
    } else if (!ok && inst.phase === 'ready') {
      this.life.setPhase(inst, 'unready');
      inst.readySince = undefined;
      ctx.traffic.request();
      ctx.schedule();
    }
  }

  private becomeAvailable(inst: Instance): void {
    this.life.setPhase(inst, 'available');
    // Available instances are not probed again: like Kubernetes, they count until something says otherwise (an exit).
    this.ctx.readiness.unwatch(inst.id);
    this.ctx.emit({ type: 'available', name: inst.id });
    this.ctx.progress();
  }

  /** Notices containers that exited or vanished, and failed ones running again. */
  async observe(): Promise<void> {
    const { ctx } = this;
    // A listing asked before a start returned may still show that container as "created": only
    // instances known running before the question are judged by its answer.
    const askedAt = ctx.now();
    let infos: InstanceInfo[];
    try {
      infos = await ctx.d.list();
    } catch (err) {
      ctx.fail(err);
      return;
    }
    const byName = new Map(infos.map((i) => [i.name, i]));
    let changed = false;
    for (const inst of ctx.view.values()) {
      if (inst.phase === 'starting' || inst.phase === 'stopping' || inst.dockerId === undefined) continue;
      if (inst.runningSince === undefined || inst.runningSince >= askedAt) continue;
      const info = byName.get(inst.id);
      if (info?.running) {
        // Running again (restarted by its engine or by hand): probe it like a new one.
        if (inst.phase === 'failed' && !inst.stopFailed && (info.address !== undefined || ctx.d.fleet.port === undefined)) {
          inst.lastExit = inst.lastProbe;
          inst.address = info.address;
          this.life.setPhase(inst, 'unready');
          ctx.readiness.watch(inst);
          changed = true;
        }
        continue;
      }
      if (inst.phase === 'failed') continue;
      inst.lastProbe = info
        ? `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}`
        : 'container removed by someone else';
      ctx.readiness.unwatch(inst.id);
      inst.readySince = undefined;
      if (isTerminating(inst.phase)) {
        // It died while draining: nothing left to drain.
        inst.before = 'failed';
        inst.routed = ctx.traffic.routes(inst.address);
        if (inst.stopAt === undefined && !inst.routed) inst.stopAt = ctx.now();
      } else {
        inst.keptInTraffic = undefined;
        this.life.setPhase(inst, 'failed');
      }
      ctx.emit({ type: 'info', message: `${inst.id} on ${inst.host}: ${inst.lastProbe}` });
      changed = true;
    }
    if (changed) {
      ctx.traffic.request();
      ctx.schedule();
    }
  }
}
