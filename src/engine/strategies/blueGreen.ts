/**
 * BlueGreen. The new set starts beside the old one and stays out of nginx
 * until every new instance is available (and in the preview upstream,
 * prePromotion passed, `fleetroll promote` given, as the steps say); then
 * one write and one reload per nginx puts the new set in and the old one
 * down (the switch). The old set waits out scaleDownDelaySeconds still
 * running, so a switch back (`fleetroll undo`, or a failed analysis) is
 * again one reload; after that it is stopped like any drained instance.
 */
import { isTerminating, type Hold } from '../../core/decide.js';
import { blueGreenSteps, type BlueGreenStepKind } from '../../core/strategySteps.js';
import type { BlueGreenStrategy } from '../../core/strategy.js';
import type { UpstreamEntry } from '../../core/upstream.js';
import { RolloutFailedError } from '../../errors.js';
import type { SwitchTimes } from '../../ports.js';
import type { ControllerResult, RolloutContext } from '../context.js';
import type { Ending, Instance } from '../instance.js';
import type { Lifecycle } from '../lifecycle.js';
import type { TrafficOptions } from '../traffic.js';
import { BaseDriver } from './base.js';

type State = 'before' | 'promoting' | 'switched';

export class BlueGreenDriver extends BaseDriver {
  private readonly s: BlueGreenStrategy;
  private readonly steps: readonly BlueGreenStepKind[];
  private readonly delayMs: number;
  private state: State = 'before';
  /** Old instances alive when the rollout began: none may go before the switch. */
  private oldAtStart = 0;
  private promoted = false;
  private waitingSaid = false;
  private backRequested = false;
  private backDone = false;
  /** When the switch was decided, confirmed in force in every nginx, and issued; the same for a switch back. */
  private switchedAt: number | undefined;
  private switchInForceAt: number | undefined;
  private switchIssuedAt: number | undefined;
  private backInForceAt: number | undefined;
  private backIssuedAt: number | undefined;
  private gateStarted = false;
  /** The switch is decided: the step that terminates the old set requests its write. */
  private switchToWrite = false;
  /** The gate after the switch is measuring: the rollout is not complete (nor stalled) until it decides. */
  private gateRunning = false;
  readonly preview: TrafficOptions['preview'];

  constructor(ctx: RolloutContext, life: Lifecycle, s: BlueGreenStrategy) {
    super(ctx, life);
    this.s = s;
    this.steps = blueGreenSteps(s, { prePromotion: ctx.d.prePromotion !== undefined, cannotPromote: !ctx.d.promoted });
    this.delayMs = s.blueGreen.scaleDownDelaySeconds * 1000;
    this.preview = s.blueGreen.previewUpstream !== undefined ? { upstream: s.blueGreen.previewUpstream, servers: () => this.previewServers() } : undefined;
  }

  private has(step: BlueGreenStepKind): boolean {
    return this.steps.includes(step);
  }

  override begin(): void {
    const { ctx } = this;
    this.oldAtStart = ctx.instances().filter((i) => i.revision !== ctx.revision && i.phase !== 'failed').length;
    const { promoted, switchBack } = ctx.d;
    if (this.has('awaitPromote') && promoted) {
      ctx.every(
        ctx.timing.switchBackPollMs,
        async () => {
          if (ctx.ending || this.promoted || this.state !== 'before') return;
          if (await promoted().catch(() => false)) {
            this.promoted = true;
            ctx.emit({ type: 'promoted', skipsSteps: false });
            ctx.schedule();
          }
        },
        ctx.d.stateWrites,
      );
    }
    if (switchBack) {
      ctx.every(
        ctx.timing.switchBackPollMs,
        async () => {
          if (ctx.ending || !this.inScaleDownDelay()) return;
          if (await switchBack().catch(() => false)) this.switchBack();
        },
        ctx.d.stateWrites,
      );
    }
  }

  /** Before the switch the whole new set may start, and no old instance may go. */
  hold(): Hold | undefined {
    return this.state !== 'switched' ? { maxNew: this.ctx.d.fleet.replicas, minOld: this.oldAtStart } : undefined;
  }

  override waiting(): boolean {
    // Waiting out scaleDownDelaySeconds, the gate, or an operator is the plan, not a stall.
    return this.inScaleDownDelay() || this.gateRunning || (this.waitingSaid && !this.promoted && this.state === 'before');
  }

  override settled(): boolean {
    if (this.gateRunning || this.switchToWrite || this.state === 'promoting') return false;
    // With no old set to wait on (a first deploy) decide says complete as soon as the new set
    // is available, before promotion and the switch: complete means nginx routes the new set.
    const { ctx } = this;
    // A heal's left-out instance (unready when it began) is not waited for: it stays out of nginx.
    return (
      this.state === 'switched' ||
      ctx.fresh().every((i) => (i.leftUnready === true && i.phase === 'unready') || (i.address !== undefined && ctx.traffic.routes(i.address)))
    );
  }

