/**
 * What every nginx sends traffic to: the upstream files of all load
 * balancers, kept in step with the fleet.
 *
 * Changes that become due close together (two instances ready 40 ms apart, a
 * mark-down that coincides with an enable) go out as one write + `nginx -t`
 * + reload per load balancer: a change waits at most `coalesceMs` for
 * company, and changes that come while a write is in flight go out together
 * right after it. All-or-nothing across load balancers: every file is
 * written and checked before any nginx reloads; if one check fails, the
 * files already written are put back and nothing is reloaded.
 *
 * A server that is up in a config nginx has loaded, or in one being written,
 * is "routed" (`routes`): the engine never stops an instance nginx may still
 * send requests to.
 */
import { listsOnlyServers, parseUpstreamServers, renderUpstream, type ForceKey, type StickyKey, type UpstreamEntry, type UpstreamInput } from '../core/upstream.js';
import { RolloutFailedError } from '../errors.js';
import type { Clock, Journal, Router, UpstreamFile } from '../ports.js';
import type { EventSink } from './events.js';
import { faultPoint } from './faults.js';
import { sameEntry, UpstreamList } from './upstreamList.js';

/** A load balancer: how to reach it, and what to write into its upstream file. */
export interface LoadBalancer {
  router: Router;
  /** Upstream file template (templates/upstream.conf.tmpl or the fleet's own). */
  template: string;
  upstream: string;
}

export interface TrafficOptions {
  service: string;
  balancers: readonly LoadBalancer[];
  clock: Clock;
  emit: EventSink;
  journal: Journal;
  /** How long a change waits for others to share its reload. */
  coalesceMs: number;
  /**
   * What every upstream should have now, read once when a write begins: the
   * servers (up and down: the controller's list, compared by its changes, or
   * a new plain list each time, compared whole) and, for a canary split, the
   * sticky key of the `hash ... consistent` line (undefined: no hash line).
   */
  desired: () => { servers: UpstreamList | readonly UpstreamEntry[]; hash?: StickyKey | undefined };
  /** After every reload: what nginx now has in force, and the addresses `routes` now answers otherwise than after the previous reload. */
  applied: (up: ReadonlySet<string>, down: ReadonlySet<string>, changed: readonly string[]) => void;
  /** A write or reload failed: the rollout cannot go on. */
  failed: (err: unknown) => void;
  /** Nothing is waiting or being written any more. */
  idle?: () => void;
  /**
   * Blue-green's preview: a second upstream block in every file, listing the
   * new set before the switch so a prePromotion hook can try it. A change of
   * its servers needs a reload like the main upstream's.
   */
  preview?: { upstream: string; servers: () => UpstreamEntry[] } | undefined;
  /**
   * Canary with `force`: every file also gets the forced route (a map and an
   * upstream per side, see core/upstream forceRoute), whatever the phase, so
   * an nginx.conf that proxies to its variable always passes `nginx -t`.
   * `canary` tells the new revision's addresses from stable's.
   */
  force?: { key: ForceKey; canary: (address: string) => boolean } | undefined;
}

/** What beyond the up/down sets changes how nginx splits traffic: the hash line, the weights and the forced canary side. */
function splitSignature(hash: StickyKey | undefined, servers: readonly UpstreamEntry[], force?: UpstreamInput['force']): string {
  const weights = servers.filter((e) => !e.down && e.weight !== undefined).map((e) => `${e.address}=${e.weight}`);
  const forced = force ? force.canary.map((e) => e.address).sort() : [];
  return `${hash ?? ''}|${weights.sort().join(',')}|${forced.join(',')}`;
}

/** A file written (or read at the start): its text on demand, and for a router that reads servers, what it lists. */
interface WrittenFile extends Partial<UpstreamFile> {
  text(): string;
  hash?: StickyKey | undefined;
  /** The controller's list the servers are a version of. */
  list?: UpstreamList | undefined;
  version?: number | undefined;
}

