/**
 * Rendering of the nginx upstream file. Every value that reaches the file is
 * checked here against a strict pattern, whatever validated it before: this
 * is the last line between input and nginx config.
 *
 * What a template holds (templates/upstream.conf.tmpl is the default):
 *
 *   {{service}}   the service name (for comments)
 *   {{upstream}}  the upstream name the user's `proxy_pass http://<upstream>` names
 *   {{servers}}   the upstream's body: a `hash <key> consistent;` line when a
 *                 sticky key is given (canary), then one `server` line per instance,
 *                 with ` weight=N` when a weight is given and ` down` when down
 *   {{blocks}}    further http-level blocks fleetroll needs, or nothing: the preview
 *                 upstream (blue-green), the `map` that reads a cookie whose name
 *                 nginx cannot spell as `$cookie_NAME`, and a canary's forced
 *                 route (`canary.force`: a map and two upstreams, see forceRoute).
 *                 A template without `{{blocks}}` still works: the blocks are then
 *                 appended at its end.
 *
 * The file is included at http level (it holds `upstream` blocks), so a `map`
 * and several `upstream` blocks are allowed there. nginx resolves variables
 * once the whole http block is read, so the map may follow the upstream that
 * uses its variable.
 *
 * Canary traffic splitting uses weights inside the one upstream with
 * `hash <key> consistent`, so the user's `proxy_pass http://<upstream>` is
 * the same under every strategy: `canaryWeights` (./canaryWeights.ts) gives the weights.
 *
 * PURE.
 */
import { FleetrollError } from '../errors.js';
import { canaryWeights, MAX_WEIGHT, MIN_WEIGHT } from './canaryWeights.js';

// Re-exported: the weights are part of the upstream vocabulary callers (core/strategy, the tests) import from here.
export { canaryWeights, MAX_WEIGHT, MIN_WEIGHT };

export interface UpstreamEntry {
  address: string;
  down: boolean;
  name: string;
  /** nginx `weight=` (an integer from 1 to 1000); omitted means nginx's default, 1. */
  weight?: number | undefined;
}

/**
 * How requests stick to an instance (and so to a version) under `hash ... consistent`:
 * the client address, a cookie or a request header. NAME: letters, digits, "_" and "-",
 * at most 64.
 */
export type StickyKey = 'remote_addr' | `cookie:${string}` | `header:${string}`;

export interface UpstreamInput {
  service: string;
  upstream: string;
  servers: readonly UpstreamEntry[];
  /** Canary: `hash <key> consistent;` as the upstream's first line, so servers' weights split traffic stickily. */
  hash?: StickyKey | undefined;
  /**
   * Blue-green: a second upstream holding the new set before the switch, so a
   * prePromotion hook can test it through nginx. Render it whenever the fleet
   * names one (with no servers outside a rollout: it then holds the
   * always-down placeholder), so an nginx.conf that proxies to it keeps
   * passing `nginx -t`.
   */
  preview?: { upstream: string; servers: readonly UpstreamEntry[] } | undefined;
  /**
   * Canary with `force`: a header or cookie that sends a request to the
   * canary or to stable whatever the weights. `canary` / `stable` are the
   * servers in service of each side (a subset of `servers`, up); a side
   * with none is not forced to (its requests take the main upstream).
   */
  force?: { key: ForceKey; canary: readonly UpstreamEntry[]; stable: readonly UpstreamEntry[] } | undefined;
}

/**
 * `canary.force`: a request header or cookie a tester sets to pick a side.
 * Its value `always` sends the request to the canary, `never` to stable
 * (ignoring case, as ingress-nginx's canary-by-header does); anything else,
 * or no such header or cookie, leaves it to the weighted split.
 */
export type ForceKey = `cookie:${string}` | `header:${string}`;
export const FORCE_CANARY = 'always';
export const FORCE_STABLE = 'never';

const ADDRESS_RE = /^(?:[0-9]{1,3}\.){3}[0-9]{1,3}:[0-9]{1,5}$|^\[[0-9a-fA-F:]+\]:[0-9]{1,5}$|^[A-Za-z0-9][A-Za-z0-9.-]{0,252}:[0-9]{1,5}$/;
/** An nginx upstream name (also what fleet files allow). */
export const UPSTREAM_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const IDENT_RE = UPSTREAM_NAME_RE;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;
/** The NAME of `cookie:NAME` / `header:NAME`. */
export const STICKY_NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
const STICKY_KEY_RE = /^(?:remote_addr|(cookie|header):([A-Za-z0-9_-]{1,64}))$/;

