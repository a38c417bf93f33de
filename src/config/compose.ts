/**
 * A team's docker-compose.yml as the container of a fleet:
 *
 *   compose: { file: ./docker-compose.yml, service: api }   (in a fleet file)
 *   fleetroll deploy -f docker-compose.yml --service api     (x-fleetroll: in the compose file)
 *
 * The file is read, interpolated as compose does (the environment first, then
 * the `.env` beside it), validated against the compose-spec JSON schema, and
 * the one service is mapped field by field onto fleet-file fields
 * (composeFields.ts says what happens to each). A field fleetroll cannot
 * honour is an error naming it and why; nothing is dropped silently.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, resolve as resolvePath } from 'node:path';
import { ValidationError, type FieldIssue } from '../errors.js';
import { COMPOSE_FIELD_RULES } from './composeFields.js';
import { composeValidator, schemaIssues } from './composeSchema.js';
import { interpolateTree, parseDotenv, type Lookup } from './interpolate.js';
import { readDocument } from './document.js';

export { COMPOSE_SERVICE_FIELDS, type ComposeFieldRule, type ComposeFieldStatus } from './composeFields.js';

type Json = Record<string, unknown>;

export interface ComposeServiceResult {
  /** Raw fleet-file fields (camelCase, before zod); the fleet file's own fields override them key by key. */
  fields: Record<string, unknown>;
  warnings: string[];
  /** The compose file's directory: relative paths in it were resolved against this. */
  composeDir: string;
  /** The compose project name (named volumes and networks are prefixed with it, as compose does). */
  project: string;
  /** slash path (in the compose file) -> variables used there, for `validate` to explain. */
  variables: Map<string, string[]>;
}

/** A document is a compose file when it has a top-level `services:` mapping (a fleet file never does). */
export function isComposeDocument(doc: unknown): boolean {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return false;
  const s = (doc as Json).services;
  return s !== null && typeof s === 'object' && !Array.isArray(s);
}

function isObj(v: unknown): v is Json {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/**
 * YAML merge keys (`<<: *app`, what compose files use to share a block). The
 * shared YAML reader leaves them as a literal `<<` key; they are applied here
 * with the YAML 1.1 rule: the mapping's own keys win, then the merged
 * mappings in order.
 */
export function applyMergeKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(applyMergeKeys);
  if (!isObj(v)) return v;
  const out: Json = {};
  const merge = v['<<'];
  if (merge !== undefined) {
    const sources = (Array.isArray(merge) ? merge : [merge]).filter(isObj).map((m) => applyMergeKeys(m) as Json);
    for (const src of sources) for (const [k, x] of Object.entries(src)) if (!(k in out)) out[k] = x;
  }
  const own: Json = {};
  for (const [k, x] of Object.entries(v)) if (k !== '<<') own[k] = applyMergeKeys(x);
  return { ...Object.fromEntries(Object.entries(out).filter(([k]) => !(k in own))), ...own };
}

// ---------------------------------------------------------------------------------------
// Reading: .env, interpolation, schema

/** compose's project-name rule: lowercase letters, digits, `-` and `_`, starting with a letter or digit. */
export function normaliseProjectName(name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9_-]/g, '').replace(/^[^a-z0-9]+/, '');
}

// Values compose casts back from strings after interpolation (`read_only: ${RO}`).
const BOOLEAN_FIELDS = ['read_only', 'init', 'privileged', 'tty', 'stdin_open', 'oom_kill_disable'];
const INTEGER_FIELDS = ['scale', 'cpu_shares', 'cpu_count', 'cpu_percent', 'oom_score_adj', 'mem_swappiness'];

