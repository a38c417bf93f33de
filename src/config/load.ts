/**
 * Loading a fleet file: read, parse (YAML or JSON), validate, apply shared
 * defaults, and resolve the strategy with CLI overrides. Every problem is
 * reported with its field path; nothing here touches Docker or nginx.
 */
import { analysisSchema } from './analysis.js';
import { deployChecks } from './checks.js';
import { probeIssues, portIssues } from './probes.js';
import { dirname, resolve as resolvePath } from 'node:path';
import { readDocument, readFleetOrComposeDocument, readTextFile } from './document.js';
import { FleetrollError, ValidationError, type FieldIssue } from '../errors.js';
import { BUILTIN_DEFAULTS, type ResolvedStrategy } from '../core/strategy.js';
import { checkStrategyLayers, loadStrategy } from './strategy.js';
import type { ContainerConfig } from '../core/container.js';
import { containerConfigOf } from './container.js';
import { interpolateTree, parseDotenv } from './interpolate.js';
import { digestSecretFiles } from './secrets.js';
import { ADOPT_IGNORABLE, composeService, fleetFromCompose, isComposeDocument } from './compose.js';
import { defaultsSchema, fleetSchema, type DefaultsParsed, type FleetFileParsed } from './schema.js';
import { zodIssues } from './fields.js';

export interface CliOverrides {
  image?: string | undefined;
  /** `--replicas` (plan and simulate only: a what-if on the file's fleet). */
  replicas?: number | undefined;
  maxSurge?: string | undefined;
  maxUnavailable?: string | undefined;
  /** `--host-parallelism`: already checked by the flag's parser. */
  hostParallelism?: number | undefined;
  /** `--replacement-policy`. */
  replacementPolicy?: string | undefined;
  /** `--service`: the compose service to deploy when -f names a compose file. */
  service?: string | undefined;
}

/** A fleet file with every default filled in and its strategy resolved. */
export interface Fleet extends Omit<FleetFileParsed, 'defaults' | 'strategy' | 'replacementPolicy' | 'minReadySeconds' | 'progressDeadlineSeconds' | 'drainSeconds' | 'terminationGracePeriodSeconds' | 'revisionHistoryLimit' | 'hostParallelism' | 'version'> {
  version: string;
  minReadySeconds: number;
  progressDeadlineSeconds: number;
  drainSeconds: number;
  terminationGracePeriodSeconds: number;
  revisionHistoryLimit: number;
  hostParallelism: number;
  onFailure: 'pause' | 'rollback';
  /** Set from the fleet's state by `fleetroll restart`; part of the revision hash. */
  restartedAt?: string | undefined;
  /**
   * The build the image resolved to at the start of the deploy (engine/pin.ts):
   * `repo@sha256:...` (its registry digest) or `sha256:...` (its image ID);
   * part of the revision hash. Unset where no host was asked (plan, simulate, validate).
   */
  digest?: string | undefined;
  /** The reference every container of the deploy is created with: the digest, or the image ID where a host has no digest for it. */
  pinnedImage?: string | undefined;
  strategy: ResolvedStrategy;
  /** Where each timing value came from, for `validate` to explain. */
  timingSources: Record<TimingField, 'cli' | 'fleet' | 'defaults' | 'builtin'>;
  /** The file it was loaded from, and the defaults file if any. */
  source: { file: string; defaultsFile?: string | undefined };
  /** The container fields, normalized for Docker (core/container.ts). */
  container: ContainerConfig;
  /**
   * Env entries whose value is a secret, and where it came from as written:
   * a reference such as "${DB_PASSWORD}" (or "postgres://app:${DB_PASSWORD}@db")
   * or "envFile:./api.env". The state keeps these and a digest, never the value.
   */
  envSources: Record<string, string>;
  /** Secret files (secretFiles) by name: the absolute path bind-mounted under /run/secrets. */
  secretSources: Record<string, string>;
  /** sha256 of each secret file's content, by name: a rotated secret is a new revision. */
  secretDigests: Record<string, string>;
  /** The fleet's random key from its state (engine/session.ts): keys the revision hash. */
  revisionKey?: string | undefined;
}

/** Where variables in a fleet file come from: fleetroll's environment, unless a caller says otherwise. */
export type VariableLookup = (name: string) => string | undefined;

