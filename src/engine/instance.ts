/**
 * One instance as the rollout controller tracks it, and how a run can end.
 * Shared by the loop (controller.ts), the lifecycle that alone writes an
 * instance's phase and routing (lifecycle.ts), readiness (availability.ts),
 * the endings and the strategy drivers (strategies/).
 */
import type { InstanceView, Phase } from '../core/decide.js';
import type { GateStart } from './analysis.js';

export interface Instance extends InstanceView {
  /** Docker's container id; undefined while it is being created. */
  dockerId?: string | undefined;
  address?: string | undefined;
  /** The phase before termination began: where an undone drain goes back to. */
  before?: Phase | undefined;
  readySince?: number | undefined;
  /** Instances started together (Lifecycle.batchOf): their readiness is awaited together by nginx writes. */
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
  /** Its drain is a plain one (drainSeconds, no strategy's hold): it may end once no request is in flight (idleDrain.ts). */
  idleDrain?: boolean | undefined;
  /** When its drain began (the mark-down in force), for the drained event. */
  drainFrom?: number | undefined;
  /** When the reload that put it up in every nginx was confirmed in force (what an analysis of its traffic starts from). */
  inForceAt?: number | undefined;
  /**
   * Found not ready at the start while nginx routed it: it stays up in nginx
   * until it answers ready again or the rollout marks it down (then it is
   * drained like a serving one). A readiness probe that times out on a busy
   * machine must not make a deploy's first write empty the upstream; it still
   * counts as unavailable, so it is replaced first.
   */
  keptInTraffic?: boolean | undefined;
  /**
   * A heal found it unready (it leaves nginx at once): the heal does not wait
   * for it. `fleetroll watch` goes on looking: it puts it back when it answers,
   * and replaces it once it has been unready for progressDeadlineSeconds.
   * Waiting here would hold the fleet's lock (a deploy refused) until the
   * heal's own deadline, and then fail.
   */
  leftUnready?: boolean | undefined;
  /** When it first became ready in this rollout: its monitor window runs from here (Availability). */
  firstReadyAt?: number | undefined;
  /**
   * It exited within its monitor window: failed for this rollout, never put
   * back in traffic even when its engine restarts it. What happened, for the
   * report.
   */
  crashed?: string | undefined;
  /** What the last probe or observation said, for the deadline report. */
  lastProbe: string;
  /** How it last exited, when it did and then ran again (restarted by its engine): kept for the deadline report. */
  lastExit?: string | undefined;
  labels: Record<string, string>;
}

/**
 * Since when nginx has routed what a gate or hook is about to judge (see
 * GateStart): never the decision or readiness alone.
 */
export type InService = GateStart;

/**
 * Why a run stops making progress. The first three any rollout can have; a
 * switch back (blue-green) and an abort (canary) are their drivers' own.
 */
export type Ending =
  | { kind: 'interrupted' }
  | { kind: 'paused' }
  | { kind: 'failed'; error: unknown }
  | { kind: 'switchedBack'; requestedAt: number; error?: unknown }
  | { kind: 'aborted'; reason: string; error?: unknown };

export function isServing(phase: Phase): boolean {
  return phase === 'ready' || phase === 'available';
}
