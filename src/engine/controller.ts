/**
 * The rollout controller: an event loop that owns the fleet view and asks
 * core/decide.ts what may happen after every event. It never awaits a
 * wave: each instance's steps go on by themselves (lifecycle.ts), and every
 * event (a container started or exited, a probe answer, a reload in force,
 * a drain over, a stop done, a failure, an interrupt, a pause) re-runs
 * step() on the fleet as it is then. Like the Kubernetes deployment
 * controller, a terminating instance no longer counts as a replica
 * (replacementPolicy TerminationStarted), so its replacement starts without
 * waiting for its drain and stop; under TerminationComplete it counts until
 * its container is gone.
 *
 * The parts, each with one job, share a RolloutContext (context.ts):
 *   lifecycle.ts     start, terminate, stop, batches, routing after a reload
 *   availability.ts  probe answers, minReadySeconds, exits
 *   endings.ts       how a run stops and what it reports
 *   strategies/      what RollingUpdate, BlueGreen and Canary add (one driver each)
 */
import { decide } from '../core/decide.js';
import type { HostSlot } from '../core/placement.js';
import { RolloutFailedError } from '../errors.js';
import type { InstanceInfo } from '../ports.js';
import { Availability } from './availability.js';
import { RolloutContext, type ControllerDeps, type ControllerResult } from './context.js';
import { Endings } from './endings.js';
import type { FleetView } from './fleetView.js';
import { watchIdleDrains } from './idleDrain.js';
import type { Ending, Instance } from './instance.js';
import { Lifecycle } from './lifecycle.js';
import { Readiness } from './readiness.js';
import { driverFor, type StrategyDriver } from './strategies/index.js';
import { Traffic } from './traffic.js';

export type { ControllerDeps, ControllerResult, ControllerTiming } from './context.js';
export { hostFailure } from './endings.js';
export type { Instance, InService } from './instance.js';

export class Controller {
  private readonly ctx: RolloutContext;
  private readonly life: Lifecycle;
  private readonly availability: Availability;
  private readonly endings: Endings;
  private readonly driver: StrategyDriver;
  private scheduled = false;

  constructor(d: ControllerDeps) {
    const ctx = new RolloutContext(d, { schedule: () => this.schedule(), end: (e) => this.endings.end(e), fail: (err) => this.endings.fail(err) });
    this.ctx = ctx;
    this.life = new Lifecycle(ctx, () => this.driver);
    this.driver = driverFor(ctx, this.life);
    this.endings = new Endings(ctx, this.life, () => this.driver);
    this.availability = new Availability(ctx, this.life);
    ctx.traffic = new Traffic({
      service: d.fleet.service,
      balancers: d.balancers,
      clock: d.clock,
      emit: d.emit,
      journal: d.journal,
      coalesceMs: ctx.timing.coalesceMs,
      starts: () => this.life.starts(),
      desired: () => this.life.wanted(),
      applied: (_up, _down, changed) => this.life.reloaded(changed),
      failed: (err) => this.endings.fail(err),
      idle: () => this.schedule(),
      preview: this.driver.preview,
      force: this.driver.force,
      gone: (address) => {
        for (const i of ctx.view.values()) if (i.address === address) return stoppedServing(i);
        return false;
      },
    });
    d.inspect?.(this);
    ctx.readiness = new Readiness({
      prober: d.prober,
      clock: d.clock,
      periodMs: d.fleet.probes.readiness.periodMs,
      result: (w, ok, detail) => this.availability.probed(w.id, ok, detail),
    });
  }

  get reloads(): number {
    return this.ctx.traffic.reloads;
  }

  /** The fleet as the controller sees it now (tests check invariants on it after every event). */
  instances(): readonly Instance[] {
    return this.ctx.instances();
  }

