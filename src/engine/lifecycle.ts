/**
 * The instance lifecycle, the only writer of an instance's phase and routing:
 *
 *   new:         start → (probes) ready → in every nginx → available
 *   terminating: marked down → reload in force → drained → stopped → removed
 *
 * Starts and stops run on the host's work queue; their results, a probe's
 * (availability.ts) and a reload in force (reloaded) move the instance on.
 * What a strategy adds (how long a drained instance is kept, which servers
 * nginx lists) it asks the strategy driver.
 */
import { isTerminating, type Phase } from '../core/decide.js';
import type { UpstreamEntry } from '../core/upstream.js';
import { Overlaps } from '../core/stepCosts.js';
import { FleetrollError } from '../errors.js';
import type { InstanceInfo } from '../ports.js';
import { LABELS } from '../ports.js';
import type { RolloutContext } from './context.js';
import { faultPoint } from './faults.js';
import type { Instance } from './instance.js';
import { instanceSpec } from './instances.js';
import type { StrategyDriver, WantedUpstream } from './strategies/driver.js';
import { UpstreamList } from './upstreamList.js';
import { Batches } from './batches.js';

export class Lifecycle {
  /** The servers every upstream should list (wanted), and the instances changed since it was last brought up to date. */
  private readonly upstream = new UpstreamList();
  private readonly upstreamTouched;
  private upstreamWhole = true;
  /** What reloaded() looks at: instances changed since the last reload, and instances by address. */
  private readonly reloadTouched;
  private readonly atAddress = new Map<string, Instance[]>();
  /** Instances started within two probe periods of each other. */
  private readonly batches = new Batches();
  /** Creates + starts running on each host now: Docker shares itself among them, so a start's cost grows with them (core/stepCosts.ts). */
  private readonly startsInFlight = new Overlaps();
  private startsBegun = 0;
  /** A heal: the lines of containers it leaves alone (other revisions), as nginx had them when it began. */
  private readonly kept = new Map<string, UpstreamEntry>();

  /** Creates + starts on every host: in flight now, and begun so far (a load-balancer change counts those beside it, Traffic). */
  starts(): { now: number; begun: number } {
    return { now: this.startsInFlight.inProgress(), begun: this.startsBegun };
  }

  constructor(
    private readonly ctx: RolloutContext,
    private readonly driver: () => StrategyDriver,
  ) {
    this.upstreamTouched = ctx.view.touched();
    this.reloadTouched = ctx.view.touched();
    ctx.view.onPhase((i, from) => this.batches.moved(i.batch, from, i.phase));
  }