const UP = 1;
const DOWN = 2;

interface Diff {
  /** Addresses to change in force, and what they become (UP | DOWN bits). */
  target: Map<string, number>;
  upAdded: string[];
  upRemoved: string[];
  /** Entries down that are not down in force, and entries up at addresses not up in force. */
  newDown: UpstreamEntry[];
  newUp: UpstreamEntry[];
}

/** The names of the servers up (or down), for the journal: only spelled out when the journal is written. */
class Names {
  constructor(
    private readonly servers: () => readonly UpstreamEntry[],
    private readonly down: boolean,
  ) {}

  toJSON(): string[] {
    return this.servers()
      .filter((e) => e.down === this.down)
      .map((e) => e.name);
  }
}

function put(r: Router, f: WrittenFile): Promise<void> {
  return r.writeServers && f.servers ? r.writeServers(f as UpstreamFile) : r.writeAndTest(f.text());
}

/**
 * Whether two files have the same text. Two lists of servers under the same
 * template and hash line render alike exactly when their entries are equal
 * (every field reaches the file), so those are compared without rendering;
 * two versions of the controller's list, by version, unless a server's state
 * is known to have changed (`changed`: then they differ).
 */
function sameFile(a: WrittenFile, b: WrittenFile | undefined, changed: boolean): boolean {
  if (b === undefined) return false;
  if (a.list !== undefined && a.list === b.list && a.hash === b.hash) {
    if (a.version === b.version) return true;
    if (changed) return false;
  }
  if (a.servers && b.servers && a.hash === b.hash) {
    const [x, y] = [a.servers(), b.servers()];
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!sameEntry(x[i]!, y[i]!)) return false;
    return true;
  }
  return a.text() === b.text();
}

export class Traffic {
  private readonly lastContent: (string | undefined)[] = [];
  /** What each file holds, as far as the engine knows: what it read at the start, then what it wrote. */
  private readonly lastFile: (WrittenFile | undefined)[] = [];
  private inForceUp = new Set<string>();
  private inForceDown = new Set<string>();
  private inForcePreview = new Set<string>();
  private inForceSplit = '||';
  /** The controller's list as last compared, and its version then. */
  private seen: { list: UpstreamList; version: number } | undefined;
  /** Addresses whose servers differed from those in force when last compared (compared again next time). */
  private unsettled = new Set<string>();
  private writingUp: Set<string> | undefined;
  private dirty = false;
  private timer: { cancel(): void } | undefined;
  /** No write before this time (see hold), unless settle() asks for one. */
  private heldUntil = 0;
  private inFlight: Promise<void> | undefined;
  private recoveryReload = false;
  /** A write or reload failed: no more changes go out. */
  broken = false;
  reloads = 0;
  /** When the reloads of the config now in force were issued (nginx moves traffic between this and their return). */
  reloadIssuedAt: number | undefined;

  constructor(private readonly o: TrafficOptions) {}

  /**
   * Reads what every nginx has now (preflight has checked them), so an
   * unchanged upstream costs no reload. After a crash nginx may run a config
   * older than its file: `recovering` reloads every nginx once.
   */
  async load(recovering: boolean): Promise<void> {
    for (const lb of this.o.balancers) {
      const content = await lb.router.read();
      this.lastContent.push(content);
      this.lastFile.push(content === undefined ? undefined : { text: () => content });
    }
    // Only the main upstream's block: a preview block's servers take no traffic.
    const first = this.lastContent.findIndex((c) => c !== undefined);
    const current = parseUpstreamServers(this.lastContent[first] ?? '', this.o.balancers[first]?.upstream);
    if (this.o.preview) this.inForcePreview = new Set(parseUpstreamServers(this.lastContent[first] ?? '', this.o.preview.upstream).filter((e) => !e.down).map((e) => e.address));
    this.inForceUp = new Set(current.filter((e) => !e.down).map((e) => e.address));
    this.inForceDown = new Set(current.filter((e) => e.down).map((e) => e.address));
    // What nginx lists that the fleet may not: compared on the first write.
    for (const a of this.inForceUp) this.unsettled.add(a);
    for (const a of this.inForceDown) this.unsettled.add(a);
    this.recoveryReload = recovering;
  }

