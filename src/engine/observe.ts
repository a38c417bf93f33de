/**
 * What the fleet is: its containers on every host, read from their labels,
 * plus containers taken over with `fleetroll adopt` (they carry no fleetroll
 * labels; the fleet's state names them).
 */
import type { ObservedInstance } from '../core/fleetModel.js';
import { parseUpstreamServers } from '../core/upstream.js';
import { LABELS, type InstanceInfo, type Router, type Runtime } from '../ports.js';
import { mapBounded } from './hostWork.js';

export interface Adopted {
  instances: readonly { id: string; host: string; port: number }[];
  revision: string;
  version: string;
}

/** The fleet's instances on every host. */
export async function listFleet(service: string, runtimes: ReadonlyMap<string, Runtime>, hostParallelism: number, adopted?: Adopted): Promise<InstanceInfo[]> {
  const labels = { [LABELS.service]: service, [LABELS.managed]: 'true' };
  const lists = await mapBounded([...runtimes.values()], hostParallelism, (rt) => rt.list(labels));
  return [...lists.flat(), ...(await adoptedInstances(service, runtimes, adopted))];
}

/** Adopted containers that still exist, dressed in the labels fleetroll would have given them. */
async function adoptedInstances(service: string, runtimes: ReadonlyMap<string, Runtime>, a: Adopted | undefined): Promise<InstanceInfo[]> {
  if (!a) return [];
  const found = await Promise.all(
    a.instances.map(async (x) => {
      const info = await runtimes.get(x.host)?.inspect(x.id, x.port);
      if (!info) return undefined;
      const labels: Record<string, string> = {
        ...info.labels,
        [LABELS.managed]: 'true',
        [LABELS.service]: service,
        [LABELS.revision]: a.revision,
        [LABELS.version]: a.version,
        [LABELS.created]: '0',
      };
      return { ...info, labels };
    }),
  );
  return found.filter((i): i is InstanceInfo => i !== undefined);
}

/**
 * The fleet as an onlooker starts from (`--metrics`): every instance with its
 * revision, version and address, and the servers each load balancer has now
 * (by its router name). A load balancer that cannot be read is left out: the
 * rollout's own events fill it in.
 */
export async function fleetSnapshot(
  service: string,
  deps: { runtimes: ReadonlyMap<string, Runtime>; routers: readonly { router: Pick<Router, 'name' | 'read'> }[] },
  hostParallelism: number,
  adopted?: Adopted,
): Promise<{ instances: ObservedInstance[]; balancers: Record<string, { name: string; down: boolean }[]> }> {
  const [infos, lbs] = await Promise.all([
    listFleet(service, deps.runtimes, hostParallelism, adopted),
    Promise.all(deps.routers.map(async ({ router }) => [router.name, await router.read().catch(() => undefined)] as const)),
  ]);
  const instances = infos.map((i) => ({
    name: i.name,
    host: i.host,
    revision: i.labels[LABELS.revision] ?? '?',
    version: i.labels[LABELS.version],
    address: i.address,
    running: i.running,
  }));
  const balancers = Object.fromEntries(
    lbs.filter(([, text]) => text !== undefined).map(([name, text]) => [name, parseUpstreamServers(text ?? '').map((s) => ({ name: s.name, down: s.down }))]),
  );
  return { instances, balancers };
}
