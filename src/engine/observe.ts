/**
 * What the fleet is: its containers on every host, read from their labels,
 * plus containers taken over with `fleetroll adopt` (they carry no fleetroll
 * labels; the fleet's state names them).
 */
import { LABELS, type InstanceInfo, type Runtime } from '../ports.js';
import { mapBounded } from './hostWork.js';

export interface Adopted {
  instances: readonly { id: string; host: string; port: number }[];
  revision: string;
  version: string;
}

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
      const labels: Record<string, string> = { ...info.labels, [LABELS.managed]: 'true', [LABELS.service]: service, [LABELS.revision]: a.revision, [LABELS.version]: a.version, [LABELS.created]: '0' };
      return { ...info, labels };
    }),
  );
  return found.filter((i): i is InstanceInfo => i !== undefined);
}