  /** nginx may send requests to this address: it is up in a config in force or being written. */
  routes(address: string | undefined): boolean {
    if (address === undefined) return false;
    return this.inForceUp.has(address) || (this.writingUp?.has(address) ?? false);
  }

  /** Up in the config every nginx has confirmed in force (not merely in one being written). */
  inForce(address: string | undefined): boolean {
    return address !== undefined && this.inForceUp.has(address);
  }

  /** Up in the preview upstream of the config in force. */
  inPreview(address: string | undefined): boolean {
    return address !== undefined && this.inForcePreview.has(address);
  }

  /** Listed `down` in the config in force. */
  markedDown(address: string | undefined): boolean {
    return address !== undefined && this.inForceDown.has(address);
  }

  /** Nothing waiting and nothing being written (once broken, nothing can wait: no change goes out any more). */
  get idle(): boolean {
    return (this.broken || !this.dirty) && this.timer === undefined && this.inFlight === undefined;
  }

  /** Something nginx should know changed: write within coalesceMs (or once a hold ends). */
  request(): void {
    if (this.broken) return;
    this.dirty = true;
    if (this.timer || this.inFlight) return;
    this.arm(Math.max(this.o.coalesceMs, this.heldUntil - this.o.clock.now()));
  }

  /**
   * Keeps changes back until `until` (at the latest): instances started
   * together become ready a probe or two apart, and their enables, with the
   * mark-downs they allow, should share one reload rather than one each.
   */
  hold(until: number): void {
    if (until <= this.heldUntil) return;
    this.heldUntil = until;
    if (this.timer) this.arm(Math.max(this.o.coalesceMs, until - this.o.clock.now()));
  }

  /** The batch is complete: what waits goes out within coalesceMs. */
  release(): void {
    this.heldUntil = 0;
    if (this.timer) this.arm(this.o.coalesceMs);
  }

  private arm(ms: number): void {
    this.timer?.cancel();
    this.timer = this.o.clock.timer(ms, () => {
      this.timer = undefined;
      this.kick();
    });
  }

  /** Waits for what is in flight, then writes once more even if only gone servers' lines changed (no reload for those). */
  async settle(): Promise<void> {
    this.heldUntil = 0;
    this.timer?.cancel();
    this.timer = undefined;
    while (this.inFlight) await this.inFlight;
    this.dirty = false;
    await this.apply(true);
  }

  private kick(): void {
    if (this.broken && this.idle) {
      // A timer armed before the failure: what it would have written never goes out.
      this.o.idle?.();
      return;
    }
    if (this.inFlight || !this.dirty || this.broken) return;
    if (this.heldUntil > this.o.clock.now()) {
      this.arm(this.heldUntil - this.o.clock.now());
      return;
    }
    this.dirty = false;
    this.inFlight = this.apply(false)
      .catch((err: unknown) => {
        this.broken = true;
        this.o.failed(err);
      })
      .finally(() => {
        this.inFlight = undefined;
        // What came in while this write ran has waited long enough, unless
        // the write failed: then nothing more goes out, and the controller,
        // which waits for traffic to be idle before it ends, must hear it is.
        if (this.dirty && !this.broken) this.kick();
        else if (this.idle) this.o.idle?.();
      });
  }

