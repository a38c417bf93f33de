/**
 * What the config every nginx has in force lists, as far as the engine
 * knows (what it read at the start, then what each reload put in force), and
 * how the servers wanted now differ from it, address by address.
 */
import { parseUpstreamServers, type StickyKey, type UpstreamEntry, type UpstreamInput } from '../core/upstream.js';
import { UpstreamList } from './upstreamList.js';

/** What beyond the up/down sets changes how nginx splits traffic: the hash line, the weights and the forced canary side. */
export function splitSignature(hash: StickyKey | undefined, servers: readonly UpstreamEntry[], force?: UpstreamInput['force']): string {
  const weights = servers.filter((e) => !e.down && e.weight !== undefined).map((e) => `${e.address}=${e.weight}`);
  const forced = force ? force.canary.map((e) => e.address).sort() : [];
  return `${hash ?? ''}|${weights.sort().join(',')}|${forced.join(',')}`;
}

const UP = 1;
const DOWN = 2;

export interface Diff {
  /** Addresses to change in force, and what they become (UP | DOWN bits). */
  target: Map<string, number>;
  upAdded: string[];
  upRemoved: string[];
  /** Entries down that are not down in force, and entries up at addresses not up in force. */
  newDown: UpstreamEntry[];
  newUp: UpstreamEntry[];
}

export class InForce {
  /** Addresses up, and listed `down`, in the main upstream. */
  up = new Set<string>();
  down = new Set<string>();
  /** Addresses up in the preview upstream. */
  preview = new Set<string>();
  /** The split in force (splitSignature). */
  split = '||';
  /** The controller's list as last compared, and its version then. */
  private seen: { list: UpstreamList; version: number } | undefined;
  /** Addresses whose servers differed from those in force when last compared (compared again next time). */
  private unsettled = new Set<string>();

  /** What nginx has at the start: `content` is one load balancer's file (they are written alike). */
  load(content: string, upstream: string | undefined, previewUpstream: string | undefined): void {
    // Only the main upstream's block: a preview block's servers take no traffic.
    const current = parseUpstreamServers(content, upstream);
    if (previewUpstream !== undefined)
      this.preview = new Set(
        parseUpstreamServers(content, previewUpstream)
          .filter((e) => !e.down)
          .map((e) => e.address),
      );
    this.up = new Set(current.filter((e) => !e.down).map((e) => e.address));
    this.down = new Set(current.filter((e) => e.down).map((e) => e.address));
    // What nginx lists that the fleet may not: compared on the first write.
    for (const a of this.up) this.unsettled.add(a);
    for (const a of this.down) this.unsettled.add(a);
  }

  /**
   * How the servers wanted now differ from those in force, address by
   * address. From the list the controller keeps, only the addresses changed
   * since the last look (and those left different then) are compared; a
   * plain list (a canary's weighted split) is compared whole.
   */
  diff(desired: UpstreamList | readonly UpstreamEntry[], servers: () => readonly UpstreamEntry[]): Diff {
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
      for (const a of this.up) candidates.add(a);
      for (const a of this.down) candidates.add(a);
      at = (a) => byAddress.get(a) ?? [];
    }
    this.seen = list ? { list, version: list.version } : undefined;
    const out: Diff = { target: new Map(), upAdded: [], upRemoved: [], newDown: [], newUp: [] };
    for (const a of candidates) {
      const entries = at(a);
      let st = 0;
      for (const e of entries) st |= e.down ? DOWN : UP;
      const inUp = this.up.has(a);
      const inDown = this.down.has(a);
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

  /** The reloads of the config a diff was written for are in force (with these preview servers and split). */
  confirm(d: Diff, preview: Set<string>, split: string): void {
    for (const [a, st] of d.target) {
      if (st & UP) this.up.add(a);
      else this.up.delete(a);
      if (st & DOWN) this.down.add(a);
      else this.down.delete(a);
    }
    this.unsettled.clear();
    this.preview = preview;
    this.split = split;
  }
}