/** The dynamic mode's peers file when the fleet file names none: /tmp is writable by nginx's workers in any image. */
export function defaultPeersFile(upstream: string): string {
  return `/tmp/fleetroll-${upstream}.peers`;
}

/** The address of the placeholder server below (nothing listens on the discard port). */
export const PLACEHOLDER_ADDRESS = '127.0.0.1:9';
/**
 * nginx rejects an upstream without servers, and a reload with a failing
 * config keeps the old one: so an empty fleet gets a placeholder that is
 * always down (requests get a 502 from nginx instead of an old backend).
 */
export const PLACEHOLDER_SERVER = `    server ${PLACEHOLDER_ADDRESS} down; # no instance in service`;

/** A value that would not be inert text in an nginx config (validation refuses user input first): E_UNSAFE_VALUE, exit 1. */
export class UnsafeUpstreamValueError extends FleetrollError {
  constructor(message: string) {
    super('E_UNSAFE_VALUE', message);
  }
}

function assertSafe(re: RegExp, value: unknown, what: string): asserts value is string {
  if (typeof value !== 'string' || !re.test(value))
    throw new UnsafeUpstreamValueError(`refusing to write ${what} ${JSON.stringify(value)} into an nginx config`);
}

const FORCE_KEY_RE = /^(cookie|header):([A-Za-z0-9_-]{1,64})$/;
/** The names fleetroll derives from an upstream's (up to 64 characters, plus its own prefix and suffix). */
const DERIVED_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;

/** Parses `canary.force` ("header:NAME" or "cookie:NAME"); returns the problem instead of throwing. */
export function parseForceKey(raw: unknown): { kind: 'cookie' | 'header'; name: string } | { error: string } {
  const allowed = '"header:NAME" or "cookie:NAME" (NAME: letters, digits, "_" and "-", at most 64)';
  if (typeof raw !== 'string') return { error: `must be ${allowed}, got ${raw === null ? 'null' : typeof raw}` };
  const m = FORCE_KEY_RE.exec(raw);
  if (!m) return { error: `must be ${allowed}, got ${JSON.stringify(raw)}` };
  return { kind: m[1] as 'cookie' | 'header', name: m[2] ?? '' };
}

/**
 * What `canary.force` adds for an upstream: the variable nginx.conf proxies
 * to (`proxy_pass http://$fleetroll_<upstream>_route;`) and the two
 * upstreams it may name besides the main one. The variable's value is an
 * upstream name, so nginx picks that server group without a resolver.
 */
export function forceRoute(upstream: string): { variable: string; canary: string; stable: string } {
  assertSafe(IDENT_RE, upstream, 'upstream name');
  return { variable: `$fleetroll_${upstream}_route`, canary: `fleetroll_${upstream}_canary`, stable: `fleetroll_${upstream}_stable` };
}

/**
 * The forced route's blocks: a `map` from the header (or the Cookie header)
 * to an upstream name, defaulting to the main upstream, and an upstream per
 * side with that side's servers in service. A side with none gets no map
 * entry (forcing it means the main upstream, which then holds only the other
 * side) and the always-down placeholder, so the file's shape never changes.
 */
