/**
 * Canary. While its steps run, the stable set keeps every replica and the
 * canary set has the count the current weight needs; both are in the one
 * upstream with `hash <stickyKey> consistent` and weights that give the
 * canary its share. After the last step (or `fleetroll promote`) a rolling
 * update replaces the stable set; `fleetroll abort` (or a failed analysis)
 * takes the canary out in one reload and removes it. The steps, with the
 * weight and canary count of each, are core/strategySteps.ts's
 * canarySchedule: the same list `fleetroll plan` shows.
 */
import type { Hold } from '../../core/decide.js';
import { canarySchedule, type CanaryStepTarget } from '../../core/strategySteps.js';
import { canaryInstancesFor, finalRollingUpdate, type CanaryStrategy, type ResolvedStrategy } from '../../core/strategy.js';
import { splitTraffic } from '../../core/upstream.js';
import { RolloutFailedError } from '../../errors.js';
import type { RolloutContext } from '../context.js';
import type { Ending, Instance, InService } from '../instance.js';
import type { Lifecycle } from '../lifecycle.js';
import type { TrafficOptions } from '../traffic.js';
import type { UpstreamList } from '../upstreamList.js';
import { BaseDriver } from './base.js';
import type { WantedUpstream } from './driver.js';

export class CanaryDriver extends BaseDriver {
  private readonly s: CanaryStrategy;
  private readonly schedule: readonly CanaryStepTarget[];
  private index = 0;
  private weight = 0;
  /** The weight in the config nginx has in force, and the one being written. */
  private inForceWeight: number | undefined;
  /** When the weight in force was confirmed (an analysis of the canary's share starts no earlier). */
  private weightInForceAt: number | undefined;
  private writingWeight: number | undefined;
  /** The steps are over (or skipped: a first deploy, promote): the rolling update runs. */
  private final: boolean;
  private stepSince: number | undefined;
  /** An analysis step is measuring. */
  private running = false;
  /** An inconclusive analysis holds the canary until promote or abort. */
  private heldByAnalysis = false;
  private promoted = false;
  private waitingSaid = false;
  readonly force: TrafficOptions['force'];

  constructor(ctx: RolloutContext, life: Lifecycle, s: CanaryStrategy) {
    super(ctx, life);
    this.s = s;
    this.schedule = canarySchedule(s);
    this.final = s.canary.steps.length === 0 || ctx.d.skipCanarySteps === true;
    this.force = s.canary.force !== undefined ? { key: s.canary.force, canary: (address) => this.isFresh(address) } : undefined;
  }

  override begin(): void {
    const { ctx } = this;
    const { promoted, aborted } = ctx.d;
    if (!promoted && !aborted) return;
    ctx.every(
      ctx.timing.switchBackPollMs * 5,
      async () => {
        if (ctx.ending || this.final) return;
        if (aborted && (await aborted().catch(() => false))) this.abort('fleetroll abort');
        else if (promoted && !this.promoted && (await promoted().catch(() => false))) {
          this.promoted = true;
          ctx.emit({ type: 'promoted', skipsSteps: true });
          ctx.schedule();
        }
      },
      ctx.d.stateWrites,
    );
  }

  /** The steps may surge by the canary count; their end is the rolling update. */
  override strategy(): ResolvedStrategy {
    const rolling = finalRollingUpdate(this.s);
    if (this.final) return rolling;
    const k = this.target();
    return { ...rolling, maxSurge: k, maxUnavailable: 0, maxTotal: this.s.replicas + k, minAvailable: this.s.replicas };
  }

  /** During the steps: as many new instances as the weight needs, every stable one stays. */
  hold(): Hold | undefined {
    return this.final ? undefined : { maxNew: this.target(), minOld: this.ctx.d.fleet.replicas };
  }

  override waiting(): boolean {
    return this.running || this.waitingSaid || this.heldByAnalysis;
  }

  private target(): number {
    return canaryInstancesFor(this.weight, this.ctx.d.fleet.replicas, this.s.canary.canaryReplicas);
  }

  /** The address belongs to an instance of the revision being rolled out (canary.force's canary side). */
  private isFresh(address: string): boolean {
    for (const i of this.ctx.view.values()) if (i.address === address) return i.revision === this.ctx.revision;
    return false;
  }