function castInterpolated(service: Json, variables: Map<string, string[]>, base: string): void {
  const cast = (o: Json, key: string, path: string, kind: 'boolean' | 'integer') => {
    const v = o[key];
    if (typeof v !== 'string' || !variables.has(path)) return;
    if (kind === 'boolean' && /^(true|false)$/i.test(v)) o[key] = v.toLowerCase() === 'true';
    if (kind === 'integer' && /^-?[0-9]+$/.test(v)) o[key] = Number(v);
  };
  for (const k of BOOLEAN_FIELDS) cast(service, k, `${base}/${k}`, 'boolean');
  for (const k of INTEGER_FIELDS) cast(service, k, `${base}/${k}`, 'integer');
  if (isObj(service.deploy)) cast(service.deploy, 'replicas', `${base}/deploy/replicas`, 'integer');
  if (isObj(service.healthcheck)) {
    cast(service.healthcheck, 'retries', `${base}/healthcheck/retries`, 'integer');
    cast(service.healthcheck, 'disable', `${base}/healthcheck/disable`, 'boolean');
  }
}

interface LoadedCompose {
  doc: Json;
  dir: string;
  project: string;
  lookup: Lookup;
  variables: Map<string, string[]>;
}

async function loadCompose(file: string, env: NodeJS.ProcessEnv): Promise<LoadedCompose> {
  const dir = dirname(resolvePath(file));
  const raw = applyMergeKeys(await readDocument(file, 'compose file', { aliases: true }));
  if (!isComposeDocument(raw)) {
    throw new ValidationError([{ path: 'services', message: 'a compose file needs a services: mapping' }], { source: file });
  }
  // compose: the shell environment wins over the .env file beside the compose file.
  const dotenvPath = resolvePath(dir, '.env');
  let dotenv: Record<string, string> = {};
  if (existsSync(dotenvPath) && statSync(dotenvPath).isFile()) {
    dotenv = parseDotenv(readFileSync(dotenvPath, 'utf8'), dotenvPath, (k) => env[k]);
  }
  const lookup: Lookup = (k) => env[k] ?? (Object.hasOwn(dotenv, k) ? dotenv[k] : undefined);
  let interpolated: { value: unknown; variables: Map<string, string[]> };
  try {
    interpolated = interpolateTree(raw, lookup);
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.issues, { source: file });
    throw err;
  }
  const doc = interpolated.value as Json;
  for (const [name, svc] of Object.entries(doc.services as Json)) if (isObj(svc)) castInterpolated(svc, interpolated.variables, `services/${name}`);
  const validate = await composeValidator();
  if (!validate(doc)) throw new ValidationError(schemaIssues(validate.errors ?? []), { source: file });
  const named = lookup('COMPOSE_PROJECT_NAME') ?? (typeof doc.name === 'string' ? doc.name : undefined) ?? basename(dir);
  const project = normaliseProjectName(named);
  return { doc, dir, project, lookup, variables: interpolated.variables };
}

// ---------------------------------------------------------------------------------------
// Mapping one service

interface Ctx {
  doc: Json;
  dir: string;
  project: string;
  lookup: Lookup;
  base: string;
  issues: FieldIssue[];
  warnings: string[];
  fields: Json;
  /** Container ports from ports: and expose: (TCP), in order. */
  ports: number[];
}

const refuse = (c: Ctx, path: string, why: string) => c.issues.push({ path: `${c.base}/${path}`, message: why });
const warn = (c: Ctx, path: string, why: string) => c.warnings.push(`${c.base}/${path}: ${why}`);

function setCreate(c: Ctx, path: string, value: unknown): void {
  const parts = path.split('/');
  let o = (c.fields.dockerCreateOptions ??= {}) as Json;
  for (const p of parts.slice(0, -1)) o = (o[p] ??= {}) as Json;
  o[parts.at(-1)!] = value;
}

function toList(v: unknown): string[] {
  return typeof v === 'string' ? [v] : Array.isArray(v) ? v.map(String) : [];
}

