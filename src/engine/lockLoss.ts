/**
 * A rollout lock on a lease (etcd) can be lost mid-rollout: the cluster does
 * not answer or lost its quorum, and the lease may run out, after which
 * another machine may take the lock. The rollout then stops as at Ctrl-C (the
 * step in progress finished or undone, the fleet consistent), its own writes
 * are refused by the store's fence, and the error says what happened and
 * that `resume` continues it.
 */
import { FleetrollError } from '../errors.js';
import type { FleetLockPort } from '../ports.js';
import type { DeployDeps } from './rollout.js';

export interface LockLoss {
  /** The rollout's signal: the caller's (Ctrl-C), or the loss of the lock. */
  signal: AbortSignal | undefined;
  /** Why the lock was lost, once it was. */
  why(): string | undefined;
  /** The error a rollout that ended after the loss fails with (exit 1, E_ETCD). */
  error(err: unknown): FleetrollError;
  dispose(): void;
}

export function followLockLoss(lock: FleetLockPort, signal: AbortSignal | undefined, emit: NonNullable<DeployDeps['events']>): LockLoss {
  if (!lock.onLost) return { signal, why: () => undefined, error: (err) => err as FleetrollError, dispose: () => {} };
  const lost = new AbortController();
  let why: string | undefined;
  const stop = lock.onLost((w) => {
    why = w;
    emit({ type: 'info', message: `lost the fleet's lock: ${w}: stopping after the step in progress, as at Ctrl-C; no change after it` });
    lost.abort();
  });
  return {
    signal: signal ? AbortSignal.any([signal, lost.signal]) : lost.signal,
    why: () => why,
    error: (err) => {
      const where = err instanceof Error ? (err.message.split('\n')[0] ?? '') : String(err);
      return new FleetrollError(
        'E_ETCD',
        `lost the fleet's lock: ${why}. The rollout stopped after its step in progress and changed nothing after it (${where})`,
        {
          hint: 'once etcd answers again: fleetroll resume -f <fleet> continues the rollout (fleetroll status shows where it stands)',
          cause: err,
        },
      );
    },
    dispose: stop,
  };
}
