/**
 * The checks a deploy would make on a fleet before it touches a host, run
 * at load time so that `validate` (and every command that loads a fleet)
 * refuses what a later stage would refuse: an upstream template deploy
 * cannot use, a Docker endpoint no URL parser accepts, an address nginx and
 * Docker reject, nginx names past nginx's limits, an image reference Docker
 * cannot parse, a hook argument the OS cannot pass.
 *
 * They run after the schema, on the loaded fleet (its strategy resolved), so
 * a rule may see several fields at once and name them all. Everything here is
 * pure except reading the upstream templates.
 */
import { readTextFile } from './document.js';
import { FleetrollError } from '../errors.js';

/** An upstream template is a few lines around {{servers}}: 256 KiB is far more than any needs. */
export const MAX_TEMPLATE_BYTES = 256 * 1024;
import { dirname, resolve } from 'node:path';
import type { FieldIssue } from '../errors.js';
import type { ResolvedStrategy } from '../core/strategy.js';
import { NGINX_MAP_VARIABLE_MAX, mapVariables, upstreamTemplateProblem } from '../core/upstream.js';
import { IMAGE_RE, type FleetFileParsed } from './schema.js';

/**
 * What the checks read of a fleet: the loaded `Fleet` (config/load.ts) fits
 * it. Spelled out here rather than imported, so load.ts can call this module
 * without an import cycle.
 */
export type CheckedFleet = Pick<FleetFileParsed, 'image' | 'hosts' | 'hooks' | 'loadBalancers'> & {
  strategy: ResolvedStrategy;
  source: { file: string; defaultsFile?: string | undefined };
};

export interface DeployCheckOptions {
  /** Where the image came from, for its messages: "image" (the file) or "--image" (the flag). */
  imageField?: string | undefined;
}

/** Every deploy-time problem of a loaded fleet, each with its field path. Reads the fleet's own upstream templates. */
export async function deployChecks(fleet: CheckedFleet, opts: DeployCheckOptions = {}): Promise<FieldIssue[]> {
  return [...fleetValueIssues(fleet, opts), ...(await templateIssues(fleet))];
}

/** The pure part of deployChecks. */
export function fleetValueIssues(fleet: CheckedFleet, opts: DeployCheckOptions = {}): FieldIssue[] {
  const issues: FieldIssue[] = [];
  // Outside the schema's character set the schema (or load.ts, for --image) has already said what is wrong.
  const image = IMAGE_RE.test(fleet.image) ? imageReferenceProblem(fleet.image) : undefined;
  if (image !== undefined) issues.push({ path: opts.imageField ?? 'image', message: image });
  fleet.hosts.forEach((h, i) => {
    const endpoint = dockerEndpointProblem(h.docker);
    if (endpoint !== undefined) issues.push({ path: `hosts/${i}/docker`, message: endpoint });
    if (h.publishAddress !== undefined) {
      const addr = ipv4Problem(h.publishAddress);
      if (addr !== undefined) issues.push({ path: `hosts/${i}/publishAddress`, message: addr });
    }
  });
  issues.push(...hookIssues(fleet.hooks), ...nginxNameIssues(fleet));
  return issues;
}

/**
 * Each `loadBalancers[].nginx.template` (relative to the fleet file) must be
 * readable and hold {{servers}}: deploy reads it the same way (src/wiring.ts)
 * and refuses otherwise.
 */
export async function templateIssues(fleet: Pick<CheckedFleet, 'loadBalancers' | 'source'>): Promise<FieldIssue[]> {
  const issues: FieldIssue[] = [];
  for (const [i, { nginx }] of fleet.loadBalancers.entries()) {
    if (nginx.template === undefined) continue;
    const path = `loadBalancers/${i}/nginx/template`;
    const file = resolve(dirname(fleet.source.file), nginx.template);
    let text: string;
    try {
      // A regular file of bounded size only: a FIFO or /dev/zero as a template must not hang or fill memory.
      text = await readTextFile(file, 'upstream template', MAX_TEMPLATE_BYTES);
    } catch (err) {
      if (!(err instanceof FleetrollError)) throw err;
      issues.push({ path, message: `${err.message} (relative to the fleet file)` });
      continue;
    }
    const problem = upstreamTemplateProblem(text);
    if (problem !== undefined) issues.push({ path, message: `${problem} (the upstream's server lines go there), got ${file} without it` });
  }
  return issues;
}

/**
 * A DNS host name (labels of letters, digits and "-", not starting or ending
 * with "-", at most 63 each, 253 in all) or, when it is all digits and dots,
 * an IPv4 address.
 */