  override reloading(now: number): void {
    if (this.inForceWeight !== this.writingWeight || this.weightInForceAt === undefined) this.weightInForceAt = now;
    this.inForceWeight = this.writingWeight;
  }

  /** Runs the current step once the canary set matches it, then the next, until the last (or promote). */
  reconcile(): void {
    const { ctx } = this;
    if (this.final || ctx.ending || this.running) return;
    const now = ctx.now();
    for (;;) {
      if (this.heldByAnalysis && !this.promoted) return;
      if (this.promoted || this.index >= this.schedule.length) {
        this.final = true;
        ctx.emit({ type: 'canaryDone', promoted: this.promoted && this.index < this.schedule.length });
        ctx.d.journal('canary', 'end', { step: this.index });
        ctx.traffic.request();
        ctx.schedule();
        return;
      }
      const { step, weight } = this.schedule[this.index]!;
      const fresh = ctx.fresh();
      const n = this.index + 1;
      if (step.kind === 'setWeight') {
        if (this.weight !== weight) {
          this.weight = weight;
          ctx.emit({ type: 'canaryStep', index: n, kind: 'setWeight', weight, instances: this.target() });
          ctx.traffic.request();
        }
        const k = this.target();
        // Fewer canaries for a lower weight: the newest go first.
        if (fresh.length > k) {
          for (const extra of fresh.sort((a, b) => b.created - a.created).slice(0, fresh.length - k)) this.life.terminate(extra.id);
          return;
        }
        // Done once the canary set is up and nginx has the weight in force. Weight 0 is in force
        // once nginx routes to no canary: a write that changes nothing reloads nothing, so no
        // reload would ever confirm it (a first step of setWeight 0 waited for one for ever).
        const inForce = weight === 0 && !fresh.some((i) => ctx.traffic.routes(i.address)) ? 0 : this.inForceWeight;
        if (fresh.length < k || fresh.some((i) => i.phase !== 'available') || inForce !== weight) return;
        // A weight in force is not yet a canary in service: the write that set it may have gone out
        // before the canary was ready. The step is done once every canary is up in every nginx.
        if (weight > 0 && fresh.some((i) => !ctx.traffic.inForce(i.address))) return;
      } else if (step.kind === 'pause') {
        this.stepSince ??= now;
        if (step.seconds === undefined && ctx.d.skipOpenPauses) {
          // Simulated: nobody can promote; the pause costs nothing.
        } else if (step.seconds === undefined) {
          if (!this.waitingSaid) {
            this.waitingSaid = true;
            ctx.emit({ type: 'canaryStep', index: n, kind: 'pause', weight: this.weight });
          }
          return;
        } else if (now < this.stepSince + step.seconds * 1000) {
          if (this.stepSince === now) ctx.emit({ type: 'canaryStep', index: n, kind: 'pause', weight: this.weight, seconds: step.seconds });
          ctx.wakeAt(this.stepSince + step.seconds * 1000);
          return;
        }
      } else {
        this.analyze(step, fresh, now);
        return;
      }
      this.index++;
      this.stepSince = undefined;
      this.waitingSaid = false;
      ctx.progress();
    }
  }

  private analyze(step: Extract<CanaryStepTarget['step'], { kind: 'analysis' }>, fresh: readonly Instance[], now: number): void {
    const { ctx } = this;
    const n = this.index + 1;
    const analyze = ctx.d.analyze;
    if (!analyze) {
      this.abort(
        'analysis step',
        new RolloutFailedError(
          `canary step ${n} (${step.path}) is an analysis, and no load balancer's access log can be read (loadBalancers/N/nginx/accessLog)`,
          'name the access log of each load balancer (accessLog: /var/log/nginx/fleetroll.log) so the analysis can read it',
        ),
      );
      return;
    }
    this.running = true;
    // The canary's share as nginx routes it: since the weight and the last canary were in force.
    const routed = ctx.inService(fresh, (k) => `the reload that gave ${k} canary instance(s) ${this.weight}% was in force in every load balancer`);
    const since: InService = routed
      ? { ...routed, atMs: Math.max(routed.atMs, this.weightInForceAt ?? 0) }
      : { atMs: now, why: `the canary is not in every load balancer at ${this.weight}%` };
    ctx.emit({ type: 'canaryStep', index: n, kind: 'analysis', weight: this.weight });
    analyze(step, since).then(
      (outcome) => {
        this.running = false;
        if (outcome === 'inconclusive') {
          // onInconclusive: pause: a human decides (promote or abort).
          this.heldByAnalysis = true;
          ctx.emit({ type: 'canaryHeld', index: n, weight: this.weight });
          ctx.schedule();
          return;
        }
        this.index++;
        this.stepSince = undefined;
        ctx.progress();
        ctx.schedule();
      },
      (err: unknown) => {
        this.running = false;
        this.abort('the analysis failed', err);
      },
    );
  }

