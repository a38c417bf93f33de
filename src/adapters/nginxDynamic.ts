/**
 * The `Router` of nginx's dynamic mode (`loadBalancers[].nginx.mode: dynamic`):
 * membership changes with no reload, so no keep-alive client connection is
 * closed by a deploy. nginx runs fleetroll's Lua balancer
 * (templates/fleetroll.lua, templates/nginx-dynamic.conf.example).
 *
 * The transport is a file, as in reload mode: fleetroll writes a peers file
 * into nginx's filesystem (Docker's archive API, or a plain write on this
 * machine with exec: true), and a Lua timer in nginx reads it every 10 ms and
 * answers in a status file with the version it has in force. That needs
 * nothing in the image but nginx and its modules (no shell, no curl, no
 * listener fleetroll must reach through a remote host's network), and the
 * file on disk is also what a restarted nginx starts from.
 *
 * The engine's contract is kept: `writeAndTest` takes the upstream file as
 * reload mode would write it and only checks and stages its servers (so all
 * load balancers are checked before any changes, and a restore is a restage);
 * `reload` writes the peers file and returns once the status file confirms
 * that version: from then on no new request goes to a server marked down.
 */
import path from 'node:path';
import { FleetrollError } from '../errors.js';
import {
  PLACEHOLDER_ADDRESS,
  defaultPeersFile,
  STICKY_NAME_RE,
  UPSTREAM_NAME_RE,
  forceRoute,
  parseForceKey,
  parseUpstreamServers,
  type ForceKey,
  type StickyKey,
  type UpstreamEntry,
} from '../core/upstream.js';
import type { ChangeParts, Router } from '../ports.js';
import type { NginxPlace } from './nginxPlace.js';

/** The Debian packages that give Debian 12's nginx the Lua module (lua-resty-core comes with them). */
export const LUA_PACKAGES = 'libnginx-mod-http-lua libnginx-mod-http-ndk';

// Re-exported: the adapter's callers (wiring, tests) name the default peers file with the rest of the dynamic mode.
export { defaultPeersFile };

/** A peer as fleetroll's Lua reads it. */
const ADDRESS_RE = /^(?:[0-9]{1,3}\.){3}[0-9]{1,3}:[0-9]{1,5}$/;
const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** The peers of a second upstream the Lua balances (blue-green's preview, a canary's forced sides). */
export interface PeerGroup {
  name: string;
  servers: readonly UpstreamEntry[];
}

/** canary.force in the dynamic mode: the header or cookie, and the groups holding each side's servers in service. */
export interface PeersForce {
  key: ForceKey;
  canary: string;
  stable: string;
}

export interface PeersExtras {
  split?: { key: StickyKey; epoch: number } | undefined;
  groups?: readonly PeerGroup[] | undefined;
  force?: PeersForce | undefined;
}

/** One server as a peers-file line, every value checked against what the Lua side parses. */
function peerLine(s: UpstreamEntry): string {
  if (!ADDRESS_RE.test(s.address))
    throw new FleetrollError('E_INVALID', `the dynamic nginx mode takes IPv4 addresses with a port, got ${JSON.stringify(s.address)}`);
  if (!NAME_RE.test(s.name)) throw new FleetrollError('E_INVALID', `an instance name fleetroll's Lua cannot carry: ${JSON.stringify(s.name)}`);
  const weight = s.weight ?? 1;
  if (!Number.isInteger(weight) || weight < 1 || weight > 1000) throw new FleetrollError('E_INVALID', `a weight from 1 to 1000, got ${weight}`);
  return `${s.address} ${s.down ? 'down' : 'up'} ${weight} ${s.name}`;
}

function groupName(name: string): string {
  if (!UPSTREAM_NAME_RE.test(name) && !/^fleetroll_[A-Za-z0-9_]{1,64}_(?:canary|stable)$/.test(name))
    throw new FleetrollError('E_INVALID', `a group name fleetroll's Lua cannot carry: ${JSON.stringify(name)}`);
  return name;
}

/**
 * The peers file for these servers (the placeholder left out). Every value
 * is checked against what the Lua side parses, so nothing else reaches
 * nginx: an IPv4 address and port, up or down, a weight, a container name,
 * an upstream name, a header or cookie name.
 */
