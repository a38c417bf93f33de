/**
 * The servers the upstreams should list, kept up to date entry by entry
 * rather than rebuilt: a 1/0 rollout of 20,000 replicas reloads nginx 20,000
 * times, and rebuilding, sorting and comparing the whole list each time made
 * it quadratic. The controller sets the entries of the instances that
 * changed; Traffic asks which addresses changed since it last looked and what
 * the list holds there, so a reload costs the changes, not the fleet.
 *
 * Entries are kept sorted by name (the order of the upstream file). `entries()`
 * hands out the sorted array itself and copies it before the next change, so
 * what a caller holds never changes under it.
 */
import type { UpstreamEntry } from '../core/upstream.js';

export function sameEntry(a: UpstreamEntry, b: UpstreamEntry): boolean {
  return a.address === b.address && a.down === b.down && a.name === b.name && a.weight === b.weight;
}

/** One change: the address, and its entry after (undefined: no longer listed under that name). */
export interface UpstreamChange {
  address: string;
  after: UpstreamEntry | undefined;
}

export class UpstreamList {
  private readonly byName = new Map<string, UpstreamEntry>();
  private readonly byAddress = new Map<string, UpstreamEntry[]>();
  private sorted: UpstreamEntry[] = [];
  /** `sorted` was handed out: copy it before changing it. */
  private shared = false;
  /** Every change in order; version n is the list after the first n. */
  private readonly log: UpstreamChange[] = [];
  /** Entries with a weight (canary splits): none means no weights in the file. */
  private weightedCount = 0;

  get version(): number {
    return this.log.length;
  }

  get size(): number {
    return this.sorted.length;
  }

  get weighted(): number {
    return this.weightedCount;
  }

  /** Sets (or with undefined, removes) the entry of this name. */
  set(name: string, e: UpstreamEntry | undefined): void {
    const prev = this.byName.get(name);
    if (prev === undefined && e === undefined) return;
    if (prev !== undefined && e !== undefined && sameEntry(prev, e)) return;
    if (this.shared) {
      this.sorted = this.sorted.slice();
      this.shared = false;
    }
    const at = this.indexOf(name);
    if (prev !== undefined) {
      this.sorted.splice(at, 1);
      this.unindex(prev);
      this.byName.delete(name);
      if (e === undefined || e.address !== prev.address) this.log.push({ address: prev.address, after: undefined });
    }
    if (e !== undefined) {
      this.sorted.splice(at, 0, e);
      this.byName.set(name, e);
      const same = this.byAddress.get(e.address);
      if (same) same.push(e);
      else this.byAddress.set(e.address, [e]);
      if (e.weight !== undefined) this.weightedCount++;
      this.log.push({ address: e.address, after: e });
    }
  }

  /** The entries, sorted by name; the array never changes afterwards. */
  entries(): readonly UpstreamEntry[] {
    this.shared = true;
    return this.sorted;
  }

  /** The entries listed at this address now. */
  at(address: string): readonly UpstreamEntry[] {
    return this.byAddress.get(address) ?? [];
  }

  /** The changes from version `from` to `to` (default: now), in order. */
  changes(from: number, to = this.log.length): readonly UpstreamChange[] {
    return this.log.slice(from, to);
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

  /** Where this name is or would go in `sorted` (names compared as the upstream file orders them). */
  private indexOf(name: string): number {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]!.name < name) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
