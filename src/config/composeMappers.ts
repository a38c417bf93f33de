/**
 * The mapper of every supported compose service field (composeFields.ts says
 * what happens to each), and mapService, which runs them over one service and
 * collects its fleet fields, refusals and warnings.
 */
import { existsSync, readFileSync } from 'node:fs';
import { resolve as resolvePath } from 'node:path';
import type { FieldIssue } from '../errors.js';
import { COMPOSE_FIELD_RULES } from './composeFields.js';
import { gpusFrom, mapDeploy } from './composeDeploy.js';
import { bytesOrIssue, expandHome, parseGoDurationMs, refuse, setCreate, setOnce, toList, toMap, warn, type Ctx, type Res } from './composeMapping.js';
import { mapConfigs, mapSecrets, mapVolumes } from './composeMounts.js';
import { mapNetworks, mapPorts } from './composeNetworks.js';
import { isObj, type Json } from './composeRead.js';
import { parseDotenv, type Lookup } from './interpolate.js';

/**
 * Refused fields a fleet file may leave out by name (`compose.ignore`): the
 * ones that say how compose itself starts the service (builds it, names its
 * one container, orders it after others), which fleetroll replaces. A
 * compose file a team keeps using beside fleetroll (until `adopt`) has them.
 */
export const ADOPT_IGNORABLE: ReadonlySet<string> = new Set(['build', 'container_name', 'depends_on']);

type Mapper = (c: Ctx, v: unknown, svc: Json, res: Res) => void;

const direct =
  (to: string): Mapper =>
  (c, v) => {
    c.fields[to] = v;
  };
const create =
  (to: string, conv: (c: Ctx, v: unknown, path: string) => unknown = (_c, v) => v): Mapper =>
  (c, v, _s) => {
    const field = to;
    const value = conv(c, v, field);
    if (value !== undefined) setCreate(c, field, value);
  };