export function renderPeers(servers: readonly UpstreamEntry[], version: number, extras: PeersExtras = {}): string {
  const lines = ['fleetroll-peers 1', `version ${version}`];
  const { split, force } = extras;
  if (split) {
    const [kind, name] = split.key === 'remote_addr' ? ['remote_addr', '-'] : (split.key.split(':') as [string, string]);
    if (!STICKY_NAME_RE.test(name) && name !== '-')
      throw new FleetrollError('E_INVALID', `a sticky key name fleetroll's Lua cannot carry: ${JSON.stringify(name)}`);
    lines.push(`split ${kind} ${name} ${split.epoch}`);
  }
  if (force) {
    const k = parseForceKey(force.key);
    if ('error' in k) throw new FleetrollError('E_INVALID', `canary.force ${k.error}`);
    lines.push(`force ${k.kind} ${k.name} ${groupName(force.canary)} ${groupName(force.stable)}`);
  }
  for (const s of servers) if (s.address !== PLACEHOLDER_ADDRESS) lines.push(`peer ${peerLine(s)}`);
  for (const g of extras.groups ?? []) {
    const name = groupName(g.name);
    for (const s of g.servers) if (s.address !== PLACEHOLDER_ADDRESS) lines.push(`member ${name} ${peerLine(s)}`);
  }
  lines.push(`end ${version}`);
  return `${lines.join('\n')}\n`;
}

function parseEntry(p: RegExpMatchArray, at: number): UpstreamEntry {
  const weight = Number(p[at + 2]);
  return { address: p[at]!, down: p[at + 1] === 'down', name: p[at + 3]!, ...(weight !== 1 ? { weight } : {}) };
}

/** A complete peers file (header and trailer agree): its version, servers and groups; undefined otherwise. */
export function parsePeers(text: string | undefined): { version: number; servers: UpstreamEntry[]; groups: PeerGroup[] } | undefined {
  const m = text === undefined ? null : /^fleetroll-peers 1\nversion (\d+)\n/.exec(text);
  if (!m || !text || !new RegExp(`\\nend ${m[1]}\\n?$`).test(text)) return undefined;
  const servers = [...text.matchAll(/^peer (\S+) (up|down) (\d+) (\S+)$/gm)].map((p) => parseEntry(p, 1));
  const groups = new Map<string, UpstreamEntry[]>();
  for (const p of text.matchAll(/^member (\S+) (\S+) (up|down) (\d+) (\S+)$/gm)) groups.set(p[1]!, [...(groups.get(p[1]!) ?? []), parseEntry(p, 2)]);
  return { version: Number(m[1]), servers, groups: [...groups].map(([name, list]) => ({ name, servers: list })) };
}

/**
 * What the Lua timer last wrote: the version in force, since when this nginx
 * runs, the Lua file's own version (1 before groups and force existed), when
 * the version went in force (nginx's clock, seconds), and the requests in
 * flight per peer marked down.
 */
export interface PeersStatus {
  version: number;
  started: number;
  lua: number;
  since: number | undefined;
  inflight: Map<string, number>;
}

export function parseStatus(text: string | undefined): PeersStatus | undefined {
  const m = text === undefined ? null : /^fleetroll-status 1\nversion (\d+)\nstarted ([0-9.]+)\n/.exec(text);
  if (!m || !text || !new RegExp(`\\nend ${m[1]}\\n?$`).test(text)) return undefined;
  const inflight = new Map<string, number>();
  for (const p of text.matchAll(/^inflight (\S+) (-?\d+)$/gm)) inflight.set(p[1]!, Math.max(0, Number(p[2])));
  const since = Number(/^since ([0-9.]+)$/m.exec(text)?.[1] ?? 0);
  return { version: Number(m[1]), started: Number(m[2]), lua: Number(/^lua (\d+)$/m.exec(text)?.[1] ?? 1), since: since > 0 ? since : undefined, inflight };
}

