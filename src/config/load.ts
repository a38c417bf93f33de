/**
 * Loading a fleet file: read, parse (YAML or JSON), validate, apply shared
 * defaults, and resolve the strategy with CLI overrides. Every problem is
 * reported with its field path; nothing here touches Docker or nginx.
 */
import { dirname, resolve as resolvePath } from 'node:path';
import { deployChecks } from './checks.js';
import { readDocument, readFleetOrComposeDocument } from './document.js';
import { ValidationError, type FieldIssue } from '../errors.js';
import { BUILTIN_DEFAULTS, type ResolvedStrategy } from '../core/strategy.js';
import { checkStrategyLayers, loadStrategy } from './strategy.js';
import type { ContainerConfig } from '../core/container.js';
import { containerConfigOf } from './container.js';
import { fleetFromCompose, isComposeDocument } from './compose.js';
import { analysisStepIssues, crossFieldIssues, secretIssues, strategyFleetIssues } from './fleetRules.js';
import { lookupEnv, prepare, type Composed, type VariableLookup } from './prepare.js';
import { defaultsSchema, fleetSchema, type DefaultsParsed, type FleetFileParsed } from './schema.js';
import { zodIssues } from './fields.js';

export type { VariableLookup } from './prepare.js';

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
export interface Fleet extends Omit<
  FleetFileParsed,
  | 'defaults'
  | 'strategy'
  | 'replacementPolicy'
  | 'minReadySeconds'
  | 'progressDeadlineSeconds'
  | 'drainSeconds'
  | 'terminationGracePeriodSeconds'
  | 'revisionHistoryLimit'
  | 'hostParallelism'
  | 'version'
> {
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

const TIMING_FIELDS = [
  'minReadySeconds',
  'progressDeadlineSeconds',
  'drainSeconds',
  'terminationGracePeriodSeconds',
  'revisionHistoryLimit',
  'hostParallelism',
] as const;
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
  if (cli.service !== undefined)
    throw new ValidationError([{ path: '--service', message: `only applies when -f names a compose file (one with services:); ${file} is a fleet file` }]);
  return fleetFromObject(doc, file, cli, lookup);
}

/**
 * Validates a fleet given as an object (what `rehearse` builds in code) exactly
 * as a file would be; `file` names it in messages and anchors a relative defaults path.
 */
export async function fleetFromObject(
  rawIn: unknown,
  file: string,
  cli: CliOverrides = {},
  lookup: VariableLookup = (name) => process.env[name],
  o: { composed?: Composed } = {},
): Promise<Fleet> {
  const prepared = await prepare(rawIn, file, lookup, o.composed);
  const raw = prepared.raw;
  const parsed = fleetSchema.safeParse(raw);
  if (!parsed.success || prepared.issues.length > 0) {
    // A field whose interpolation failed still holds its template: the schema's word on it would only repeat the problem.
    const failed = new Set(prepared.issues.map((i) => i.path));
    const schemaIssues = parsed.success ? [] : zodIssues(parsed.error).filter((i) => !failed.has(i.path));
    throw new ValidationError([...prepared.issues, ...schemaIssues, ...strategyIssuesOf(raw)], { source: file });
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
    state: f.state ?? defaults?.state,
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