  /**
   * Runs the rollout from the observed containers (probed once: a container
   * found ready has been serving and counts as available) to completion.
   */
  async run(found: readonly { info: InstanceInfo; ready: boolean }[]): Promise<ControllerResult> {
    const { ctx } = this;
    await ctx.traffic.load(ctx.d.recovering === true);
    const now = ctx.now();
    ctx.lastProgress = now;
    for (const { info, ready } of found) this.life.found(info, ready, now);
    this.replaceStuck();
    this.life.leaveAlone(ctx.d.leftAlone?.() ?? []);
    this.driver.begin();
    this.startWatchers();
    // nginx may list what it should not (a crash, a hand edit): bring it in line first.
    ctx.traffic.request();
    return new Promise<ControllerResult>((resolve, reject) => {
      this.endings.settleInto({ resolve, reject });
      this.schedule();
    });
  }

  /**
   * A heal's stuck instances (ControllerDeps.replace), if still unready:
   * terminated before the first decision, so that decision starts their
   * replacements under the fleet's limits like any other start. An unready
   * instance is not available: taking it away costs no availability, as
   * decide() terminates unavailable instances first.
   */
  private replaceStuck(): void {
    const { ctx } = this;
    for (const id of ctx.d.replace ?? []) {
      const inst = ctx.view.get(id);
      if (!inst || inst.revision !== ctx.revision || inst.phase !== 'unready') continue;
      ctx.emit({
        type: 'info',
        message: `replacing ${id} on ${inst.host}: ${inst.lastProbe} for progressDeadlineSeconds (${ctx.d.fleet.progressDeadlineSeconds} s)`,
      });
      ctx.d.journal('replace', 'end', { name: id });
      inst.leftUnready = undefined;
      this.life.terminate(id);
    }
  }

  /** Exits, the pause flag, the progress deadline and an interrupt, each on its own timer. */
  private startWatchers(): void {
    const { ctx } = this;
    const follow = ctx.d.containerEvents;
    ctx.every(
      ctx.timing.observeMs,
      () => this.availability.observe(),
      follow
        ? (look) =>
            follow((e) => {
              this.availability.event(e);
              if (this.availability.concerns(e)) look();
            })
        : undefined,
    );
    watchIdleDrains(ctx);
    const paused = ctx.d.paused;
    if (paused) {
      ctx.every(
        ctx.timing.pausePollMs,
        async () => {
          if (ctx.ending) return;
          if (await paused().catch(() => false)) this.end({ kind: 'paused' });
        },
        ctx.d.stateWrites,
      );
    }
    const deadline = () =>
      ctx.timer(Math.max(1, ctx.lastProgress + ctx.deadlineMs - ctx.now()), () => {
        this.schedule();
        deadline();
      });
    deadline();
    const signal = ctx.d.signal;
    if (signal) {
      const onAbort = () => this.end({ kind: 'interrupted' });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      ctx.onFinish(() => signal.removeEventListener('abort', onAbort));
    }
  }

  /** The fleet's hosts, less the room the containers a heal leaves alone take on each (maxInstances is a limit of the machine). */
  private hosts(): readonly HostSlot[] {
    const hosts = this.ctx.d.fleet.hosts;
    const others = this.ctx.d.leftAlone?.() ?? [];
    if (others.length === 0) return hosts;
    return hosts.map((h) =>
      h.maxInstances === undefined ? h : { name: h.name, maxInstances: h.maxInstances - others.filter((o) => o.host === h.name).length },
    );
  }

  private end(e: Ending): void {
    this.endings.end(e);
  }