  override hidesNew(): boolean {
    return this.state !== 'switched';
  }

  override wholeUpstream(): boolean {
    return true;
  }

  /** Once every new instance is available: the preview, prePromotion, promote, then the switch. */
  reconcile(): void {
    const { ctx } = this;
    if (this.switchToWrite) {
      this.switchToWrite = false;
      ctx.traffic.request();
    }
    if (this.state !== 'before') return;
    const fresh = ctx.fresh();
    if (fresh.length < ctx.d.fleet.replicas || fresh.some((i) => i.phase !== 'available')) return;
    // With a preview upstream, prePromotion tries the new set there: wait until nginx has it.
    if (this.has('preview') && fresh.some((i) => !ctx.traffic.inPreview(i.address))) {
      ctx.traffic.request();
      return;
    }
    if (this.has('awaitPromote') && !this.promoted) {
      if (!this.waitingSaid) {
        this.waitingSaid = true;
        ctx.emit({ type: 'awaitingPromote', instances: fresh.length });
      }
      // Waiting for an operator is not a stall.
      ctx.progress();
      return;
    }
    this.state = 'promoting';
    const prePromotion = ctx.d.prePromotion;
    const promote = prePromotion ? prePromotion(ctx.instances()) : Promise.resolve();
    promote.then(
      () => {
        if (ctx.ending) return;
        this.state = 'switched';
        this.switchedAt = ctx.now();
        ctx.emit({ type: 'switch', instances: fresh.length, prePromotion: prePromotion !== undefined });
        ctx.d.journal('switch', 'begin', { keepOldMs: this.delayMs });
        ctx.progress();
        // The next step's decision terminates the whole old set at once; the switch is requested
        // from that step (reconcile), after it: requested here, a write still finishing (the
        // preview's) went out again at once with the new set up beside the old (two reloads).
        this.switchToWrite = true;
        ctx.schedule();
      },
      (err: unknown) => {
        this.state = 'before';
        ctx.end({ kind: 'failed', error: err });
      },
    );
  }

  /** The old set is switched out and still running, waiting out scaleDownDelaySeconds. */
  private inScaleDownDelay(): boolean {
    if (this.state !== 'switched' || this.backRequested) return false;
    const { ctx } = this;
    const old = ctx.instances().filter((i) => i.revision !== ctx.revision && i.phase !== 'failed');
    const now = ctx.now();
    return old.length > 0 && old.every((i) => i.phase === 'draining' && i.stopAt !== undefined && i.stopAt > now);
  }

  override reloading(now: number): void {
    const { ctx } = this;
    // The reload that puts the new set in is the switch users see. It is recorded as in force
    // (every nginx confirmed its new workers), with the time it was issued beside it: nginx
    // moves traffic between the two, and on a busy load balancer they are seconds apart.
    if (
      this.state === 'switched' &&
      this.switchInForceAt === undefined &&
      ctx.instances().some((i) => i.revision === ctx.revision && ctx.traffic.routes(i.address))
    ) {
      this.switchInForceAt = now;
      this.switchIssuedAt = ctx.traffic.reloadIssuedAt ?? now;
      // The gate judges the new set from the switch on, however long the old set is kept: with
      // scaleDownDelaySeconds no longer than the drain it used never to start at all.
      this.startGate();
    }
  }

  /** The old set, switched out: kept running for scaleDownDelaySeconds (at least the drain). */
  private keepsOld(inst: Instance): boolean {
    return this.state === 'switched' && !this.backRequested && inst.revision !== this.ctx.revision && this.ctx.ending === undefined;
  }

  override drainMsFor(inst: Instance): number {
    return this.keepsOld(inst) ? Math.max(this.ctx.drainMs, this.delayMs) : this.ctx.drainMs;
  }

  override drained(names: string[]): void {
    const { ctx } = this;
    const kept = this.state === 'switched' && !this.backRequested && ctx.ending === undefined && this.delayMs > ctx.drainMs;
    if (kept) ctx.emit({ type: 'switched', kept: names.length, seconds: this.s.blueGreen.scaleDownDelaySeconds });
    ctx.emit({ type: 'draining', names, seconds: kept ? Math.max(ctx.drainMs, this.delayMs) / 1000 : ctx.d.fleet.drainSeconds });
  }

  override reloaded(now: number): void {
    const { ctx } = this;
    const ending = ctx.ending;
    if (!this.backRequested || ending?.kind !== 'switchedBack' || this.backDone) return;
    if (!ctx.instances().every((i) => i.revision === ctx.revision || isTerminating(i.phase) || ctx.traffic.routes(i.address) || !i.address)) return;
    this.backDone = true;
    this.backInForceAt = now;
    this.backIssuedAt = ctx.traffic.reloadIssuedAt ?? now;
    const ms = now - ending.requestedAt;
    ctx.emit({ type: 'switchedBack', ms });
    ctx.d.journal('switched-back', 'end', { ms });
  }

