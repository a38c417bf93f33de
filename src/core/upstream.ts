/**
 * Rendering of the nginx upstream file. Every value that reaches the file is
 * checked here against a strict pattern, whatever validated it before: this
 * is the last line between input and nginx config.
 *
 * PURE.
 */
export interface UpstreamEntry {
  address: string;
  down: boolean;
  name: string;
}

export interface UpstreamInput {
  service: string;
  upstream: string;
  servers: readonly UpstreamEntry[];
}

const ADDRESS_RE = /^(?:[0-9]{1,3}\.){3}[0-9]{1,3}:[0-9]{1,5}$|^\[[0-9a-fA-F:]+\]:[0-9]{1,5}$|^[A-Za-z0-9][A-Za-z0-9.-]{0,252}:[0-9]{1,5}$/;
const IDENT_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/**
 * nginx rejects an upstream without servers, and a reload with a failing
 * config keeps the old one: so an empty fleet gets a placeholder that is
 * always down (requests get a 502 from nginx instead of an old backend).
 */
export const PLACEHOLDER_SERVER = '    server 127.0.0.1:9 down; # no instance in service';

export class UnsafeUpstreamValueError extends Error {}

function assertSafe(re: RegExp, value: string, what: string): void {
  if (!re.test(value)) throw new UnsafeUpstreamValueError(`refusing to write ${what} ${JSON.stringify(value)} into an nginx config`);
}

function renderServers(servers: readonly UpstreamEntry[]): string {
  if (servers.length === 0) return PLACEHOLDER_SERVER;
  return servers
    .map((s) => {
      assertSafe(ADDRESS_RE, s.address, 'server address');
      assertSafe(NAME_RE, s.name, 'instance name');
      return `    server ${s.address}${s.down ? ' down' : ''}; # ${s.name}`;
    })
    .join('\n');
}

/** Fills `{{service}}`, `{{upstream}}` and `{{servers}}` in a template. */
export function renderUpstream(template: string, input: UpstreamInput): string {
  assertSafe(IDENT_RE, input.upstream, 'upstream name');
  assertSafe(NAME_RE, input.service, 'service name');
  const values: Record<string, string> = { service: input.service, upstream: input.upstream, servers: renderServers(input.servers) };
  return template.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, key: string) => values[key] ?? whole);
}

/** Parses server lines back out of a file fleetroll wrote (for status and tests). */
export function parseUpstreamServers(content: string): UpstreamEntry[] {
  const out: UpstreamEntry[] = [];
  for (const m of content.matchAll(/^\s*server\s+(\S+?)(\s+down)?\s*;\s*(?:#\s*(\S+))?/gm)) {
    if (m[1] === '127.0.0.1:9') continue;
    out.push({ address: m[1] ?? '', down: m[2] !== undefined, name: m[3] ?? '' });
  }
  return out;
}