  /** Decides once every event already queued has been applied. */
  private schedule(): void {
    if (this.scheduled || this.ctx.finished) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      try {
        this.step();
      } catch (err) {
        this.endings.fail(err);
      }
    });
  }

  /** One look at the fleet: deadline, hold, decide, apply, the strategy's own steps, complete. */
  private step(): void {
    const { ctx, driver } = this;
    if (ctx.finished) return;
    const now = ctx.now();
    // 1. The progress deadline (waiting by design is not a stall, nor is a
    // fleet whose new set is whole and which only waits for old instances to
    // finish stopping: like Kubernetes, scaling the old set down is progress,
    // and a stop has its own bound, terminationGracePeriodSeconds. A rollback
    // whose target was already in service once failed here at CI load, its
    // deadline passing while the failed instance stopped).
    if (driver.waiting() || onlyStopsLeft(ctx.view, ctx.revision, ctx.d.fleet.replicas)) ctx.progress();
    if (!ctx.ending && now - ctx.lastProgress >= ctx.deadlineMs) this.end({ kind: 'failed', error: this.endings.deadlineFailure() });
    // 2. What may not happen yet: everything while stopping, else what the strategy holds back.
    const hold = ctx.ending || ctx.settling ? 'all' : driver.hold();
    // 3. The one rolling decision.
    const d = decide(ctx.view, { revision: ctx.revision, replicas: ctx.d.fleet.replicas, strategy: driver.strategy(), now, hosts: this.hosts(), hold });
    // 4. Apply it.
    for (const id of d.stop) this.life.stop(id);
    if (d.terminate.length + d.start.length > 0) {
      ctx.waves++;
      ctx.emit({ type: 'wave', index: ctx.waves, start: d.start.length, stop: d.terminate });
      ctx.d.journal('wave', 'begin', { wave: ctx.waves, stop: d.terminate, start: d.start.length });
      for (const id of d.terminate) this.life.terminate(id);
      for (const host of d.start) this.life.start(host);
    }
    if (d.unplaced > 0 && ctx.view.count('draining') + ctx.view.count('stopping') + ctx.view.count('starting') === 0) {
      this.end({
        kind: 'failed',
        error: new RolloutFailedError('no host has room for another instance (every host is at maxInstances)', 'raise maxInstances or add a host'),
      });
    }
    if (d.wakeAt !== undefined) ctx.wakeAt(d.wakeAt);
    if (ctx.ending) {
      this.endings.maybeEnd();
      return;
    }
    // 5. The strategy's own steps (postWave hooks, the switch, canary steps).
    driver.reconcile({ newAvailable: d.counts.current.available, oldAlive: d.counts.old.reduce((a, r) => a + r.total, 0) });
    // 6. Complete once the fleet is and nothing of the strategy's is in flight.
    if ((d.complete || (ctx.d.heal === true && healDone(ctx.view.values(), ctx.revision, ctx.d.fleet.replicas))) && driver.settled())
      void this.endings.finishOk();
  }
}

/** An instance a heal found unready and does not wait for (Instance.leftUnready): out of nginx at the heal's end, the watch's from then on. */
export function leftOut(i: Instance): boolean {
  return i.leftUnready === true && i.phase === 'unready';
}

/**
 * A heal is done once the fleet is whole but for instances it found unready:
 * `replicas` instances of the revision, each available or left out, nothing
 * else alive. finishOk then writes nginx (the left-out ones absent) and ends
 * once that write is in force, so the lock is never released on a change
 * half made.
 */
function healDone(instances: Iterable<Instance>, revision: string, replicas: number): boolean {
  let n = 0;
  for (const i of instances) {
    if (i.revision !== revision || (i.phase !== 'available' && !leftOut(i))) return false;
    n++;
  }
  return n === replicas;
}

/**
 * The new revision's instances are all available, and everything else is on
 * its way out. Asked on every event: read from the view's tallies, as a pass
 * over a 10,000-instance fleet each time made simulate several times slower.
 */
function onlyStopsLeft(view: FleetView<Instance>, revision: string, replicas: number): boolean {
  const leaving = view.terminatingCount();
  const available = view.available(revision);
  return leaving > 0 && available >= replicas && available === view.size - leaving;
}

/**
 * An instance that stopped serving by itself: it exited, crashed, froze or
 * moved (failed, Availability.lost), or it was ready and its readiness probe
 * now fails (unready: a crashing app's probe is often refused before Docker's
 * event arrives). Its takedown goes to nginx at once with no nginx -t before
 * the reload; a planned drain (draining, stopping) keeps the test.
 */
export function stoppedServing(i: Pick<Instance, 'phase'>): boolean {
  return i.phase === 'failed' || i.phase === 'unready';
}
