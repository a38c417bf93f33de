/**
 * Secrets at rest: what the fleet's state keeps of a revision's env, and how
 * `undo`, `resume` and `restart` get the values back. A secret is an env
 * entry whose value came from a variable (`${DB_PASSWORD}`) or an env file;
 * the state keeps where it came from, as written, and a keyed digest for
 * change detection, never the value. Getting it back means resolving the
 * reference again, in the environment of whoever runs the command.
 */
import { createHash } from 'node:crypto';
import { readFileSync, statSync } from 'node:fs';
import { dirname, resolve as resolvePath } from 'node:path';
import { ValidationError } from '../errors.js';
import { interpolateString, parseDotenv } from './interpolate.js';

/** One secret env entry of a recorded revision. */
export interface SecretRef {
  /** As written: "${DB_PASSWORD}", "postgres://app:${DB_PASSWORD}@db/app" or "envFile:./api.env". */
  source: string;
  /** Keyed digest of the value (engine/revision.ts secretDigest). */
  digest: string;
}

/** Docker Swarm's limit for a secret, kept for secret files too. */
export const MAX_SECRET_FILE_BYTES = 500 * 1024;

/** The source of a value fleetroll did not keep (state written before secrets were kept as references). */
export const NOT_KEPT = '(not kept)';

/**
 * The values of a recorded revision's secret env entries, resolved again.
 * `strict` (undo, resume, restart) refuses what cannot be resolved, naming
 * the entry and the variable; otherwise (status, history) those are left out.
 */
export function resolveSecretRefs(
  refs: Record<string, SecretRef>,
  o: { lookup: (name: string) => string | undefined; fleetFile: string; what: string; strict: boolean; digestOf?: (value: string) => string },
): Record<string, string> {
  const out: Record<string, string> = {};
  const issues: { path: string; message: string }[] = [];
  const files = new Map<string, Record<string, string> | string>();
  for (const [key, ref] of Object.entries(refs)) {
    const path = `env/${key}`;
    if (ref.source === NOT_KEPT) {
      issues.push({
        path,
        message: `${o.what} was recorded before fleetroll kept secrets as references: its value is not in the state; deploy it from its fleet file instead`,
      });
      continue;
    }
    if (ref.source.startsWith('compose:')) {
      issues.push({
        path,
        message: `${o.what} took it from ${ref.source.slice('compose:'.length)} through more than one variable: deploy that revision from its compose file instead`,
      });
      continue;
    }
    if (ref.source.startsWith('envFile:')) {
      const file = resolvePath(dirname(o.fleetFile), ref.source.slice('envFile:'.length));
      let parsed = files.get(file);
      if (parsed === undefined) {
        try {
          parsed = parseDotenv(readFileSync(file, 'utf8'), file);
        } catch (err) {
          parsed = err instanceof ValidationError ? 'is not a valid env file' : `cannot be read (${(err as NodeJS.ErrnoException).code ?? 'unreadable'})`;
        }
        files.set(file, parsed);
      }
      if (typeof parsed === 'string') issues.push({ path, message: `${o.what} takes it from ${file}, which ${parsed}` });
      else if (parsed[key] === undefined) issues.push({ path, message: `${o.what} takes it from ${file}, which no longer sets ${key}` });
      else out[key] = parsed[key];
      continue;
    }
    try {
      const r = interpolateString(ref.source, o.lookup, path);
      const unset = r.variables.filter((v) => o.lookup(v) === undefined);
      // An unset variable is fine where the reference gives the recorded value anyway (a ${VAR:-default}).
      const asRecorded = o.digestOf !== undefined && o.digestOf(r.value) === ref.digest;
      if (unset.length === 0 || asRecorded) out[key] = r.value;
      // Leniently (status, history) an entry that cannot be resolved is left out, not filled with empty strings.
      else if (o.strict)
        issues.push({
          path,
          message: `${o.what} references ${unset.map((v) => `\${${v}}`).join(', ')}, not set in this environment: set ${unset.length > 1 ? 'them' : 'it'} and run the command again`,
        });
    } catch (err) {
      if (!(err instanceof ValidationError)) throw err;
      issues.push(...err.issues.map((i) => ({ path, message: `${o.what}: ${i.message}` })));
    }
  }
  if (issues.length > 0 && o.strict) throw new ValidationError(issues);
  return out;
}

/**
 * sha256 of each secret file's content, by name (it joins the revision hash,
 * so a rotated secret file rolls the fleet). The content itself goes no
 * further than the bind mount. Unreadable files are listed by name.
 */
export function digestSecretFiles(
  paths: Record<string, string>,
  pathOf: (name: string) => string,
): { digests: Record<string, string>; issues: { path: string; message: string }[] } {
  const digests: Record<string, string> = {};
  const issues: { path: string; message: string }[] = [];
  for (const [name, file] of Object.entries(paths)) {
    try {
      // A secret is a small regular file: a FIFO or a device would block or never end.
      const st = statSync(file);
      if (!st.isFile()) {
        issues.push({ path: pathOf(name), message: `${file} is not a regular file` });
        continue;
      }
      if (st.size > MAX_SECRET_FILE_BYTES) {
        issues.push({ path: pathOf(name), message: `${file} is ${st.size} bytes, larger than the ${MAX_SECRET_FILE_BYTES} a secret file may be` });
        continue;
      }
      digests[name] = createHash('sha256').update(readFileSync(file)).digest('hex');
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      issues.push({
        path: pathOf(name),
        message: `cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : (code ?? 'unreadable')}`,
      });
    }
  }
  return { digests, issues };
}