export function hostNameProblem(host: string): string | undefined {
  if (/^[0-9.]+$/.test(host)) {
    const p = ipv4Problem(host);
    return p === undefined ? undefined : `host ${JSON.stringify(host)}: ${p}`;
  }
  const what =
    'a host name (labels of letters, digits and "-" separated by ".", none empty, none starting or ending with "-", at most 63 characters each) or an IPv4 address';
  if (host.length > 253) return `host ${JSON.stringify(host.slice(0, 40))}... is ${host.length} characters: ${what}, at most 253 characters`;
  const bad = host.split('.').find((l) => !/^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$/.test(l));
  if (bad !== undefined) return `host ${JSON.stringify(host)} must be ${what}${bad === '' ? ': it has an empty label' : `, got label ${JSON.stringify(bad)}`}`;
  return undefined;
}

function portProblem(port: string): string | undefined {
  const n = Number(port);
  return Number.isInteger(n) && n >= 1 && n <= 65535 ? undefined : `port must be from 1 to 65535, got ${port}`;
}

/**
 * tcp://host:port and ssh://[user@]host[:port] past the schema's pattern:
 * the port in range and the host a real host name, else every Docker command
 * fails with "is not a URL" (adapters/dockerConnect.ts dockerOptions parses it
 * with `new URL`).
 */
export function dockerEndpointProblem(endpoint: string): string | undefined {
  const m = /^(tcp|ssh):\/\/(?:[^@/]*@)?([^:/]*)(?::([0-9]*))?$/.exec(endpoint);
  if (!m) return undefined;
  const [, scheme, host = '', port] = m;
  const problems = [hostNameProblem(host), port === undefined ? undefined : portProblem(port)].filter((p) => p !== undefined);
  if (problems.length === 0) return undefined;
  return `${problems.join('; ')} (in ${JSON.stringify(endpoint)}, ${scheme === 'tcp' ? 'a tcp://host:port' : 'an ssh://user@host[:port]'} Docker endpoint)`;
}

/**
 * Four decimal octets from 0 to 255. No leading zeros: Docker's address
 * parser (Go's net.ParseIP) refuses them, and other tools read them as octal.
 */
export function ipv4Problem(addr: string): string | undefined {
  const octets = addr.split('.');
  const what = 'an IPv4 address: four numbers from 0 to 255 separated by "." (no leading zeros)';
  if (octets.length !== 4) return `must be ${what}, got ${JSON.stringify(addr)}`;
  const bad = octets.find((o) => !/^(?:0|[1-9][0-9]{0,2})$/.test(o) || Number(o) > 255);
  return bad === undefined ? undefined : `must be ${what}, got ${JSON.stringify(addr)} (${JSON.stringify(bad)})`;
}

/** Digest algorithms a Docker engine accepts, with their hex lengths. */
const DIGEST_HEX: Record<string, number> = { sha256: 64, sha384: 96, sha512: 128 };
/** A registry host ("." or ":" in the first part, or "localhost", as Docker tells one from a name part). */
const DOMAIN_RE = /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?$/;
/** A repository name part: lowercase letters and digits, separated by ".", "_", "__" or dashes. */
const PATH_COMPONENT_RE = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;

/**
 * Docker's image reference grammar, [registry[:port]/]name[/name...][:tag][@algorithm:hex]
 * (github.com/distribution/reference), beyond the schema's character set:
 * no empty tag ("a:" would give an empty version), no empty or uppercase
 * name part, a digest Docker can verify.
 */
export function imageReferenceProblem(ref: string): string | undefined {
  const at = ref.indexOf('@');
  const nameTag = at === -1 ? ref : ref.slice(0, at);
  const digest = at === -1 ? undefined : ref.slice(at + 1);
  const problems: string[] = [];
  if (digest !== undefined) {
    const [alg = '', hex, ...more] = digest.split(':');
    const len = DIGEST_HEX[alg];
    if (len === undefined || hex === undefined || more.length > 0 || !new RegExp(`^[a-f0-9]{${len}}$`).test(hex)) {
      problems.push(`the digest after "@" must be sha256:<64 lowercase hex digits> (or sha384:<96>, sha512:<128>), got ${JSON.stringify(digest)}`);
    }
  }
  const slash = nameTag.lastIndexOf('/');
  const colon = nameTag.lastIndexOf(':');
  const name = colon > slash ? nameTag.slice(0, colon) : nameTag;
  const tag = colon > slash ? nameTag.slice(colon + 1) : undefined;
  if (tag !== undefined) {
    if (tag === '') problems.push('has an empty tag after ":" (write name:tag, or leave ":" out for "latest")');
    else if (!TAG_RE.test(tag))
      problems.push(`tag ${JSON.stringify(tag)} must be letters, digits, "_", "." and "-", not starting with "." or "-", at most 128`);
  }
  const parts = name.split('/');
  const first = parts[0] ?? '';
  const hasDomain = parts.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasDomain && !DOMAIN_RE.test(first)) problems.push(`registry ${JSON.stringify(first)} must be a host name with an optional :port`);
  const path = hasDomain ? parts.slice(1) : parts;
  if (path.some((p) => p === '')) problems.push(`has an empty name part (${JSON.stringify(name)}: nothing between "/"s, or a "/" at an end)`);
  const bad = path.find((p) => p !== '' && !PATH_COMPONENT_RE.test(p));
  if (bad !== undefined) problems.push(`name part ${JSON.stringify(bad)} must be lowercase letters and digits, separated by ".", "_", "__" or "-"`);
  if (name.length > 255) problems.push(`the name is ${name.length} characters, at most 255`);
  return problems.length === 0 ? undefined : `must be a Docker image reference like "registry/name:tag": ${JSON.stringify(ref)} ${problems.join('; ')}`;
}