function renderForce(upstream: string, force: NonNullable<UpstreamInput['force']>): string {
  const k = parseForceKey(force.key);
  if ('error' in k) throw new UnsafeUpstreamValueError(`refusing to write canary.force ${JSON.stringify(force.key)} into an nginx config: it ${k.error}`);
  assertSafe(STICKY_NAME_RE, k.name, 'canary.force name');
  const r = forceRoute(upstream);
  for (const name of [r.canary, r.stable]) assertSafe(DERIVED_NAME_RE, name, 'upstream name');
  const up = (xs: readonly UpstreamEntry[]) => xs.filter((s) => !s.down).map((s) => ({ ...s, weight: undefined }));
  const canary = up(force.canary);
  const stable = up(force.stable);
  // The header's value is matched as a string (nginx ignores case); a cookie is found in the
  // Cookie header by a regular expression (its NAME is letters, digits, "_" and "-": nothing
  // a regular expression reads specially), its value matched ignoring case too.
  const source = k.kind === 'header' ? headerVariable(k.name) : '$http_cookie';
  const match = (value: string) => (k.kind === 'header' ? value : `"~(?:^|;)\\s*${k.name}=(?i:${value})\\s*(?:;|$)"`);
  const what = k.kind === 'header' ? `the ${k.name} header` : `the ${k.name} cookie`;
  return [
    `# canary.force: ${what} "${FORCE_CANARY}" sends a request to the canary, "${FORCE_STABLE}" to stable; without it the request`,
    `# takes ${upstream}'s weighted split. nginx.conf proxies to http://${r.variable} for this to work.`,
    `map ${source} ${r.variable} {`,
    `    default ${upstream};`,
    ...(canary.length > 0 ? [`    ${match(FORCE_CANARY)} ${r.canary};`] : []),
    ...(stable.length > 0 ? [`    ${match(FORCE_STABLE)} ${r.stable};`] : []),
    '}',
    `upstream ${r.canary} {`,
    renderServers(canary),
    '}',
    `upstream ${r.stable} {`,
    renderServers(stable),
    '}',
  ].join('\n');
}

/** nginx's variable for a request header: lowercased, "-" as "_" (X-User → $http_x_user). */
function headerVariable(name: string): string {
  return `$http_${name.toLowerCase().replace(/-/g, '_')}`;
}

export type ParsedStickyKey = { kind: 'remote_addr' } | { kind: 'cookie' | 'header'; name: string };

/**
 * Parses a sticky key ("remote_addr", "cookie:NAME", "header:NAME"). Returns
 * the problem instead of throwing, for the config's list of every problem.
 */
export function parseStickyKey(raw: unknown): ParsedStickyKey | { error: string } {
  const allowed = '"remote_addr", "cookie:NAME" or "header:NAME" (NAME: letters, digits, "_" and "-", at most 64)';
  if (typeof raw !== 'string') return { error: `must be ${allowed}, got ${raw === null ? 'null' : typeof raw}` };
  const m = STICKY_KEY_RE.exec(raw);
  if (!m) return { error: `must be ${allowed}, got ${JSON.stringify(raw)}` };
  return m[1] === undefined ? { kind: 'remote_addr' } : { kind: m[1] as 'cookie' | 'header', name: m[2] ?? '' };
}

/**
 * The nginx variable a sticky key hashes on, and the `map` that defines it
 * when nginx has no built-in one:
 *
 *   remote_addr      → $remote_addr
 *   header:X-User    → $http_x_user        (nginx lowercases header names, "-" becomes "_")
 *   cookie:session   → $cookie_session
 *   cookie:my-sess   → $fleetroll_<upstream>_sticky, from a map over $http_cookie
 *                      (an nginx variable name cannot hold "-", so $cookie_my-sess would
 *                      read as $cookie_my followed by "-sess")
 */
export function stickyVariable(key: StickyKey, upstream: string): { variable: string; map?: string } {
  assertSafe(IDENT_RE, upstream, 'upstream name');
  const k = parseStickyKey(key);
  if ('error' in k) throw new UnsafeUpstreamValueError(`refusing to write sticky key ${JSON.stringify(key)} into an nginx config: it ${k.error}`);
  if (k.kind === 'remote_addr') return { variable: '$remote_addr' };
  assertSafe(STICKY_NAME_RE, k.name, 'sticky key name');
  if (k.kind === 'header') return { variable: headerVariable(k.name) };
  if (/^[A-Za-z0-9_]+$/.test(k.name)) return { variable: `$cookie_${k.name}` };
  const variable = `$fleetroll_${upstream}_sticky`;
  // The name is letters, digits, "_" and "-": nothing a regular expression reads specially.
  const map = [
    `# The ${k.name} cookie, for the sticky canary split of ${upstream} (nginx has no $cookie_ variable for a name with "-").`,
    `map $http_cookie ${variable} {`,
    `    "~(?:^|;)\\s*${k.name}=([^;]*)" $1;`,
    '    default "";',
    '}',
  ].join('\n');
  return { variable, map };
}

