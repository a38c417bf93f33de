/**
 * The rollout controller: an event loop that owns the fleet view and asks
 * core/decide.ts what may happen after every event. It never awaits a
 * wave: each instance's steps go on by themselves
 *
 *   new:         start → (probes) ready → in every nginx → available
 *   terminating: marked down → reload in force → drained → stopped → removed
 *
 * and every event (a container started or exited, a probe answer, a reload
 * in force, a drain over, a stop done, a failure, an interrupt, a pause)
 * re-runs the decision on the fleet as it is then. Like the Kubernetes
 * deployment controller, a terminating instance no longer counts as a
 * replica (replacementPolicy TerminationStarted), so its replacement starts
 * without waiting for its drain and stop; under TerminationComplete it
 * counts until its container is gone.
 *
 * Stopping cleanly (interrupt, pause, failure): nothing new is started or
 * terminated; instances still draining are put back in service; what is in
 * flight (starts, stops, a reload) finishes; nginx gets a last write; then
 * the run ends with the reason.
 */
import type { Fleet } from '../config/load.js';
import { decide, holdsTerminating, isTerminating, type Hold, type InstanceView, type Phase } from '../core/decide.js';
import { planRollout } from '../core/plan.js';
import { canaryInstancesFor, finalRollingUpdate, type CanaryStep, type ResolvedStrategy } from '../core/strategy.js';
import { splitTraffic, type StickyKey, type UpstreamEntry } from '../core/upstream.js';
import { FleetrollError, InterruptedError, PausedError, RolloutFailedError } from '../errors.js';
import { LABELS, type Clock, type InstanceInfo, type Journal, type Prober, type Runtime, type SwitchTimes } from '../ports.js';
import type { GateStart } from './analysis.js';
import type { EventSink } from './events.js';
import { faultPoint } from './faults.js';
import { FleetView } from './fleetView.js';
import type { HostWork } from './hostWork.js';
import { instanceSpec } from './instances.js';
import { Readiness } from './readiness.js';
import { Traffic, type LoadBalancer } from './traffic.js';
import { UpstreamList } from './upstreamList.js';

/** One instance as the controller tracks it. */
export interface Instance extends InstanceView {
  /** Docker's container id; undefined while it is being created. */
  dockerId?: string | undefined;
  address?: string | undefined;
  /** The phase before termination began: where an undone drain goes back to. */
  before?: Phase | undefined;
  readySince?: number | undefined;
  /** Instances started together (see Controller.batchOf): their readiness is awaited together by nginx writes. */
  batch?: number | undefined;
  /** When its container was seen running (start returned, or found at the start). */
  runningSince?: number | undefined;
  /** Its stop failed: it may still run, out of nginx, and is left for the operator. */
  stopFailed?: boolean | undefined;
  /**
   * When a reload took it out of traffic while it was not terminating: a
   * canary side at weight 0 (stable at 100%, the canary back at 0) is marked
   * down or left out without a drain of its own. Requests that reached it
   * before that reload may still be running, so stopping it waits for the
   * rest of a drain from then.
   */
  leftTrafficAt?: number | undefined;
  /** When the reload that put it up in every nginx was confirmed in force (what an analysis of its traffic starts from). */
  inForceAt?: number | undefined;
  /** What the last probe or observation said, for the deadline report. */
  lastProbe: string;
  /** How it last exited, when it did and then ran again (restarted by its engine): kept for the deadline report. */
  lastExit?: string | undefined;
  labels: Record<string, string>;
}

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
  /** Asked every pausePollMs: true stops the rollout cleanly (exit 4). */
  paused?: (() => Promise<boolean>) | undefined;
  /** Every container of the fleet on every host (and adopted ones), for the periodic look at which exited. */
  list: () => Promise<InstanceInfo[]>;
  /** Told the controller once it exists (tests check invariants on its view). */
  inspect?: ((c: Controller) => void) | undefined;
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
  timing?: Partial<ControllerTiming> | undefined;
}

/**
 * Since when nginx has routed what a gate or hook is about to judge (see
 * GateStart): never the decision or readiness alone.
 */
export type InService = GateStart;

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

const DEFAULT_TIMING: ControllerTiming = { coalesceMs: 50, observeMs: 1000, pausePollMs: 1000, switchBackPollMs: 100 };

export interface ControllerResult {
  instances: Instance[];
  waves: number;
  reloads: number;
  /** Blue-green: when the switch's reload was in force in every nginx (clock ms), and when it was issued. */
  switchedAtMs?: number | undefined;
  switchIssuedAtMs?: number | undefined;
}

type Ending = { kind: 'interrupted' } | { kind: 'paused' } | { kind: 'failed'; error: unknown } | { kind: 'switchedBack'; requestedAt: number; error?: unknown } | { kind: 'aborted'; reason: string; error?: unknown };

export class Controller {
  private readonly view = new FleetView<Instance>();
  /** The servers every upstream should list (desiredUpstream), and the instances changed since it was last brought up to date. */
  private readonly upstream = new UpstreamList();
  private readonly upstreamTouched = this.view.touched();
  private upstreamWhole = true;
  /** What reloaded() looks at: instances changed since the last reload, and instances by address. */
  private readonly reloadTouched = this.view.touched();
  private readonly atAddress = new Map<string, Instance[]>();
  private readonly traffic: Traffic;
  private readonly readiness: Readiness;
  private readonly timing: ControllerTiming;
  private readonly minReadyMs: number;
  private readonly deadlineMs: number;
  private readonly drainMs: number;
  private waves = 0;
  private lastProgress = 0;
  private scheduled = false;
  private ending: Ending | undefined;
  private finished = false;
  private settling = false;
  private hookRunning = false;
  private wake: { at: number; timer: { cancel(): void } } | undefined;
  private readonly timers = new Set<{ cancel(): void }>();
  /** postWave boundaries: [old, new] after each of plan's waves, and how many have passed. */
  private readonly boundaries: [number, number][];
  private passed = 0;
  private backDone = false;
  /**
   * Canary (undefined otherwise). While its steps run, the stable set keeps
   * every replica and the canary set has the count the current weight needs;
   * both are in the one upstream with `hash <stickyKey> consistent` and
   * weights that give the canary its share. After the last step (or
   * `fleetroll promote`) a rolling update replaces the stable set; `fleetroll
   * abort` (or a failed analysis) takes the canary out in one reload and
   * removes it.
   */
  private readonly cn:
    | {
        steps: readonly CanaryStep[];
        index: number;
        weight: number;
        /** The weight in the config nginx has in force, and the one being written. */
        inForceWeight: number | undefined;
        /** When the weight in force was confirmed (an analysis of the canary's share starts no earlier). */
        weightInForceAt: number | undefined;
        writingWeight: number | undefined;
        /** The write being made splits by weight (a canary and stable both in service). */
        writingHash: boolean;
        stickyKey: StickyKey;
        fixed: number | undefined;
        final: boolean;
        stepSince: number | undefined;
        running: boolean;
        /** An inconclusive analysis holds the canary until promote or abort. */
        heldByAnalysis: boolean;
        promoted: boolean;
        waitingSaid: boolean;
      }
    | undefined;
  /** Instances started within two probe periods of each other, by batch number. */
  private readonly batches = new Map<number, Instance[]>();
  private openBatch: { id: number; at: number } | undefined;
  private done!: { resolve: (r: ControllerResult) => void; reject: (e: unknown) => void };
  /**
   * BlueGreen (undefined otherwise). The new set starts beside the old one and
   * stays out of nginx until every new instance is available and
   * prePromotion passed; then one write and one reload per nginx puts the new
   * set in and the old one down (the switch). The old set waits out
   * scaleDownDelaySeconds (its stopAt) still running, so a switch-back is
   * again one reload; after that it is stopped like any drained instance.
   */
  private readonly bg: { delayMs: number; state: 'before' | 'promoting' | 'switched'; switchedAt?: number; switchInForceAt?: number; switchIssuedAt?: number; backInForceAt?: number; backIssuedAt?: number; oldAtStart: number; backRequested: boolean; autoPromote: boolean; promoted: boolean; waitingSaid: boolean } | undefined;