/** Fields never interpolated: hooks run with fleetroll's environment and read variables themselves, so their argv never holds a resolved secret. */
const NOT_INTERPOLATED = new Set(['hooks']);

/** A relative bind source, env file or secret file is relative to the fleet file, as compose's are to the compose file. */
const isRelative = (p: string) => p === '.' || p === '..' || p.startsWith('./') || p.startsWith('../');

/** What a compose file gave (config/compose.ts), for the fleet built from it. */
interface Composed {
  file: string;
  service: string;
  warnings: string[];
  variables: Map<string, string[]>;
}

/** The lookup as an environment object, for the compose reader. */
function lookupEnv(lookup: VariableLookup | undefined): NodeJS.ProcessEnv {
  if (!lookup) return process.env;
  return new Proxy({}, { get: (_t, name) => (typeof name === 'string' ? lookup(name) : undefined), has: (_t, name) => typeof name === 'string' && lookup(name) !== undefined });
}

interface Prepared {
  notes: string[];
  raw: unknown;
  envSources: Record<string, string>;
  secretSources: Record<string, string>;
  secretDigests: Record<string, string>;
  issues: FieldIssue[];
}

/**
 * What happens to a fleet file before its schema sees it: compose
 * interpolation of every string (values from `lookup`), env files merged
 * under env, relative paths made absolute against the fleet file. Records
 * which env entries are secrets (came from a variable or an env file).
 * Messages name fields and variables, never a value.
 */