function serverLine(s: UpstreamEntry): string {
  assertSafe(ADDRESS_RE, s.address, 'server address');
  assertSafe(NAME_RE, s.name, 'instance name');
  if (s.weight !== undefined && (!Number.isInteger(s.weight) || s.weight < MIN_WEIGHT || s.weight > MAX_WEIGHT)) {
    throw new UnsafeUpstreamValueError(
      `refusing to write weight ${JSON.stringify(s.weight)} into an nginx config: a weight is an integer from ${MIN_WEIGHT} to ${MAX_WEIGHT}`,
    );
  }
  return `    server ${s.address}${s.weight !== undefined ? ` weight=${s.weight}` : ''}${s.down ? ' down' : ''}; # ${s.name}`;
}

/** The server lines of an upstream (the placeholder when there are none). */
function renderServers(servers: readonly UpstreamEntry[]): string {
  if (servers.length === 0) return PLACEHOLDER_SERVER;
  return servers.map(serverLine).join('\n');
}

/** What `{{servers}}` and `{{blocks}}` expand to, for a template or a caller of its own. */
export function renderUpstreamParts(input: UpstreamInput): { servers: string; blocks: string } {
  assertSafe(IDENT_RE, input.upstream, 'upstream name');
  const blocks: string[] = [];
  let body = renderServers(input.servers);
  if (input.hash !== undefined) {
    const { variable, map } = stickyVariable(input.hash, input.upstream);
    body = `    hash ${variable} consistent;\n${body}`;
    if (map) blocks.push(map);
  }
  if (input.preview) {
    assertSafe(IDENT_RE, input.preview.upstream, 'preview upstream name');
    if (input.preview.upstream === input.upstream) {
      throw new UnsafeUpstreamValueError(`refusing to write preview upstream ${JSON.stringify(input.preview.upstream)}: it is the main upstream's name`);
    }
    blocks.push(
      [
        `# Preview of the new set (blue-green), before the switch. Not in ${input.upstream}'s traffic.`,
        `upstream ${input.preview.upstream} {`,
        renderServers(input.preview.servers),
        '}',
      ].join('\n'),
    );
  }
  if (input.force) blocks.push(renderForce(input.upstream, input.force));
  return { servers: body, blocks: blocks.join('\n') };
}

const SERVERS_RE = /\{\{\s*servers\s*\}\}/;

/** What is wrong with an upstream template's text, if anything: without {{servers}} no instance would ever reach the file. */
export function upstreamTemplateProblem(text: string): string | undefined {
  return SERVERS_RE.test(text) ? undefined : 'the upstream template must contain {{servers}}';
}

/**
 * The longest variable name (without "$") a `map` may define under nginx's
 * default `variables_hash_bucket_size` 64. nginx keeps every variable a map
 * defines in one hash; an entry takes a pointer (8 bytes) plus the name and 2
 * bytes rounded up to 8, and a bucket ends with an 8-byte marker, so one
 * name fills a 64-byte bucket at 46 characters. Measured on nginx 1.22.1
 * (64-bit): a 46-character name passes `nginx -t`, 47 fails with "could not
 * build variables_hash, you should increase variables_hash_bucket_size: 64".
 * $cookie_NAME and $http_NAME are prefix variables, not in that hash: no limit
 * there below the 64 characters a NAME may have.
 */
export const NGINX_MAP_VARIABLE_MAX = 46;

/**
 * The variables the rendered file defines with `map` (spelled with "$") for
 * an upstream under a canary's sticky key and force key: the names that must
 * fit nginx's variables hash (NGINX_MAP_VARIABLE_MAX).
 */
export function mapVariables(
  upstream: string,
  o: { hash?: StickyKey | undefined; force?: ForceKey | undefined },
): { variable: string; from: 'hash' | 'force' }[] {
  const out: { variable: string; from: 'hash' | 'force' }[] = [];
  if (o.hash !== undefined) {
    const s = stickyVariable(o.hash, upstream);
    if (s.map !== undefined) out.push({ variable: s.variable, from: 'hash' });
  }
  if (o.force !== undefined) out.push({ variable: forceRoute(upstream).variable, from: 'force' });
  return out;
}

const BLOCKS_RE = /\{\{\s*blocks\s*\}\}/;