  constructor(private readonly d: ControllerDeps) {
    this.timing = { ...DEFAULT_TIMING, ...d.timing };
    this.minReadyMs = d.fleet.minReadySeconds * 1000;
    this.deadlineMs = d.fleet.progressDeadlineSeconds * 1000;
    this.drainMs = d.fleet.drainSeconds * 1000;
    const strategy = d.fleet.strategy;
    this.bg = strategy.type === 'BlueGreen' ? { delayMs: strategy.blueGreen.scaleDownDelaySeconds * 1000, state: 'before', oldAtStart: 0, backRequested: false, autoPromote: strategy.blueGreen.autoPromote || !d.promoted, promoted: false, waitingSaid: false } : undefined;
    this.cn =
      strategy.type === 'Canary'
        ? { steps: strategy.canary.steps, index: 0, weight: 0, inForceWeight: undefined, weightInForceAt: undefined, writingWeight: undefined, writingHash: false, stickyKey: strategy.canary.stickyKey, fixed: strategy.canary.canaryReplicas, final: strategy.canary.steps.length === 0 || d.skipCanarySteps === true, stepSince: undefined, running: false, heldByAnalysis: false, promoted: false, waitingSaid: false }
        : undefined;
    // A blue-green rollout has no waves: its one boundary is the switch (prePromotion); a canary's
    // postWave boundaries are those of its final rolling update.
    this.boundaries = d.postWave && !this.bg && !this.cn ? planRollout(strategy).waves.slice(1) : [];
    this.traffic = new Traffic({
      service: d.fleet.service,
      balancers: d.balancers,
      clock: d.clock,
      emit: d.emit,
      journal: d.journal,
      coalesceMs: this.timing.coalesceMs,
      desired: () => this.desiredUpstream(),
      applied: (_up, _down, changed) => this.reloaded(changed),
      failed: (err) => this.fail(err),
      idle: () => this.schedule(),
      preview: strategy.type === 'BlueGreen' && strategy.blueGreen.previewUpstream !== undefined ? { upstream: strategy.blueGreen.previewUpstream, servers: () => this.previewServers() } : undefined,
      hash: () => (this.cn?.writingHash === true ? this.cn.stickyKey : undefined),
      force: strategy.type === 'Canary' && strategy.canary.force !== undefined ? { key: strategy.canary.force, canary: (address) => this.isFresh(address) } : undefined,
    });
    d.inspect?.(this);
    this.readiness = new Readiness({ prober: d.prober, clock: d.clock, periodMs: d.fleet.probes.readiness.periodMs, result: (w, ok, detail) => this.probed(w.id, ok, detail) });
  }

  get reloads(): number {
    return this.traffic.reloads;
  }

  /** The fleet as the controller sees it now (tests check invariants on it after every event). */
  instances(): readonly Instance[] {
    return [...this.view.values()];
  }

  /**
   * Runs the rollout from the observed containers (probed once: a container
   * found ready has been serving and counts as available) to completion.
   */
  async run(found: readonly { info: InstanceInfo; ready: boolean }[]): Promise<ControllerResult> {
    await this.traffic.load(this.d.recovering === true);
    const now = this.d.clock.now();
    this.lastProgress = now;
    for (const { info, ready } of found) {
      const phase: Phase = !info.running ? 'failed' : ready ? 'available' : 'unready';
      const inst: Instance = {
        id: info.name,
        host: info.host,
        revision: info.labels[LABELS.revision] ?? 'unknown',
        created: Number(info.labels[LABELS.created] ?? 0) || 0,
        phase,
        routed: false,
        dockerId: info.id,
        address: info.address,
        runningSince: info.running ? now - 1 : undefined,
        readySince: ready ? Number.NEGATIVE_INFINITY : undefined,
        lastProbe: !info.running ? `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}` : ready ? 'ready' : 'readiness probe failing',
        labels: info.labels,
      };
      inst.routed = this.traffic.routes(inst.address);
      this.view.add(inst);
      if (phase === 'unready') this.readiness.watch(inst);
    }
    if (this.bg) this.bg.oldAtStart = [...this.view.values()].filter((i) => i.revision !== this.d.revision && i.phase !== 'failed').length;
    // Boundaries the fleet is already past (a rollout continued) do not run the hook again.
    const newAvailable = [...this.view.values()].filter((i) => i.revision === this.d.revision && i.phase === 'available').length;
    while (this.passed < this.boundaries.length && (this.boundaries[this.passed]?.[1] ?? 0) <= newAvailable && newAvailable > 0) this.passed++;
    this.startBackground();
    // nginx may list what it should not (a crash, a hand edit): bring it in line first.
    this.traffic.request();
    return new Promise<ControllerResult>((resolve, reject) => {
      this.done = { resolve, reject };
      this.schedule();
    });
  }

  // --- background watchers ---------------------------------------------------

  private startBackground(): void {
    const every = (ms: number, fn: () => Promise<void> | void) => {
      const loop = () => {
        const t = this.d.clock.timer(ms, () => {
          this.timers.delete(t);
          if (this.finished) return;
          void Promise.resolve(fn()).finally(() => {
            if (!this.finished) loop();
          });
        });
        this.timers.add(t);
      };
      loop();
    };
    every(this.timing.observeMs, () => this.observe());
    if (this.d.paused) {
      const paused = this.d.paused;
      every(this.timing.pausePollMs, async () => {
        if (this.ending) return;
        if (await paused().catch(() => false)) this.end({ kind: 'paused' });
      });
    }
    if (this.bg && !this.bg.autoPromote && this.d.promoted) {
      const ask = this.d.promoted;
      const bg = this.bg;
      every(this.timing.switchBackPollMs, async () => {
        if (this.ending || bg.promoted || bg.state !== 'before') return;
        if (await ask().catch(() => false)) {
          bg.promoted = true;
          this.d.emit({ type: 'info', message: 'promoted (fleetroll promote)' });
          this.schedule();
        }
      });
    }
    if (this.cn && (this.d.promoted || this.d.aborted)) {
      const cn = this.cn;
      const promoted = this.d.promoted;
      const aborted = this.d.aborted;
      every(this.timing.switchBackPollMs * 5, async () => {
        if (this.ending || cn.final) return;
        if (aborted && (await aborted().catch(() => false))) this.abortCanary('fleetroll abort');
        else if (promoted && !cn.promoted && (await promoted().catch(() => false))) {
          cn.promoted = true;
          this.d.emit({ type: 'info', message: 'promoted (fleetroll promote): the remaining canary steps are skipped' });
          this.schedule();
        }
      });
    }
    if (this.bg && this.d.switchBack) {
      const ask = this.d.switchBack;
      every(this.timing.switchBackPollMs, async () => {
        if (this.ending || !this.inScaleDownDelay()) return;
        if (await ask().catch(() => false)) this.switchBack();
      });
    }
    const deadline = () => {
      const t = this.d.clock.timer(Math.max(1, this.lastProgress + this.deadlineMs - this.d.clock.now()), () => {
        this.timers.delete(t);
        if (this.finished) return;
        this.schedule();
        deadline();
      });
      this.timers.add(t);
    };
    deadline();
    const signal = this.d.signal;
    if (signal) {
      const onAbort = () => this.end({ kind: 'interrupted' });
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
      this.timers.add({ cancel: () => signal.removeEventListener('abort', onAbort) });
    }
  }

