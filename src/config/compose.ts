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
import { ValidationError } from '../errors.js';
import { mapService } from './composeMappers.js';
import { isObj, loadCompose, type Json } from './composeRead.js';

export { COMPOSE_SERVICE_FIELDS, type ComposeFieldRule, type ComposeFieldStatus } from './composeFields.js';
export { ADOPT_IGNORABLE } from './composeMappers.js';
export { isComposeDocument } from './composeRead.js';

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

/**
 * The container of one compose service as raw fleet-file fields. Relative
 * paths are resolved against the compose file's directory and every value is
 * already interpolated: merge them under the fleet file's own fields after
 * interpolating the fleet file, and do not interpolate them again (a `$$` in
 * the compose file is already a single `$`).
 */
export async function composeService(
  file: string,
  service: string,
  env: NodeJS.ProcessEnv,
  o: { ignore?: readonly string[] } = {},
): Promise<ComposeServiceResult> {
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
      throw new ValidationError(
        [
          {
            path: '--service',
            message: `name the compose service to deploy (${all.join(', ')})${marked.length > 1 ? `: ${marked.join(', ')} each have an x-fleetroll: block` : ''}`,
          },
        ],
        { source: file },
      );
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
