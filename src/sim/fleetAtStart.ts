/**
 * The simulated fleet before the engine starts: its containers and what
 * every nginx routes to. By default the fleet a deploy rolls, every instance
 * of the old revision, ready and in nginx; or, instance by instance, a fleet
 * already at the current revision with the faults `fleetroll watch` heals
 * (core/heal.ts): exited, removed, unready while routed, out of nginx, back
 * at a new address, a server nginx routes to that no container has, and
 * containers of a revision the fleet's history does not know.
 */
import type { Fleet } from '../config/load.js';
import type { UpstreamEntry } from '../core/upstream.js';
import { LABELS } from '../ports.js';
import type { SimWorld } from './ports.js';

/** The revision of the instances a simulated deploy finds (the fleet's previous one). */
export const OLD_REVISION = 'simulated-old';
/** A revision no simulated fleet's history has: someone else's containers with the fleet's labels. */
export const UNKNOWN_REVISION = 'simulated-unknown';

/** One container of the fleet at the start. */
export interface StartInstance {
  /** new: the revision being deployed or healed; old: the one before it (both in the fleet's history); unknown: neither (default new). */
  revision?: 'new' | 'old' | 'unknown' | undefined;
  /**
   * running (ready), exited (its container stopped, nginx still routes to its
   * address), removed (no container left, nginx still routes to it), unready
   * (fails readiness until readyAtMs, nginx routes to it), moved (ready, at an
   * address nginx does not have: nginx lists its name at the one it had).
   * Default running.
   */
  state?: 'running' | 'exited' | 'removed' | 'unready' | 'moved' | undefined;
  /** Its host, by name (default: the hosts in turn). */
  host?: string | undefined;
  /** unready: when it answers its readiness probe again, ms on the virtual clock (default never). */
  readyAtMs?: number | undefined;
  /** false: no nginx lists it (default true). */
  inNginx?: boolean | undefined;
}

export interface FleetAtStart {
  instances: readonly StartInstance[];
  /** Servers every nginx routes to that no container has. */
  strays?: number | undefined;
}

/** An address no simulated container is ever given (TEST-NET-1): an old address, or a stray's. */
const nowhere = (n: number, port: number | undefined) => `192.0.2.${n}:${port ?? 80}`;

/**
 * Seeds the containers into `world` and returns the servers every nginx
 * lists at the start. `start` undefined: `initial` instances of the old
 * revision, ready unless `oldUnreadyUntilMs` says otherwise.
 */
export function seedFleet(
  world: SimWorld,
  fleet: Fleet,
  revision: string,
  start: FleetAtStart | undefined,
  initial: number,
  oldUnreadyUntilMs?: number,
): UpstreamEntry[] {
  const labels = (rev: string, version: string) => ({
    [LABELS.managed]: 'true',
    [LABELS.service]: fleet.service,
    [LABELS.revision]: rev,
    [LABELS.version]: version,
    [LABELS.created]: '0',
  });
  const servers: UpstreamEntry[] = [];
  if (!start) {
    for (let i = 0; i < initial; i++) {
      const host = fleet.hosts[i % fleet.hosts.length]!.name;
      const c = world.seed(host, `old-${i + 1}`, labels(OLD_REVISION, 'old'), fleet.port);
      if (oldUnreadyUntilMs !== undefined) c.readyAt = oldUnreadyUntilMs;
      servers.push({ address: c.address, down: false, name: c.name });
    }
    return servers;
  }
  let elsewhere = 0;
  const counts = new Map<string, number>();
  start.instances.forEach((x, i) => {
    const version = x.revision ?? 'new';
    const rev = version === 'new' ? revision : version === 'old' ? OLD_REVISION : UNKNOWN_REVISION;
    const n = (counts.get(version) ?? 0) + 1;
    counts.set(version, n);
    const host = x.host ?? fleet.hosts[i % fleet.hosts.length]!.name;
    const c = world.seed(host, `${version}-${n}`, labels(rev, version), fleet.port, version === 'new' ? fleet.image : `simulated:${version}`);
    const state = x.state ?? 'running';
    if (state === 'unready') c.readyAt = x.readyAtMs ?? Number.POSITIVE_INFINITY;
    if (state === 'exited' || state === 'removed') world.exit(c);
    if (state === 'removed') world.forget(c);
    if (x.inNginx === false) return;
    servers.push({ address: state === 'moved' ? nowhere(++elsewhere, fleet.port) : c.address, down: false, name: c.name });
  });
  for (let k = 1; k <= (start.strays ?? 0); k++) servers.push({ address: nowhere(++elsewhere, fleet.port), down: false, name: `stray-${k}` });
  return servers;
}
