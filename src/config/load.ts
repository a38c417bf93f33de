/**
 * Loading a fleet file: read, parse (YAML or JSON), validate, apply shared
 * defaults, and resolve the strategy with CLI overrides. Every problem is
 * reported with its field path; nothing here touches Docker or nginx.
 */
import { analysisSchema } from './analysis.js';
import { readFile } from 'node:fs/promises';
import { dirname, resolve as resolvePath } from 'node:path';
import { parseDocument } from 'yaml';
import { FleetrollError, ValidationError, type FieldIssue, ExitCode } from '../errors.js';
import { BUILTIN_DEFAULTS, resolveStrategy, type ResolvedStrategy, type RollingUpdateInput } from '../core/strategy.js';
import { defaultsSchema, fleetSchema, strategySchema, zodIssues, type DefaultsParsed, type FleetFileParsed } from './schema.js';

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

/** Reads and parses a YAML or JSON document, reporting syntax errors with line and column. */
export async function readDocument(file: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : String((err as Error).message);
    throw new FleetrollError('E_NO_FILE', ExitCode.invalidInput, `cannot read ${what} ${file}: ${why}`, { cause: err });
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const issues = doc.errors.map((e) => {
      const pos = e.linePos?.[0];
      return { path: pos ? `line ${pos.line}, column ${pos.col}` : '', message: e.message.split('\n')[0] ?? e.message };
    });
    throw new ValidationError(issues, { source: file });
  }
  const value: unknown = doc.toJS();
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError([{ path: '', message: `${what} must be a mapping (YAML object), got ${value === null ? 'an empty document' : Array.isArray(value) ? 'a list' : typeof value}` }], { source: file });
  }
  return value;
}

function defaultVersion(image: string): string {
  const noDigest = image.split('@')[0] ?? image;
  const lastSlash = noDigest.lastIndexOf('/');
  const colon = noDigest.lastIndexOf(':');
  return colon > lastSlash ? noDigest.slice(colon + 1) : 'latest';
}

/** Cross-field rules that a per-field schema cannot express. */
function crossFieldIssues(f: FleetFileParsed, timings: Record<TimingField, number>): FieldIssue[] {
  const issues: FieldIssue[] = [];
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
      if (lb.nginx.upstream === preview) {
        issues.push({ path, message: `must differ from loadBalancers/${i}/nginx/upstream (${JSON.stringify(preview)}): the preview upstream holds the new set before the switch, out of the users' traffic` });
      }
    });
  }
  if (f.hooks?.prePromotion !== undefined && s.type !== 'BlueGreen') {
    s.notes.push(`hooks.prePromotion runs only with strategy type BlueGreen (before the switch); with ${s.type} it never runs`);
  }
  return issues;
}

/** maxSurge / maxUnavailable problems of a file that failed the schema (best effort). */
function strategyIssuesOf(raw: Record<string, unknown>): FieldIssue[] {
  const strategy = strategySchema.safeParse(raw.strategy);
  if (!strategy.success || strategy.data === undefined) return [];
  const replicas = typeof raw.replicas === 'number' && Number.isInteger(raw.replicas) && raw.replicas >= 0 ? raw.replicas : 1;
  try {
    resolveStrategy({ replicas, strategy: strategy.data });
    return [];
  } catch (err) {
    return err instanceof ValidationError ? err.issues.filter((i) => i.path !== 'replicas') : [];
  }
}

/**
 * Loads a fleet file. Throws ValidationError (exit 2) listing every problem
 * found, with paths relative to the file, e.g. `strategy/rollingUpdate/maxSurge`.
 */
export async function loadFleet(file: string, cli: CliOverrides = {}): Promise<Fleet> {
  return fleetFromObject(await readDocument(file, 'fleet file'), file, cli);
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

export async function fleetFromObject(raw: unknown, file: string, cli: CliOverrides = {}): Promise<Fleet> {
  const parsed = fleetSchema.safeParse(raw);
  if (!parsed.success) {
    // Report strategy value problems alongside schema problems, so one pass fixes the file.
    throw new ValidationError([...zodIssues(parsed.error), ...strategyIssuesOf(raw as Record<string, unknown>)], { source: file });
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

  const issues = crossFieldIssues(f, timings);
  let strategy: ResolvedStrategy | undefined;
  const defaultsStrategyPath = typeof f.defaults === 'string' ? `${defaultsPrefix}strategy` : 'defaults/strategy';
  try {
    const cliLayer: RollingUpdateInput = { maxSurge: cli.maxSurge, maxUnavailable: cli.maxUnavailable };
    strategy = resolveStrategy({
      replicas: f.replicas,
      group: f.group,
      cli: cliLayer,
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
  if (strategy?.type === 'Canary') issues.push(...analysisStepIssues(strategy, (raw as { analysis?: unknown }).analysis));
  const image = cli.image ?? f.image;
  if (cli.image !== undefined) {
    const r = fleetSchema.shape.image.safeParse(cli.image);
    if (!r.success) issues.push({ path: '--image', message: r.error.issues[0]?.message ?? 'invalid image' });
  }
  if (issues.length > 0 || !strategy) throw new ValidationError(issues, { source: file });

  const { defaults: _d, strategy: _s, replacementPolicy: _p, ...rest } = f;
  return {
    ...rest,
    image,
    // An explicit version in the file describes the file's image; an --image override brings its own tag.
    version: cli.image !== undefined ? defaultVersion(image) : (f.version ?? defaultVersion(image)),
    ...timings,
    onFailure: f.onFailure ?? 'pause',
    strategy,
    timingSources,
    source: { file, defaultsFile },
  };
}