  /** Notices containers that exited or vanished (probes only watch instances that are not yet available). */
  private async observe(): Promise<void> {
    // A listing asked before a start returned may still show that container as "created": only
    // instances known running before the question are judged by its answer.
    const askedAt = this.d.clock.now();
    let infos: InstanceInfo[];
    try {
      infos = await this.d.list();
    } catch (err) {
      this.fail(err);
      return;
    }
    const byName = new Map(infos.map((i) => [i.name, i]));
    let changed = false;
    for (const inst of this.view.values()) {
      if (inst.phase === 'starting' || inst.phase === 'stopping' || inst.dockerId === undefined) continue;
      if (inst.runningSince === undefined || inst.runningSince >= askedAt) continue;
      const info = byName.get(inst.id);
      if (info?.running) {
        // Running again (restarted by its engine or by hand): probe it like a new one.
        if (inst.phase === 'failed' && !inst.stopFailed && (info.address !== undefined || this.d.fleet.port === undefined)) {
          inst.lastExit = inst.lastProbe;
          inst.address = info.address;
          this.view.setPhase(inst, 'unready');
          this.readiness.watch(inst);
          changed = true;
        }
        continue;
      }
      if (inst.phase === 'failed') continue;
      inst.lastProbe = info ? `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}` : 'container removed by someone else';
      this.readiness.unwatch(inst.id);
      inst.readySince = undefined;
      if (isTerminating(inst.phase)) {
        // It died while draining: nothing left to drain.
        inst.before = 'failed';
        inst.routed = this.traffic.routes(inst.address);
        if (inst.stopAt === undefined && !inst.routed) inst.stopAt = this.d.clock.now();
      } else {
        this.view.setPhase(inst, 'failed');
      }
      this.d.emit({ type: 'info', message: `${inst.id} on ${inst.host}: ${inst.lastProbe}` });
      changed = true;
    }
    if (changed) {
      this.traffic.request();
      this.schedule();
    }
  }

  // --- events ----------------------------------------------------------------

  private probed(id: string, ok: boolean, detail: string): void {
    const inst = this.view.get(id);
    if (!inst || isTerminating(inst.phase) || inst.phase === 'failed') return;
    // A probe failing after a restart says why it is being probed again.
    inst.lastProbe = !ok && inst.lastExit !== undefined ? `${detail} (after ${inst.lastExit})` : detail;
    if (!ok && inst.phase === 'unready') faultPoint('waiting-for-readiness');
    const now = this.d.clock.now();
    if (ok && inst.phase === 'unready') {
      this.view.setPhase(inst, 'ready');
      inst.readySince = now;
      this.d.emit({ type: 'ready', name: inst.id });
      this.d.journal('ready', 'end', { name: inst.id });
      this.progress();
      if (this.minReadyMs <= 0) this.becomeAvailable(inst);
      else {
        const since = inst.readySince;
        const t = this.d.clock.timer(this.minReadyMs, () => {
          this.timers.delete(t);
          if (inst.phase === 'ready' && inst.readySince === since && !this.finished) {
            this.becomeAvailable(inst);
            this.schedule();
          }
        });
        this.timers.add(t);
      }
      this.traffic.request();
      this.holdForBatch(inst);
      this.schedule();
    } else if (!ok && inst.phase === 'ready') {
      this.view.setPhase(inst, 'unready');
      inst.readySince = undefined;
      this.traffic.request();
      this.schedule();
    }
  }

  /**
   * Instances started together become ready a probe or two apart. While some
   * of this one's batch are still coming up, nginx changes wait (at most two
   * probe periods) so the batch goes in, and the old instances it lets go out,
   * with one reload.
   */
  private holdForBatch(inst: Instance): void {
    const members = inst.batch === undefined ? undefined : this.batches.get(inst.batch);
    const waiting = members?.some((m) => m.phase === 'starting' || m.phase === 'unready') ?? false;
    if (waiting) this.traffic.hold(this.d.clock.now() + 2 * this.d.fleet.probes.readiness.periodMs);
    else this.traffic.release();
  }

  /** The batch a new instance joins: the open one if it opened within two probe periods, else a new one. */
  private batchOf(inst: Instance): void {
    const now = this.d.clock.now();
    if (!this.openBatch || now - this.openBatch.at > 2 * this.d.fleet.probes.readiness.periodMs) {
      this.openBatch = { id: (this.openBatch?.id ?? 0) + 1, at: now };
      this.batches.set(this.openBatch.id, []);
    }
    inst.batch = this.openBatch.id;
    this.batches.get(this.openBatch.id)?.push(inst);
  }

  private becomeAvailable(inst: Instance): void {
    this.view.setPhase(inst, 'available');
    // Available instances are not probed again: like Kubernetes, they count until something says otherwise (an exit).
    this.readiness.unwatch(inst.id);
    this.d.emit({ type: 'available', name: inst.id });
    this.progress();
  }

  /**
   * The instances a reload may concern, in the fleet's order: those at an
   * address nginx routes to otherwise now, those changed since the last
   * reload (an address given), and draining ones still waiting for nginx.
   * Every other instance's `routed` already says what nginx does.
   */
  private reloadedToVisit(changed: readonly string[]): Instance[] {
    const visit = new Set<Instance>();
    for (const id of this.reloadTouched()) {
      const i = this.view.get(id);
      if (!i) continue;
      visit.add(i);
      if (i.address === undefined) continue;
      const same = this.atAddress.get(i.address);
      if (!same) this.atAddress.set(i.address, [i]);
      else if (!same.includes(i)) same.push(i);
    }
    for (const a of changed) {
      const same = this.atAddress.get(a)?.filter((i) => i.address === a && this.view.get(i.id) === i);
      if (same?.length) this.atAddress.set(a, same);
      else this.atAddress.delete(a);
      for (const i of same ?? []) visit.add(i);
    }
    for (const i of this.view.terminating()) if (i.phase === 'draining' && i.stopAt === undefined) visit.add(i);
    return [...visit].sort((a, b) => this.view.ordinal(a) - this.view.ordinal(b));
  }

