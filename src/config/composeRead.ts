/**
 * Reading a compose file as compose does: YAML merge keys applied, the
 * environment and then the `.env` beside it interpolated (x-fleetroll hooks
 * excepted), strings cast back where compose casts them, the compose-spec
 * JSON schema checked, and the project name worked out.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, resolve as resolvePath } from 'node:path';
import { ValidationError } from '../errors.js';
import { composeValidator, schemaIssues } from './composeSchema.js';
import { readDocument } from './document.js';
import { interpolateTree, parseDotenv, type Lookup } from './interpolate.js';

export type Json = Record<string, unknown>;

/** A document is a compose file when it has a top-level `services:` mapping (a fleet file never does). */
export function isComposeDocument(doc: unknown): boolean {
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) return false;
  const s = (doc as Json).services;
  return s !== null && typeof s === 'object' && !Array.isArray(s);
}

export function isObj(v: unknown): v is Json {
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

/** compose's project-name rule: lowercase letters, digits, `-` and `_`, starting with a letter or digit. */
export function normaliseProjectName(name: string): string {
  return name
    .toLowerCase()
    .replace(/[^a-z0-9_-]/g, '')
    .replace(/^[^a-z0-9]+/, '');
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

export interface LoadedCompose {
  doc: Json;
  dir: string;
  project: string;
  lookup: Lookup;
  variables: Map<string, string[]>;
}

/**
 * x-fleetroll hooks are read as in a fleet file: never interpolated. They run
 * on this machine with fleetroll's environment and read their variables
 * themselves, and their argv is printed: `sh -c 'notify $TOKEN'` expanded at
 * load would print the token (and `$$` would lose its meaning to the shell).
 */
const isFleetrollHooks = (path: string) => /^(?:services\/[^/]+\/)?x-fleetroll\/hooks$/.test(path);

export async function loadCompose(file: string, env: NodeJS.ProcessEnv): Promise<LoadedCompose> {
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
    interpolated = interpolateTree(raw, lookup, '', isFleetrollHooks);
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
