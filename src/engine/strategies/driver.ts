/**
 * A strategy driver: what RollingUpdate/Recreate, BlueGreen and Canary do
 * beyond the one rolling decision (core/decide.ts). The loop asks every
 * driver the same questions in the same order (controller.ts step()), so it
 * has no branch per strategy; a new strategy is a new driver here plus its
 * pure steps in core/ (see docs/development.md, "Adding a strategy").
 *
 * Drivers never set an instance's phase or routing themselves: they ask the
 * lifecycle (drainOut, terminate) and nginx (Traffic.request).
 */
import type { Hold } from '../../core/decide.js';
import type { ResolvedStrategy } from '../../core/strategy.js';
import type { StickyKey, UpstreamEntry } from '../../core/upstream.js';
import type { ControllerResult } from '../context.js';
import type { Ending, Instance } from '../instance.js';
import type { TrafficOptions } from '../traffic.js';
import type { UpstreamList } from '../upstreamList.js';

/** What every nginx should have: the servers, and the sticky key of a `hash ... consistent` line (a canary split). */
export interface WantedUpstream {
  servers: UpstreamList | readonly UpstreamEntry[];
  hash?: StickyKey | undefined;
}

/** The counts of the decision just applied, as a driver's steps need them. */
export interface Reconcile {
  newAvailable: number;
  oldAlive: number;
}

export interface StrategyDriver {
  /** The counts decide() works with now (a canary's steps surge by its canaries; after them, the rolling update's). */
  strategy(): ResolvedStrategy;
  /** What decide() may not do yet (the run is not ending). */
  hold(): Hold | undefined;
  /** Once, with the found fleet in the view: pick up where a continued rollout is, and start the driver's pollers. */
  begin(): void;
  /** The run waits by design (an operator, scaleDownDelaySeconds, a gate measuring): not a stall. */
  waiting(): boolean;
  /** The driver's own steps, once decide's actions are applied (the run is not ending). */
  reconcile(r: Reconcile): void;
  /** Nothing of the driver's is in flight: once decide says complete, the rollout may complete. */
  settled(): boolean;
  /** Something the run must wait for before it can end (a hook running). */
  inFlight(): boolean;
  /** New instances stay out of nginx for now (blue-green before the switch). */
  hidesNew(): boolean;
  /** Every instance's upstream entry is looked at again on each write, not only those changed since the last. */
  wholeUpstream(): boolean;
  /** The servers every nginx should have, from the instance-by-instance list. Called when a write begins. */
  upstream(list: UpstreamList): WantedUpstream;
  /** A reload is in force; called before and after the instances' routing is brought up to date. */
  reloading(now: number): void;
  reloaded(now: number): void;
  /** How long a serving instance that just left traffic drains before its stop (ms). */
  drainMsFor(inst: Instance): number;
  /** Serving instances just left traffic: say so (the `draining` event and any strategy note). */
  drained(names: string[]): void;
  /** The run is ending: true when this draining instance stays draining (the driver's call), false to put it back in service. */
  keepsDraining(inst: Instance, e: Ending, now: number): boolean;
  /** The error a run that ended in one of the driver's own ways rejects with; undefined when the ending is not its own. */
  closing(e: Ending, where: string): unknown;
  /** The driver's figures for the result (blue-green's switch times). */
  result(): Partial<ControllerResult>;
  /** Blue-green's preview upstream, a canary's forced route: what nginx gets beside the main upstream. */
  readonly preview?: TrafficOptions['preview'];
  readonly force?: TrafficOptions['force'];
}
