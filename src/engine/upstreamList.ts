/**
 * The servers the upstreams should list, kept up to date entry by entry
 * rather than rebuilt: a 1/0 rollout of 20,000 replicas reloads nginx 20,000
 * times, and rebuilding, sorting and comparing the whole list each time made
 * it quadratic. The controller sets the entries of the instances that
 * changed; Traffic asks which addresses changed since it last looked and what
 * the list holds there, so a reload costs the changes, not the fleet.
 *
 * Every change is logged, so the list as it was at any version can be
 * spelled out later (`entriesAt`, sorted by name: the upstream file's order)
 * and only when someone needs it: a real nginx's file is rendered from it at
 * once, the simulated nginx's only if a test reads it.
 */
import type { UpstreamEntry } from '../core/upstream.js';

export function sameEntry(a: UpstreamEntry, b: UpstreamEntry): boolean {
  return a.address === b.address && a.down === b.down && a.name === b.name && a.weight === b.weight;
}

/** One change of an address: its entry after it (undefined: no longer listed there under that name). */
export interface UpstreamChange {
  address: string;
  after: UpstreamEntry | undefined;
}

interface Change {
  name: string;
  before: UpstreamEntry | undefined;
  after: UpstreamEntry | undefined;
}

const byName = (a: UpstreamEntry, b: UpstreamEntry) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

export class UpstreamList {
  private readonly byName = new Map<string, UpstreamEntry>();
  private readonly byAddress = new Map<string, UpstreamEntry[]>();
  /** Every change in order; version n is the list after the first n. */
  private readonly log: Change[] = [];
  /** The entries sorted, for the version they were sorted at. */
  private sorted: { version: number; entries: readonly UpstreamEntry[] } | undefined;
  /** Entries with a weight (canary splits): none means no weights in the file. */
  private weightedCount = 0;

  get version(): number {
    return this.log.length;
  }

  get weighted(): number {
    return this.weightedCount;
  }

  /** Sets (or with undefined, removes) the entry of this name (`e.name` is `name`). */
  set(name: string, e: UpstreamEntry | undefined): void {
    const prev = this.byName.get(name);
    if (prev === undefined && e === undefined) return;
    if (prev !== undefined && e !== undefined && sameEntry(prev, e)) return;
    if (prev !== undefined) {
      this.unindex(prev);
      this.byName.delete(name);
    }
    if (e !== undefined) {
      this.byName.set(name, e);
      const same = this.byAddress.get(e.address);
      if (same) same.push(e);
      else this.byAddress.set(e.address, [e]);
      if (e.weight !== undefined) this.weightedCount++;
    }
    this.log.push({ name, before: prev, after: e });
  }

  /** The entries now, sorted by name. */
  entries(): readonly UpstreamEntry[] {
    return this.entriesAt(this.version);
  }

  /** The entries as they were at a version, sorted by name; the array never changes afterwards. */
  entriesAt(version: number): readonly UpstreamEntry[] {
    if (this.sorted?.version === version) return this.sorted.entries;
    let entries: UpstreamEntry[];
    if (version === this.version) entries = [...this.byName.values()];
    else {
      // Undo what came after, newest first.
      const then = new Map(this.byName);
      for (let i = this.log.length - 1; i >= version; i--) {
        const c = this.log[i]!;
        if (c.before) then.set(c.name, c.before);
        else then.delete(c.name);
      }
      entries = [...then.values()];
    }
    entries.sort(byName);
    if (version === this.version) this.sorted = { version, entries };
    return entries;
  }

  /** The entries listed at this address now. */
  at(address: string): readonly UpstreamEntry[] {
    return this.byAddress.get(address) ?? [];
  }

  /** The changes from version `from` to `to` (default: now), address by address, in order. */
  changes(from: number, to = this.log.length): UpstreamChange[] {
    const out: UpstreamChange[] = [];
    for (let i = from; i < to; i++) {
      const c = this.log[i]!;
      if (c.before && c.before.address !== c.after?.address) out.push({ address: c.before.address, after: undefined });
      if (c.after) out.push({ address: c.after.address, after: c.after });
    }
    return out;
  }

  private unindex(e: UpstreamEntry): void {
    const same = this.byAddress.get(e.address);
    if (same) {
      const i = same.indexOf(e);
      if (i >= 0) same.splice(i, 1);
      if (same.length === 0) this.byAddress.delete(e.address);
    }
    if (e.weight !== undefined) this.weightedCount--;
  }
}
