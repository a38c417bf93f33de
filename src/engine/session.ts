/**
 * A rollout as operators run it day to day: under the fleet lock, recorded
 * as a revision in the fleet's history, journaled step by step, pausable from
 * another machine, and recovering cleanly when the previous run was killed.
 * deploy, undo, restart and resume all go through `runManaged`. What a
 * revision's record holds is records.ts; adopt and the switch-back request
 * are adopt.ts and switchBack.ts.
 */
import { randomBytes } from 'node:crypto';
import type { Fleet } from '../config/load.js';
import type { FleetState, RevisionRecord, RolloutOutcome } from '../ports.js';
import { RolloutNotifications, type RolloutKind } from './notifyRollout.js';
import { journalWriter, unfinishedRollout } from './journal.js';
import type { HealthWatch } from './health.js';
import { FleetrollError } from '../errors.js';
import { deploy, healthOf, prepare, startHealthWatch, RolloutFailedError, type DeployDeps, type DeployOptions, type DeployResult } from './rollout.js';
import type { FleetHandles } from './types.js';
import { revisionOf } from './revision.js';
import { adoptedOf, forgetRemovedAdopted } from './adopt.js';
import { followLockLoss } from './lockLoss.js';
import { changesFromRunning, finishRecord, outcomeOf, recordedSpecOf, recordSpec, scrubLegacySecrets, switchTimesOf, withState } from './records.js';

export type { FleetHandles } from './types.js';

export interface ManagedOptions extends Omit<DeployOptions, 'heal'> {
  /** The command line, recorded with the lock. */
  command: string;
  /** Wait this long for a held lock (ms); 0 fails at once with exit 3. */
  lockWaitMs?: number;
  /** Continue this revision record instead of starting a new one (resume). */
  continueRevision?: number;
  /**
   * `fleetroll watch`: heal the fleet at its latest revision, which must be
   * complete and have this spec, for this reason. The revision's record is
   * left as its deploy wrote it; the journal has the heal.
   */
  heal?: string | undefined;
  /** What the notifications say started the rollout (default deploy). */
  kind?: RolloutKind;
}

export interface ManagedResult extends DeployResult {
  revisionNumber: number;
}

export { outcomeOf };