async function prepare(raw: unknown, file: string, lookup: VariableLookup, composedIn?: Composed): Promise<Prepared> {
  const out: Prepared = { raw, envSources: {}, secretSources: {}, secretDigests: {}, notes: [], issues: [] };
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return out;
  const dir = dirname(file);
  const src = raw as Record<string, unknown>;
  const obj: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(src)) {
    // A compose file was interpolated as compose does it ($$ is already $): never twice.
    if (NOT_INTERPOLATED.has(k) || composedIn) {
      obj[k] = v;
      continue;
    }
    try {
      const r = interpolateTree(v, lookup, k);
      obj[k] = r.value;
      for (const [path, vars] of r.variables) {
        const m = /^env\/([^/]+)$/.exec(path);
        const written = m ? (src.env as Record<string, unknown> | undefined)?.[m[1]!] : undefined;
        if (m && vars.length > 0 && typeof written === 'string') {
          out.envSources[m[1]!] = written;
          // compose warns here too: an unset variable without a default is an empty value, rarely what was meant.
          const unset = vars.filter((x) => lookup(x) === undefined);
          if (unset.length > 0 && (r.value as Record<string, unknown>)[m[1]!] === '') {
            out.notes.push(`env/${m[1]}: ${unset.map((x) => `\${${x}}`).join(', ')} ${unset.length > 1 ? 'are' : 'is'} not set, so the value is empty (write \${${unset[0]}:?message} to require it)`);
          }
        }
      }
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      out.issues.push(...err.issues);
      obj[k] = v;
    }
  }
  // compose: { file, service }: the container from the team's compose file; the fleet file's fields win.
  let composed = composedIn;
  const ref = obj.compose as { file?: unknown; service?: unknown; ignore?: unknown } | undefined;
  if (!composed && ref !== null && typeof ref === 'object' && typeof ref.file === 'string' && typeof ref.service === 'string') {
    const composeFile = resolvePath(dir, ref.file);
    try {
      const ignore = Array.isArray(ref.ignore) ? ref.ignore.filter((x): x is string => typeof x === 'string' && ADOPT_IGNORABLE.has(x)) : [];
      const r = await composeService(composeFile, ref.service, lookupEnv(lookup), { ignore });
      composed = { ...r, file: composeFile, service: ref.service };
      const own = obj;
      const merged: Record<string, unknown> = { ...r.fields, ...own };
      // Maps merge entry by entry: the fleet file adds to or overrides the compose service's env and labels.
      for (const m of ['env', 'labels'] as const) {
        const a = r.fields[m];
        const b = own[m];
        if (a && typeof a === 'object' && !Array.isArray(a) && b && typeof b === 'object' && !Array.isArray(b)) merged[m] = { ...(a as object), ...(b as object) };
      }
      // Kept for the schema, which checks it (ignore's names); dropped after.
      merged.compose = own.compose;
      for (const k of Object.keys(merged)) delete obj[k];
      Object.assign(obj, merged);
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      out.issues.push(...err.issues.map((i) => ({ path: `compose (${composeFile})${i.path ? `: ${i.path}` : ''}`, message: i.message })));
    }
  }
  if (composed) {
    out.notes.push(...composed.warnings.map((w) => `compose: ${w}`));
    // An env value compose interpolated is a secret: kept as its variable when it is exactly one.
    const env = obj.env as Record<string, unknown> | undefined;
    for (const [path, vars] of composed.variables) {
      const m = new RegExp(`^services/${composed.service.replace(/[.]/g, '\\.')}/environment/([^/]+)$`).exec(path);
      const key = m?.[1];
      if (key === undefined || env?.[key] === undefined || out.envSources[key] !== undefined) continue;
      out.envSources[key] = vars.length === 1 && lookup(vars[0]!) === String(env[key]) ? `\${${vars[0]}}` : `compose:${composed.file}`;
    }
  }
  // env files: their values join env (env's own entries win) and are secrets.
  const envFile = obj.envFile;
  const files = typeof envFile === 'string' ? [envFile] : Array.isArray(envFile) ? envFile.filter((f): f is string => typeof f === 'string') : [];
  if (files.length > 0) {
    const env: Record<string, unknown> = obj.env !== null && typeof obj.env === 'object' && !Array.isArray(obj.env) ? { ...(obj.env as Record<string, unknown>) } : {};
    const own = new Set(Object.keys(env));
    for (const [i, f] of files.entries()) {
      const path = resolvePath(dir, f);
      const at = typeof envFile === 'string' ? 'envFile' : `envFile/${i}`;
      let text: string;
      try {
        text = await readTextFile(path, 'env file');
      } catch (err) {
        if (!(err instanceof FleetrollError)) throw err;
        out.issues.push({ path: at, message: err.message });
        continue;
      }
      try {
        // Interpolated as compose reads env_file: from the environment, earlier keys of the file first.
        for (const [k, v] of Object.entries(parseDotenv(text, path, lookup))) {
          if (own.has(k)) continue;
          env[k] = v;
          out.envSources[k] = `envFile:${f}`;
        }
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        out.issues.push(...err.issues.map((x) => ({ path: at, message: `${x.path}: ${x.message}` })));
      }
    }
    obj.env = env;
  }
  // Relative bind sources, against the fleet file's directory.
  if (Array.isArray(obj.volumes)) {
    obj.volumes = obj.volumes.map((v: unknown) => {
      if (typeof v === 'string') {
        const colon = v.indexOf(':');
        const source = colon < 0 ? v : v.slice(0, colon);
        return colon > 0 && isRelative(source) ? `${resolvePath(dir, source)}${v.slice(colon)}` : v;
      }
      if (v !== null && typeof v === 'object' && (v as { type?: unknown }).type === 'bind' && typeof (v as { source?: unknown }).source === 'string' && isRelative((v as { source: string }).source)) {
        return { ...(v as object), source: resolvePath(dir, (v as { source: string }).source) };
      }
      return v;
    });
  }
  // Secret files: absolute, read here for the revision hash (their content never leaves this process but for the mount).
  if (obj.secretFiles !== null && typeof obj.secretFiles === 'object' && !Array.isArray(obj.secretFiles)) {
    const defs: Record<string, unknown> = {};
    for (const [name, d] of Object.entries(obj.secretFiles as Record<string, unknown>)) {
      const f = d !== null && typeof d === 'object' ? (d as { file?: unknown }).file : undefined;
      if (typeof f !== 'string') {
        defs[name] = d;
        continue;
      }
      const path = resolvePath(dir, f);
      defs[name] = { ...(d as object), file: path };
      const r = digestSecretFiles({ [name]: path }, (n) => `secretFiles/${n}/file`);
      out.issues.push(...r.issues);
      if (r.digests[name] !== undefined) {
        out.secretDigests[name] = r.digests[name];
        out.secretSources[name] = path;
      }
    }
    obj.secretFiles = defs;
  }
  out.raw = obj;
  return out;
}

/** secrets/N must name a secretFiles entry; a secret file needs a path that exists. */
function secretIssues(f: FleetFileParsed): FieldIssue[] {
  const defined = new Set(Object.keys(f.secretFiles ?? {}));
  return (f.secrets ?? []).flatMap((s, i) => (defined.has(s.name) ? [] : [{ path: `secrets/${i}`, message: `names no entry of secretFiles (${[...defined].join(', ') || 'none defined'}): define it as secretFiles: { ${s.name}: { file: ./path } }` }]));
}