  /**
   * fleetroll abort, or a failed analysis: the canary out of every upstream in
   * one write and one reload (stable alone, no weights), then drained and
   * removed; the rollout ends failed (exit 1) saying why.
   */
  private abort(reason: string, error?: unknown): void {
    const { ctx } = this;
    if (this.final || ctx.ending) return;
    const now = ctx.now();
    for (const inst of ctx.fresh()) this.life.drainOut(inst, now);
    ctx.emit({ type: 'canaryAborted', reason });
    ctx.d.journal('abort', 'begin', { reason });
    ctx.end({ kind: 'aborted', reason, error });
  }

  /** The weights that give the canary its share of the hash ring, while the steps run. */
  override upstream(list: UpstreamList): WantedUpstream {
    const { ctx } = this;
    if (this.final || ctx.ending !== undefined) {
      this.writingWeight = undefined;
      return { servers: list };
    }
    const out = list.entries();
    // A new weight goes out once the canary set it needs is available (one reload per step, and
    // no canary carries a share meant for more); until then the weight in force holds.
    const freshInstances = ctx.instances().filter((i) => i.revision === ctx.revision);
    const fresh = new Set(freshInstances.map((i) => i.address));
    const stable = out.filter((e) => !fresh.has(e.address));
    const canary = out.filter((e) => fresh.has(e.address) && !e.down);
    const complete = freshInstances.filter((i) => i.phase === 'available').length >= this.target();
    const weight = complete ? this.weight : (this.inForceWeight ?? 0);
    // What is being written: the reload that confirms it puts this weight in force (reloading).
    this.writingWeight = weight;
    const hashed = weight > 0 && canary.length > 0 && stable.some((e) => !e.down);
    // Canaries being drained (a lower weight needs fewer) stay listed, down, like any drain.
    const draining = out.filter((e) => fresh.has(e.address) && e.down);
    if (!hashed) {
      if (weight !== 0 && canary.length > 0) return { servers: list };
      // Weight 0: a canary nginx never sent traffic is not listed; one that had some (0 after a
      // higher weight) is marked down, as a drain is, for as long as the weight holds.
      const hadTraffic = canary.filter((e) => ctx.traffic.routes(e.address) || ctx.traffic.markedDown(e.address)).map((e) => ({ ...e, down: true }));
      return { servers: [...stable, ...hadTraffic, ...draining] };
    }
    return { servers: [...splitTraffic(stable, canary, weight), ...draining], hash: this.s.canary.stickyKey };
  }

  override keepsDraining(_inst: Instance, e: Ending): boolean {
    // An abort drains the canary on purpose.
    return e.kind === 'aborted';
  }

  override closing(e: Ending, where: string): unknown {
    if (e.kind !== 'aborted') return undefined;
    const { ctx } = this;
    ctx.emit({ type: 'failed', reason: `canary aborted: ${e.reason}` });
    ctx.d.journal('failed', 'end', { aborted: e.reason });
    const cause = e.error instanceof Error ? `\n${e.error.message}` : '';
    return new RolloutFailedError(
      `canary aborted (${e.reason}): all traffic is back on the stable revision and the canary instances were removed: ${where}${cause}`,
      'the stable revision serves alone; fix the new version and deploy again',
      { aborted: e.reason, ...(e.reason === 'the analysis failed' ? { stoppedBy: 'analysis' } : {}) },
    );
  }
}
