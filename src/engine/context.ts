/**
 * What every part of a running rollout shares: the deps it was given, the
 * fleet view, nginx (Traffic), the clock and its timers, and how the run is
 * ending. The loop (controller.ts) owns one RolloutContext; the lifecycle,
 * readiness, endings and the strategy drivers each get it, so none of them
 * reaches into another's fields.
 */
import type { Fleet } from '../config/load.js';
import { isTerminating } from '../core/decide.js';
import type { CanaryStep } from '../core/strategy.js';
import type { Clock, ContainerEvent, InstanceInfo, Journal, Prober, Runtime } from '../ports.js';
import type { EventSink, RolloutEvent } from './events.js';
import { FleetView } from './fleetView.js';
import type { HostWork } from './hostWork.js';
import type { Ending, Instance, InService } from './instance.js';
import type { Readiness } from './readiness.js';
import type { LoadBalancer, Traffic } from './traffic.js';

export interface ControllerDeps {
  fleet: Fleet;
  revision: string;
  runtimes: ReadonlyMap<string, Runtime>;
  balancers: readonly LoadBalancer[];
  prober: Prober;
  clock: Clock;
  emit: EventSink;
  journal: Journal;
  work: HostWork;
  nameSuffix: () => string;
  changeCause?: string | undefined;
  signal?: AbortSignal | undefined;
  /**
   * Optional: calls the listener soon after the fleet state is written by
   * anyone (ports.ts StateStore.watch); returns a function that stops it. The
   * polls for pause, switch-back, promote and abort then look at once: undo
   * in blue-green's delay is on the path to users back on the old set.
   */
  stateWrites?: ((listener: () => void) => () => void) | undefined;
  /** Asked every pausePollMs: true stops the rollout cleanly (exit 4). */
  paused?: (() => Promise<boolean>) | undefined;
  /**
   * Optional: follows Docker's events for the fleet's containers (engine/followEvents.ts);
   * returns the closer. An exit is acted on at once, anything else that can
   * change what serves makes the controller look at once; the periodic look
   * stays, as the safety net for an event missed.
   */
  containerEvents?: ((listener: (e: ContainerEvent) => void) => () => void) | undefined;
  /** Every container of the fleet on every host (and adopted ones), for the periodic look at which exited. */
  list: () => Promise<InstanceInfo[]>;
  /** Told the controller once it exists (tests check invariants on its view). */
  inspect?: ((c: ControllerView) => void) | undefined;
  /** Runs the postWave hook (throws RolloutFailedError when it fails). */
  postWave?: ((boundary: number, instances: readonly Instance[], inService: InService) => Promise<void>) | undefined;
  /** BlueGreen: runs the prePromotion hook once the whole new set is available, before the switch (throws when it fails). */
  prePromotion?: ((instances: readonly Instance[]) => Promise<void>) | undefined;
  /** BlueGreen: asked while the old set waits out scaleDownDelaySeconds; true switches traffic back (fleetroll undo). */
  switchBack?: (() => Promise<boolean>) | undefined;
  /** BlueGreen with autoPromote false: asked while the available new set waits; true lets it switch (fleetroll promote). Canary: true skips the remaining steps. */
  promoted?: (() => Promise<boolean>) | undefined;
  /** Canary: asked during the steps; true sends all traffic back to stable and removes the canary (fleetroll abort). */
  aborted?: (() => Promise<boolean>) | undefined;
  /** BlueGreen with `analysis:`: judges the new set once it takes all traffic (rejects with the figures when it fails: then traffic switches back). */
  afterSwitch?: ((inService: InService) => Promise<'passed' | 'inconclusive'>) | undefined;
  /** Canary: no stable revision runs (a first deploy): the steps are skipped, the final rolling update creates the fleet. */
  skipCanarySteps?: boolean | undefined;
  /** Canary: an open pause (`pause: {}`) is passed at once instead of waiting for promote (simulate: nobody can promote). */
  skipOpenPauses?: boolean | undefined;
  /** Canary: an analysis step; resolves when the gate passes, rejects (RolloutFailedError with the figures) when it fails. */
  analyze?: ((step: Extract<CanaryStep, { kind: 'analysis' }>, inService: InService) => Promise<'passed' | 'inconclusive'>) | undefined;
  /** After a crash: reload every nginx once even if its file looks current. */
  recovering?: boolean | undefined;
  /** `fleetroll watch` healing (DeployOptions.heal): an instance found unready leaves nginx at once. */
  heal?: boolean | undefined;
  /** A heal: instances of the current revision to replace if they are still unready when it begins (DeployOptions.replace). */
  replace?: readonly string[] | undefined;
  /**
   * A heal: the running containers of revisions the fleet's history does not
   * know, as last listed. Left alone: nginx goes on routing to them as it did,
   * and they take their room on their host (maxInstances is the machine's).
   */
  leftAlone?: (() => readonly InstanceInfo[]) | undefined;
  timing?: Partial<ControllerTiming> | undefined;
}

