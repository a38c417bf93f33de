/**
 * What happens to a fleet file before its schema sees it: compose
 * interpolation of every string, a compose service merged under the fleet's
 * own fields, env files merged under env, relative paths made absolute
 * against the fleet file, secret files read for the revision hash.
 */
import { dirname, resolve as resolvePath } from 'node:path';
import { FleetrollError, ValidationError, type FieldIssue } from '../errors.js';
import { ADOPT_IGNORABLE, composeService } from './compose.js';
import { readTextFile } from './document.js';
import { interpolateTree, parseDotenv } from './interpolate.js';
import { digestSecretFiles } from './secrets.js';

/** Where variables in a fleet file come from: fleetroll's environment, unless a caller says otherwise. */
export type VariableLookup = (name: string) => string | undefined;

/** Fields never interpolated: hooks run with fleetroll's environment and read variables themselves, so their argv never holds a resolved secret. */
const NOT_INTERPOLATED = new Set(['hooks']);

/** A relative bind source, env file or secret file is relative to the fleet file, as compose's are to the compose file. */
const isRelative = (p: string) => p === '.' || p === '..' || p.startsWith('./') || p.startsWith('../');

/** What a compose file gave (config/compose.ts), for the fleet built from it. */
export interface Composed {
  file: string;
  service: string;
  warnings: string[];
  variables: Map<string, string[]>;
}

/** The lookup as an environment object, for the compose reader. */
export function lookupEnv(lookup: VariableLookup | undefined): NodeJS.ProcessEnv {
  if (!lookup) return process.env;
  return new Proxy(
    {},
    { get: (_t, name) => (typeof name === 'string' ? lookup(name) : undefined), has: (_t, name) => typeof name === 'string' && lookup(name) !== undefined },
  );
}

export interface Prepared {
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
export async function prepare(raw: unknown, file: string, lookup: VariableLookup, composedIn?: Composed): Promise<Prepared> {
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
            out.notes.push(
              `env/${m[1]}: ${unset.map((x) => `\${${x}}`).join(', ')} ${unset.length > 1 ? 'are' : 'is'} not set, so the value is empty (write \${${unset[0]}:?message} to require it)`,
            );
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
        if (a && typeof a === 'object' && !Array.isArray(a) && b && typeof b === 'object' && !Array.isArray(b))
          merged[m] = { ...(a as object), ...(b as object) };
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
    const env: Record<string, unknown> =
      obj.env !== null && typeof obj.env === 'object' && !Array.isArray(obj.env) ? { ...(obj.env as Record<string, unknown>) } : {};
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
      if (
        v !== null &&
        typeof v === 'object' &&
        (v as { type?: unknown }).type === 'bind' &&
        typeof (v as { source?: unknown }).source === 'string' &&
        isRelative((v as { source: string }).source)
      ) {
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