const TIMING_FIELDS = ['minReadySeconds', 'progressDeadlineSeconds', 'drainSeconds', 'terminationGracePeriodSeconds', 'revisionHistoryLimit', 'hostParallelism'] as const;
type TimingField = (typeof TIMING_FIELDS)[number];
const TIMING_BUILTIN: Record<TimingField, number> = {
  minReadySeconds: BUILTIN_DEFAULTS.minReadySeconds,
  progressDeadlineSeconds: BUILTIN_DEFAULTS.progressDeadlineSeconds,
  drainSeconds: 2,
  terminationGracePeriodSeconds: 30,
  revisionHistoryLimit: BUILTIN_DEFAULTS.revisionHistoryLimit,
  // Eight engines at a time: enough that a fleet of a few dozen hosts is not
  // serialised, few enough that image copies do not saturate the deploy
  // machine's uplink.
  hostParallelism: 8,
};

function defaultVersion(image: string): string {
  const noDigest = image.split('@')[0] ?? image;
  const lastSlash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > lastSlash ? noDigest.slice(colon + 1) : 'latest';
}

/** Cross-field rules that a per-field schema cannot express. */
function crossFieldIssues(f: FleetFileParsed, timings: Record<TimingField, number>): FieldIssue[] {
  const issues: FieldIssue[] = [...portIssues(f), ...probeIssues(f)];
  const hostNames = new Set<string>();
  f.hosts.forEach((h, i) => {
    if (hostNames.has(h.name)) issues.push({ path: `hosts/${i}/name`, message: `duplicate host name ${JSON.stringify(h.name)}` });
    if (h.ssh && !h.docker.startsWith('ssh://')) issues.push({ path: `hosts/${i}/ssh`, message: `only applies to an ssh:// endpoint, got ${JSON.stringify(h.docker)}` });
    if (h.tls && !h.docker.startsWith('tcp://')) issues.push({ path: `hosts/${i}/tls`, message: `only applies to a tcp:// endpoint, got ${JSON.stringify(h.docker)}` });
    hostNames.add(h.name);
  });
  const files = new Map<string, number>();
  f.loadBalancers.forEach((lb, i) => {
    const p = `loadBalancers/${i}/nginx`;
    const n = lb.nginx;
    if (n.exec && n.container) issues.push({ path: p, message: 'set either container (nginx in a Docker container) or exec: true (nginx on this machine), not both' });
    if (!n.exec && !n.container) issues.push({ path: p, message: 'needs container (nginx in a Docker container) or exec: true (nginx on this machine)' });
    if (n.container) {
      const host = n.host ?? f.hosts[0]?.name;
      if (host !== undefined && !hostNames.has(host)) issues.push({ path: `${p}/host`, message: `must name an entry in hosts (${[...hostNames].join(', ')}), got ${JSON.stringify(host)}` });
    } else if (n.host) {
      issues.push({ path: `${p}/host`, message: 'only applies with container; with exec: true nginx runs on this machine' });
    }
    if (n.accessLog === 'stdout' && n.exec) {
      issues.push({ path: `${p}/accessLog`, message: '"stdout" is a container\'s log stream: with exec: true (nginx on this machine) give the absolute path of the file nginx logs to' });
    }
    if (n.accessLog !== undefined && /^\/dev\/(?:stdout|stderr)$|^\/proc\//.test(n.accessLog)) {
      issues.push({ path: `${p}/accessLog`, message: `must be a regular file nginx writes to, got ${JSON.stringify(n.accessLog)}${n.container ? ': for nginx logging to its output write accessLog: stdout' : ''}` });
    }
    if (n.config && !n.exec) issues.push({ path: `${p}/config`, message: 'only applies with exec: true (the nginx.conf of the nginx on this machine)' });
    const key = `${n.exec ? 'exec' : `${n.host ?? ''}/${n.container ?? ''}`}:${n.upstreamFile}`;
    if (files.has(key)) issues.push({ path: `${p}/upstreamFile`, message: `the same file is already managed by loadBalancers/${files.get(key)}` });
    files.set(key, i);
  });
  if (timings.progressDeadlineSeconds <= timings.minReadySeconds) {
    issues.push({ path: 'progressDeadlineSeconds', message: `must be greater than minReadySeconds (${timings.minReadySeconds}), got ${timings.progressDeadlineSeconds}` });
  }
  return issues;
}