/** The servers (and each group) as upstream blocks, the form the engine reads (status, the start of a rollout). */
function asUpstream(upstream: string, servers: readonly UpstreamEntry[], groups: readonly PeerGroup[] = []): string {
  const block = (name: string, list: readonly UpstreamEntry[]) => {
    const lines = list.map((s) => `    server ${s.address}${s.down ? ' down' : ''}${s.weight !== undefined ? ` weight=${s.weight}` : ''}; # ${s.name}`);
    return `upstream ${name} {\n${lines.join('\n')}\n}\n`;
  };
  return `# fleetroll dynamic mode: the peers nginx's Lua balancer has\n${block(upstream, servers)}${groups.map((g) => block(g.name, g.servers)).join('')}`;
}

// A bound for a Lua that never takes a set (a paused or wedged nginx), not a
// budget for one that does (10-60 ms): an nginx restarted mid-rollout on a
// CI machine at load 30 took over 5 s to read the peers file again.
const CONFIRM_TIMEOUT_MS = 15_000;
/** How often fleetroll's Lua reads the peers file (TICK in templates/fleetroll.lua). */
const LUA_TICK_MS = 10;

export interface DynamicNginxRouterOptions {
  place: NginxPlace;
  upstream: string;
  /** The peers file's path where nginx runs; the status file is the same path with ".status". */
  peersFile: string;
  /** A canary's sticky key: while the upstream has a canary's `hash` line, the Lua splits users exactly by it. */
  stickyKey?: StickyKey | undefined;
  /** Blue-green's preview upstream: nginx.conf's upstream of that name balances the group of that name. */
  preview?: string | undefined;
  /** canary.force: the Lua reads this header or cookie and sends "always" to the canary's servers, "never" to stable's. */
  force?: ForceKey | undefined;
  /** How long a set may take to be confirmed in force before the change fails (default CONFIRM_TIMEOUT_MS). */
  confirmTimeoutMs?: number | undefined;
}

/** An upstream file of a canary in progress: its `hash ... consistent` line (core/upstream renderUpstreamParts). */
const HASH_LINE_RE = /^\s*hash\s+\S+\s+consistent\s*;/m;

export class DynamicNginxRouter implements Router {
  readonly name: string;
  /** Membership changes need no reload: the rollout counts none. */
  readonly reloadFree = true;
  private readonly place: NginxPlace;
  private readonly upstream: string;
  private readonly peersFile: string;
  private readonly statusFile: string;
  private readonly confirmTimeoutMs: number;
  private staged: { servers: readonly UpstreamEntry[]; groups: PeerGroup[] } | undefined;
  private stagedSplit = false;
  private readonly stickyKey: StickyKey | undefined;
  private readonly preview: string | undefined;
  private readonly force: PeersForce | undefined;
  /** The version the current canary split began at: the Lua keeps its users' assignments under it. */
  private splitEpoch: number | undefined;
  private version = 0;
  private parts: ChangeParts | undefined;

  constructor(o: DynamicNginxRouterOptions) {
    this.place = o.place;
    this.name = `${o.place.name} (dynamic)`;
    this.upstream = o.upstream;
    this.peersFile = o.peersFile;
    this.statusFile = `${o.peersFile}.status`;
    this.confirmTimeoutMs = o.confirmTimeoutMs ?? CONFIRM_TIMEOUT_MS;
    this.stickyKey = o.stickyKey;
    this.preview = o.preview;
    // The forced sides carry the names reload mode gives their upstream blocks, so one upstream file serves both modes.
    this.force = o.force === undefined ? undefined : { key: o.force, ...forceRoute(o.upstream) };
  }

  /** The groups the Lua needs beside the main upstream: their names, as in the upstream file. */
  private groupNames(): string[] {
    return [...(this.preview !== undefined ? [this.preview] : []), ...(this.force ? [this.force.canary, this.force.stable] : [])];
  }