/**
 * Fills `{{service}}`, `{{upstream}}`, `{{servers}}` and `{{blocks}}` in a
 * template. Blocks a template has no `{{blocks}}` for are appended at its end.
 */
export function renderUpstream(template: string, input: UpstreamInput): string {
  assertSafe(IDENT_RE, input.upstream, 'upstream name');
  assertSafe(NAME_RE, input.service, 'service name');
  const parts = renderUpstreamParts(input);
  const values: Record<string, string> = { service: input.service, upstream: input.upstream, servers: parts.servers, blocks: parts.blocks };
  // Nothing to put in {{blocks}}: its line goes, rather than leaving a blank one.
  const t = parts.blocks === '' ? template.replace(/^[ \t]*\{\{\s*blocks\s*\}\}[ \t]*(?:\r?\n|$)/gm, '') : template;
  const out = t.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, key: string) => values[key] ?? whole);
  if (parts.blocks === '' || BLOCKS_RE.test(template)) return out;
  return `${out}${out.endsWith('\n') || out === '' ? '' : '\n'}${parts.blocks}\n`;
}

/**
 * Stable and canary servers with the weights that give the canary
 * `weightPercent` of the traffic (canaryWeights over the servers not down);
 * a side at 0% is marked down. Servers already down stay down, unweighted.
 */
export function splitTraffic(stable: readonly UpstreamEntry[], canary: readonly UpstreamEntry[], weightPercent: number): UpstreamEntry[] {
  const inService = (xs: readonly UpstreamEntry[]) => xs.filter((s) => !s.down).length;
  const w = canaryWeights(inService(stable), inService(canary), weightPercent);
  const weigh = (xs: readonly UpstreamEntry[], weight: number) =>
    xs.map((s) => (s.down ? { ...s, weight: undefined } : weight === 0 ? { ...s, down: true, weight: undefined } : { ...s, weight }));
  return [...weigh(stable, w.stable), ...weigh(canary, w.canary)];
}

const SERVER_LINE_RE = /^\s*server\s+(\S+?)((?:\s+(?:weight=[0-9]+|down))*)\s*;\s*(?:#\s*(\S+))?/gm;
const TEMPLATE_SERVER_RE = new RegExp(SERVER_LINE_RE.source, 'm');

/**
 * Whether the servers `parseUpstreamServers(renderUpstream(template, input))`
 * reads back are just the input's servers (before its de-duplication): no
 * preview or forced-route block and no server line of the template's own. A
 * router that reads servers rather than nginx config (the simulated nginx)
 * then takes them instead of parsing the text again, so a reload per
 * instance does not cost a parse of the whole fleet's file.
 */
export function listsOnlyServers(template: string, input: Pick<UpstreamInput, 'preview' | 'force'>): boolean {
  // A template is a few lines: testing it each time costs nothing beside the servers.
  return input.preview === undefined && input.force === undefined && !TEMPLATE_SERVER_RE.test(template);
}

/**
 * Parses server lines back out of a file fleetroll wrote (for status and
 * tests). With `upstream`, only that block's servers (the main upstream,
 * without a preview block's); without, every server in the file, once.
 */
export function parseUpstreamServers(content: string, upstream?: string): UpstreamEntry[] {
  let text = content;
  if (upstream !== undefined) {
    const block = new RegExp(`^\\s*upstream\\s+${upstream.replace(/[^A-Za-z0-9_]/g, '')}\\s*\\{([^}]*)\\}`, 'm').exec(content);
    text = block?.[1] ?? '';
  }
  const out: UpstreamEntry[] = [];
  const seen = new Set<string>();
  for (const m of text.matchAll(SERVER_LINE_RE)) {
    // A canary's forced-route upstreams repeat servers of the main one (which comes first): each counts once.
    if (m[1] === PLACEHOLDER_ADDRESS || seen.has(m[1] ?? '')) continue;
    seen.add(m[1] ?? '');
    const params = m[2] ?? '';
    const weight = /weight=([0-9]+)/.exec(params)?.[1];
    out.push({ address: m[1] ?? '', down: /\bdown\b/.test(params), name: m[3] ?? '', ...(weight !== undefined ? { weight: Number(weight) } : {}) });
  }
  return out;
}