  private async apply(final: boolean): Promise<void> {
    const wanted = this.o.desired();
    const desired = wanted.servers;
    const list = desired instanceof UpstreamList ? desired : undefined;
    // The controller's list as it is now, spelled out only where needed (a real nginx's file, a canary's split).
    const version = list?.version ?? 0;
    const servers = list ? () => list.entriesAt(version) : () => desired as readonly UpstreamEntry[];
    const d = this.diff(desired, servers);
    const preview = this.o.preview ? { upstream: this.o.preview.upstream, servers: this.o.preview.servers() } : undefined;
    const previewSet = new Set((preview?.servers ?? []).filter((e) => !e.down).map((e) => e.address));
    const previewChanged = preview !== undefined && (previewSet.size !== this.inForcePreview.size || [...previewSet].some((a) => !this.inForcePreview.has(a)));
    const hash = wanted.hash;
    const f = this.o.force;
    const up = f ? servers().filter((e) => !e.down) : [];
    const force = f ? { key: f.key, canary: up.filter((e) => f.canary(e.address)), stable: up.filter((e) => !f.canary(e.address)) } : undefined;
    const split = splitSignature(hash, list && list.weighted === 0 ? [] : servers(), force);
    const upChanged = d.upAdded.length + d.upRemoved.length > 0;
    const reload = upChanged || d.newDown.length > 0 || previewChanged || split !== this.inForceSplit || this.recoveryReload;
    if (!reload && !final) return;
    this.writingUp = new Set(d.upAdded);
    try {
      const written = await this.writeAll(servers, { preview, hash, force }, list && { list, version }, upChanged || d.newDown.length > 0);
      if (!reload) return;
      const toReload = this.recoveryReload ? this.o.balancers.map((_, i) => i) : written;
      this.recoveryReload = false;
      faultPoint('before-reload');
      const issuedAt = this.o.clock.now();
      for (const i of toReload) {
        await this.o.balancers[i]?.router.reload();
        this.reloads++;
      }
      this.reloadIssuedAt = issuedAt;
      for (const [a, st] of d.target) {
        if (st & UP) this.inForceUp.add(a);
        else this.inForceUp.delete(a);
        if (st & DOWN) this.inForceDown.add(a);
        else this.inForceDown.delete(a);
      }
      this.unsettled.clear();
      this.inForcePreview = previewSet;
      this.inForceSplit = split;
      this.o.emit({
        type: 'upstream',
        action: d.newDown.length > 0 ? 'drain' : final ? 'final' : 'enable',
        down: d.newDown.map((e) => e.name),
        up: d.newUp.map((e) => e.name),
        reloads: this.reloads,
      });
      this.o.journal('reload', 'end', { up: new Names(servers, false), down: new Names(servers, true) });
      this.o.applied(this.inForceUp, this.inForceDown, [...d.upAdded, ...d.upRemoved]);
    } finally {
      this.writingUp = undefined;
    }
  }