export interface ControllerTiming {
  /** How long an nginx change waits for others to share its reload. */
  coalesceMs: number;
  /** How often containers are listed to notice exits. */
  observeMs: number;
  /** How often the pause flag is read. */
  pausePollMs: number;
  /** BlueGreen: how often a switch-back request is looked for during scaleDownDelaySeconds. */
  switchBackPollMs: number;
}

/** How often a poll that is woken by the state's writes still looks, in case a wake was missed. */
const WOKEN_POLL_MS = 1000;

export const DEFAULT_TIMING: ControllerTiming = { coalesceMs: 50, observeMs: 1000, pausePollMs: 1000, switchBackPollMs: 100 };

export interface ControllerResult {
  instances: Instance[];
  waves: number;
  reloads: number;
  /** Blue-green: when the switch's reload was in force in every nginx (clock ms), and when it was issued. */
  switchedAtMs?: number | undefined;
  switchIssuedAtMs?: number | undefined;
}

/** What a test sees of a running controller: its fleet after every event. */
export interface ControllerView {
  instances(): readonly Instance[];
  readonly reloads: number;
}

/** What the context asks of the loop that owns it. */
export interface Loop {
  /** Decide again once the events already queued are applied. */
  schedule(): void;
  /** Stop making progress and end the run this way. */
  end(e: Ending): void;
  /** A host, nginx or hook failed: end the run failed (as a rollout failure, so onFailure applies). */
  fail(err: unknown): void;
}

export class RolloutContext {
  readonly view = new FleetView<Instance>();
  readonly timing: ControllerTiming;
  readonly minReadyMs: number;
  readonly deadlineMs: number;
  readonly drainMs: number;
  /** Every load balancer counts requests in flight (the dynamic mode): a plain drain ends when none is left (idleDrain.ts). */
  readonly endsDrainsWhenIdle: boolean;
  /** Set once by the controller: nginx and the prober need callbacks into the parts built from this context. */
  traffic!: Traffic;
  readiness!: Readiness;
  ending: Ending | undefined;
  /** The run is over: timers are cancelled, late answers are dropped. */
  finished = false;
  /** The last write is going out (a success or an ending): nothing new may start. */
  settling = false;
  waves = 0;
  /** When the rollout last made progress (the progress deadline counts from here). */
  lastProgress = 0;
  private readonly timers = new Set<{ cancel(): void }>();
  private wake: { at: number; timer: { cancel(): void } } | undefined;

  constructor(
    readonly d: ControllerDeps,
    private readonly loop: Loop,
  ) {
    this.timing = { ...DEFAULT_TIMING, ...d.timing };
    this.minReadyMs = d.fleet.minReadySeconds * 1000;
    this.deadlineMs = d.fleet.progressDeadlineSeconds * 1000;
    this.drainMs = d.fleet.drainSeconds * 1000;
    this.endsDrainsWhenIdle = d.balancers.length > 0 && d.balancers.every((lb) => lb.router.inFlight !== undefined);
  }