  /** With `analysis:`: the gate over the new set's first minutes of all traffic; failing, switch back while the old set waits. */
  private startGate(): void {
    const { ctx } = this;
    const gate = ctx.d.afterSwitch;
    if (!gate || this.gateStarted) return;
    this.gateStarted = true;
    this.gateRunning = true;
    const at = this.switchInForceAt ?? ctx.now();
    gate({ atMs: at, why: 'the switch was in force in every load balancer' }).then(
      (outcome) => {
        this.gateRunning = false;
        if (outcome === 'inconclusive')
          ctx.emit({
            type: 'info',
            message: 'analysis after the switch was inconclusive: the new set stays; `fleetroll undo` switches back until the old set is removed',
          });
        ctx.schedule();
      },
      (err: unknown) => {
        this.gateRunning = false;
        ctx.schedule();
        if (ctx.ending) return;
        if (this.inScaleDownDelay()) this.switchBack(err);
        else
          ctx.end({
            kind: 'failed',
            error: new RolloutFailedError(
              `${err instanceof Error ? err.message : String(err)}\nthe old set was already being removed (scaleDownDelaySeconds is shorter than the analysis), so traffic stays on the new set`,
              'deploy the previous image to go back; give scaleDownDelaySeconds room for the analysis interval',
            ),
          });
      },
    );
  }

  /**
   * fleetroll undo during scaleDownDelaySeconds: the old set back in and the
   * new set down in one write and one reload per nginx, then the new set is
   * drained and removed, and the rollout ends as rolled back.
   */
  private switchBack(error?: unknown): void {
    const { ctx } = this;
    if (this.backRequested || ctx.ending) return;
    this.backRequested = true;
    const now = ctx.now();
    for (const inst of ctx.view.values()) {
      if (inst.revision !== ctx.revision && inst.phase === 'draining') {
        inst.before ??= 'available';
        this.life.putBack(inst, false);
      } else if (inst.revision === ctx.revision && !isTerminating(inst.phase)) {
        this.life.drainOut(inst, now);
      }
    }
    ctx.emit({ type: 'switchingBack', cause: error ? 'analysis' : 'undo' });
    ctx.d.journal('switch-back', 'begin', {});
    ctx.end({ kind: 'switchedBack', requestedAt: now, ...(error !== undefined ? { error } : {}) });
    ctx.traffic.hurry();
  }

  override keepsDraining(inst: Instance, e: Ending, now: number): boolean {
    // A switch back drains the new set on purpose.
    if (e.kind === 'switchedBack') return true;
    // After the switch the old set never goes back in beside the new one (two versions in
    // traffic); what waits out the delay is stopped once its drain is over.
    if (this.state === 'switched' && inst.revision !== this.ctx.revision) {
      if (inst.stopAt !== undefined) inst.stopAt = Math.min(inst.stopAt, Math.max(now, (this.switchedAt ?? now) + this.ctx.drainMs));
      return true;
    }
    return false;
  }

  override closing(e: Ending, where: string): unknown {
    if (e.kind !== 'switchedBack') return undefined;
    const { ctx } = this;
    ctx.emit({ type: 'failed', reason: 'switched back' });
    ctx.d.journal('rolled back', 'end', { by: 'undo' });
    const why = e.error === undefined ? 'undo' : 'the analysis failed';
    const cause = e.error instanceof Error ? `\n${e.error.message}` : '';
    return new RolloutFailedError(
      `rolled back (${why}): traffic switched back to the old set in one reload; the new set was drained and removed: ${where}${cause}`,
      'the fleet runs the previous revision again; fix the new version and deploy again',
      { switchedBack: true, ...this.switchTimes(), ...(e.error !== undefined ? { stoppedBy: 'analysis' } : {}) },
    );
  }

  /** The switch and switch-back, each as in force and as issued (ISO times), for the revision's record. */
  private switchTimes(): SwitchTimes {
    const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
    if (this.switchInForceAt === undefined) return {};
    return {
      switchedAt: iso(this.switchInForceAt),
      switchIssuedAt: iso(this.switchIssuedAt),
      ...(this.backInForceAt !== undefined ? { switchedBackAt: iso(this.backInForceAt), switchBackIssuedAt: iso(this.backIssuedAt) } : {}),
    };
  }

  override result(): Partial<ControllerResult> {
    return this.switchInForceAt !== undefined ? { switchedAtMs: this.switchInForceAt, switchIssuedAtMs: this.switchIssuedAt } : {};
  }

  /** The preview upstream: the new set's ready instances until the switch, then nothing. */
  private previewServers(): UpstreamEntry[] {
    if (this.state === 'switched') return [];
    const out: UpstreamEntry[] = [];
    for (const i of this.ctx.view.values()) {
      if (i.address && i.revision === this.ctx.revision && (i.phase === 'ready' || i.phase === 'available'))
        out.push({ address: i.address, down: false, name: i.id });
    }
    return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
}