const int =
  (name: string) =>
  (c: Ctx, v: unknown): unknown => {
    const n = Number(v);
    if (!Number.isInteger(n)) {
      refuse(c, name, `must be a whole number, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return n;
  };
const micros =
  (name: string) =>
  (c: Ctx, v: unknown): unknown => {
    if (typeof v === 'number' || /^[0-9]+$/.test(String(v))) return Number(v);
    const ms = parseGoDurationMs(v);
    if (ms === undefined) {
      refuse(c, name, `must be microseconds or a duration like "400ms", got ${JSON.stringify(v)}`);
      return undefined;
    }
    return Math.round(ms * 1000);
  };
const namespace =
  (name: string, allowed: string[]) =>
  (c: Ctx, v: unknown): unknown => {
    const s = String(v);
    if (/^(service|container):/.test(s)) {
      refuse(c, name, `${s} joins another container's namespace; fleetroll instances keep their own (or use ${allowed.join(' / ')})`);
      return undefined;
    }
    return s;
  };
const resource =
  (key: string): Mapper =>
  (c, v, _s, res) => {
    const field = ({ memory: 'mem_limit', memoryReservation: 'mem_reservation', cpus: 'cpus', pidsLimit: 'pids_limit' } as Record<string, string>)[key]!;
    const prev = res[key];
    if (prev !== undefined && String(prev.value) !== String(v)) refuse(c, field, `disagrees with ${prev.from}: keep one`);
    else res[key] = { value: v, from: `${c.base}/${field}` };
  };

const MAPPERS: Record<string, Mapper> = {
  image: direct('image'),
  command: direct('command'),
  entrypoint: direct('entrypoint'),
  user: direct('user'),
  working_dir: direct('workingDir'),
  read_only: direct('readOnly'),
  tmpfs: direct('tmpfs'),
  cap_add: direct('capAdd'),
  cap_drop: direct('capDrop'),
  stop_signal: direct('stopSignal'),
  ulimits: direct('ulimits'),
  restart: (c, v) => setOnce(c, 'restart', v, 'restart', 'deploy.restart_policy'),
  scale: (c, v) => setOnce(c, 'replicas', v, 'scale', 'deploy.replicas'),
  logging: (c, v) => {
    const l = v as Json;
    const out: Json = {};
    if (l.driver !== undefined) out.driver = l.driver;
    if (isObj(l.options))
      out.options = Object.fromEntries(
        Object.entries(l.options)
          .filter(([, x]) => x !== null)
          .map(([k, x]) => [k, String(x)]),
      );
    c.fields.logging = out;
  },
  environment: (c, v) => {
    const env: Record<string, string> = {};
    for (const [k, x] of Object.entries(toMap(v))) {
      if (x !== null) env[k] = x;
      else {
        const fromEnv = c.lookup(k);
        if (fromEnv !== undefined) env[k] = fromEnv;
        else warn(c, `environment/${k}`, `${k} is not set in the environment or .env: the container does not get it`);
      }
    }
    c.fields.env = env;
  },
  env_file: (c, v) => {
    const files: string[] = [];
    const list = typeof v === 'string' ? [v] : (v as unknown[]);
    list.forEach((e, i) => {
      const o = typeof e === 'string' ? { path: e } : (e as Json);
      const abs = resolvePath(c.dir, expandHome(String(o.path)));
      const p = typeof v === 'string' ? 'env_file' : `env_file/${i}`;
      if (o.format !== undefined) {
        refuse(c, `${p}/format`, `fleetroll reads env files in compose's default format only, got ${JSON.stringify(o.format)}`);
        return;
      }
      if (!existsSync(abs)) {
        if (o.required === false || o.required === 'false') warn(c, p, `${abs} does not exist (required: false): skipped`);
        else refuse(c, p, `no such file ${abs}`);
        return;
      }
      files.push(abs);
    });
    if (files.length > 0) c.fields.envFile = files;
  },
  labels: (c, v) => {
    c.fields.labels = { ...((c.fields.labels as Json | undefined) ?? {}), ...labelMap(c, v, 'labels') };
  },
  label_file: (c, v) => {
    const fromFiles: Json = {};
    toList(v).forEach((f, i) => {
      const abs = resolvePath(c.dir, expandHome(f));
      const p = typeof v === 'string' ? 'label_file' : `label_file/${i}`;
      if (!existsSync(abs)) {
        refuse(c, p, `no such file ${abs}`);
        return;
      }
      Object.assign(fromFiles, labelMap(c, parseDotenv(readFileSync(abs, 'utf8'), abs), p));
    });
    // labels: wins over a label file (compose-spec label_file).
    c.fields.labels = { ...fromFiles, ...((c.fields.labels as Json | undefined) ?? {}) };
  },
  volumes: mapVolumes,
  configs: mapConfigs,
  secrets: mapSecrets,
  networks: mapNetworks,
  ports: (c, v) => mapPorts(c, v, 'ports'),
  expose: (c, v) => mapPorts(c, v, 'expose'),
  extra_hosts: (c, v) => {
    if (Array.isArray(v)) c.fields.extraHosts = v;
    else c.fields.extraHosts = Object.entries(v as Json).flatMap(([h, ip]) => toList(ip).map((a) => `${h}=${a}`));
  },
  healthcheck: (c, v) => {
    const h = v as Json;
    const out: Json = {};
    if (h.disable === true || h.disable === 'true') out.disable = true;
    if (h.test !== undefined) {
      if (typeof h.test === 'string') out.test = ['CMD-SHELL', h.test];
      else if (Array.isArray(h.test) && h.test[0] === 'NONE') out.disable = true;
      else out.test = h.test;
    }
    for (const [from, to] of [
      ['interval', 'interval'],
      ['timeout', 'timeout'],
      ['start_period', 'startPeriod'],
      ['start_interval', 'startInterval'],
    ] as const) {
      if (h[from] !== undefined) out[to] = h[from];
    }
    if (h.retries !== undefined) out.retries = Number(h.retries);
    c.fields.healthcheck = out;
  },
  stop_grace_period: (c, v) => {
    const ms = parseGoDurationMs(v);
    if (ms === undefined) refuse(c, 'stop_grace_period', `must be a duration like "10s" or "1m30s", got ${JSON.stringify(v)}`);
    else c.fields.terminationGracePeriodSeconds = Math.ceil(ms / 1000);
  },
  shm_size: (c, v) => {
    const b = bytesOrIssue(c, 'shm_size', v);
    if (b !== undefined) c.fields.shmSize = b;
  },
  sysctls: (c, v) => {
    c.fields.sysctls = toMap(v);
  },
  devices: (c, v) => {
    c.fields.devices = (v as unknown[]).map((d) => {
      if (typeof d === 'string') return d;
      const o = d as Json;
      return [o.source, o.target ?? o.source, ...(o.permissions !== undefined ? [o.permissions] : [])].join(':');
    });
  },
  gpus: (c, v) => setOnce(c, 'gpus', v === 'all' ? 'all' : gpusFrom(c, 'gpus', v as unknown[], true), 'gpus', 'deploy.resources.reservations.devices'),
  pull_policy: (c, v) => {
    const map: Record<string, string> = { always: 'always', missing: 'missing', if_not_present: 'missing', never: 'never' };
    const to = map[String(v)];
    if (to) c.fields.pull = to;
    else if (v === 'build') refuse(c, 'pull_policy', 'fleetroll does not build images (see build)');
    else refuse(c, 'pull_policy', `fleetroll pulls per deploy (always, missing or never), got ${JSON.stringify(v)}: a refresh schedule has no meaning for it`);
  },
  deploy: (c, v, _s, res) => {
    if (isObj(v)) mapDeploy(c, v, res);
  },
  mem_limit: resource('memory'),
  mem_reservation: resource('memoryReservation'),
  cpus: resource('cpus'),
  pids_limit: resource('pidsLimit'),
  annotations: create('HostConfig/Annotations', (_c, v) => toMap(v)),
  cgroup: create('HostConfig/CgroupnsMode'),
  cgroup_parent: create('HostConfig/CgroupParent'),
  cpu_count: create('HostConfig/CpuCount', int('cpu_count')),
  cpu_percent: create('HostConfig/CpuPercent', int('cpu_percent')),
  cpu_shares: create('HostConfig/CpuShares', int('cpu_shares')),
  cpu_quota: create('HostConfig/CpuQuota', micros('cpu_quota')),
  cpu_period: create('HostConfig/CpuPeriod', micros('cpu_period')),
  cpu_rt_period: create('HostConfig/CpuRealtimePeriod', micros('cpu_rt_period')),
  cpu_rt_runtime: create('HostConfig/CpuRealtimeRuntime', micros('cpu_rt_runtime')),
  cpuset: create('HostConfig/CpusetCpus'),
  device_cgroup_rules: create('HostConfig/DeviceCgroupRules'),
  dns: create('HostConfig/Dns', (_c, v) => toList(v)),
  dns_opt: create('HostConfig/DnsOptions', (_c, v) => toList(v)),
  dns_search: create('HostConfig/DnsSearch', (_c, v) => toList(v)),
  domainname: create('Domainname'),
  group_add: create('HostConfig/GroupAdd', (_c, v) => toList(v)),
  hostname: create('Hostname'),
  init: create('HostConfig/Init'),
  ipc: create('HostConfig/IpcMode', namespace('ipc', ['private', 'shareable', 'host'])),
  isolation: create('HostConfig/Isolation'),
  mem_swappiness: create('HostConfig/MemorySwappiness', int('mem_swappiness')),
  memswap_limit: create('HostConfig/MemorySwap', (c, v) => bytesOrIssue(c, 'memswap_limit', v)),
  oom_kill_disable: create('HostConfig/OomKillDisable'),
  oom_score_adj: create('HostConfig/OomScoreAdj', int('oom_score_adj')),
  pid: create('HostConfig/PidMode', namespace('pid', ['host'])),
  privileged: create('HostConfig/Privileged'),
  runtime: create('HostConfig/Runtime'),
  security_opt: create('HostConfig/SecurityOpt', (_c, v) => toList(v)),
  stdin_open: create('OpenStdin'),
  storage_opt: create('HostConfig/StorageOpt', (_c, v) => toMap(v)),
  tty: create('Tty'),
  uts: create('HostConfig/UTSMode'),
  userns_mode: create('HostConfig/UsernsMode'),
};

/** Every supported row of the table has a mapper (checked by the unit test). */
export const MAPPED_FIELDS: readonly string[] = Object.keys(MAPPERS);

function labelMap(c: Ctx, v: unknown, path: string): Json {
  const out: Json = {};
  for (const [k, x] of Object.entries(toMap(v))) {
    if (k.startsWith('fleetroll.')) refuse(c, `${path}/${k}`, 'labels under fleetroll. are reserved: fleetroll sets them on every instance');
    else out[k] = x ?? '';
  }
  return out;
}

export function mapService(
  doc: Json,
  name: string,
  dir: string,
  project: string,
  lookup: Lookup,
  ignore: ReadonlySet<string> = new Set(),
): { fields: Json; warnings: string[]; issues: FieldIssue[] } {
  const services = doc.services as Json;
  const svc = services[name];
  if (!isObj(svc)) {
    const names = Object.keys(services);
    return {
      fields: {},
      warnings: [],
      issues: [{ path: 'services', message: `has no service ${JSON.stringify(name)}${names.length > 0 ? ` (it has ${names.join(', ')})` : ''}` }],
    };
  }
  const c: Ctx = { doc, dir, project, lookup, base: `services/${name}`, issues: [], warnings: [], fields: {}, ports: [] };
  const res: Res = {};
  // label_file after labels, so labels: can win regardless of key order.
  const keys = Object.keys(svc).sort((a, b) => Number(a === 'label_file') - Number(b === 'label_file'));
  for (const key of keys) {
    if (key.startsWith('x-')) continue;
    const rule = COMPOSE_FIELD_RULES.get(key);
    if (!rule) refuse(c, key, 'not a compose-spec service field');
    else if (rule.status === 'refused' && ignore.has(key)) warn(c, key, 'left out, as compose.ignore asks');
    else if (rule.status === 'refused')
      refuse(
        c,
        key,
        `${rule.why}${ADOPT_IGNORABLE.has(key) ? ` (for a compose file that also starts the service itself, as before adopt, leave it out with compose: { ignore: [${key}] })` : ''}`,
      );
    else if (rule.status === 'ignored') warn(c, key, `ignored: ${rule.why}`);
    else MAPPERS[key]!(c, svc[key], svc, res);
  }
  if (Object.keys(res).length > 0) {
    const out: Json = {};
    for (const [k, { value, from }] of Object.entries(res)) {
      const at = from.slice(c.base.length + 1);
      if (k === 'memory' || k === 'memoryReservation') {
        const b = bytesOrIssue(c, at, value);
        if (b !== undefined) out[k] = b;
      } else {
        const n = Number(value);
        if (!Number.isFinite(n) || n <= 0 || (k === 'pidsLimit' && !Number.isInteger(n) && n !== -1))
          refuse(c, at, `must be a positive number, got ${JSON.stringify(value)}`);
        else out[k] = n;
      }
    }
    c.fields.resources = out;
  }
  if (c.ports.length === 1) c.fields.port = c.ports[0];
  else if (c.ports.length > 1)
    c.warnings.push(
      `${c.base}/ports: fleetroll routes one container port and this service has ${c.ports.length} (${c.ports.join(', ')}); set port: in the fleet file`,
    );
  return { fields: c.fields, warnings: c.warnings, issues: c.issues };
}
