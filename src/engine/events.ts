/**
 * What a rollout reports while it runs. The engine emits these; the CLI turns
 * them into lines for people (cli/events.ts describeEvent), JSON logs, or a
 * live view; experiments read the strategy events below to name the phases
 * of a run. Nothing reads a message's words: what a consumer acts on is a
 * field of a typed event.
 */
import type { ChangeParts } from '../ports.js';

export type RolloutEvent =
  | { type: 'observed'; instances: number; byRevision: Record<string, number>; revision: string }
  | { type: 'wave'; index: number; start: number; stop: string[] }
  /**
   * A change in force in every load balancer. `ms`: from its write starting to
   * the last reload in force; `balancers`: the same per load balancer (by its
   * name), so a slow one is named; `parts`: where a real nginx's time went,
   * per load balancer (ports.ts ChangeParts: the raw operations, and the
   * waits and polls that are not). Absent on a restore, and in logs from
   * before they were measured.
   */
  /** `beside`: creates + starts in flight during the change, on any host (they share the engine with `nginx -t` and the reload on one machine). */
  | {
      type: 'upstream';
      action: 'drain' | 'enable' | 'final' | 'restore';
      down: string[];
      up: string[];
      reloads: number;
      ms?: number | undefined;
      balancers?: Record<string, number> | undefined;
      parts?: Record<string, ChangeParts> | undefined;
      reloadFree?: boolean | undefined;
      beside?: number | undefined;
    }
  | { type: 'draining'; names: string[]; seconds: number }
  /** A drain that could end early (every nginx counts requests in flight): `idle` when none was left, after `ms`; `drainSeconds` when the time ran out first. */
  | { type: 'drained'; name: string; reason: 'idle' | 'drainSeconds'; ms: number }
  /** `ms`: docker stop + remove (absent in logs from before it was measured). */
  | { type: 'stopped'; name: string; host: string; ms?: number | undefined }
  /** `ms`: docker create + start; `inFlight`: starts running on the host when it began, itself included (both absent in logs from before they were measured). */
  | { type: 'started'; name: string; host: string; address?: string | undefined; ms?: number | undefined; inFlight?: number | undefined }
  | { type: 'ready'; name: string }
  | { type: 'available'; name: string }
  /** `tries` and `elapsedMs`: how many probes the final check needed and how long they took (absent in logs from before it retried). */
  | { type: 'verified'; name: string; version: string; tries?: number | undefined; elapsedMs?: number | undefined }
  | { type: 'complete'; revision: string; version: string }
  | { type: 'failed'; reason: string }
  /** A webhook (named by position and host only) did not take an event after `tries` tries; the rollout goes on. */
  | { type: 'notifyFailed'; webhook: string; event: string; tries: number; reason: string }
  | StrategyEvent
  | { type: 'info'; message: string };

/** What blue-green, canary and a rollback announce: each starts a phase of the run. */
export type StrategyEvent =
  /** BlueGreen (autoPromote false): the new set is available, out of traffic, waiting for `fleetroll promote`. */
  | { type: 'awaitingPromote'; instances: number }
  /** `fleetroll promote` was seen; `skipsSteps`: a canary's remaining steps are skipped. */
  | { type: 'promoted'; skipsSteps: boolean }
  /** BlueGreen: every nginx gets the new set in one write and one reload. */
  | { type: 'switch'; instances: number; prePromotion: boolean }
  /** BlueGreen: the old set is out of traffic and kept running `seconds` (scaleDownDelaySeconds). */
  | { type: 'switched'; kept: number; seconds: number }
  /** BlueGreen: the old set back in and the new one down, in one reload. */
  | { type: 'switchingBack'; cause: 'undo' | 'analysis' }
  /** BlueGreen: the switch back is in force, `ms` after it was asked for. */
  | { type: 'switchedBack'; ms: number }
  /**
   * Canary: step `index` (1-based) begins. setWeight: `instances` canaries
   * for `weight`%; pause: `seconds` (undefined: until promote or abort).
   */
  | {
      type: 'canaryStep';
      index: number;
      kind: 'setWeight' | 'pause' | 'analysis';
      weight: number;
      instances?: number | undefined;
      seconds?: number | undefined;
    }
  /** Canary: an analysis step was inconclusive; the weight holds until promote or abort. */
  | { type: 'canaryHeld'; index: number; weight: number }
  /** Canary: the steps are over (or skipped by promote); a rolling update replaces the stable set. */
  | { type: 'canaryDone'; promoted: boolean }
  /** Canary: all traffic back to stable in one reload; the canaries are removed. */
  | { type: 'canaryAborted'; reason: string }
  /** onFailure: rollback: the previous revision is rolled out again. */
  | { type: 'rollingBack'; revision: string; image: string; version: string };

export type EventSink = (e: RolloutEvent) => void;
