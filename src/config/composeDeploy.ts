/**
 * A compose service's `deploy:` block as fleet fields: replicas, the restart
 * policy, resource limits and reservations, GPU requests; what only Swarm
 * does is refused or warned about.
 */
import { refuse, setOnce, toList, warn, type Ctx, type Res } from './composeMapping.js';
import { isObj, type Json } from './composeRead.js';

export function gpusFrom(c: Ctx, path: string, entries: unknown[], implicit: boolean): 'all' | number | undefined {
  const gpu = entries.filter((e) => implicit || toList((e as Json).capabilities).includes('gpu'));
  const other = entries.filter((e) => !gpu.includes(e));
  other.forEach((e) =>
    refuse(
      c,
      `${path}/${entries.indexOf(e)}`,
      `only GPU device requests (capabilities: [gpu]) are supported, got capabilities ${JSON.stringify((e as Json).capabilities ?? [])}`,
    ),
  );
  if (gpu.length === 0) return undefined;
  if (gpu.length > 1) {
    refuse(c, path, "fleetroll's gpus is all or one count: give one GPU entry");
    return undefined;
  }
  const e = gpu[0] as Json;
  const i = entries.indexOf(e);
  if (e.device_ids !== undefined)
    refuse(c, `${path}/${i}/device_ids`, "fleetroll's gpus is all or a count: pinning device ids would give every instance on a host the same GPUs");
  if (e.options !== undefined) refuse(c, `${path}/${i}/options`, "driver options are not carried by fleetroll's gpus (all or a count)");
  if (e.driver !== undefined && e.driver !== 'nvidia')
    refuse(c, `${path}/${i}/driver`, `fleetroll requests GPUs the way docker --gpus does (nvidia), got ${JSON.stringify(e.driver)}`);
  if (e.count === undefined || e.count === 'all' || e.count === -1) return 'all';
  const n = Number(e.count);
  if (!Number.isInteger(n) || n < 1) {
    refuse(c, `${path}/${i}/count`, 'must be all or a whole number of GPUs');
    return undefined;
  }
  return n;
}

function restartFromPolicy(c: Ctx, rp: Json, path: string): string | undefined {
  for (const k of ['delay', 'window']) if (rp[k] !== undefined) warn(c, `${path}/${k}`, "Docker's restart policy has no delay or window; ignored");
  const condition = rp.condition ?? 'any';
  if (condition === 'none') return 'no';
  if (condition === 'any') return 'always';
  if (condition === 'on-failure') return rp.max_attempts !== undefined ? `on-failure:${String(rp.max_attempts)}` : 'on-failure';
  refuse(c, `${path}/condition`, `must be none, on-failure or any, got ${JSON.stringify(condition)}`);
  return undefined;
}

export function mapDeploy(c: Ctx, d: Json, res: Res): void {
  for (const [k, x] of Object.entries(d)) {
    const p = `deploy/${k}`;
    switch (k) {
      case 'replicas':
        setOnce(c, 'replicas', x, p, 'scale');
        break;
      case 'mode':
        if (x !== 'replicated')
          refuse(c, p, `fleetroll runs replicas: N instances across hosts:, got mode ${JSON.stringify(x)} (global means one per Swarm node)`);
        break;
      case 'labels':
        warn(c, p, 'deploy.labels label a Swarm service, not the container (use labels:); ignored');
        break;
      case 'endpoint_mode':
        warn(c, p, 'a Swarm load-balancing mode; fleetroll routes through nginx; ignored');
        break;
      case 'update_config':
      case 'rollback_config':
        refuse(c, p, 'fleetroll rolls out by strategy: in the fleet file (rollingUpdate.maxSurge / maxUnavailable, onFailure); move the settings there');
        break;
      case 'placement':
        refuse(c, p, 'fleetroll places instances on the hosts: of the fleet file, not by Swarm constraints');
        break;
      case 'restart_policy':
        setOnce(c, 'restart', restartFromPolicy(c, x as Json, p), p, 'restart');
        break;
      case 'resources': {
        const r = x as Json;
        const limits = isObj(r.limits) ? r.limits : {};
        const reservations = isObj(r.reservations) ? r.reservations : {};
        const both = (key: string, v: unknown, at: string) => {
          if (v === undefined) return;
          const prev = res[key];
          if (prev !== undefined && String(prev.value) !== String(v)) refuse(c, at, `disagrees with ${prev.from}: keep one`);
          else res[key] = { value: v, from: `${c.base}/${at}` };
        };
        both('memory', limits.memory, `${p}/limits/memory`);
        both('cpus', limits.cpus, `${p}/limits/cpus`);
        both('pidsLimit', limits.pids, `${p}/limits/pids`);
        both('memoryReservation', reservations.memory, `${p}/reservations/memory`);
        if (reservations.cpus !== undefined) warn(c, `${p}/reservations/cpus`, 'a Swarm scheduling hint: plain Docker has no CPU reservation; ignored');
        if (reservations.generic_resources !== undefined) refuse(c, `${p}/reservations/generic_resources`, 'generic resources are a Swarm scheduling feature');
        if (Array.isArray(reservations.devices))
          setOnce(c, 'gpus', gpusFrom(c, `${p}/reservations/devices`, reservations.devices, false), `${p}/reservations/devices`, 'gpus');
        break;
      }
      default:
        if (!k.startsWith('x-')) refuse(c, p, 'not a deploy field fleetroll knows');
    }
  }
}
