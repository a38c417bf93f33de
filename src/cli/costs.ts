/**
 * Where simulate and plan get their timings: the flags, else the fleet's
 * recorded step costs (core/stepCosts.ts, kept in its state by every
 * deploy), else nominal values. The state is read best effort: simulate and
 * plan work without reaching the hosts, and then say why the costs are
 * nominal.
 */
import type { Fleet } from '../config/load.js';
import { costsText, readCosts, typicalCosts, type StepCosts, type TypicalCosts } from '../core/stepCosts.js';
import { placeCosts, placesDiffer, type HostCosts, type PlaceCosts } from '../core/placeCosts.js';
import type { FleetState } from '../ports.js';
import { calibratedTimings, withNginxMode, type SimulationSetup, type SimulationTimings } from '../sim/simulate.js';
import { fieldError } from '../errors.js';
import type { CostsSource } from './args.js';

/** What simulate and plan read of the fleet: its state, and its load balancers by the names their costs are recorded under. */
export interface StateRead {
  state?: FleetState | undefined;
  error?: string;
  /** Each load balancer's name as a deploy records its changes (the router's name), in the fleet's order. */
  loadBalancers?: string[] | undefined;
}

/** The fleet's state from its first host, or why it could not be read (2 s to answer a ping). */
export async function readStateBestEffort(fleet: Fleet): Promise<StateRead> {
  try {
    // The Docker, ssh and nginx adapters load only to read a fleet's state: simulate --replicas and --costs nominal do without them (202 modules -> 85).
    const { buildDeps, fleetHandles } = await import('../wiring.js');
    const deps = await buildDeps(fleet);
    const rt = [...deps.runtimes.values()][0];
    await (rt as { ping(ms?: number): Promise<void> } | undefined)?.ping(2000);
    return { state: await fleetHandles(fleet, deps).store.read(), loadBalancers: deps.routers.map((lb) => lb.router.name) };
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
  /** The recorded costs used, with their sample counts; `places`: each host's and load balancer's own figures. */
  recorded?: { deploys: number; lastAt: string; typical: TypicalCosts; places: PlaceCosts } | undefined;
  /** The simulated world for the recorded costs: the fleet's own hosts and load balancers, by name, so each is priced with its own figures. */
  setup?: Pick<SimulationSetup, 'hostNames' | 'loadBalancerNames' | 'maxInstances'> | undefined;
}

const s2ms = (s: number) => Math.round(s * 1000);

/**
 * The timings to simulate `fleet` (or a strategy given by flags alone) with.
 * A flag always wins; then recorded costs, unless `--costs nominal`; then
 * nominal values. `--costs recorded` without a fleet file is exit 2.
 */
export async function pricedTimings(
  o: TimingFlags,
  fleet: Fleet | undefined,
  read: (f: Fleet) => Promise<StateRead> = readStateBestEffort,
): Promise<PricedTimings> {
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
  // A flag prices that step at every host: no host's own figure, nor the warm-ups beside it, stays.
  const flags = (t: SimulationTimings): SimulationTimings => {
    const out: SimulationTimings = {
      ...t,
      ...(o.startup !== undefined ? { startupMs: s2ms(o.startup) } : {}),
      ...(o.stop !== undefined ? { stopMs: s2ms(o.stop) } : {}),
    };
    if (o.startup !== undefined) delete out.startupQueuedMs;
    if (t.hosts && (o.startup !== undefined || o.stop !== undefined)) {
      out.hosts = Object.fromEntries(
        Object.entries(t.hosts).map(([h, x]) => {
          const { startupMs, startupQueuedMs, stopMs, ...rest } = x;
          return [h, { ...rest, ...(o.startup === undefined ? { startupMs, startupQueuedMs } : {}), ...(o.stop === undefined ? { stopMs } : {}) }];
        }),
      );
    }
    return out;
  };
  const nominal = (why: string): PricedTimings => ({
    timings: flags(base),
    source: 'nominal',
    text: `nominal costs (${why}): Docker and nginx steps cost nothing`,
  });
  if (!fleet) return nominal('no fleet file');
  if (o.costs === 'nominal') return nominal('--costs nominal');
  const { state, error, loadBalancers } = await read(fleet);
  if (error !== undefined) return nominal(`cannot read the fleet's state: ${error}`);
  const costs: StepCosts | undefined = readCosts(state?.costs);
  if (!costs) return nominal('no deploy of this fleet has recorded any yet');
  const typical = typicalCosts(costs);
  // Without the routers' names (a state read some other way) every load balancer takes the median change.
  const lbNames = loadBalancers && loadBalancers.length === fleet.loadBalancers.length && loadBalancers.length > 0 ? loadBalancers : undefined;
  const places = placeCosts(
    costs,
    fleet.hosts.map((h) => h.name),
    lbNames ?? [],
    typical,
  );
  const setup: PricedTimings['setup'] = {
    hostNames: fleet.hosts.map((h) => h.name),
    maxInstances: fleet.hosts.map((h) => h.maxInstances),
    ...(lbNames ? { loadBalancerNames: lbNames } : {}),
  };
  return {
    timings: flags(calibratedTimings(base, typical, places)),
    source: 'recorded',
    text: costsText(costs),
    recorded: { deploys: costs.deploys, lastAt: costs.lastAt, typical, places },
    setup,
  };
}

const sec = (ms: number) => `${(ms / 1000).toFixed(2)} s`;

/** The recorded figures in one line: `create+start 0.31 s, start to ready 2.4 s, ...`. */
export function typicalText(t: TypicalCosts): string {
  const parts: [string, number | undefined][] = [
    ['create+start', t.runMs],
    ['+ per start beside it', t.runQueuedMs],
    ['start to ready', t.readyMs],
    ['+ per warm-up beside it', t.readyQueuedMs],
    ['stop', t.stopMs],
    ['load-balancer change', t.changeMs],
    ['+ per start during it', t.changeQueuedMs],
    ['until the first wave', t.prepareMs],
    ['final check', t.verifyMs],
    ['health report', t.reportMs],
    ['drain until idle', t.drainMs],
  ];
  return parts.flatMap(([k, v]) => (v === undefined ? [] : [`${k} ${sec(v)}`])).join(', ');
}

/**
 * Each host's and load balancer's own figures, a line each, when they differ
 * (a fleet whose places cost the same says it all in its medians): none
 * otherwise. A figure a place has no samples of is the median, marked so.
 */
export function placesText(p: PlaceCosts): string[] {
  if (!placesDiffer(p)) return [];
  const marked = (own: readonly string[], kind: string, text: string) => (own.includes(kind) ? text : `${text} (median)`);
  const host = (x: HostCosts) =>
    [
      x.runMs !== undefined
        ? marked(x.own, 'run', `create+start ${sec(x.runMs)}${x.runQueuedMs ? ` + ${sec(x.runQueuedMs)} per start beside it` : ''}`)
        : undefined,
      x.readyMs !== undefined
        ? marked(x.own, 'ready', `start to ready ${sec(x.readyMs)}${x.readyQueuedMs ? ` + ${sec(x.readyQueuedMs)} per warm-up beside it` : ''}`)
        : undefined,
      x.stopMs !== undefined ? marked(x.own, 'stop', `stop ${sec(x.stopMs)}`) : undefined,
    ].filter((s) => s !== undefined);
  return [
    ...Object.entries(p.hosts).map(([h, x]) => `host ${h}: ${host(x).join(', ')}`),
    ...Object.entries(p.loadBalancers).flatMap(([lb, x]) =>
      x.changeMs !== undefined
        ? [
            `load balancer ${lb}: ${marked(x.own, 'change', `change ${sec(x.changeMs)}${x.changeQueuedMs ? ` + ${sec(x.changeQueuedMs)} per start during it` : ''}`)}`,
          ]
        : [],
    ),
  ];
}
