/**
 * A compose service's networks and ports as fleet fields: which Docker
 * networks an instance joins (compose's names), and the container port
 * fleetroll routes (host ports are refused: instances are many).
 */
import { refuse, resourceName, toList, warn, type Ctx } from './composeMapping.js';
import { isObj, type Json } from './composeRead.js';

export function mapNetworks(c: Ctx, v: unknown): void {
  const out: unknown[] = [];
  const entries: [string, unknown][] = Array.isArray(v) ? v.map((n) => [String(n), null]) : Object.entries(v as Json);
  for (const [key, opts] of entries) {
    const p = `networks/${key}`;
    const name = resourceName(c, 'networks', key, p);
    if (name === undefined) continue;
    if (!isObj(opts)) {
      out.push(name);
      continue;
    }
    let aliases: string[] | undefined;
    for (const [k, x] of Object.entries(opts)) {
      if (k === 'aliases') aliases = toList(x);
      else if (k === 'priority' || k === 'gw_priority') warn(c, `${p}/${k}`, 'ignored: fleetroll connects the networks in the order given');
      else if (['ipv4_address', 'ipv6_address', 'link_local_ips', 'mac_address'].includes(k))
        refuse(c, `${p}/${k}`, 'a fixed address cannot be shared by several instances (replicas and the surge instance beside the old one)');
      else if (!k.startsWith('x-')) refuse(c, `${p}/${k}`, "fleetroll's networks carry a name and aliases");
    }
    out.push(aliases && aliases.length > 0 ? { name, aliases } : name);
  }
  if (out.length > 0) c.fields.networks = out;
}

function parsePortSpec(c: Ctx, path: string, spec: string, allowHost: boolean): void {
  const [body, proto = 'tcp'] = spec.split('/') as [string, string | undefined];
  if (proto !== 'tcp') {
    refuse(c, path, `only TCP ports can be routed by nginx, got ${proto}`);
    return;
  }
  // [[host_ip:]host_port:]container_port; an IPv6 host_ip is bracketed.
  const m = /^(?:(?:(\[[^\]]*\]|[^:]*):)?([^:]*):)?([0-9]+(?:-[0-9]+)?)$/.exec(body);
  if (!m) {
    refuse(c, path, `expected [[HOST_IP:]HOST_PORT:]CONTAINER_PORT[/tcp], got ${JSON.stringify(spec)}`);
    return;
  }
  const hostPort = m[2];
  if (hostPort !== undefined && hostPort !== '') {
    if (!allowHost) refuse(c, path, 'expose takes container ports only');
    else {
      refuse(
        c,
        path,
        `publishes the fixed host port ${hostPort}: fleetroll runs several instances per host (replicas, and a surge instance beside the old one) and reaches each through its network, so one fixed host port cannot work; write the container port alone (${JSON.stringify(m[3])}) or remove it`,
      );
    }
    return;
  }
  const [from, to = from] = m[3]!.split('-').map(Number) as [number, number | undefined];
  for (let port = from; port <= (to ?? from); port++) if (!c.ports.includes(port)) c.ports.push(port);
}

export function mapPorts(c: Ctx, v: unknown, field: 'ports' | 'expose'): void {
  (v as unknown[]).forEach((item, i) => {
    const p = `${field}/${i}`;
    if (typeof item === 'number') {
      if (!c.ports.includes(item)) c.ports.push(item);
    } else if (typeof item === 'string') parsePortSpec(c, p, item, field === 'ports');
    else {
      const o = item as Json;
      if (o.published !== undefined && o.published !== '') {
        refuse(
          c,
          `${p}/published`,
          `publishes the fixed host port ${String(o.published)}: fleetroll runs several instances per host and reaches each through its network; remove published (fleetroll publishes each instance itself)`,
        );
        return;
      }
      if (o.protocol !== undefined && o.protocol !== 'tcp') {
        refuse(c, `${p}/protocol`, `only TCP ports can be routed by nginx, got ${String(o.protocol)}`);
        return;
      }
      const t = Number(o.target);
      if (!Number.isInteger(t) || t < 1 || t > 65535) refuse(c, `${p}/target`, 'must be a port from 1 to 65535');
      else if (!c.ports.includes(t)) c.ports.push(t);
    }
  });
}