/** Rules between the resolved strategy and the rest of the fleet; notes go into the strategy's notes. */
function strategyFleetIssues(f: FleetFileParsed, s: ResolvedStrategy, defaultsStrategyPath: string): FieldIssue[] {
  const issues: FieldIssue[] = [];
  if (s.type === 'BlueGreen' && s.blueGreen.previewUpstream !== undefined) {
    const preview = s.blueGreen.previewUpstream;
    const path = `${s.blueGreen.sources.previewUpstream === 'defaults' ? defaultsStrategyPath : 'strategy'}/blueGreen/previewUpstream`;
    f.loadBalancers.forEach((lb, i) => {
      // nginx compares upstream names ignoring case: API and api are the same upstream to it.
      if (lb.nginx.upstream.toLowerCase() === preview.toLowerCase()) {
        issues.push({ path, message: `must differ from loadBalancers/${i}/nginx/upstream (${JSON.stringify(preview)}): the preview upstream holds the new set before the switch, out of the users' traffic` });
      }
    });
  }
  if (f.hooks?.prePromotion !== undefined && s.type !== 'BlueGreen') {
    s.notes.push(`hooks.prePromotion runs only with strategy type BlueGreen (before the switch); with ${s.type} it never runs`);
  }
  return issues;
}

/** The strategy's problems of a file that failed the schema, so one pass fixes the file. */
function strategyIssuesOf(raw: unknown): FieldIssue[] {
  if (raw === null || typeof raw !== 'object') return [];
  const r = raw as Record<string, unknown>;
  const replicas = typeof r.replicas === 'number' && Number.isInteger(r.replicas) && r.replicas >= 0 ? r.replicas : 1;
  return checkStrategyLayers({ replicas, strategy: r.strategy, replacementPolicy: { own: r.replacementPolicy } }).issues;
}

/**
 * Loads a fleet file. Throws ValidationError (exit 2) listing every problem
 * found, with paths relative to the file, e.g. `strategy/rollingUpdate/maxSurge`.
 */
export async function loadFleet(file: string, cli: CliOverrides = {}, lookup?: VariableLookup): Promise<Fleet> {
  const doc = await readFleetOrComposeDocument(file);
  if (isComposeDocument(doc)) {
    // The reverse form: a compose file whose x-fleetroll: blocks hold the fleet settings.
    const env = lookupEnv(lookup);
    const r = await fleetFromCompose(file, cli.service, env);
    return fleetFromObject(r.fleet, file, cli, lookup, { composed: { ...r, file } });
  }
  if (cli.service !== undefined) throw new ValidationError([{ path: '--service', message: `only applies when -f names a compose file (one with services:); ${file} is a fleet file` }]);
  return fleetFromObject(doc, file, cli, lookup);
}

/**
 * Validates a fleet given as an object (what `rehearse` builds in code) exactly
 * as a file would be; `file` names it in messages and anchors a relative defaults path.
 */
/**
 * A canary's analysis steps: the top-level `analysis:` with each step's
 * overrides, validated as one block (so a step may supply what the top level
 * leaves out, and a threshold is required somewhere); the result is kept on
 * the step for the engine.
 */
function analysisStepIssues(s: Extract<ResolvedStrategy, { type: 'Canary' }>, top: unknown): { path: string; message: string }[] {
  const issues: { path: string; message: string }[] = [];
  const base = top !== null && typeof top === 'object' && !Array.isArray(top) ? (top as Record<string, unknown>) : {};
  for (const step of s.canary.steps) {
    if (step.kind !== 'analysis') continue;
    const r = analysisSchema.safeParse({ ...base, ...step.overrides });
    if (r.success) step.spec = r.data;
    else issues.push(...zodIssues(r.error, `${step.path}/analysis`));
  }
  return issues;
}