/** compose list-or-dict (`["k=v"]` or `{k: v}`) as a map of strings; `null` values stay null. */
function toMap(v: unknown, sep = '='): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  if (Array.isArray(v)) {
    for (const e of v.map(String)) {
      const i = e.indexOf(sep);
      if (i < 0) out[e] = null;
      else out[e.slice(0, i)] = e.slice(i + 1);
    }
  } else if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) out[k] = x === null || x === undefined ? null : String(x);
  }
  return out;
}

const BYTE_UNITS: Record<string, number> = { '': 1, b: 1, k: 1024, kb: 1024, m: 1024 ** 2, mb: 1024 ** 2, g: 1024 ** 3, gb: 1024 ** 3, t: 1024 ** 4, tb: 1024 ** 4 };

/** Docker's byte sizes ("256m", "1gb", "512", 1048576), 1024-based as docker's units are. */
export function parseBytes(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isInteger(v) && v >= -1 ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$/i.exec(v);
  const unit = m ? BYTE_UNITS[m[2]!.toLowerCase()] : undefined;
  return m && unit !== undefined ? Math.round(Number(m[1]) * unit) : undefined;
}

const DURATION_UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds from a Go duration ("1m30s", "500ms"); undefined when it is not one. */
export function parseGoDurationMs(v: unknown): number | undefined {
  if (typeof v === 'number') return v * 1000;
  if (typeof v !== 'string' || !/^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+$/.test(v)) return undefined;
  let ms = 0;
  for (const m of v.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * DURATION_UNIT_MS[m[2]!]!;
  return ms;
}

function bytesOrIssue(c: Ctx, path: string, v: unknown): number | undefined {
  const b = parseBytes(v);
  if (b === undefined) refuse(c, path, `must be a size like 256m, 1g or a number of bytes, got ${JSON.stringify(v)}`);
  return b;
}

function expandHome(p: string): string {
  return p === '~' ? homedir() : p.startsWith('~/') ? resolvePath(homedir(), p.slice(2)) : p;
}

function isPathLike(src: string): boolean {
  return src.startsWith('.') || src.startsWith('/') || src.startsWith('~');
}

/** compose's name for a top-level network or volume `key`: `name:`, the key itself when external, else `<project>_<key>`. */
function resourceName(c: Ctx, kind: 'volumes' | 'networks', key: string, path: string): string | undefined {
  const defs = isObj(c.doc[kind]) ? (c.doc[kind] as Json) : {};
  if (!(key in defs)) {
    if (kind === 'networks' && key === 'default') return `${c.project}_default`;
    refuse(c, path, `refers to ${kind === 'volumes' ? 'volume' : 'network'} ${JSON.stringify(key)}, which the top-level ${kind}: does not define`);
    return undefined;
  }
  const def = isObj(defs[key]) ? (defs[key] as Json) : {};
  const ext = def.external;
  const extName = isObj(ext) && typeof ext.name === 'string' ? ext.name : undefined;
  if (typeof def.name === 'string') return def.name;
  if (extName) return extName;
  if (ext === true || ext === 'true') return key;
  return `${c.project}_${key}`;
}

/** Top-level volume definition options fleetroll cannot create a volume with. */
function checkVolumeDefinition(c: Ctx, key: string, path: string): void {
  const defs = isObj(c.doc.volumes) ? (c.doc.volumes as Json) : {};
  const def = defs[key];
  if (!isObj(def) || def.external) return;
  if (def.driver !== undefined && def.driver !== 'local') c.issues.push({ path: `volumes/${key}/driver`, message: `fleetroll creates named volumes with the local driver, got ${JSON.stringify(def.driver)}: create the volume on every host first and mark it external: true` });
  if (def.driver_opts !== undefined) c.issues.push({ path: `volumes/${key}/driver_opts`, message: 'fleetroll creates named volumes without driver options: create the volume on every host first and mark it external: true' });
  if (def.labels !== undefined) c.warnings.push(`volumes/${key}/labels: not set on the volume fleetroll creates (labels do not change what the container sees) (used at ${c.base}/${path})`);
}

const SHORT_VOLUME_MODES = /^(ro|rw|z|Z|nocopy|cached|delegated|consistent|shared|rshared|slave|rslave|private|rprivate)(,(ro|rw|z|Z|nocopy|cached|delegated|consistent|shared|rshared|slave|rslave|private|rprivate))*$/;

function mapVolumes(c: Ctx, v: unknown): void {
  const out: unknown[] = [];
  (v as unknown[]).forEach((item, i) => {
    const p = `volumes/${i}`;
    if (typeof item === 'string') {
      const parts = item.split(':');
      if (parts.length === 1) {
        out.push(item); // anonymous volume: a fresh one per instance
        return;
      }
      const [src, target, mode, ...extra] = parts as [string, string, string | undefined, ...string[]];
      if (extra.length > 0 || target === '' || (mode !== undefined && !SHORT_VOLUME_MODES.test(mode))) {
        refuse(c, p, 'expected SOURCE:TARGET[:MODE] with MODE such as ro, rw, z, Z or nocopy');
        return;
      }
      let source: string | undefined;
      if (isPathLike(src)) source = resolvePath(c.dir, expandHome(src));
      else {
        source = resourceName(c, 'volumes', src, p);
        checkVolumeDefinition(c, src, p);
      }
      if (source !== undefined) out.push(`${source}:${target}${mode !== undefined ? `:${mode}` : ''}`);
      return;
    }
    const o = item as Json;
    const type = String(o.type);
    if (type !== 'bind' && type !== 'volume' && type !== 'tmpfs') {
      refuse(c, `${p}/type`, `fleetroll mounts bind, volume and tmpfs, got ${JSON.stringify(type)}`);
      return;
    }
    const m: Json = { type };
    if (typeof o.source === 'string' && o.source !== '') {
      if (type === 'bind') m.source = resolvePath(c.dir, expandHome(o.source));
      else if (type === 'volume') {
        m.source = resourceName(c, 'volumes', o.source, `${p}/source`);
        checkVolumeDefinition(c, o.source, p);
      } else refuse(c, `${p}/source`, 'a tmpfs mount has no source');
    } else if (type === 'bind') refuse(c, `${p}/source`, 'a bind mount needs source (a host path)');
    m.target = o.target;
    if (o.read_only !== undefined) m.readOnly = o.read_only === true || o.read_only === 'true';
    if (o.consistency !== undefined) warn(c, `${p}/consistency`, 'only Docker Desktop for Mac uses it; ignored');
    const supported: Record<string, string[]> = { bind: [], volume: ['nocopy'], tmpfs: ['size'] };
    for (const sub of ['bind', 'volume', 'tmpfs', 'image'] as const) {
      const opts = o[sub];
      if (!isObj(opts)) continue;
      const keep: Json = {};
      for (const [k, x] of Object.entries(opts)) {
        if (k.startsWith('x-')) continue;
        if (sub === type && supported[sub]?.includes(k)) keep[k] = k === 'size' ? bytesOrIssue(c, `${p}/tmpfs/size`, x) : x === true || x === 'true';
        else refuse(c, `${p}/${sub}/${k}`, `fleetroll's volume long form carries source, target, read_only, volume.nocopy and tmpfs.size; use the short syntax (SOURCE:TARGET:MODE) for z/Z or propagation`);
      }
      if (Object.keys(keep).length > 0) m[sub] = keep;
    }
    out.push(m);
  });
  if (out.length > 0) c.fields.volumes = [...((c.fields.volumes as unknown[] | undefined) ?? []), ...out];
}

function mapConfigs(c: Ctx, v: unknown): void {
  const defs = isObj(c.doc.configs) ? (c.doc.configs as Json) : {};
  const out: unknown[] = [];
  (v as unknown[]).forEach((item, i) => {
    const p = `configs/${i}`;
    const o: Json = typeof item === 'string' ? { source: item } : (item as Json);
    const source = String(o.source);
    const def = defs[source];
    if (!isObj(def)) {
      refuse(c, p, `refers to config ${JSON.stringify(source)}, which the top-level configs: does not define`);
      return;
    }
    if (typeof def.file !== 'string') {
      const kind = def.external ? 'external' : def.content !== undefined ? 'content' : def.environment !== undefined ? 'environment' : 'this';
      c.issues.push({ path: `configs/${source}`, message: `a ${kind} config would need a file written on every host; fleetroll mounts configs given as file: (used at ${c.base}/${p})` });
      return;
    }
    for (const k of ['uid', 'gid', 'mode']) if (o[k] !== undefined) warn(c, `${p}/${k}`, 'a file config is a bind mount: it keeps the file\'s own owner and mode (compose ignores this too)');
    const target = typeof o.target === 'string' ? (isAbsolute(o.target) ? o.target : `/${o.target}`) : `/${source}`;
    out.push({ type: 'bind', source: resolvePath(c.dir, expandHome(def.file)), target, readOnly: true });
  });
  if (out.length > 0) c.fields.volumes = [...((c.fields.volumes as unknown[] | undefined) ?? []), ...out];
}

function mapSecrets(c: Ctx, v: unknown): void {
  const defs = isObj(c.doc.secrets) ? (c.doc.secrets as Json) : {};
  const secrets: unknown[] = [];
  const files: Json = {};
  (v as unknown[]).forEach((item, i) => {
    const p = `secrets/${i}`;
    const o: Json = typeof item === 'string' ? { source: item } : (item as Json);
    const source = String(o.source);
    const def = defs[source];
    if (!isObj(def)) {
      refuse(c, p, `refers to secret ${JSON.stringify(source)}, which the top-level secrets: does not define`);
      return;
    }
    const dp = `secrets/${source}`;
    let ok = true;
    if (def.external) {
      c.issues.push({ path: `${dp}/external`, message: 'an external secret lives in a Swarm cluster; fleetroll mounts file: or environment: secrets' });
      ok = false;
    }
    for (const k of ['driver', 'driver_opts', 'template_driver']) {
      if (def[k] !== undefined) {
        c.issues.push({ path: `${dp}/${k}`, message: 'secret drivers are a Swarm feature; fleetroll mounts file: or environment: secrets' });
        ok = false;
      }
    }
    if (ok && typeof def.file === 'string') files[source] = { file: resolvePath(c.dir, expandHome(def.file)) };
    else if (ok && typeof def.environment === 'string') files[source] = { environment: def.environment };
    else if (ok) {
      c.issues.push({ path: dp, message: 'needs file: or environment:' });
      ok = false;
    }
    if (!ok) return;
    for (const k of ['uid', 'gid', 'mode']) if (o[k] !== undefined) warn(c, `${p}/${k}`, 'a file secret is a bind mount: it keeps the file\'s own owner and mode (compose ignores this too)');
    secrets.push(typeof o.target === 'string' ? { source, target: o.target } : source);
  });
  if (secrets.length > 0) c.fields.secrets = secrets;
  if (Object.keys(files).length > 0) c.fields.secretFiles = files;
}

function mapNetworks(c: Ctx, v: unknown): void {
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
      else if (['ipv4_address', 'ipv6_address', 'link_local_ips', 'mac_address'].includes(k)) refuse(c, `${p}/${k}`, 'a fixed address cannot be shared by several instances (replicas and the surge instance beside the old one)');
      else if (!k.startsWith('x-')) refuse(c, `${p}/${k}`, 'fleetroll\'s networks carry a name and aliases');
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
      refuse(c, path, `publishes the fixed host port ${hostPort}: fleetroll runs several instances per host (replicas, and a surge instance beside the old one) and reaches each through its network, so one fixed host port cannot work; write the container port alone (${JSON.stringify(m[3])}) or remove it`);
    }
    return;
  }
  const [from, to = from] = m[3]!.split('-').map(Number) as [number, number | undefined];
  for (let port = from; port <= (to ?? from); port++) if (!c.ports.includes(port)) c.ports.push(port);
}

