/**
 * The notifications of one managed rollout (engine/session.ts): start once
 * its revision is recorded, rollback when it goes back (onFailure: rollback,
 * an analysis, undo, a blue-green switch back), then success or failure.
 * Nothing here throws or waits, but `flush` at the very end, which is bounded.
 */
import type { Fleet } from '../config/load.js';
import type { Webhook } from '../core/notify.js';
import { FleetrollError } from '../errors.js';
import type { RevisionRecord } from '../ports.js';
import type { EventSink, RolloutEvent } from './events.js';
import { healthOf } from './health.js';
import { Notifier, type NotifyFailure } from './notify.js';
import type { DeployDeps, DeployResult } from './types.js';

/** What started the rollout: the CLI verb (the library's runManaged says deploy). */
export type RolloutKind = 'deploy' | 'undo' | 'restart' | 'resume';

type Revision = Pick<RevisionRecord, 'number' | 'hash' | 'version' | 'image' | 'changeCause'>;

export class RolloutNotifications {
  private revision: Revision | undefined;
  private started = false;

  private constructor(
    private readonly notifier: Notifier,
    private readonly fleet: Fleet,
    private readonly kind: RolloutKind,
    /** The fleet's history, to name the revision a rollback goes back to. */
    private readonly history: () => readonly RevisionRecord[],
  ) {}

  /** Undefined when the fleet names no webhook or nothing can send. */
  static of(
    fleet: Fleet,
    deps: Pick<DeployDeps, 'webhookPost' | 'events'>,
    kind: RolloutKind,
    history: () => readonly RevisionRecord[],
  ): RolloutNotifications | undefined {
    const webhooks: readonly Webhook[] = fleet.notify?.webhooks ?? [];
    if (webhooks.length === 0 || !deps.webhookPost) return undefined;
    const emit = deps.events ?? (() => {});
    const failed = (f: NotifyFailure) => emit({ type: 'notifyFailed', ...f });
    return new RolloutNotifications(new Notifier(webhooks, deps.webhookPost, failed), fleet, kind, history);
  }

  private base(r: Revision | undefined) {
    return {
      service: this.fleet.service,
      revision: r?.number,
      revisionHash: r?.hash,
      version: r?.version ?? this.fleet.version,
      image: r?.image ?? this.fleet.image,
      kind: this.kind,
      changeCause: r?.changeCause,
    };
  }

  /** The revision is recorded: the rollout begins changing the fleet. An undo is a rollback as well. */
  start(r: Revision): void {
    this.revision = r;
    this.started = true;
    this.notifier.send({ ...this.base(r), event: 'start', outcome: 'started' });
    if (this.kind === 'undo') this.notifier.send({ ...this.base(r), event: 'rollback', outcome: 'undo' });
  }

  success(result: DeployResult): void {
    this.notifier.send({ ...this.base(this.revision), event: 'success', outcome: 'complete', durationMs: result.durationMs, health: result.health });
  }

  /**
   * Any end but complete, once it began, or a preflight refusal (nothing
   * changed, and no revision recorded): `outcome` says which.
   */
  failure(err: unknown, outcome: string, durationMs: number): void {
    if (!this.started && !(err instanceof FleetrollError && err.code === 'E_ROLLOUT_FAILED')) return;
    const error =
      err instanceof FleetrollError
        ? { code: err.code, message: err.message }
        : { code: 'E_INTERNAL', message: err instanceof Error ? err.message : String(err) };
    this.notifier.send({ ...this.base(this.revision), event: 'failure', outcome, durationMs, health: healthOf(err), error });
  }

  /** Wraps the rollout's event sink: the engine's own announcements of going back become `rollback`. */
  watch(sink: EventSink | undefined): EventSink {
    return (e: RolloutEvent) => {
      sink?.(e);
      if (e.type === 'rollingBack') {
        const to = this.history().findLast((x) => x.hash === e.revision);
        this.notifier.send({
          ...this.base(undefined),
          revision: to?.number,
          revisionHash: e.revision,
          version: e.version,
          image: e.image,
          changeCause: this.revision?.changeCause,
          event: 'rollback',
          outcome: 'rolling back',
        });
      } else if (e.type === 'switchingBack') {
        const to = this.history().findLast((x) => x.outcome === 'complete' && x.hash !== this.revision?.hash);
        this.notifier.send({
          ...this.base(to ?? this.revision),
          changeCause: this.revision?.changeCause,
          event: 'rollback',
          outcome: `switching back (${e.cause})`,
        });
      }
    };
  }

  flush(): Promise<void> {
    return this.notifier.flush();
  }
}
