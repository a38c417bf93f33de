/**
 * Step costs per place: each host's and load balancer's own figures from its
 * own samples, so a slow host is simulated slow instead of being averaged
 * into the medians of the whole fleet (core/stepCosts.ts typicalCosts). A
 * place without samples of a kind (a host added since) takes the figure of
 * every place.
 *
 * PURE: no I/O, no clock.
 */
import { contentionLine, contentionPoints, median, type ContendedKind, type CostKind, type StepCosts, type TypicalCosts } from './stepCosts.js';

export interface HostCosts {
  runMs?: number | undefined;
  runQueuedMs?: number | undefined;
  readyMs?: number | undefined;
  readyQueuedMs?: number | undefined;
  stopMs?: number | undefined;
  /** The kinds priced with the host's own samples; the others are the figures of every place. */
  own: CostKind[];
}

export interface BalancerCosts {
  changeMs?: number | undefined;
  changeQueuedMs?: number | undefined;
  own: CostKind[];
}

export interface PlaceCosts {
  hosts: Record<string, HostCosts>;
  loadBalancers: Record<string, BalancerCosts>;
}

/**
 * A contended kind at one host: its own line when its samples make one; else
 * its samples with every place's slope taken off (a host that only ever
 * started alone, or only beside others, is still its own speed); else every
 * place's figures.
 */
function hostLine(
  c: StepCosts,
  kind: ContendedKind,
  host: string,
  typical: TypicalCosts,
): { aloneMs?: number | undefined; queuedMs?: number | undefined; own: boolean } {
  const fleetAlone = kind === 'run' ? typical.runMs : kind === 'ready' ? typical.readyMs : typical.changeMs;
  const fleetQueued = kind === 'run' ? typical.runQueuedMs : kind === 'ready' ? typical.readyQueuedMs : typical.changeQueuedMs;
  const pts = contentionPoints(c, kind, host);
  if (pts.length === 0) return { aloneMs: fleetAlone, queuedMs: fleetQueued, own: false };
  const line = contentionLine(c, kind, undefined, host);
  if (line) return { ...line, own: true };
  const q = fleetQueued ?? 0;
  return { aloneMs: Math.round(median(pts.map(([x, y]) => Math.max(0, y - q * x)))), queuedMs: fleetQueued, own: true };
}

const ownMedian = (c: StepCosts, kind: CostKind, place: string): number | undefined => {
  const xs = c.samples[kind]?.[place];
  return xs?.length ? Math.round(median(xs)) : undefined;
};

/** The figures of each named host and load balancer (`typical`: every place's, for those without samples of a kind). */
export function placeCosts(c: StepCosts, hosts: readonly string[], loadBalancers: readonly string[], typical: TypicalCosts): PlaceCosts {
  const out: PlaceCosts = { hosts: {}, loadBalancers: {} };
  for (const h of hosts) {
    const run = hostLine(c, 'run', h, typical);
    const ready = hostLine(c, 'ready', h, typical);
    const stop = ownMedian(c, 'stop', h);
    const own: CostKind[] = [...(run.own ? ['run' as const] : []), ...(ready.own ? ['ready' as const] : []), ...(stop !== undefined ? ['stop' as const] : [])];
    out.hosts[h] = {
      runMs: run.aloneMs,
      runQueuedMs: run.queuedMs,
      readyMs: ready.aloneMs,
      readyQueuedMs: ready.queuedMs,
      stopMs: stop ?? typical.stopMs,
      own,
    };
  }
  for (const lb of loadBalancers) {
    const change = hostLine(c, 'change', lb, typical);
    out.loadBalancers[lb] = {
      changeMs: change.aloneMs,
      ...(change.queuedMs !== undefined ? { changeQueuedMs: change.queuedMs } : {}),
      own: change.own ? ['change'] : [],
    };
  }
  return out;
}

const figures = (x: HostCosts | BalancerCosts): string => JSON.stringify({ ...x, own: undefined });

/** Whether the places differ at all: a fleet whose hosts (and load balancers) cost the same is described by its medians alone. */
export function placesDiffer(p: PlaceCosts): boolean {
  const differ = (xs: (HostCosts | BalancerCosts)[]) => new Set(xs.map(figures)).size > 1;
  return differ(Object.values(p.hosts)) || differ(Object.values(p.loadBalancers));
}