  get revision(): string {
    return this.d.revision;
  }

  now(): number {
    return this.d.clock.now();
  }

  emit(e: RolloutEvent): void {
    this.d.emit(e);
  }

  schedule(): void {
    this.loop.schedule();
  }

  end(e: Ending): void {
    this.loop.end(e);
  }

  fail(err: unknown): void {
    this.loop.fail(err);
  }

  progress(): void {
    this.lastProgress = this.now();
  }

  /** The fleet as it is now. */
  instances(): Instance[] {
    return [...this.view.values()];
  }

  /** Instances of the revision being rolled out that are not terminating. */
  fresh(): Instance[] {
    return this.instances().filter((i) => i.revision === this.d.revision && !isTerminating(i.phase));
  }

  /** A one-shot timer, cancelled when the run ends; `fn` does not run after that. */
  timer(ms: number, fn: () => void): void {
    const t = this.d.clock.timer(ms, () => {
      this.timers.delete(t);
      if (!this.finished) fn();
    });
    this.timers.add(t);
  }

  /**
   * Runs `fn` every `ms` (the next wait starts once it has settled) until the
   * run ends; with `wakeOn`, also as soon as that says so (d.stateWrites), at
   * most one run at a time: a wake during a run runs it once more after. With
   * a wake the timer is only the safety net for a wake that never came, so it
   * runs at most every WOKEN_POLL_MS: each look at the state is an archive
   * GET, which costs the engine a process of its own.
   */
  every(ms: number, fn: () => Promise<void> | void, wakeOn?: ((listener: () => void) => () => void) | undefined): void {
    let next: { cancel(): void } | undefined;
    let running = false;
    let again = false;
    const run = () => {
      next?.cancel();
      next = undefined;
      if (this.finished) return;
      if (running) {
        again = true;
        return;
      }
      running = true;
      void Promise.resolve(fn()).finally(() => {
        running = false;
        if (this.finished) return;
        if (again) {
          again = false;
          run();
        } else arm();
      });
    };
    const every = wakeOn ? Math.max(ms, WOKEN_POLL_MS) : ms;
    const arm = () => {
      next = this.d.clock.timer(every, run);
    };
    this.timers.add({ cancel: () => next?.cancel() });
    if (wakeOn) this.timers.add({ cancel: wakeOn(run) });
    arm();
  }

  /** Something to cancel when the run ends (a signal listener). */
  onFinish(cancel: () => void): void {
    this.timers.add({ cancel });
  }

  /** Decide again at `at` if nothing else happens before (only the earliest such wake is kept). */
  wakeAt(at: number): void {
    if (this.wake && this.wake.at <= at && this.wake.at > this.now()) return;
    this.wake?.timer.cancel();
    const timer = this.d.clock.timer(Math.max(0, at - this.now()), () => {
      this.wake = undefined;
      this.schedule();
    });
    this.wake = { at, timer };
  }

  /** Cancels every timer: the run is over. */
  shutdown(): void {
    this.finished = true;
    this.readiness.stop();
    this.wake?.timer.cancel();
    for (const t of this.timers) t.cancel();
    this.timers.clear();
  }

  /**
   * Since when every nginx has routed to all of `fresh` (the latest of their
   * in-force times), or undefined while a reload that enables one of them has
   * not been confirmed. Without load balancers nothing is routed: in service
   * now.
   */
  inService(fresh: readonly Instance[], why: (n: number) => string): InService | undefined {
    const now = this.now();
    if (this.d.balancers.length === 0) return { atMs: now, why: 'no load balancer routes to the fleet' };
    let at = 0;
    for (const i of fresh) {
      if (i.inForceAt === undefined || !this.traffic.inForce(i.address)) return undefined;
      at = Math.max(at, i.inForceAt);
    }
    return { atMs: fresh.length > 0 ? at : now, why: why(fresh.length) };
  }
}
