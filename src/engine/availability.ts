/**
 * Readiness in one place: what a probe answer means for an instance (ready,
 * unready again), the minReadySeconds timer that makes a ready instance
 * available, Docker's events for the fleet's containers, and the periodic
 * look at which containers exited or came back (the safety net for an event
 * missed; probes only watch instances that are not yet available). Phases
 * move through the lifecycle.
 *
 * The monitor window, as Docker Swarm's update monitor: a new instance that
 * exits within monitorSeconds of first becoming ready (default
 * minReadySeconds, at least 5 s) has crashed. It never goes back into
 * traffic in this rollout, even when its engine restarts it: its restart
 * policy is switched off and it is stopped. Up to `maxFailures` of them are
 * replaced; one more fails the rollout at once, naming the instance, its exit
 * code and its last log lines. Progress, for progressDeadlineSeconds, is an
 * instance ready for the first time or available, never a re-ready after a
 * crash: a crash loop does not keep a rollout alive.
 */
import { isTerminating } from '../core/decide.js';
import { RolloutFailedError } from '../errors.js';
import type { ContainerEvent, InstanceInfo } from '../ports.js';
import type { RolloutContext } from './context.js';
import { faultPoint } from './faults.js';
import type { Instance } from './instance.js';
import type { Lifecycle } from './lifecycle.js';

/** How many last log lines a crash report shows. */
const LOG_LINES = 5;

export class Availability {
  /** New instances that crashed in their monitor window so far. */
  private crashes = 0;
  readonly monitorMs: number;

  constructor(
    private readonly ctx: RolloutContext,
    private readonly life: Lifecycle,
  ) {
    const f = ctx.d.fleet;
    this.monitorMs = (f.monitorSeconds ?? Math.max(f.minReadySeconds, 5)) * 1000;
  }

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
      // Ready again after an exit is not progress: a crash loop must not hold off the progress deadline.
      if (inst.firstReadyAt === undefined) {
        inst.firstReadyAt = now;
        ctx.progress();
      }
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

  /**
   * One of Docker's events for a container of the fleet. An exit (die, oom,
   * destroy) is acted on at once, with the exit code the event carries; any
   * other event that can change what is in service (a pause, a stop, a
   * network leaving, a restart) makes the caller look (observe) at once.
   */
  event(e: ContainerEvent): void {
    const { ctx } = this;
    if (ctx.finished) return;
    const inst = this.byDockerId(e.id);
    if (!inst || inst.phase === 'starting' || inst.phase === 'stopping') return;
    if (e.action !== 'die' && e.action !== 'oom' && e.action !== 'destroy') return;
    if (inst.phase === 'failed' && !(inst.revision === ctx.revision && this.inWindow(inst))) return;
    const how =
      e.action === 'destroy'
        ? 'container removed by someone else'
        : `container exited${e.exitCode !== undefined ? `, exit code ${e.exitCode}` : ''}${e.action === 'oom' ? ' (out of memory)' : ''}`;
    this.lost(inst, how, e.action !== 'destroy');
    ctx.traffic.request();
    ctx.schedule();
  }

  /** Whether an event may change what serves, so that a look is due: not one of the rollout's own stops. */
  concerns(e: ContainerEvent): boolean {
    const inst = this.byDockerId(e.id);
    return inst === undefined || !isTerminating(inst.phase);
  }

  private byDockerId(id: string): Instance | undefined {
    for (const inst of this.ctx.view.values()) if (inst.dockerId === id) return inst;
    return undefined;
  }

  /** Whether a new instance is still in its monitor window: it became ready no longer than monitorSeconds ago. */
  private inWindow(inst: Instance): boolean {
    return inst.firstReadyAt !== undefined && inst.crashed === undefined && this.ctx.now() - inst.firstReadyAt <= this.monitorMs;
  }

  /** The container is not serving any more (`how`: what Docker says); `exited`: it ended, as opposed to being paused or moved. */
  private lost(inst: Instance, how: string, exited: boolean): void {
    const { ctx } = this;
    inst.lastProbe = how;
    ctx.readiness.unwatch(inst.id);
    inst.readySince = undefined;
    if (isTerminating(inst.phase)) {
      // It died while draining: nothing left to drain.
      inst.before = 'failed';
      inst.routed = ctx.traffic.routes(inst.address);
      if (inst.stopAt === undefined && !inst.routed) inst.stopAt = ctx.now();
      return;
    }
    const crashed = exited && inst.revision === ctx.revision && this.inWindow(inst);
    inst.keptInTraffic = undefined;
    if (inst.phase !== 'failed') this.life.setPhase(inst, 'failed');
    ctx.emit({ type: 'info', message: `${inst.id} on ${inst.host}: ${how}` });
    if (crashed) this.crashed(inst, how);
  }