  /** A reload is in force: draining instances nginx no longer routes to start their drain. */
  private reloaded(changed: readonly string[]): void {
    const now = this.d.clock.now();
    if (this.cn) {
      if (this.cn.inForceWeight !== this.cn.writingWeight || this.cn.weightInForceAt === undefined) this.cn.weightInForceAt = now;
      this.cn.inForceWeight = this.cn.writingWeight;
    }
    // Blue-green: the reload that puts the new set in is the switch users see. It is recorded as
    // in force (every nginx confirmed its new workers), with the time it was issued beside it:
    // nginx moves traffic between the two, and on a busy load balancer they are seconds apart.
    if (this.bg?.state === 'switched' && this.bg.switchInForceAt === undefined && [...this.view.values()].some((i) => i.revision === this.d.revision && this.traffic.routes(i.address))) {
      this.bg.switchInForceAt = now;
      this.bg.switchIssuedAt = this.traffic.reloadIssuedAt ?? now;
      // The gate judges the new set from the switch on, however long the old set is kept: with
      // scaleDownDelaySeconds no longer than the drain it used never to start at all.
      this.startSwitchGate();
    }
    const drained: string[] = [];
    for (const inst of this.reloadedToVisit(changed)) {
      const was = inst.routed;
      inst.routed = this.traffic.routes(inst.address);
      if (!this.traffic.inForce(inst.address)) inst.inForceAt = undefined;
      else inst.inForceAt ??= now;
      if (inst.routed) inst.leftTrafficAt = undefined;
      else if (was && !isTerminating(inst.phase)) inst.leftTrafficAt = now;
      if (inst.phase !== 'draining' || inst.stopAt !== undefined || inst.routed || inst.dockerId === undefined) continue;
      const wasServing = inst.before === 'ready' || inst.before === 'available';
      // Blue-green's old set, switched out: kept running for scaleDownDelaySeconds (at least the drain).
      const keep = this.bg?.state === 'switched' && !this.bg.backRequested && inst.revision !== this.d.revision && this.ending === undefined;
      inst.stopAt = now + (wasServing ? (keep ? Math.max(this.drainMs, this.bg?.delayMs ?? 0) : this.drainMs) : 0);
      if (wasServing) drained.push(inst.id);
    }
    if (drained.length > 0) {
      faultPoint('after-mark-down');
      const kept = this.bg?.state === 'switched' && !this.bg.backRequested && this.ending === undefined && this.bg.delayMs > this.drainMs;
      if (kept) this.d.emit({ type: 'info', message: `switched: the old set (${drained.length}) is out of traffic and kept running ${this.d.fleet.strategy.type === 'BlueGreen' ? this.d.fleet.strategy.blueGreen.scaleDownDelaySeconds : 0} s (scaleDownDelaySeconds); \`fleetroll undo\` switches back with one reload until then` });
      this.d.emit({ type: 'draining', names: drained, seconds: kept ? Math.max(this.drainMs, this.bg?.delayMs ?? 0) / 1000 : this.d.fleet.drainSeconds });
    }
    if (this.bg?.backRequested && this.ending?.kind === 'switchedBack' && !this.backDone && [...this.view.values()].every((i) => i.revision === this.d.revision || isTerminating(i.phase) || this.traffic.routes(i.address) || !i.address)) {
      this.backDone = true;
      if (this.bg) {
        this.bg.backInForceAt = now;
        this.bg.backIssuedAt = this.traffic.reloadIssuedAt ?? now;
      }
      const ms = now - this.ending.requestedAt;
      this.d.emit({ type: 'info', message: `switched back: the old set serves again, ${ms} ms after the request (one reload)` });
      this.d.journal('switched-back', 'end', { ms });
    }
    this.schedule();
  }

  private progress(): void {
    this.lastProgress = this.d.clock.now();
  }

  // --- the loop ----------------------------------------------------------------

  /** Decides once every event already queued has been applied. */
  private schedule(): void {
    if (this.scheduled || this.finished) return;
    this.scheduled = true;
    queueMicrotask(() => {
      this.scheduled = false;
      try {
        this.step();
      } catch (err) {
        this.fail(err);
      }
    });
  }

  private step(): void {
    if (this.finished) return;
    const now = this.d.clock.now();
    // Waiting out scaleDownDelaySeconds is the plan, not a stall.
    if (this.inScaleDownDelay() || this.switchGateRunning || (this.bg?.waitingSaid === true && !this.bg.promoted && this.bg.state === 'before') || this.cn?.running === true || this.cn?.waitingSaid === true || this.cn?.heldByAnalysis === true) this.progress();
    if (!this.ending && now - this.lastProgress >= this.deadlineMs) {
      this.end({ kind: 'failed', error: this.deadlineFailure() });
    }
    const hold = this.hold();
    const d = decide(this.view, {
      revision: this.d.revision,
      replicas: this.d.fleet.replicas,
      strategy: this.decideStrategy(),
      now,
      hosts: this.d.fleet.hosts,
      hold,
    });
    for (const id of d.stop) this.stopInstance(id);
    if (d.terminate.length + d.start.length > 0) {
      this.waves++;
      this.d.emit({ type: 'wave', index: this.waves, start: d.start.length, stop: d.terminate });
      this.d.journal('wave', 'begin', { wave: this.waves, stop: d.terminate, start: d.start.length });
      for (const id of d.terminate) this.terminate(id);
      for (const host of d.start) this.startInstance(host);
    }
    if (d.unplaced > 0 && this.view.count('draining') + this.view.count('stopping') + this.view.count('starting') === 0) {
      this.end({ kind: 'failed', error: new RolloutFailedError('no host has room for another instance (every host is at maxInstances)', 'raise maxInstances or add a host') });
    }
    if (d.wakeAt !== undefined) this.wakeAt(d.wakeAt);

    if (this.ending) {
      this.maybeEnd();
      return;
    }
    this.maybeRunHook(d.counts.current.available, d.counts.old.reduce((a, r) => a + r.total, 0));
    if (this.bg?.state === 'before') this.maybeSwitch();
    if (this.cn && !this.cn.final) this.canarySteps();
    if (d.complete && !this.hookRunning && !this.switchGateRunning && this.passed >= this.boundaries.length) void this.finishOk();
  }

  /** What may not happen yet: everything while stopping, else what lies past a postWave boundary whose hook has not passed. */
  private hold(): Hold | undefined {
    if (this.ending || this.settling) return 'all';
    // Blue-green before the switch: the whole new set may start, no old instance may go.
    if (this.bg && this.bg.state !== 'switched') return { maxNew: this.d.fleet.replicas, minOld: this.bg.oldAtStart };
    // Canary steps: as many new instances as the weight needs, every stable one stays.
    if (this.cn && !this.cn.final) return { maxNew: this.canaryTarget(), minOld: this.d.fleet.replicas };
    const b = this.boundaries[this.passed];
    return b ? { minOld: b[0], maxNew: b[1] } : undefined;
  }