export async function fleetFromObject(rawIn: unknown, file: string, cli: CliOverrides = {}, lookup: VariableLookup = (name) => process.env[name], o: { composed?: Composed } = {}): Promise<Fleet> {
  const prepared = await prepare(rawIn, file, lookup, o.composed);
  const raw = prepared.raw;
  const parsed = fleetSchema.safeParse(raw);
  if (!parsed.success || prepared.issues.length > 0) {
    throw new ValidationError([...prepared.issues, ...(parsed.success ? [] : zodIssues(parsed.error)), ...strategyIssuesOf(raw)], { source: file });
  }
  const f = cli.replicas !== undefined ? { ...parsed.data, replicas: cli.replicas } : parsed.data;

  let defaults: DefaultsParsed | undefined;
  let defaultsFile: string | undefined;
  let defaultsPrefix = 'defaults';
  if (typeof f.defaults === 'string') {
    defaultsFile = resolvePath(dirname(file), f.defaults);
    const rawDefaults = await readDocument(defaultsFile, 'defaults file (from the fleet file\'s "defaults")');
    const d = defaultsSchema.safeParse(rawDefaults);
    if (!d.success) throw new ValidationError(zodIssues(d.error), { source: defaultsFile });
    defaults = d.data;
    defaultsPrefix = `${defaultsFile}: `;
  } else {
    defaults = f.defaults;
  }

  const timings = {} as Record<TimingField, number>;
  const timingSources = {} as Record<TimingField, 'cli' | 'fleet' | 'defaults' | 'builtin'>;
  const fromCli: Partial<Record<TimingField, number>> = { hostParallelism: cli.hostParallelism };
  for (const k of TIMING_FIELDS) {
    const flag = fromCli[k];
    const own = f[k];
    const shared = defaults?.[k];
    timings[k] = flag ?? own ?? shared ?? TIMING_BUILTIN[k];
    timingSources[k] = flag !== undefined ? 'cli' : own !== undefined ? 'fleet' : shared !== undefined ? 'defaults' : 'builtin';
  }

  const issues = [...crossFieldIssues(f, timings), ...secretIssues(f)];
  let strategy: ResolvedStrategy | undefined;
  const defaultsStrategyPath = typeof f.defaults === 'string' ? `${defaultsPrefix}strategy` : 'defaults/strategy';
  try {
    strategy = loadStrategy({
      replicas: f.replicas,
      group: f.group,
      cli: { maxSurge: cli.maxSurge, maxUnavailable: cli.maxUnavailable },
      strategy: f.strategy,
      defaults: defaults?.strategy,
      replacementPolicy: { cli: cli.replacementPolicy, own: f.replacementPolicy, defaults: defaults?.replacementPolicy },
      paths: { defaults: defaultsStrategyPath },
    });
  } catch (err) {
    if (!(err instanceof ValidationError)) throw err;
    issues.push(...err.issues);
  }
  if (strategy) issues.push(...strategyFleetIssues(f, strategy, defaultsStrategyPath));
  strategy?.notes.push(...prepared.notes);
  if (strategy?.type === 'Canary') issues.push(...analysisStepIssues(strategy, (raw as { analysis?: unknown }).analysis));
  const image = cli.image ?? f.image;
  if (cli.image !== undefined) {
    const r = fleetSchema.shape.image.safeParse(cli.image);
    if (!r.success) issues.push({ path: '--image', message: r.error.issues[0]?.message ?? 'invalid image' });
  }
  if (!strategy) throw new ValidationError(issues, { source: file });

  const { defaults: _d, strategy: _s, replacementPolicy: _p, ...rest } = f;
  const fleet: Fleet = {
    ...rest,
    image,
    // An explicit version in the file describes the file's image; an --image override brings its own tag.
    version: cli.image !== undefined ? defaultVersion(image) : (f.version ?? defaultVersion(image)),
    ...timings,
    onFailure: f.onFailure ?? 'pause',
    strategy,
    timingSources,
    source: { file, defaultsFile },
    container: containerConfigOf(f),
    envSources: prepared.envSources,
    secretSources: Object.fromEntries(Object.entries(prepared.secretSources).filter(([name]) => (f.secrets ?? []).some((s) => s.name === name))),
    secretDigests: Object.fromEntries(Object.entries(prepared.secretDigests).filter(([name]) => (f.secrets ?? []).some((s) => s.name === name))),
  };
  issues.push(...(await deployChecks(fleet, { imageField: cli.image !== undefined ? '--image' : 'image' })));
  if (issues.length > 0) throw new ValidationError(issues, { source: file });
  return fleet;
}