  /**
   * A new instance exited in its monitor window: out of traffic for good,
   * its restart policy off. Within maxFailures it is removed and replaced;
   * past it, it is stopped (kept for `docker logs`) and the rollout fails.
   */
  private crashed(inst: Instance, how: string): void {
    const { ctx } = this;
    const d = ctx.d;
    const after = ((ctx.now() - (inst.firstReadyAt ?? ctx.now())) / 1000).toFixed(1);
    const monitor = this.monitorMs / 1000;
    inst.crashed = `${how}, ${after} s after it became ready, within its monitor window (${monitor} s)`;
    this.crashes++;
    const allowed = d.fleet.maxFailures ?? 0;
    d.journal('crashed', 'end', { name: inst.id });
    ctx.emit({ type: 'info', message: `${inst.id} on ${inst.host} crashed: ${inst.crashed}; it stays out of traffic for this rollout` });
    const rt = d.runtimes.get(inst.host);
    const dockerId = inst.dockerId;
    if (!rt || dockerId === undefined) return;
    if (this.crashes <= allowed) {
      ctx.emit({ type: 'info', message: `replacing ${inst.id} (${this.crashes} of maxFailures ${allowed})` });
      void Promise.resolve(rt.disableRestart?.(dockerId))
        .catch(() => {})
        .then(() => {
          this.life.terminate(inst.id);
          ctx.schedule();
        });
      return;
    }
    // Stopped at once (SIGKILL): it is in nobody's traffic, and a graceful stop of what its engine restarted would only delay the report.
    void d.work
      .run(inst.host, async () => {
        await rt.disableRestart?.(dockerId).catch(() => {});
        await rt.stop(dockerId, 0).catch(() => {});
        return (await rt.logs(dockerId, LOG_LINES).catch(() => '')).trim();
      })
      .then(
        (logs) => this.failCrashed(inst, logs),
        () => this.failCrashed(inst, ''),
      );
  }

  private failCrashed(inst: Instance, logs: string): void {
    const { ctx } = this;
    const f = ctx.d.fleet;
    const allowed = f.maxFailures ?? 0;
    const others = ctx.instances().filter((i) => i.revision !== ctx.revision && !isTerminating(i.phase) && i.phase !== 'failed').length;
    ctx.emit({ type: 'failed', reason: 'crashed in its monitor window' });
    ctx.fail(
      new RolloutFailedError(
        `rollout of ${f.service} to ${f.version} failed: ${inst.id} on ${inst.host} ${inst.crashed ?? 'crashed'}` +
          `${allowed > 0 ? `, the ${this.crashes}th such crash (maxFailures ${allowed})` : ''}. ` +
          `It was taken out of traffic at once, its restart policy switched off and it is stopped; ${others} instance(s) of the old revision keep serving.` +
          (logs ? `\n  last log lines of ${inst.id}:\n    ${logs.split('\n').slice(-LOG_LINES).join('\n    ')}` : ''),
        `docker logs ${inst.id} on ${inst.host} says why; fix the image and deploy again (the rollout continues from here), or deploy the previous image to go back`,
        { crashed: inst.id },
      ),
    );
  }

  /** Notices containers that exited, vanished, froze (paused) or left their address, and failed ones running again. */
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
      // Running at another address (its network left and joined again) is serving nowhere nginx knows: lost, then found again below.
      const moved = info?.running === true && inst.phase !== 'failed' && inst.address !== undefined && info.address !== inst.address;
      if (info?.running && !moved) {
        // Running again (restarted by its engine or by hand): probe it like a new one. Never one that crashed in its monitor window.
        if (inst.phase === 'failed' && !inst.stopFailed && inst.crashed === undefined && (info.address !== undefined || ctx.d.fleet.port === undefined)) {
          inst.lastExit = inst.lastProbe;
          inst.address = info.address;
          this.life.setPhase(inst, 'unready');
          ctx.readiness.watch(inst);
          changed = true;
        }
        continue;
      }
      if (inst.phase === 'failed' && !moved) {
        // An exit the events missed while Docker restarts it still counts against the window.
        if (info && !info.running && info.state !== 'paused' && inst.revision === ctx.revision && this.inWindow(inst)) {
          this.crashed(inst, `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}`);
          changed = true;
        }
        continue;
      }
      const how = moved
        ? `container left its address ${inst.address} (now ${info?.address ?? 'none'})`
        : info
          ? `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}`
          : 'container removed by someone else';
      this.lost(inst, how, !moved && info?.state !== 'paused');
      changed = true;
    }
    if (changed) {
      ctx.traffic.request();
      ctx.schedule();
    }
  }
}