  /** Blue-green: once every new instance is available, prePromotion (if any), then the switch. */
  private maybeSwitch(): void {
    const bg = this.bg;
    if (!bg || bg.state !== 'before') return;
    const fresh = [...this.view.values()].filter((i) => i.revision === this.d.revision && !isTerminating(i.phase));
    if (fresh.length < this.d.fleet.replicas || fresh.some((i) => i.phase !== 'available')) return;
    // With a preview upstream, prePromotion tries the new set there: wait until nginx has it.
    const s = this.d.fleet.strategy;
    if (s.type === 'BlueGreen' && s.blueGreen.previewUpstream !== undefined && fresh.some((i) => !this.traffic.inPreview(i.address))) {
      this.traffic.request();
      return;
    }
    if (!bg.autoPromote && !bg.promoted) {
      if (!bg.waitingSaid) {
        bg.waitingSaid = true;
        this.d.emit({ type: 'info', message: `the new set (${fresh.length}) is available and out of traffic; waiting for \`fleetroll promote\` (autoPromote: false)` });
      }
      // Waiting for an operator is not a stall.
      this.progress();
      return;
    }
    bg.state = 'promoting';
    const promote = this.d.prePromotion ? this.d.prePromotion(this.instances()) : Promise.resolve();
    promote.then(
      () => {
        if (this.ending) return;
        bg.state = 'switched';
        bg.switchedAt = this.d.clock.now();
        this.d.emit({ type: 'info', message: `switch: ${fresh.length} new instance(s) available${this.d.prePromotion ? ' and prePromotion passed' : ''}; every nginx gets the new set in one write and one reload` });
        this.d.journal('switch', 'begin', { keepOldMs: bg.delayMs });
        this.progress();
        // The decision now terminates the whole old set at once, and its mark-down goes out with the new set's enable.
        this.traffic.request();
        this.schedule();
      },
      (err: unknown) => {
        bg.state = 'before';
        this.end({ kind: 'failed', error: err });
      },
    );
  }

  /** Blue-green: the old set is switched out and still running, waiting out scaleDownDelaySeconds. */
  private inScaleDownDelay(): boolean {
    if (this.bg?.state !== 'switched' || this.bg.backRequested) return false;
    const old = [...this.view.values()].filter((i) => i.revision !== this.d.revision && i.phase !== 'failed');
    const now = this.d.clock.now();
    return old.length > 0 && old.every((i) => i.phase === 'draining' && i.stopAt !== undefined && i.stopAt > now);
  }

  private switchGateStarted = false;
  /** The gate after the switch is measuring: the rollout is not complete (nor stalled) until it decides. */
  private switchGateRunning = false;

  /** Blue-green with `analysis:`: the gate over the new set's first minutes of all traffic; failing, switch back while the old set waits. */
  private startSwitchGate(): void {
    const gate = this.d.afterSwitch;
    if (!gate || this.switchGateStarted) return;
    this.switchGateStarted = true;
    this.switchGateRunning = true;
    const at = this.bg?.switchInForceAt ?? this.d.clock.now();
    gate({ atMs: at, why: 'the switch was in force in every load balancer' }).then(
      (outcome) => {
        this.switchGateRunning = false;
        if (outcome === 'inconclusive') this.d.emit({ type: 'info', message: 'analysis after the switch was inconclusive: the new set stays; `fleetroll undo` switches back until the old set is removed' });
        this.schedule();
      },
      (err: unknown) => {
        this.switchGateRunning = false;
        this.schedule();
        if (this.ending) return;
        if (this.inScaleDownDelay()) this.switchBack(err);
        else this.end({ kind: 'failed', error: new RolloutFailedError(`${err instanceof Error ? err.message : String(err)}\nthe old set was already being removed (scaleDownDelaySeconds is shorter than the analysis), so traffic stays on the new set`, 'deploy the previous image to go back; give scaleDownDelaySeconds room for the analysis interval') });
      },
    );
  }

  /**
   * fleetroll undo during scaleDownDelaySeconds: the old set back in and the
   * new set down in one write and one reload per nginx, then the new set is
   * drained and removed, and the rollout ends as rolled back.
   */
  private switchBack(error?: unknown): void {
    const bg = this.bg;
    if (!bg || bg.backRequested || this.ending) return;
    bg.backRequested = true;
    const now = this.d.clock.now();
    for (const inst of this.view.values()) {
      if (inst.revision !== this.d.revision && inst.phase === 'draining') {
        this.view.setPhase(inst, inst.before ?? 'available');
        inst.stopAt = undefined;
      } else if (inst.revision === this.d.revision && !isTerminating(inst.phase)) {
        inst.before = inst.phase;
        this.view.setPhase(inst, 'draining');
        this.readiness.unwatch(inst.id);
        inst.routed = this.traffic.routes(inst.address);
        if (!inst.routed && inst.dockerId !== undefined) inst.stopAt = this.unroutedStopAt(inst, now);
      }
    }
    this.d.emit({ type: 'info', message: `switching back (${error ? 'the analysis failed' : 'fleetroll undo'}): the old set in, the new set down, in one reload` });
    this.d.journal('switch-back', 'begin', {});
    this.end({ kind: 'switchedBack', requestedAt: now, ...(error !== undefined ? { error } : {}) });
  }

  /** What decide() counts with: a canary's steps may surge by the canary count; its end is the rolling update. */
  private decideStrategy(): ResolvedStrategy {
    const s = this.d.fleet.strategy;
    if (s.type !== 'Canary') return s;
    const rolling = finalRollingUpdate(s);
    if (this.cn?.final !== false) return rolling;
    const k = this.canaryTarget();
    return { ...rolling, maxSurge: k, maxUnavailable: 0, maxTotal: s.replicas + k, minAvailable: s.replicas };
  }

  private canaryTarget(): number {
    const cn = this.cn;
    return cn ? canaryInstancesFor(cn.weight, this.d.fleet.replicas, cn.fixed) : 0;
  }