  /** An instance found running (or exited) when the rollout began; probed once: found ready, it has been serving. */
  found(info: InstanceInfo, ready: boolean, now: number): Instance {
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
      lastProbe: !info.running
        ? `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}`
        : ready
          ? 'ready'
          : 'readiness probe failing',
      labels: info.labels,
    };
    inst.routed = this.ctx.traffic.routes(inst.address);
    // A deploy keeps an unready instance nginx routes to (a slow probe is no reason for 502s); a heal takes it out at once.
    if (phase === 'unready' && inst.routed && this.ctx.d.heal !== true) inst.keptInTraffic = true;
    if (phase === 'unready' && this.ctx.d.heal === true) inst.leftUnready = true;
    this.ctx.view.add(inst);
    if (phase === 'unready') this.ctx.readiness.watch(inst);
    return inst;
  }

  /** Containers a heal leaves alone: nginx goes on routing to each as it did (up, down, or not at all). */
  leaveAlone(infos: readonly InstanceInfo[]): void {
    const t = this.ctx.traffic;
    for (const i of infos) {
      if (i.address !== undefined && (t.routes(i.address) || t.markedDown(i.address)))
        this.kept.set(i.name, { address: i.address, down: !t.routes(i.address), name: i.name });
    }
  }

  setPhase(inst: Instance, phase: Phase): void {
    this.ctx.view.setPhase(inst, phase);
  }

  // --- starting ------------------------------------------------------------------

  start(host: string): void {
    const { ctx } = this;
    const d = ctx.d;
    const fleet = d.fleet;
    const slot = fleet.hosts.find((h) => h.name === host);
    const spec = {
      ...instanceSpec(fleet, d.revision, d.nameSuffix(), slot?.network, ctx.now(), d.changeCause),
      publishAddress: fleet.port !== undefined ? slot?.publishAddress : undefined,
    };
    const inst: Instance = {
      id: spec.name,
      host,
      revision: d.revision,
      created: ctx.now(),
      phase: 'starting',
      routed: false,
      lastProbe: 'starting',
      labels: spec.labels,
    };
    ctx.view.add(inst);
    inst.batch = this.batches.join(inst.phase, ctx.now(), 2 * fleet.probes.readiness.periodMs);
    d.journal('start', 'begin', { name: spec.name, host });
    const rt = d.runtimes.get(host);
    // Timed from the host's turn, not the request: a start waiting in the host's queue is the controller's doing, which simulate models itself.
    let began = 0;
    let inFlight = 0;
    d.work
      .run(host, async () => {
        if (!rt) throw new FleetrollError('E_INTERNAL', `no runtime for host ${host}`);
        began = ctx.now();
        const overlap = this.startsInFlight.begin(host);
        this.startsBegun++;
        try {
          return await rt.run(spec);
        } finally {
          this.startsInFlight.end(host, overlap);
          inFlight = overlap.max;
        }
      })
      .then(
        (info) => {
          inst.dockerId = info.id;
          inst.address = info.address;
          ctx.view.touch(inst);
          inst.runningSince = ctx.now();
          ctx.emit({ type: 'started', name: inst.id, host, address: info.address, ms: ctx.now() - began, inFlight });
          d.journal('start', 'end', { name: inst.id, host, address: info.address });
          ctx.progress();
          if (inst.phase === 'starting') {
            ctx.view.setPhase(inst, 'unready');
            ctx.readiness.watch(inst);
          } else if (inst.phase === 'draining' && inst.stopAt === undefined) {
            inst.stopAt = ctx.now();
          }
          ctx.schedule();
        },
        (err: unknown) => {
          // Never created: nothing to clean up but the entry.
          ctx.view.remove(inst.id);
          ctx.fail(err);
        },
      );
  }

  /**
   * Instances started together become ready a probe or two apart. While some
   * of this one's batch are still coming up, nginx changes wait (at most two
   * probe periods) so the batch goes in, and the old instances it lets go out,
   * with one reload.
   */
  holdForBatch(inst: Instance): void {
    if (this.batches.waiting(inst.batch)) this.ctx.traffic.hold(this.ctx.now() + 2 * this.ctx.d.fleet.probes.readiness.periodMs);
    else this.ctx.traffic.release();
  }

  // --- terminating ---------------------------------------------------------------

  /** Begin terminating: marked down in nginx (if it routes there), then drained and stopped. */
  terminate(id: string): void {
    const { ctx } = this;
    const inst = ctx.view.get(id);
    if (!inst || isTerminating(inst.phase)) return;
    inst.before = inst.phase;
    ctx.view.setPhase(inst, 'draining');
    ctx.readiness.unwatch(id);
    if (inst.dockerId === undefined) return; // still being created: stopAt is set when it is
    if (ctx.traffic.routes(inst.address) || ctx.traffic.markedDown(inst.address)) {
      inst.routed = ctx.traffic.routes(inst.address);
      if (inst.routed) {
        ctx.traffic.request();
        return;
      }
    }
    inst.stopAt = this.unroutedStopAt(inst, ctx.now());
  }

  /**
   * Out of traffic on purpose, in the same write as whatever else changes (a
   * switch back's new set, an aborted canary): draining, and stopped once
   * nginx no longer routes to it.
   */
  drainOut(inst: Instance, now: number): void {
    inst.before = inst.phase;
    this.ctx.view.setPhase(inst, 'draining');
    this.ctx.readiness.unwatch(inst.id);
    inst.routed = this.ctx.traffic.routes(inst.address);
    if (!inst.routed && inst.dockerId !== undefined) inst.stopAt = this.unroutedStopAt(inst, now);
  }

  /** A drain undone: back to the phase it had, probed again if it was not yet available. */
  putBack(inst: Instance, watch: boolean): void {
    const back = inst.before ?? 'unready';
    this.ctx.view.setPhase(inst, back);
    inst.stopAt = undefined;
    if (watch && (back === 'ready' || back === 'unready')) this.ctx.readiness.watch(inst);
  }

  /**
   * When an instance nginx no longer routes to may stop: once the rest of a
   * drain has passed since a weight of 0 took it out of traffic (leftTrafficAt),
   * else now (nginx never sent it traffic: nothing to drain).
   */
  private unroutedStopAt(inst: Instance, now: number): number {
    return inst.leftTrafficAt !== undefined ? Math.max(now, inst.leftTrafficAt + this.ctx.drainMs) : now;
  }

  stop(id: string): void {
    const { ctx } = this;
    const d = ctx.d;
    const inst = ctx.view.get(id);
    if (!inst || inst.phase !== 'draining' || inst.dockerId === undefined) return;
    if (inst.idleDrain && ctx.endsDrainsWhenIdle)
      ctx.emit({ type: 'drained', name: inst.id, reason: 'drainSeconds', ms: ctx.now() - (inst.drainFrom ?? ctx.now()) });
    ctx.view.setPhase(inst, 'stopping');
    const dockerId = inst.dockerId;
    const rt = d.runtimes.get(inst.host);
    d.journal('stop', 'begin', { names: [inst.id] });
    let began = 0;
    d.work
      .run(inst.host, async () => {
        if (!rt) throw new FleetrollError('E_INTERNAL', `no runtime for host ${inst.host}`);
        began = ctx.now();
        await rt.stop(dockerId, d.fleet.terminationGracePeriodSeconds);
        await rt.remove(dockerId);
      })
      .then(
        () => {
          ctx.view.remove(id);
          ctx.emit({ type: 'stopped', name: id, host: inst.host, ms: ctx.now() - began });
          d.journal('stop', 'end', { names: [id] });
          faultPoint('after-stop');
          ctx.progress();
          ctx.schedule();
        },
        (err: unknown) => {
          ctx.view.setPhase(inst, 'failed');
          inst.stopFailed = true;
          ctx.fail(err);
        },
      );
  }

  // --- routing -------------------------------------------------------------------

  /**
   * The instances a reload may concern, in the fleet's order: those at an
   * address nginx routes to otherwise now, those changed since the last
   * reload (an address given), and draining ones still waiting for nginx.
   * Every other instance's `routed` already says what nginx does.
   */
  private reloadedToVisit(changed: readonly string[]): Instance[] {
    const { view } = this.ctx;
    const visit = new Set<Instance>();
    for (const id of this.reloadTouched()) {
      const i = view.get(id);
      if (!i) continue;
      visit.add(i);
      if (i.address === undefined) continue;
      const same = this.atAddress.get(i.address);
      if (!same) this.atAddress.set(i.address, [i]);
      else if (!same.includes(i)) same.push(i);
    }
    for (const a of changed) {
      const same = this.atAddress.get(a)?.filter((i) => i.address === a && view.get(i.id) === i);
      if (same?.length) this.atAddress.set(a, same);
      else this.atAddress.delete(a);
      for (const i of same ?? []) visit.add(i);
    }
    for (const i of view.terminating()) if (i.phase === 'draining' && i.stopAt === undefined) visit.add(i);
    return [...visit].sort((a, b) => view.ordinal(a) - view.ordinal(b));
  }

  /** A reload is in force: routing follows nginx, and draining instances nginx no longer routes to start their drain. */
  reloaded(changed: readonly string[]): void {
    const { ctx } = this;
    const driver = this.driver();
    const now = ctx.now();
    driver.reloading(now);
    const drained: string[] = [];
    for (const inst of this.reloadedToVisit(changed)) {
      const was = inst.routed;
      inst.routed = ctx.traffic.routes(inst.address);
      if (!ctx.traffic.inForce(inst.address)) inst.inForceAt = undefined;
      else inst.inForceAt ??= now;
      if (inst.routed) inst.leftTrafficAt = undefined;
      else if (was && !isTerminating(inst.phase)) inst.leftTrafficAt = now;
      if (inst.phase !== 'draining' || inst.stopAt !== undefined || inst.routed || inst.dockerId === undefined) continue;
      const wasServing = inst.before === 'ready' || inst.before === 'available' || inst.keptInTraffic === true;
      const drainMs = wasServing ? driver.drainMsFor(inst) : 0;
      inst.stopAt = now + drainMs;
      inst.drainFrom = now;
      inst.idleDrain = drainMs > 0 && drainMs === ctx.drainMs;
      if (wasServing) drained.push(inst.id);
    }
    if (drained.length > 0) {
      faultPoint('after-mark-down');
      driver.drained(drained);
    }
    driver.reloaded(now);
    ctx.schedule();
  }

  /** An instance's line in every upstream: ready instances up; terminating ones nginx knows, down. */
  private upstreamEntry(i: Instance, hideNew: boolean): UpstreamEntry | undefined {
    const t = this.ctx.traffic;
    if (!i.address) return undefined;
    if (hideNew && i.revision === this.ctx.revision && !t.routes(i.address)) return undefined;
    if (i.phase === 'ready' || i.phase === 'available') return { address: i.address, down: false, name: i.id };
    if (i.phase === 'unready' && i.keptInTraffic && t.routes(i.address)) return { address: i.address, down: false, name: i.id };
    if (isTerminating(i.phase) && (t.routes(i.address) || t.markedDown(i.address))) return { address: i.address, down: true, name: i.id };
    return undefined;
  }

  /**
   * What every upstream should have, read when a write begins: the entry of
   * every instance, by name, kept in `upstream` (only instances changed since
   * the last call are looked at again), then what the strategy makes of it.
   * What nginx has in force moves an entry only with a change of the
   * instance (a terminating one listed down stays listed down until it is
   * gone), except where the strategy says every entry must be looked at
   * again (blue-green: its switch moves entries without a change of theirs).
   */
  wanted(): WantedUpstream {
    const { view } = this.ctx;
    const driver = this.driver();
    const hideNew = driver.hidesNew();
    const touched = this.upstreamTouched();
    if (driver.wholeUpstream() || this.upstreamWhole) {
      this.upstreamWhole = false;
      for (const e of this.upstream.entries()) if (!view.get(e.name) && !this.kept.has(e.name)) this.upstream.set(e.name, undefined);
      for (const [name, e] of this.kept) this.upstream.set(name, e);
      for (const i of view.values()) this.upstream.set(i.id, this.upstreamEntry(i, hideNew));
    } else {
      for (const id of touched) {
        const i = view.get(id);
        this.upstream.set(id, i ? this.upstreamEntry(i, hideNew) : undefined);
      }
    }
    return driver.upstream(this.upstream);
  }
}