export async function runManaged(fleetIn: Fleet, deps: DeployDeps, h: FleetHandles, o: ManagedOptions): Promise<ManagedResult> {
  const startedAtMs = Date.now();
  const emit = deps.events ?? (() => {});
  // The state and lock containers never run; they need some image present on
  // the first host: the state container's own, else the fleet's, else a placeholder.
  const firstHost = fleetIn.hosts[0]?.name ?? '';
  const first = deps.runtimes.get(firstHost);
  // They live on the first host: an error reaching it (TLS, ssh, down) is a preflight failure naming it.
  try {
    await first?.ping();
  } catch (err) {
    const hint = err instanceof FleetrollError && err.hint ? err.hint : 'fix the problem above and run the deploy again';
    throw new RolloutFailedError(
      `preflight failed, nothing was changed:\n  ${(err as Error).message}`,
      hint,
      err instanceof FleetrollError ? { code: err.code } : {},
      'preflight',
    );
  }
  let image = await h.store.image();
  if (!image) {
    // Without the fleet's image there yet, a placeholder image: preflight then
    // copies or pulls the fleet's image to the host (or fails, naming it).
    image = (await first?.imageExists(fleetIn.image)) ? fleetIn.image : await h.store.placeholderImage();
    await h.store.ensure(image);
  }
  h.lock.onTakeover = (prev) =>
    emit({ type: 'info', message: `took over a stale lock of ${prev.holder} (pid ${prev.pid}, ${prev.command}): its holder is gone` });
  await acquireLock(h, image, o, emit);
  const loss = followLockLoss(h.lock, o.signal, emit);
  let healthWatch: HealthWatch | undefined;
  let state: FleetState | undefined;
  let offering: Promise<void> | undefined;
  // Only once the lock is held: a deploy refused because another runs tells the webhooks nothing.
  // A heal is no deploy to its webhooks: fleetroll watch sends `heal` once it has healed.
  const notes = o.heal === undefined ? RolloutNotifications.of(fleetIn, deps, o.kind ?? 'deploy', () => state?.revisions ?? []) : undefined;
  const began = Date.now();
  try {
    state = (await h.store.read()) ?? { service: fleetIn.service, nextRevision: 1, revisions: [] };
    if (state.paused && o.continueRevision === undefined) {
      throw new FleetrollError('E_PAUSED', `fleet ${fleetIn.service} is paused (fleetroll pause)`, {
        hint: 'continue the paused rollout with `fleetroll resume -f <fleet>`',
      });
    }
    // The key of the revision hash: made once, kept in the state, never shown.
    state.revisionKey ??= randomBytes(16).toString('hex');
    scrubLegacySecrets(state);
    // Preflight and pinning first: the digest the image resolves to is part of the revision recorded below.
    // The health window opens before preflight, and before the deploy's duration starts counting.
    healthWatch = deps.accessLogs ? await startHealthWatch(withState(fleetIn, state), deps) : undefined;
    const t0 = Date.now();
    const fleet = await prepare(withState(fleetIn, state), deps, { ...o, heal: o.heal !== undefined });
    const preparedMs = Date.now() - t0;
    const hash = revisionOf(fleet);
    const changes = changesFromRunning(fleetIn, state);
    if (changes && changes.from.hash !== hash) {
      emit({
        type: 'info',
        message: changes.lines.length
          ? `changes from revision ${changes.from.number} (${changes.from.hash}):\n  ${changes.lines.join('\n  ')}`
          : `revision ${changes.from.number} (${changes.from.hash}) differs only in what it was recorded with (the revision key)`,
      });
    }
    const rollout = `${new Date().toISOString()}-${randomBytes(3).toString('hex')}`;

    const journal = await h.store.journal();
    const crashed = unfinishedRollout(journal);
    const write = journalWriter(h.store, rollout, (e) => emit({ type: 'info', message: `journal: ${(e as Error).message}` }));
    if (crashed) {
      const msg = `recovering: the previous rollout (${crashed.rollout}) stopped without finishing; its last step was ${crashed.last.step}${crashed.last.phase ? ` (${crashed.last.phase})` : ''}${crashed.last.detail ? ` ${JSON.stringify(crashed.last.detail)}` : ''}`;
      emit({ type: 'info', message: msg });
      write('recovered', 'end', { from: crashed.rollout, lastStep: crashed.last.step, lastDetail: crashed.last.detail });
    }

    // The revision record: continue one (resume), or start a new one.
    let record: RevisionRecord;
    const existing = o.continueRevision !== undefined ? state.revisions.find((r) => r.number === o.continueRevision) : undefined;
    const latestRecord = state.revisions[state.revisions.length - 1];
    if (o.heal !== undefined) {
      // A deploy may have finished between the watch's look and this lock: heal only what it looked at.
      if (!latestRecord || latestRecord.hash !== hash || latestRecord.outcome !== 'complete') {
        throw new FleetrollError(
          'E_HEAL_STALE',
          `not healing: the fleet's latest revision is ${latestRecord ? `${latestRecord.number} (${latestRecord.outcome})` : 'none'}, not the one looked at`,
          { hint: 'the watch looks again' },
        );
      }
      record = latestRecord;
    } else if (existing) {
      record = existing;
      record.outcome = 'in progress';
    } else {
      const latest = state.revisions[state.revisions.length - 1];
      if (latest && latest.hash === hash) {
        // The same spec as the latest revision (after a failure or a crash, or
        // simply again): the same revision, continued; no new number.
        record = latest;
        record.outcome = 'in progress';
      } else {
        record = {
          number: state.nextRevision++,
          hash,
          image: fleet.image,
          digest: fleet.digest,
          version: fleet.version,
          port: fleet.port,
          ...recordSpec(fleet, state.revisionKey),
          restartedAt: fleet.restartedAt,
          changeCause: o.changeCause ?? o.command,
          who: h.who,
          when: new Date().toISOString(),
          outcome: 'in progress',
        };
        state.revisions.push(record);
      }
    }
    if (o.heal === undefined) {
      // A switch-back asked of an earlier rollout is not this one's to act on.
      state.switchBack = undefined;
      await h.asks?.withdraw().catch(() => {});
      state.promote = undefined;
      state.abort = undefined;
      // A continued record's numbers were an earlier rollout's: this one measures its own.
      delete record.health;
      // revisionHistoryLimit old revisions are kept, plus the current one.
      state.revisions = state.revisions.slice(-(fleet.revisionHistoryLimit + 1));
      await h.store.write(state);
    }
    // The one entry awaited: from here on a crash is recognised as an unfinished rollout.
    write('begin', 'begin', { revision: record.number, hash, image: fleet.image, version: fleet.version, ...(o.heal !== undefined ? { heal: o.heal } : {}) });
    await write.flush();
    notes?.start(record);

    const paused = async () => (await h.store.read())?.paused === true;
    const adopted = adoptedOf(state);
    try {
      const asks = o.heal === undefined ? h.asks : undefined;
      const switchBack = asks ? () => asks.asked(rollout) : async () => (await h.store.read())?.switchBack === true;
      const promoted = async () => (await h.store.read())?.promote === true;
      const aborted = async () => (await h.store.read())?.abort === true;
      // A rollback rebuilds the revision the fleet ran from its record (engine/rollout.ts previousFleet).
      const recordedSpec = (revision: string) => {
        const r = state?.revisions.findLast((x) => x.hash === revision);
        if (!r) return undefined;
        const { secretIssues: _i, ...spec } = recordedSpecOf(r);
        return spec;
      };
      // An ask wakes the polls as a write into the state does (the switch-back's among them).
      const stateWrites =
        h.store.watch || asks
          ? (l: () => void) => {
              const stops = [h.store.watch?.(l), asks?.onAsk(l)];
              return () => stops.forEach((stop) => stop?.());
            }
          : undefined;
      const sink = notes?.watch(deps.events) ?? deps.events;
      // Blue-green: the old set waits, so undo may ask; offered once the switch is in force, withdrawn when the rollout ends.
      const events = asks
        ? (e: Parameters<NonNullable<typeof sink>>[0]) => {
            if (e.type === 'switched') offering = asks.offer(rollout).catch(() => {});
            sink?.(e);
          }
        : sink;
      const result = await deploy(
        fleet,
        {
          ...deps,
          events,
          journal: write,
          paused,
          switchBack,
          promoted,
          aborted,
          stateWrites,
          recordedSpec,
          recovering: crashed !== undefined,
          ...(adopted ? { adopted } : {}),
        },
        {
          ...o,
          signal: loss.signal,
          prepared: true,
          preparedMs,
          startedAtMs: o.startedAtMs ?? startedAtMs,
          healthWatch,
          heal: o.heal !== undefined,
          ...(o.heal !== undefined ? { knownRevisions: state.revisions.map((r) => r.hash) } : {}),
        },
      );
      await write.flush();
      if (o.heal === undefined)
        await finishRecord(
          h.store,
          record.number,
          'complete',
          `${result.waves} wave(s), ${result.reloads} reload(s), ${result.instances.length} instance(s) verified`,
          result.health,
          { switchedAt: result.switchedAt, switchIssuedAt: result.switchIssuedAt },
          result.costs,
        );
      notes?.success(result);
      return { ...result, revisionNumber: record.number };
    } catch (err) {
      const { outcome, message } = outcomeOf(err);
      // With the lock lost, the store refuses this process's writes (fenced): the record stays as the loss left it.
      if (o.heal === undefined)
        await finishRecord(h.store, record.number, outcome, message.split('\n')[0] ?? message, healthOf(err), switchTimesOf(err)).catch((e: unknown) => {
          if (loss.why() === undefined) throw e;
        });
      write(outcome, 'end', { message: message.split('\n')[0] });
      await write.flush();
      throw loss.why() === undefined ? err : loss.error(err);
    }
  } catch (err) {
    notes?.failure(err, outcomeOf(err).outcome, Date.now() - began);
    throw err;
  } finally {
    // After its offer is made: an offer made after the withdrawal would outlive the rollout.
    await offering;
    if (o.heal === undefined) await h.asks?.withdraw().catch(() => {});
    await healthWatch?.abandon();
    await forgetRemovedAdopted(h.store, deps).catch(() => {});
    loss.dispose();
    await h.lock.release();
    // After the lock: the next deploy need not wait for a slow receiver; the bound is FLUSH_BOUND_MS.
    await notes?.flush();
  }
}