  /** Canary: runs the current step once the canary set matches it, then the next, until the last (or promote). */
  private canarySteps(): void {
    const cn = this.cn;
    if (!cn || cn.final || this.ending || cn.running) return;
    const now = this.d.clock.now();
    for (;;) {
      if (cn.heldByAnalysis && !cn.promoted) return;
      if (cn.promoted || cn.index >= cn.steps.length) {
        cn.final = true;
        this.d.emit({ type: 'info', message: `canary steps done${cn.promoted && cn.index < cn.steps.length ? ' (promoted)' : ''}: a rolling update replaces the stable set; traffic follows the instances in service` });
        this.d.journal('canary', 'end', { step: cn.index });
        this.traffic.request();
        this.schedule();
        return;
      }
      const step = cn.steps[cn.index]!;
      const fresh = [...this.view.values()].filter((i) => i.revision === this.d.revision && !isTerminating(i.phase));
      if (step.kind === 'setWeight') {
        if (cn.weight !== step.weight) {
          cn.weight = step.weight;
          this.d.emit({ type: 'info', message: `canary step ${cn.index + 1}: setWeight ${step.weight} (${this.canaryTarget()} canary instance(s))` });
          this.traffic.request();
        }
        const k = this.canaryTarget();
        // Fewer canaries for a lower weight: the newest go first.
        if (fresh.length > k) {
          for (const extra of fresh.sort((a, b) => b.created - a.created).slice(0, fresh.length - k)) this.terminate(extra.id);
          return;
        }
        // Done once the canary set is up and nginx has the weight in force. Weight 0 is in force
        // once nginx routes to no canary: a write that changes nothing reloads nothing, so no
        // reload would ever confirm it (a first step of setWeight 0 waited for one for ever).
        const inForce = step.weight === 0 && !fresh.some((i) => this.traffic.routes(i.address)) ? 0 : cn.inForceWeight;
        if (fresh.length < k || fresh.some((i) => i.phase !== 'available') || inForce !== step.weight) return;
        // A weight in force is not yet a canary in service: the write that set it may have gone out
        // before the canary was ready. The step is done once every canary is up in every nginx.
        if (step.weight > 0 && fresh.some((i) => !this.traffic.inForce(i.address))) return;
      } else if (step.kind === 'pause') {
        cn.stepSince ??= now;
        if (step.seconds === undefined && this.d.skipOpenPauses) {
          // Simulated: nobody can promote; the pause costs nothing.
        } else if (step.seconds === undefined) {
          if (!cn.waitingSaid) {
            cn.waitingSaid = true;
            this.d.emit({ type: 'info', message: `canary step ${cn.index + 1}: paused at ${cn.weight}% until \`fleetroll promote\` (or \`fleetroll abort\`)` });
          }
          return;
        } else if (now < cn.stepSince + step.seconds * 1000) {
          if (cn.stepSince === now) this.d.emit({ type: 'info', message: `canary step ${cn.index + 1}: pause ${step.seconds} s at ${cn.weight}%` });
          this.wakeAt(cn.stepSince + step.seconds * 1000);
          return;
        }
      } else {
        const analyze = this.d.analyze;
        if (!analyze) {
          this.abortCanary('analysis step', new RolloutFailedError(`canary step ${cn.index + 1} (${step.path}) is an analysis, and no load balancer's access log can be read (loadBalancers/N/nginx/accessLog)`, 'name the access log of each load balancer (accessLog: /var/log/nginx/fleetroll.log) so the analysis can read it'));
          return;
        }
        cn.running = true;
        // The canary's share as nginx routes it: since the weight and the last canary were in force.
        const routed = this.inService(fresh, (n) => `the reload that gave ${n} canary instance(s) ${cn.weight}% was in force in every load balancer`);
        const since: InService = routed ? { ...routed, atMs: Math.max(routed.atMs, cn.weightInForceAt ?? 0) } : { atMs: now, why: `the canary is not in every load balancer at ${cn.weight}%` };
        this.d.emit({ type: 'info', message: `canary step ${cn.index + 1}: analysis at ${cn.weight}%` });
        analyze(step, since).then(
          (outcome) => {
            cn.running = false;
            if (outcome === 'inconclusive') {
              // onInconclusive: pause: a human decides (promote or abort).
              cn.heldByAnalysis = true;
              this.d.emit({ type: 'info', message: `canary step ${cn.index + 1}: analysis inconclusive; holding ${cn.weight}% until \`fleetroll promote\` or \`fleetroll abort\`` });
              this.schedule();
              return;
            }
            cn.index++;
            cn.stepSince = undefined;
            this.progress();
            this.schedule();
          },
          (err: unknown) => {
            cn.running = false;
            this.abortCanary('the analysis failed', err);
          },
        );
        return;
      }
      cn.index++;
      cn.stepSince = undefined;
      cn.waitingSaid = false;
      this.progress();
    }
  }

  /**
   * fleetroll abort, or a failed analysis: the canary out of every upstream in
   * one write and one reload (stable alone, no weights), then drained and
   * removed; the rollout ends failed (exit 1) saying why.
   */
  private abortCanary(reason: string, error?: unknown): void {
    const cn = this.cn;
    if (!cn || cn.final || this.ending) return;
    const now = this.d.clock.now();
    for (const inst of this.view.values()) {
      if (inst.revision !== this.d.revision || isTerminating(inst.phase)) continue;
      inst.before = inst.phase;
      this.view.setPhase(inst, 'draining');
      this.readiness.unwatch(inst.id);
      inst.routed = this.traffic.routes(inst.address);
      if (!inst.routed && inst.dockerId !== undefined) inst.stopAt = this.unroutedStopAt(inst, now);
    }
    this.d.emit({ type: 'info', message: `aborting the canary (${reason}): all traffic back to stable in one reload; the canary instances are removed` });
    this.d.journal('abort', 'begin', { reason });
    this.end({ kind: 'aborted', reason, error });
  }

  private maybeRunHook(newAvailable: number, oldAlive: number): void {
    const b = this.boundaries[this.passed];
    const run = this.d.postWave;
    if (!b || !run || this.hookRunning || newAvailable < b[1] || oldAlive > b[0]) return;
    // The wave is in service once nginx routes to all of it, not when it became available: the
    // reload that enables it may still be on its way (coalescing, or a slow load balancer), and
    // the gate after the first wave would measure traffic the new instances never got.
    const inService = this.inService(
      [...this.view.values()].filter((i) => i.revision === this.d.revision && i.phase === 'available'),
      (n) => `the reload that put the wave's ${n} new instance(s) into every load balancer was in force`,
    );
    // Not yet: the reload that enables them was requested when they became available; its confirmation schedules the next look.
    if (!inService) return;
    this.hookRunning = true;
    const index = this.passed + 1;
    run(index, this.instances(), inService).then(
      () => {
        this.hookRunning = false;
        this.passed++;
        this.schedule();
      },
      (err: unknown) => {
        this.hookRunning = false;
        this.end({ kind: 'failed', error: err });
      },
    );
  }

  /**
   * Since when every nginx has routed to all of `fresh` (the latest of their
   * in-force times), or undefined while a reload that enables one of them has
   * not been confirmed. Without load balancers nothing is routed: in service
   * now.
   */
  private inService(fresh: readonly Instance[], why: (n: number) => string): InService | undefined {
    const now = this.d.clock.now();
    if (this.d.balancers.length === 0) return { atMs: now, why: 'no load balancer routes to the fleet' };
    let at = 0;
    for (const i of fresh) {
      if (i.inForceAt === undefined || !this.traffic.inForce(i.address)) return undefined;
      at = Math.max(at, i.inForceAt);
    }
    return { atMs: fresh.length > 0 ? at : now, why: why(fresh.length) };
  }

  private wakeAt(at: number): void {
    if (this.wake && this.wake.at <= at && this.wake.at > this.d.clock.now()) return;
    this.wake?.timer.cancel();
    const timer = this.d.clock.timer(Math.max(0, at - this.d.clock.now()), () => {
      this.wake = undefined;
      this.schedule();
    });
    this.wake = { at, timer };
  }

  // --- actions -------------------------------------------------------------------

  private startInstance(host: string): void {
    const fleet = this.d.fleet;
    const slot = fleet.hosts.find((h) => h.name === host);
    const spec = { ...instanceSpec(fleet, this.d.revision, this.d.nameSuffix(), slot?.network, this.d.clock.now(), this.d.changeCause), publishAddress: fleet.port !== undefined ? slot?.publishAddress : undefined };
    const inst: Instance = { id: spec.name, host, revision: this.d.revision, created: this.d.clock.now(), phase: 'starting', routed: false, lastProbe: 'starting', labels: spec.labels };
    this.view.add(inst);
    this.batchOf(inst);
    this.d.journal('start', 'begin', { name: spec.name, host });
    const rt = this.d.runtimes.get(host);
    this.d.work
      .run(host, async () => {
        if (!rt) throw new FleetrollError('E_INTERNAL', 1, `no runtime for host ${host}`);
        return rt.run(spec);
      })
      .then(
        (info) => {
          inst.dockerId = info.id;
          inst.address = info.address;
          this.view.touch(inst);
          inst.runningSince = this.d.clock.now();
          this.d.emit({ type: 'started', name: inst.id, host, address: info.address });
          this.d.journal('start', 'end', { name: inst.id, host, address: info.address });
          this.progress();
          if (inst.phase === 'starting') {
            this.view.setPhase(inst, 'unready');
            this.readiness.watch(inst);
          } else if (inst.phase === 'draining' && inst.stopAt === undefined) {
            inst.stopAt = this.d.clock.now();
          }
          this.schedule();
        },
        (err: unknown) => {
          // Never created: nothing to clean up but the entry.
          this.view.remove(inst.id);
          this.fail(err);
        },
      );
  }