function mapPorts(c: Ctx, v: unknown, field: 'ports' | 'expose'): void {
  (v as unknown[]).forEach((item, i) => {
    const p = `${field}/${i}`;
    if (typeof item === 'number') {
      if (!c.ports.includes(item)) c.ports.push(item);
    } else if (typeof item === 'string') parsePortSpec(c, p, item, field === 'ports');
    else {
      const o = item as Json;
      if (o.published !== undefined && o.published !== '') {
        refuse(c, `${p}/published`, `publishes the fixed host port ${String(o.published)}: fleetroll runs several instances per host and reaches each through its network; remove published (fleetroll publishes each instance itself)`);
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

function gpusFrom(c: Ctx, path: string, entries: unknown[], implicit: boolean): 'all' | number | undefined {
  const gpu = entries.filter((e) => implicit || toList((e as Json).capabilities).includes('gpu'));
  const other = entries.filter((e) => !gpu.includes(e));
  other.forEach((e) => refuse(c, `${path}/${entries.indexOf(e)}`, `only GPU device requests (capabilities: [gpu]) are supported, got capabilities ${JSON.stringify((e as Json).capabilities ?? [])}`));
  if (gpu.length === 0) return undefined;
  if (gpu.length > 1) {
    refuse(c, path, 'fleetroll\'s gpus is all or one count: give one GPU entry');
    return undefined;
  }
  const e = gpu[0] as Json;
  const i = entries.indexOf(e);
  if (e.device_ids !== undefined) refuse(c, `${path}/${i}/device_ids`, 'fleetroll\'s gpus is all or a count: pinning device ids would give every instance on a host the same GPUs');
  if (e.options !== undefined) refuse(c, `${path}/${i}/options`, 'driver options are not carried by fleetroll\'s gpus (all or a count)');
  if (e.driver !== undefined && e.driver !== 'nvidia') refuse(c, `${path}/${i}/driver`, `fleetroll requests GPUs the way docker --gpus does (nvidia), got ${JSON.stringify(e.driver)}`);
  if (e.count === undefined || e.count === 'all' || e.count === -1) return 'all';
  const n = Number(e.count);
  if (!Number.isInteger(n) || n < 1) {
    refuse(c, `${path}/${i}/count`, 'must be all or a whole number of GPUs');
    return undefined;
  }
  return n;
}

function setOnce(c: Ctx, key: string, value: unknown, path: string, other: string): void {
  if (value === undefined) return;
  const prev = c.fields[key];
  if (prev !== undefined && JSON.stringify(prev) !== JSON.stringify(value)) {
    refuse(c, path, `disagrees with ${other} (${JSON.stringify(prev)} vs ${JSON.stringify(value)}): keep one`);
    return;
  }
  c.fields[key] = value;
}

function restartFromPolicy(c: Ctx, rp: Json, path: string): string | undefined {
  for (const k of ['delay', 'window']) if (rp[k] !== undefined) warn(c, `${path}/${k}`, 'Docker\'s restart policy has no delay or window; ignored');
  const condition = rp.condition ?? 'any';
  if (condition === 'none') return 'no';
  if (condition === 'any') return 'always';
  if (condition === 'on-failure') return rp.max_attempts !== undefined ? `on-failure:${String(rp.max_attempts)}` : 'on-failure';
  refuse(c, `${path}/condition`, `must be none, on-failure or any, got ${JSON.stringify(condition)}`);
  return undefined;
}

function mapDeploy(c: Ctx, d: Json, res: Res): void {
  for (const [k, x] of Object.entries(d)) {
    const p = `deploy/${k}`;
    switch (k) {
      case 'replicas':
        setOnce(c, 'replicas', x, p, 'scale');
        break;
      case 'mode':
        if (x !== 'replicated') refuse(c, p, `fleetroll runs replicas: N instances across hosts:, got mode ${JSON.stringify(x)} (global means one per Swarm node)`);
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
        if (Array.isArray(reservations.devices)) setOnce(c, 'gpus', gpusFrom(c, `${p}/reservations/devices`, reservations.devices, false), `${p}/reservations/devices`, 'gpus');
        break;
      }
      default:
        if (!k.startsWith('x-')) refuse(c, p, 'not a deploy field fleetroll knows');
    }
  }
}

type Res = Record<string, { value: unknown; from: string }>;
type Mapper = (c: Ctx, v: unknown, svc: Json, res: Res) => void;

const direct = (to: string): Mapper => (c, v) => {
  c.fields[to] = v;
};
const create = (to: string, conv: (c: Ctx, v: unknown, path: string) => unknown = (_c, v) => v): Mapper => (c, v, _s) => {
  const field = to;
  const value = conv(c, v, field);
  if (value !== undefined) setCreate(c, field, value);
};
const int = (name: string) => (c: Ctx, v: unknown): unknown => {
  const n = Number(v);
  if (!Number.isInteger(n)) {
    refuse(c, name, `must be a whole number, got ${JSON.stringify(v)}`);
    return undefined;
  }
  return n;
};
const micros = (name: string) => (c: Ctx, v: unknown): unknown => {
  if (typeof v === 'number' || /^[0-9]+$/.test(String(v))) return Number(v);
  const ms = parseGoDurationMs(v);
  if (ms === undefined) {
    refuse(c, name, `must be microseconds or a duration like "400ms", got ${JSON.stringify(v)}`);
    return undefined;
  }
  return Math.round(ms * 1000);
};
const namespace = (name: string, allowed: string[]) => (c: Ctx, v: unknown): unknown => {
  const s = String(v);
  if (/^(service|container):/.test(s)) {
    refuse(c, name, `${s} joins another container's namespace; fleetroll instances keep their own (or use ${allowed.join(' / ')})`);
    return undefined;
  }
  return s;
};
const resource = (key: string): Mapper => (c, v, _s, res) => {
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
    if (isObj(l.options)) out.options = Object.fromEntries(Object.entries(l.options).filter(([, x]) => x !== null).map(([k, x]) => [k, String(x)]));
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
    for (const [from, to] of [['interval', 'interval'], ['timeout', 'timeout'], ['start_period', 'startPeriod'], ['start_interval', 'startInterval']] as const) {
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

function mapService(doc: Json, name: string, dir: string, project: string, lookup: Lookup, ignore: ReadonlySet<string> = new Set()): { fields: Json; warnings: string[]; issues: FieldIssue[] } {
  const services = doc.services as Json;
  const svc = services[name];
  if (!isObj(svc)) {
    const names = Object.keys(services);
    return { fields: {}, warnings: [], issues: [{ path: 'services', message: `has no service ${JSON.stringify(name)}${names.length > 0 ? ` (it has ${names.join(', ')})` : ''}` }] };
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
    else if (rule.status === 'refused') refuse(c, key, `${rule.why}${ADOPT_IGNORABLE.has(key) ? ` (for a compose file that also starts the service itself, as before adopt, leave it out with compose: { ignore: [${key}] })` : ''}`);
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
        if (!Number.isFinite(n) || n <= 0 || (k === 'pidsLimit' && !Number.isInteger(n) && n !== -1)) refuse(c, at, `must be a positive number, got ${JSON.stringify(value)}`);
        else out[k] = n;
      }
    }
    c.fields.resources = out;
  }
  if (c.ports.length === 1) c.fields.port = c.ports[0];
  else if (c.ports.length > 1) c.warnings.push(`${c.base}/ports: fleetroll routes one container port and this service has ${c.ports.length} (${c.ports.join(', ')}); set port: in the fleet file`);
  return { fields: c.fields, warnings: c.warnings, issues: c.issues };
}

/**
 * The container of one compose service as raw fleet-file fields. Relative
 * paths are resolved against the compose file's directory and every value is
 * already interpolated: merge them under the fleet file's own fields after
 * interpolating the fleet file, and do not interpolate them again (a `$$` in
 * the compose file is already a single `$`).
 */
/**
 * Refused fields a fleet file may leave out by name (`compose.ignore`): the
 * ones that say how compose itself starts the service (builds it, names its
 * one container, orders it after others), which fleetroll replaces. A
 * compose file a team keeps using beside fleetroll (until `adopt`) has them.
 */
export const ADOPT_IGNORABLE: ReadonlySet<string> = new Set(['build', 'container_name', 'depends_on']);

export async function composeService(file: string, service: string, env: NodeJS.ProcessEnv, o: { ignore?: readonly string[] } = {}): Promise<ComposeServiceResult> {
  const loaded = await loadCompose(file, env);
  const r = mapService(loaded.doc, service, loaded.dir, loaded.project, loaded.lookup, new Set(o.ignore ?? []));
  if (r.issues.length > 0) throw new ValidationError(r.issues, { source: file });
  return { fields: r.fields, warnings: r.warnings, composeDir: loaded.dir, project: loaded.project, variables: loaded.variables };
}

export interface ComposeFleetResult extends ComposeServiceResult {
  /** The raw fleet object for the normal fleet validation (fleetFromObject). */
  fleet: Record<string, unknown>;
  /** The compose service it came from. */
  service: string;
}

/**
 * The reverse form: `fleetroll deploy -f docker-compose.yml [--service api]`.
 * Fleet settings live in `x-fleetroll:` blocks: one at the top level (shared
 * by every service of the file: hosts, loadBalancers, strategy ...) and one
 * inside the service (its own: replicas, probes, service name ...). The
 * service's block wins over the top-level one key by key, and both win over
 * what the compose service says. Without `service`, the one service that has
 * an `x-fleetroll:` block (or the only service) is taken.
 */
export async function fleetFromCompose(file: string, service: string | undefined, env: NodeJS.ProcessEnv): Promise<ComposeFleetResult> {
  const loaded = await loadCompose(file, env);
  const services = loaded.doc.services as Json;
  let name = service;
  if (name === undefined) {
    const all = Object.keys(services);
    const marked = all.filter((s) => isObj(services[s]) && (services[s] as Json)['x-fleetroll'] !== undefined);
    const pick = marked.length === 1 ? marked : all.length === 1 ? all : [];
    if (pick.length !== 1) {
      throw new ValidationError([{ path: '--service', message: `name the compose service to deploy (${all.join(', ')})${marked.length > 1 ? `: ${marked.join(', ')} each have an x-fleetroll: block` : ''}` }], { source: file });
    }
    name = pick[0]!;
  }
  const r = mapService(loaded.doc, name, loaded.dir, loaded.project, loaded.lookup);
  const issues = [...r.issues];
  const block = (v: unknown, path: string): Json => {
    if (v === undefined) return {};
    if (isObj(v)) return v;
    issues.push({ path, message: 'must be a mapping of fleet-file settings (service, replicas, hosts, probes, strategy, loadBalancers, ...)' });
    return {};
  };
  const top = block(loaded.doc['x-fleetroll'], 'x-fleetroll');
  const own = block(isObj(services[name]) ? (services[name] as Json)['x-fleetroll'] : undefined, `services/${name}/x-fleetroll`);
  if ('compose' in top) issues.push({ path: 'x-fleetroll/compose', message: 'is implied: this file is the compose file' });
  if ('compose' in own) issues.push({ path: `services/${name}/x-fleetroll/compose`, message: 'is implied: this file is the compose file' });
  if (issues.length > 0) throw new ValidationError(issues, { source: file });
  const fleet: Json = { service: name, ...r.fields, ...top, ...own };
  return { fleet, fields: r.fields, warnings: r.warnings, composeDir: loaded.dir, project: loaded.project, variables: loaded.variables, service: name };
}