  /**
   * nginx's config passes `nginx -t`, has the pieces of fleetroll's Lua for
   * this upstream, and the Lua timer runs (its status file is there). Each
   * failure says what to change.
   */
  async check(): Promise<void> {
    const t = await this.place.nginx(['-T']);
    if (!t.ok) {
      const lua = /unknown directive "(?:balancer|init|init_worker|log)_by_lua|ngx_http_lua_module|ndk_http_module/.test(t.output);
      // Preflight lists several routers' messages and keeps no hint: what to do goes into the message.
      const todo = lua
        ? `\nthe dynamic mode needs nginx's Lua module: install ${LUA_PACKAGES} (Debian 12) where nginx runs, and load_module ndk_http_module.so, then ngx_http_lua_module.so (templates/nginx-dynamic.conf.example)`
        : '';
      throw new FleetrollError('E_NGINX_TEST', `${this.name}: the current configuration fails \`nginx -t\`:\n${t.output}${todo}`, {
        hint: lua ? `install ${LUA_PACKAGES} where nginx runs` : 'fix the nginx configuration, then deploy again',
      });
    }
    const missing = dynamicConfigProblems(t.stdout, this.upstream, this.peersFile, this.preview);
    if (missing.length) {
      throw new FleetrollError(
        'E_NGINX_TEST',
        `${this.name}: nginx's configuration lacks what the dynamic mode needs for upstream ${this.upstream} (templates/nginx-dynamic.conf.example has every piece; or set mode: reload):\n${missing.map((m) => `  - ${m}`).join('\n')}`,
        {
          hint: 'start from templates/nginx-dynamic.conf.example, or set mode: reload',
        },
      );
    }
    const status = parseStatus(await this.place.read(this.statusFile).catch(() => undefined));
    if (!status) {
      throw new FleetrollError('E_NGINX_TEST', `${this.name}: no status file from fleetroll's Lua at ${this.statusFile}: its timer does not run`, {
        hint: `check nginx's error log; the workers' user must be able to write ${path.posix.dirname(this.statusFile)}`,
      });
    }
    if (status.lua < 2 && this.groupNames().length > 0) {
      const what = this.preview !== undefined ? `the preview upstream ${this.preview}` : 'canary.force';
      throw new FleetrollError(
        'E_NGINX_TEST',
        `${this.name}: the fleetroll.lua nginx runs is version ${status.lua}, too old for ${what}: copy templates/fleetroll.lua from this fleetroll into nginx again and reload nginx once`,
        {
          hint: 'copy templates/fleetroll.lua into nginx and reload it',
        },
      );
    }
  }

  async config(): Promise<string> {
    const t = await this.place.nginx(['-T']);
    if (!t.ok) throw new FleetrollError('E_NGINX_TEST', `${this.name}: \`nginx -T\` failed:\n${t.output}`);
    return t.stdout;
  }

  /**
   * The peers nginx has in force, as an upstream block: the peers file when
   * the Lua side's status confirms its version. Undefined when fleetroll has
   * written none, or nginx does not have it in force (a restart that lost
   * it, a timer that stopped): the rollout then writes the whole set before
   * its first decision, as for a file that was never written.
   */
  async read(): Promise<string | undefined> {
    const [peers, status] = await Promise.all([
      this.place.read(this.peersFile).then(parsePeers),
      this.place.read(this.statusFile).then(parseStatus, () => undefined),
    ]);
    if (!peers) return undefined;
    this.version = Math.max(this.version, peers.version);
    if (status?.version !== peers.version) return undefined;
    // Every group this fleet names is listed (empty when none of its servers is in the file), as reload mode's file lists every block.
    const groups = this.groupNames().map((name) => peers.groups.find((g) => g.name === name) ?? { name, servers: [] });
    return asUpstream(this.upstream, peers.servers, groups);
  }

  /** Checks and stages the servers of this upstream and its groups; nothing reaches nginx before reload(). */
  async writeAndTest(content: string): Promise<void> {
    const servers = parseUpstreamServers(content, this.upstream);
    const groups = this.groupNames().map((name) => ({ name, servers: parseUpstreamServers(content, name) }));
    const split = this.stickyKey !== undefined && HASH_LINE_RE.test(content);
    renderPeers(servers, 0, { split: split && this.stickyKey ? { key: this.stickyKey, epoch: 0 } : undefined, groups, force: this.force });
    this.staged = { servers, groups };
    this.stagedSplit = split;
    this.parts = undefined;
    return Promise.resolve();
  }