  private terminate(id: string): void {
    const inst = this.view.get(id);
    if (!inst || isTerminating(inst.phase)) return;
    inst.before = inst.phase;
    this.view.setPhase(inst, 'draining');
    this.readiness.unwatch(id);
    if (inst.dockerId === undefined) return; // still being created: stopAt is set when it is
    if (this.traffic.routes(inst.address) || this.traffic.markedDown(inst.address)) {
      inst.routed = this.traffic.routes(inst.address);
      if (inst.routed) {
        this.traffic.request();
        return;
      }
    }
    inst.stopAt = this.unroutedStopAt(inst, this.d.clock.now());
  }

  /**
   * When an instance nginx no longer routes to may stop: once the rest of a
   * drain has passed since a weight of 0 took it out of traffic (leftTrafficAt),
   * else now (nginx never sent it traffic: nothing to drain).
   */
  private unroutedStopAt(inst: Instance, now: number): number {
    return inst.leftTrafficAt !== undefined ? Math.max(now, inst.leftTrafficAt + this.drainMs) : now;
  }

  private stopInstance(id: string): void {
    const inst = this.view.get(id);
    if (!inst || inst.phase !== 'draining' || inst.dockerId === undefined) return;
    this.view.setPhase(inst, 'stopping');
    const dockerId = inst.dockerId;
    const rt = this.d.runtimes.get(inst.host);
    this.d.journal('stop', 'begin', { names: [inst.id] });
    this.d.work
      .run(inst.host, async () => {
        if (!rt) throw new FleetrollError('E_INTERNAL', 1, `no runtime for host ${inst.host}`);
        await rt.stop(dockerId, this.d.fleet.terminationGracePeriodSeconds);
        await rt.remove(dockerId);
      })
      .then(
        () => {
          this.view.remove(id);
          this.d.emit({ type: 'stopped', name: id, host: inst.host });
          this.d.journal('stop', 'end', { names: [id] });
          faultPoint('after-stop');
          this.progress();
          this.schedule();
        },
        (err: unknown) => {
          this.view.setPhase(inst, 'failed');
          inst.stopFailed = true;
          this.fail(err);
        },
      );
  }

