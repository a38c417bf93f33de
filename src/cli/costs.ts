/**
 * Where simulate and plan get their timings: the flags, else the fleet's
 * recorded step costs (core/stepCosts.ts, kept in its state by every
 * deploy), else nominal values. The state is read best effort: simulate and
 * plan work without reaching the hosts, and then say why the costs are
 * nominal.
 */
import type { Fleet } from '../config/load.js';
import { costsText, readCosts, typicalCosts, type StepCosts, type TypicalCosts } from '../core/stepCosts.js';
import type { FleetState } from '../ports.js';
import { calibratedTimings, withNginxMode, type SimulationTimings } from '../sim/simulate.js';
import { buildDeps, fleetHandles } from '../wiring.js';
import { fieldError } from '../errors.js';
import type { CostsSource } from './args.js';

/** The fleet's state from its first host, or why it could not be read (2 s to answer a ping). */
export async function readStateBestEffort(fleet: Fleet): Promise<{ state?: FleetState | undefined; error?: string }> {
  try {
    const deps = await buildDeps(fleet);
    const rt = [...deps.runtimes.values()][0];
    await (rt as { ping(ms?: number): Promise<void> } | undefined)?.ping(2000);
    return { state: await fleetHandles(fleet, deps).store.read() };
  } catch (err) {
    return { error: (err as Error).message.split('\n')[0] ?? String(err) };
  }
}

export interface TimingFlags {
  startup?: number | undefined;
  drain?: number | undefined;
  stop?: number | undefined;
  minReady?: number | undefined;
  jitter?: number | undefined;
  seed?: number | undefined;
  costs?: CostsSource | undefined;
}

/** Nominal timings: a warm-up of 3 s, a stop of 1 s, Docker and nginx free. */
export const NOMINAL = { startupS: 3, stopS: 1, drainS: 2 } as const;

export interface PricedTimings {
  timings: SimulationTimings;
  source: 'recorded' | 'nominal';
  /** For people: where the figures come from. */
  text: string;
  /** The recorded costs used, with their sample counts. */
  recorded?: { deploys: number; lastAt: string; typical: TypicalCosts } | undefined;
}

const s2ms = (s: number) => Math.round(s * 1000);

/**
 * The timings to simulate `fleet` (or a strategy given by flags alone) with.
 * A flag always wins; then recorded costs, unless `--costs nominal`; then
 * nominal values. `--costs recorded` without a fleet file is exit 2.
 */
export async function pricedTimings(o: TimingFlags, fleet: Fleet | undefined, read: (f: Fleet) => Promise<{ state?: FleetState | undefined; error?: string }> = readStateBestEffort): Promise<PricedTimings> {
  if (o.costs === 'recorded' && !fleet) throw fieldError('--costs', 'recorded needs a fleet file (-f fleet.yaml): the costs are kept in its state');
  const base: SimulationTimings = withNginxMode(
    {
    startupMs: s2ms(NOMINAL.startupS),
    drainMs: s2ms(o.drain ?? fleet?.drainSeconds ?? NOMINAL.drainS),
    stopMs: s2ms(NOMINAL.stopS),
    minReadyMs: s2ms(o.minReady ?? fleet?.minReadySeconds ?? 0),
    jitter: o.jitter ?? 0,
    seed: o.seed ?? 1,
    periodMs: fleet?.probes.readiness.periodMs,
    },
    fleet,
  );
  const flags = (t: SimulationTimings): SimulationTimings => ({ ...t, ...(o.startup !== undefined ? { startupMs: s2ms(o.startup) } : {}), ...(o.stop !== undefined ? { stopMs: s2ms(o.stop) } : {}) });
  const nominal = (why: string): PricedTimings => ({ timings: flags(base), source: 'nominal', text: `nominal costs (${why}): Docker and nginx steps cost nothing` });
  if (!fleet) return nominal('no fleet file');
  if (o.costs === 'nominal') return nominal('--costs nominal');
  const { state, error } = await read(fleet);
  if (error !== undefined) return nominal(`cannot read the fleet's state: ${error}`);
  const costs: StepCosts | undefined = readCosts(state?.costs);
  if (!costs) return nominal('no deploy of this fleet has recorded any yet');
  const typical = typicalCosts(costs);
  return { timings: flags(calibratedTimings(base, typical)), source: 'recorded', text: costsText(costs), recorded: { deploys: costs.deploys, lastAt: costs.lastAt, typical } };
}

/** The recorded figures in one line: `create+start 0.31 s, start to ready 2.4 s, ...`. */
export function typicalText(t: TypicalCosts): string {
  const f = (ms: number | undefined) => (ms === undefined ? undefined : `${(ms / 1000).toFixed(2)} s`);
  const parts: [string, number | undefined][] = [
    ['create+start', t.runMs],
    ['+ per start beside it', t.runQueuedMs],
    ['start to ready', t.readyMs],
    ['stop', t.stopMs],
    ['load-balancer change', t.changeMs],
    ['preflight', t.prepareMs],
    ['final check', t.verifyMs],
    ['health report', t.reportMs],
    ['drain until idle', t.drainMs],
  ];
  return parts.flatMap(([k, v]) => (v === undefined ? [] : [`${k} ${f(v)}`])).join(', ');
}