  /** Writes the staged peers and waits for the Lua side to have them in force. */
  async reload(): Promise<void> {
    const staged = this.staged;
    if (!staged) return;
    const version = (this.version = Math.max(Date.now(), this.version + 1));
    this.splitEpoch = this.stagedSplit ? (this.splitEpoch ?? version) : undefined;
    const split = this.stickyKey && this.splitEpoch !== undefined ? { key: this.stickyKey, epoch: this.splitEpoch } : undefined;
    const t0 = Date.now();
    try {
      await this.place.write(this.peersFile, renderPeers(staged.servers, version, { split, groups: staged.groups, force: this.force }));
    } catch (err) {
      throw new FleetrollError('E_NGINX_FILE', `${this.name}: writing ${this.peersFile}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    const t1 = Date.now();
    let seen: PeersStatus | undefined;
    // The Lua timer looks every 10 ms: the first look comes just after one tick, so it usually confirms at once.
    await new Promise((r) => setTimeout(r, LUA_TICK_MS + 2));
    for (let wait = LUA_TICK_MS; ; wait = Math.min(wait * 2, 50)) {
      seen = parseStatus(await this.place.read(this.statusFile).catch(() => undefined));
      if (seen?.version === version) break;
      if (Date.now() - t1 > this.confirmTimeoutMs) {
        throw new FleetrollError(
          'E_NGINX_RELOAD',
          `${this.name}: fleetroll's Lua did not take the new peers within ${this.confirmTimeoutMs / 1000} s (its status file says version ${seen?.version ?? 'none'}, wanted ${version})`,
          {
            hint: 'check nginx\'s error log and that init_worker_by_lua_block calls require("fleetroll").init_worker()',
          },
        );
      }
      await new Promise((r) => setTimeout(r, wait));
    }
    this.staged = undefined;
    const total = Date.now() - t0;
    // nginx's own clock says when the set went in force; kept only where it agrees with ours (same machine, or clocks in step).
    const inForce = seen.since !== undefined ? Math.round(seen.since * 1000 - t0) : undefined;
    this.parts = { file: t1 - t0, confirm: Date.now() - t1, ...(inForce !== undefined && inForce >= 0 && inForce <= total ? { inForce } : {}) };
  }

  lastChange(): ChangeParts | undefined {
    return this.parts;
  }

  /** Requests in flight on each peer marked down, as the Lua side counts them (for a drain that ends when they do). */
  async inFlight(): Promise<Map<string, number> | undefined> {
    return parseStatus(await this.place.read(this.statusFile).catch(() => undefined))?.inflight;
  }
}

/** What an `nginx -T` output lacks of fleetroll's Lua pieces for `upstream` (templates/nginx-dynamic.conf.example). */
export function dynamicConfigProblems(config: string, upstream: string, peersFile: string, preview?: string): string[] {
  const q = (s: string) => `["']${s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}["']`;
  const checks: [RegExp, string][] = [
    [/^\s*lua_shared_dict\s+fleetroll\s+\S+\s*;/m, 'lua_shared_dict fleetroll 1m;'],
    [
      new RegExp(`require\\(["']fleetroll["']\\)\\.init\\(\\s*\\{[^}]*upstream\\s*=\\s*${q(upstream)}[^}]*peers\\s*=\\s*${q(peersFile)}`),
      `init_by_lua_block { require("fleetroll").init({ upstream = "${upstream}", peers = "${peersFile}" }) }`,
    ],
    [/require\(["']fleetroll["']\)\.init_worker\(\)/, 'init_worker_by_lua_block { require("fleetroll").init_worker() }'],
    [
      new RegExp(`balancer_by_lua_block\\s*\\{\\s*require\\(["']fleetroll["']\\)\\.balance\\(${q(upstream)}\\)`),
      `balancer_by_lua_block { require("fleetroll").balance("${upstream}") } in upstream ${upstream}`,
    ],
    [/require\(["']fleetroll["']\)\.done\(\)/, 'log_by_lua_block { require("fleetroll").done() } where it proxies'],
    ...(preview !== undefined
      ? ([
          [
            new RegExp(`balancer_by_lua_block\\s*\\{\\s*require\\(["']fleetroll["']\\)\\.balance\\(${q(preview)}\\)`),
            `upstream ${preview} { server 0.0.0.1; balancer_by_lua_block { require("fleetroll").balance("${preview}") } } (blue-green's preview)`,
          ],
        ] as [RegExp, string][])
      : []),
  ];
  return checks.filter(([re]) => !re.test(config)).map(([, what]) => what);
}