  /** Blue-green's preview upstream: the new set's ready instances until the switch, then nothing. */
  private previewServers(): UpstreamEntry[] {
    if (this.bg?.state === 'switched') return [];
    const out: UpstreamEntry[] = [];
    for (const i of this.view.values()) {
      if (i.address && i.revision === this.d.revision && (i.phase === 'ready' || i.phase === 'available')) out.push({ address: i.address, down: false, name: i.id });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The address belongs to an instance of the revision being rolled out (canary.force's canary side). */
  private isFresh(address: string): boolean {
    for (const i of this.view.values()) if (i.address === address) return i.revision === this.d.revision;
    return false;
  }

  /** An instance's line in every upstream: ready instances up; terminating ones nginx knows, down. */
  private upstreamEntry(i: Instance, hideNew: boolean): UpstreamEntry | undefined {
    if (!i.address) return undefined;
    if (hideNew && i.revision === this.d.revision && !this.traffic.routes(i.address)) return undefined;
    if (i.phase === 'ready' || i.phase === 'available') return { address: i.address, down: false, name: i.id };
    if (isTerminating(i.phase) && (this.traffic.routes(i.address) || this.traffic.markedDown(i.address))) return { address: i.address, down: true, name: i.id };
    return undefined;
  }

  /**
   * The servers every upstream should list (upstreamEntry of every instance,
   * by name), kept in `upstream`: only instances changed since the last call
   * are looked at again. What nginx has in force moves an entry only with a
   * change of the instance (a terminating one listed down stays listed down
   * until it is gone), except under blue-green before the switch: then
   * every instance is looked at again.
   */
  private desiredUpstream(): UpstreamList | readonly UpstreamEntry[] {
    // Blue-green: the new set stays out of nginx until the switch.
    const hideNew = this.bg !== undefined && this.bg.state !== 'switched';
    const touched = this.upstreamTouched();
    if (this.bg !== undefined || this.upstreamWhole) {
      this.upstreamWhole = false;
      for (const e of this.upstream.entries()) if (!this.view.get(e.name)) this.upstream.set(e.name, undefined);
      for (const i of this.view.values()) this.upstream.set(i.id, this.upstreamEntry(i, hideNew));
    } else {
      for (const id of touched) {
        const i = this.view.get(id);
        this.upstream.set(id, i ? this.upstreamEntry(i, hideNew) : undefined);
      }
    }
    const cn = this.cn;
    if (!cn || cn.final || this.ending !== undefined) {
      if (cn) {
        cn.writingWeight = undefined;
        cn.writingHash = false;
      }
      return this.upstream;
    }
    const out = this.upstream.entries();
    // Canary steps: the weights that give the canary its share of the hash ring. A new weight
    // goes out once the canary set it needs is available (one reload per step, and no canary
    // carries a share meant for more); until then the weight in force holds.
    const freshInstances = [...this.view.values()].filter((i) => i.revision === this.d.revision);
    const fresh = new Set(freshInstances.map((i) => i.address));
    const stable = out.filter((e) => !fresh.has(e.address));
    const canary = out.filter((e) => fresh.has(e.address) && !e.down);
    const complete = freshInstances.filter((i) => i.phase === 'available').length >= this.canaryTarget();
    const weight = complete ? cn.weight : (cn.inForceWeight ?? 0);
    cn.writingWeight = weight;
    cn.writingHash = weight > 0 && canary.length > 0 && stable.some((e) => !e.down);
    // Canaries being drained (a lower weight needs fewer) stay listed, down, like any drain.
    const draining = out.filter((e) => fresh.has(e.address) && e.down);
    if (!cn.writingHash) {
      if (weight !== 0 && canary.length > 0) return this.upstream;
      // Weight 0: a canary nginx never sent traffic is not listed; one that had some (0 after a
      // higher weight) is marked down, as a drain is, for as long as the weight holds.
      const hadTraffic = canary.filter((e) => this.traffic.routes(e.address) || this.traffic.markedDown(e.address)).map((e) => ({ ...e, down: true }));
      return [...stable, ...hadTraffic, ...draining];
    }
    return [...splitTraffic(stable, canary, weight), ...draining];
  }

  // --- endings ---------------------------------------------------------------------

  private fail(err: unknown): void {
    this.end({ kind: 'failed', error: hostFailure(this.d.fleet, err) });
  }

  /** Stop making progress; undo drains not yet stopped; end once what is in flight has landed. */
  private end(e: Ending): void {
    if (this.finished) return;
    if (!this.ending) {
      this.ending = e;
      // Undo drains where that keeps within replicas + maxSurge; under
      // TerminationStarted a drained instance's replacement may already run,
      // and then its drain is finished instead (it is stopped, not left down).
      const s = this.d.fleet.strategy;
      let counted = [...this.view.values()].filter((i) => !isTerminating(i.phase) && !i.stopFailed).length;
      const now = this.d.clock.now();
      for (const inst of this.view.values()) {
        if (inst.phase !== 'draining') continue;
        // A switch-back (or a canary abort) drains the new set on purpose.
        if (e.kind === 'switchedBack' || e.kind === 'aborted') continue;
        // Blue-green after the switch: the old set never goes back in beside the new one (two
        // versions in traffic); what waits out the delay is stopped once its drain is over.
        if (this.bg?.state === 'switched' && inst.revision !== this.d.revision) {
          if (inst.stopAt !== undefined) inst.stopAt = Math.min(inst.stopAt, Math.max(now, (this.bg.switchedAt ?? now) + this.drainMs));
          continue;
        }
        // With nginx refusing every change, nothing can be drained: what is still routed goes back whatever the count.
        if (!holdsTerminating(s) && counted >= s.maxTotal && !(this.traffic.broken && this.traffic.routes(inst.address))) continue;
        counted++;
        const back = inst.before ?? 'unready';
        this.view.setPhase(inst, back);
        inst.stopAt = undefined;
        if (back === 'ready' || back === 'unready') this.readiness.watch(inst);
      }
      this.traffic.release();
      this.traffic.request();
    } else if (e.kind === 'failed' && this.ending.kind !== 'failed') {
      this.ending = e;
    }
    this.schedule();
  }

  private maybeEnd(): void {
    const busy = this.view.count('starting') + this.view.count('draining') + this.view.count('stopping') > 0;
    if (busy || !this.traffic.idle || this.hookRunning || this.settling) return;
    this.settling = true;
    const ending = this.ending!;
    const trafficBroken = ending.kind === 'failed' && ending.error instanceof RolloutFailedError && /failed nginx -t/.test(ending.error.message);
    const settle = trafficBroken ? Promise.resolve() : this.traffic.settle();
    settle.then(
      () => this.close(ending),
      (err: unknown) => this.close(ending.kind === 'failed' ? ending : { kind: 'failed', error: err }),
    );
  }

  private close(ending: Ending): void {
    this.shutdown();
    const all = this.instances();
    const fresh = all.filter((i) => i.revision === this.d.revision).length;
    const inService = all.filter((i) => i.phase === 'ready' || i.phase === 'available').length;
    const where = `${all.length - fresh} old and ${fresh} new instance(s), ${inService} in service, none left marked down`;
    if (ending.kind === 'paused') {
      this.d.emit({ type: 'failed', reason: 'paused' });
      this.d.journal('paused', 'end', { waves: this.waves });
      this.done.reject(new PausedError(`paused after ${this.waves} wave(s) (fleetroll pause): ${where}`));
    } else if (ending.kind === 'aborted') {
      this.d.emit({ type: 'failed', reason: `canary aborted: ${ending.reason}` });
      this.d.journal('failed', 'end', { aborted: ending.reason });
      const cause = ending.error instanceof Error ? `\n${ending.error.message}` : '';
      this.done.reject(
        new RolloutFailedError(
          `canary aborted (${ending.reason}): all traffic is back on the stable revision and the canary instances were removed: ${where}${cause}`,
          'the stable revision serves alone; fix the new version and deploy again',
          { aborted: ending.reason, ...(ending.reason === 'the analysis failed' ? { stoppedBy: 'analysis' } : {}) },
        ),
      );
    } else if (ending.kind === 'switchedBack') {
      this.d.emit({ type: 'failed', reason: 'switched back' });
      this.d.journal('rolled back', 'end', { by: 'undo' });
      const why = ending.error === undefined ? 'undo' : 'the analysis failed';
      const cause = ending.error instanceof Error ? `\n${ending.error.message}` : '';
      this.done.reject(
        new RolloutFailedError(
          `rolled back (${why}): traffic switched back to the old set in one reload; the new set was drained and removed: ${where}${cause}`,
          'the fleet runs the previous revision again; fix the new version and deploy again',
          { switchedBack: true, ...this.switchTimes(), ...(ending.error !== undefined ? { stoppedBy: 'analysis' } : {}) },
        ),
      );
    } else if (ending.kind === 'interrupted') {
      this.d.emit({ type: 'failed', reason: 'interrupted' });
      this.d.journal('interrupted', 'end', { waves: this.waves });
      this.done.reject(new InterruptedError(`interrupted after ${this.waves} wave(s): the fleet is consistent, ${where}`, 'run the same deploy again to continue from here (or deploy the previous image to go back)'));
    } else {
      this.done.reject(ending.error);
    }
  }

  /** Blue-green's switch and switch-back, each as in force and as issued (ISO times), for the revision's record. */
  private switchTimes(): SwitchTimes {
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
    const bg = this.bg;
    if (bg?.switchInForceAt === undefined) return {};
    return { switchedAt: iso(bg.switchInForceAt), switchIssuedAt: iso(bg.switchIssuedAt), ...(bg.backInForceAt !== undefined ? { switchedBackAt: iso(bg.backInForceAt), switchBackIssuedAt: iso(bg.backIssuedAt) } : {}) };
  }

  private async finishOk(): Promise<void> {
    if (this.settling || this.finished) return;
    this.settling = true;
    try {
      await this.traffic.settle();
    } catch (err) {
      this.settling = false;
      this.fail(err);
      return;
    }
    if (this.ending) {
      // Something failed while the last write went out.
      this.settling = false;
      this.schedule();
      return;
    }
    this.shutdown();
    this.done.resolve({ instances: this.instances() as Instance[], waves: this.waves, reloads: this.reloads, ...(this.bg?.switchInForceAt !== undefined ? { switchedAtMs: this.bg.switchInForceAt, switchIssuedAtMs: this.bg.switchIssuedAt } : {}) });
  }

  private shutdown(): void {
    this.finished = true;
    this.readiness.stop();
    this.wake?.timer.cancel();
    for (const t of this.timers) t.cancel();
    this.timers.clear();
  }

  private deadlineFailure(): RolloutFailedError {
    const all = this.instances();
    const stuck = all.filter((i) => i.revision === this.d.revision && i.phase !== 'available');
    const lines = stuck.map((i) => `${i.id} on ${i.host}: ${i.lastProbe}`);
    const old = all.filter((i) => i.revision !== this.d.revision);
    const serving = all.filter((i) => i.phase === 'ready' || i.phase === 'available' || (i.phase === 'draining' && (i.before === 'ready' || i.before === 'available'))).length;
    this.d.emit({ type: 'failed', reason: 'progress deadline exceeded' });
    return new RolloutFailedError(
      `rollout of ${this.d.fleet.service} to ${this.d.fleet.version} made no progress for ${this.d.fleet.progressDeadlineSeconds} s (progressDeadlineSeconds) and is marked failed. ` +
        `The fleet is left as it is: ${serving} instance(s) in service, ${old.length} of the old revision.\n` +
        `  instances that never became available:\n    ${lines.join('\n    ') || '(none started)'}`,
      'fix the image and deploy again (the rollout continues from here), or deploy the previous image to go back',
      { stuck: stuck.map((i) => i.id) },
    );
  }
}

/** A host or nginx that fails mid-rollout (unreachable engine, refused call) fails the rollout like a deadline does, so onFailure applies. */
export function hostFailure(fleet: Pick<Fleet, 'service' | 'version'>, err: unknown): unknown {
  if (err instanceof FleetrollError && !(err instanceof RolloutFailedError) && !(err instanceof InterruptedError) && !(err instanceof PausedError) && err.exitCode === 1) {
    return new RolloutFailedError(`rollout of ${fleet.service} to ${fleet.version} stopped: ${err.message}`, 'the instances on the other hosts keep serving; fix the host and deploy again to continue', { code: err.code });
  }
  return err;
}