  /**
   * How the servers wanted now differ from those in force, address by
   * address. From the list the controller keeps, only the addresses changed
   * since the last look (and those left different then) are compared; a
   * plain list (a canary's weighted split) is compared whole.
   */
  private diff(desired: UpstreamList | readonly UpstreamEntry[], servers: () => readonly UpstreamEntry[]): Diff {
    const list = desired instanceof UpstreamList ? desired : undefined;
    let at: (address: string) => readonly UpstreamEntry[];
    const candidates = new Set<string>(this.unsettled);
    const seen = this.seen;
    if (list && seen?.list === list) {
      for (const c of list.changes(seen.version)) candidates.add(c.address);
      at = (a) => list.at(a);
    } else {
      const byAddress = new Map<string, UpstreamEntry[]>();
      for (const e of servers()) {
        const same = byAddress.get(e.address);
        if (same) same.push(e);
        else byAddress.set(e.address, [e]);
      }
      for (const a of byAddress.keys()) candidates.add(a);
      for (const a of this.inForceUp) candidates.add(a);
      for (const a of this.inForceDown) candidates.add(a);
      at = (a) => byAddress.get(a) ?? [];
    }
    this.seen = list ? { list, version: list.version } : undefined;
    const out: Diff = { target: new Map(), upAdded: [], upRemoved: [], newDown: [], newUp: [] };
    for (const a of candidates) {
      const entries = at(a);
      let st = 0;
      for (const e of entries) st |= e.down ? DOWN : UP;
      const inUp = this.inForceUp.has(a);
      const inDown = this.inForceDown.has(a);
      if (((st & UP) !== 0) === inUp && ((st & DOWN) !== 0) === inDown) continue;
      out.target.set(a, st);
      if (st & UP && !inUp) out.upAdded.push(a);
      if (!(st & UP) && inUp) out.upRemoved.push(a);
      for (const e of entries) {
        if (e.down && !inDown) out.newDown.push(e);
        if (!e.down && !inUp) out.newUp.push(e);
      }
    }
    // Servers that differ but need no reload (a gone server's down line) are compared again next time.
    this.unsettled = new Set(out.target.keys());
    // In the file's order: the list's is by name; a plain list's is its own.
    if (list) {
      const byName = (x: UpstreamEntry, y: UpstreamEntry) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0);
      out.newDown.sort(byName);
      out.newUp.sort(byName);
    } else {
      const down = new Set(out.newDown);
      const up = new Set(out.newUp);
      out.newDown = servers().filter((e) => down.has(e));
      out.newUp = servers().filter((e) => up.has(e));
    }
    return out;
  }

  /** Writes and checks every changed file; on a failed check restores the ones written and throws. Returns the indexes written. */
  private async writeAll(servers: () => readonly UpstreamEntry[], parts: Pick<UpstreamInput, 'preview' | 'hash' | 'force'>, of: { list: UpstreamList; version: number } | undefined, changed: boolean): Promise<number[]> {
    const lbs = this.o.balancers;
    const files = lbs.map((lb) => this.file(lb, servers, parts, of));
    const written: number[] = [];
    for (const [i, { router: r }] of lbs.entries()) {
      const file = files[i]!;
      if (sameFile(file, this.lastFile[i], changed)) continue;
      try {
        await put(r, file);
        written.push(i);
      } catch (err) {
        for (const j of written) {
          const prev = this.lastFile[j];
          const lb = lbs[j];
          if (prev !== undefined && lb) await put(lb.router, prev).catch(() => {});
        }
        this.o.emit({ type: 'upstream', action: 'restore', down: [], up: [], reloads: this.reloads });
        throw new RolloutFailedError(
          `${r.name}: the new upstream failed nginx -t; every upstream file was restored and nothing was reloaded:\n${(err as Error).message}`,
          'nginx keeps serving its previous config. Fix the nginx config or the upstream template, then deploy again: the rollout continues from where it stopped.',
          { nginxTestFailed: true },
        );
      }
    }
    for (const i of written) this.lastFile[i] = files[i];
    return written;
  }

  /** A load balancer's file for these parts: rendered now for a real nginx, on demand for one that reads servers. */
  private file(lb: LoadBalancer, servers: () => readonly UpstreamEntry[], parts: Pick<UpstreamInput, 'preview' | 'hash' | 'force'>, of: { list: UpstreamList; version: number } | undefined): WrittenFile {
    const render = () => renderUpstream(lb.template, { service: this.o.service, upstream: lb.upstream, servers: servers(), ...parts });
    if (!lb.router.writeServers || !listsOnlyServers(lb.template, parts)) {
      const text = render();
      return { text: () => text };
    }
    let text: string | undefined;
    return {
      text: () => (text ??= render()),
      servers,
      hash: parts.hash,
      list: of?.list,
      version: of?.version,
      changesSince: (earlier) => {
        const e = earlier as WrittenFile;
        if (of === undefined || e.list !== of.list || e.version === undefined || e.version > of.version) return undefined;
        return of.list.changes(e.version, of.version);
      },
    };
  }
}