/**
 * A hook argument the OS can pass and the rollout log can show: no NUL (no
 * process can receive one; spawning throws) and no other control character
 * but tab and newline (an escape sequence would reach the terminal through
 * the log line that shows the command).
 */
export function hookArgumentProblem(arg: string): string | undefined {
  const m = /[\u0000-\u0008\u000b-\u001f\u007f]/.exec(arg);
  if (!m) return undefined;
  const code = `U+${m[0].charCodeAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  return m[0] === '\u0000'
    ? `has a NUL byte (U+0000) at character ${m.index + 1}: a program's arguments cannot hold one`
    : `has the control character ${code} at character ${m.index + 1}: hook arguments may hold tab and newline, no other control character`;
}

const HOOK_NAMES = ['preDeploy', 'postWave', 'postDeploy', 'prePromotion', 'onFailure'] as const;

function hookIssues(hooks: CheckedFleet['hooks']): FieldIssue[] {
  const issues: FieldIssue[] = [];
  for (const name of HOOK_NAMES) {
    hooks?.[name]?.forEach((arg, j) => {
      const p = hookArgumentProblem(arg);
      if (p !== undefined) issues.push({ path: `hooks/${name}/${j}`, message: p });
    });
  }
  return issues;
}

/**
 * Names fleetroll derives from an upstream's name must fit nginx: a canary's
 * cookie map ($fleetroll_<upstream>_sticky, for a stickyKey cookie with "-")
 * and its forced route ($fleetroll_<upstream>_route, for canary.force) are
 * `map` variables, at most NGINX_MAP_VARIABLE_MAX characters under nginx's
 * default variables_hash_bucket_size. Upstream names (main, preview,
 * fleetroll_<upstream>_canary / _stable) have no such limit.
 */
export function nginxNameIssues(fleet: Pick<CheckedFleet, 'strategy' | 'loadBalancers' | 'source'>): FieldIssue[] {
  const s = fleet.strategy;
  if (s.type !== 'Canary') return [];
  const strategyPath = (source: string) =>
    source === 'defaults' ? (fleet.source.defaultsFile !== undefined ? `${fleet.source.defaultsFile}: strategy` : 'defaults/strategy') : 'strategy';
  const issues: FieldIssue[] = [];
  fleet.loadBalancers.forEach(({ nginx }, i) => {
    for (const { variable, from } of mapVariables(nginx.upstream, { hash: s.canary.stickyKey, force: s.canary.force })) {
      const length = variable.length - 1;
      if (length <= NGINX_MAP_VARIABLE_MAX) continue;
      const field = from === 'hash' ? 'stickyKey' : 'force';
      const value = from === 'hash' ? s.canary.stickyKey : s.canary.force;
      const why = from === 'hash' ? 'its cookie name has "-", so fleetroll maps the Cookie header to' : 'fleetroll routes forced requests through';
      const room = NGINX_MAP_VARIABLE_MAX - (length - nginx.upstream.length);
      issues.push({
        path: `loadBalancers/${i}/nginx/upstream`,
        message:
          `with ${strategyPath(s.canary.sources[field])}/canary/${field} ${JSON.stringify(value)}, ${why} the nginx variable ${variable}: ${length} characters, ` +
          `and nginx (default variables_hash_bucket_size 64) refuses a variable name over ${NGINX_MAP_VARIABLE_MAX} ("could not build variables_hash"): ` +
          `use an upstream name of at most ${room} characters (got ${nginx.upstream.length})${from === 'hash' ? ', or a cookie name without "-"' : ''}`,
      });
    }
  });
  return issues;
}
