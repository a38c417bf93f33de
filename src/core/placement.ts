/**
 * Where a new instance goes: the one placement rule that deploy, plan and
 * simulate share.
 *
 * A new instance goes to the host with the fewest instances of the new
 * revision (so the finished fleet is spread evenly), then the fewest
 * containers overall, among hosts below their maxInstances. Containers that
 * are still terminating occupy their host until they are gone: maxInstances
 * is a limit of the machine, not of a revision.
 *
 * PURE.
 */

export interface HostSlot {
  name: string;
  maxInstances?: number | undefined;
}

export interface HostLoad {
  /** Containers alive on the host (any revision, terminating ones included). */
  total: number;
  /** Instances of the new revision on the host. */
  fresh: number;
  /** Of `total`, containers being terminated: their room comes back when they are gone. */
  terminating?: number;
}

/**
 * The host for one more new instance, or undefined when every host is at
 * maxInstances. A host that is full only because some of its containers are
 * still terminating keeps its place in the order: the answer is then
 * `{ wait: name }`, and the instance should start there once room comes back
 * rather than elsewhere, which would leave the finished fleet lopsided.
 * Does not change `load`.
 */
function pickHost(hosts: readonly HostSlot[], load: ReadonlyMap<string, HostLoad>): string | { wait: string } | undefined {
  let best: HostSlot | undefined;
  let bestLoad: HostLoad | undefined;
  for (const h of hosts) {
    const l = load.get(h.name) ?? { total: 0, fresh: 0 };
    if (h.maxInstances !== undefined && l.total - (l.terminating ?? 0) >= h.maxInstances) continue;
    if (!bestLoad || l.fresh < bestLoad.fresh || (l.fresh === bestLoad.fresh && l.total < bestLoad.total)) {
      best = h;
      bestLoad = l;
    }
  }
  if (!best || !bestLoad) return undefined;
  if (best.maxInstances !== undefined && bestLoad.total >= best.maxInstances) return { wait: best.name };
  return best.name;
}

/**
 * Places n new instances one after another, counting each; returns the hosts
 * (fewer than n when room runs out, or when the next one should wait for a
 * terminating container to free its host).
 */
export function placeMany(n: number, hosts: readonly HostSlot[], load: Map<string, HostLoad>): string[] {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const h = pickHost(hosts, load);
    if (h === undefined || typeof h !== 'string') break;
    const l = load.get(h) ?? { total: 0, fresh: 0 };
    load.set(h, { ...l, total: l.total + 1, fresh: l.fresh + 1 });
    out.push(h);
  }
  return out;
}

/**
 * Where the instances of a finished rollout end up (plan). Hosts that cannot
 * take the rest are reported as missing.
 */
export function placement(replicas: number, hosts: readonly HostSlot[]): { perHost: Record<string, number>; unplaced: number } {
  const load = new Map<string, HostLoad>(hosts.map((h) => [h.name, { total: 0, fresh: 0 }]));
  const placed = placeMany(replicas, hosts, load);
  const perHost: Record<string, number> = Object.fromEntries(hosts.map((h) => [h.name, 0]));
  for (const h of placed) perHost[h] = (perHost[h] ?? 0) + 1;
  return { perHost, unplaced: replicas - placed.length };
}