/** How long a deploy waits for a heal of `fleetroll watch` that holds the lock: a heal is short, and the deploy must not fail because a watch runs. */
const HEAL_WAIT_MS = 10_000;

/**
 * Takes the fleet's rollout lock. Two deploys exclude each other (the second
 * exits 3, or waits with --lock-wait); a heal of `fleetroll watch` holds the
 * lock only for its duration, so a deploy that finds one waits for it.
 */
export async function acquireLock(h: FleetHandles, image: string, o: ManagedOptions, emit: NonNullable<DeployDeps['events']>): Promise<void> {
  const waitMs = o.lockWaitMs ?? 0;
  try {
    await h.lock.acquire(image, o.command, 0);
  } catch (err) {
    const holder = err instanceof FleetrollError && err.code === 'E_LOCK_HELD' ? (err.details as { command?: unknown } | undefined)?.command : undefined;
    if (o.heal !== undefined || holder !== 'fleetroll watch') {
      if (waitMs <= 0) throw err;
      await h.lock.acquire(image, o.command, waitMs);
      return;
    }
    // The heal ends as at Ctrl-C (its step finished or undone) and the watch yields: asked, not only waited for.
    const asked = await h.yieldAsks?.ask().then(
      () => true,
      () => false,
    );
    const wait = Math.max(waitMs, HEAL_WAIT_MS);
    emit({
      type: 'info',
      message: `fleetroll watch is healing the fleet: ${asked ? 'asked it to stop; ' : ''}waiting up to ${wait / 1000} s for its heal to end`,
    });
    try {
      await h.lock.acquire(image, o.command, wait);
    } finally {
      if (asked) await h.yieldAsks?.withdraw().catch(() => {});
    }
  }
}
