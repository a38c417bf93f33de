/**
 * The controller's fleet: every instance it tracks, with the answers
 * decide() asks for (counts per revision, the terminating ones, the
 * candidates to terminate, per-host load) kept up to date as phases change.
 * The controller re-decides on every event; recounting a large fleet each
 * time made a 10,000-instance simulation cost seconds, so every change of
 * phase goes through `setPhase`, `add` and `remove` here, and the tallies
 * move with it.
 */
import { compareViewsForStop, isTerminating, type FleetSnapshot, type InstanceView, type Phase } from '../core/decide.js';
import type { HostLoad } from '../core/placement.js';
import type { FleetCounts } from '../core/rolling.js';

interface Tally<Instance> {
  total: number;
  available: number;
  /** The earliest creation time seen in the revision: orders revisions, oldest first. */
  oldest: number;
  members: Set<Instance>;
  /**
   * The members in pickForStop's plain order (compareViewsForStop), last
   * first: the next to terminate is at the end, so taking it moves nothing.
   * Sorted when asked for, not on every change: keeping it sorted through
   * each of a 10,000-instance rollout's phase changes (a splice into the
   * middle per change) cost a fifth of simulate, for a handful of reads.
   * Between sorts only leaves happen (an enter sets `dirty`), so the array
   * less the instances no longer members is the members, in order.
   */
  ranked: Instance[];
  /** A member entered since `ranked` was sorted. */
  dirty: boolean;
  /** Entries of `ranked` that are no longer members. */
  stale: number;
}

export class FleetView<Instance extends InstanceView> implements FleetSnapshot {
  private readonly byId = new Map<string, Instance>();
  private readonly revisions = new Map<string, Tally<Instance>>();
  private readonly terminatingSet = new Set<Instance>();
  /** The draining members of terminatingSet, in its order (both are entered on the change of phase): what decide() looks at for stops. */
  private readonly drainingSet = new Set<Instance>();
  private readonly phases = new Map<Phase, number>();
  /** Per host: containers alive, and non-terminating instances per revision. */
  private readonly hosts = new Map<string, { total: number; terminating: number; byRevision: Map<string, number> }>();
  /** Each instance's place in `values()` order. */
  private readonly order = new Map<string, number>();
  private nextOrder = 0;
  /** Ids added, removed or changed since each reader last asked (see `touched`). */
  private readonly touchLogs: Set<string>[] = [];
  private readonly phaseReaders: ((i: Instance, from: Phase) => void)[] = [];

  get(id: string): Instance | undefined {
    return this.byId.get(id);
  }

  values(): IterableIterator<Instance> {
    return this.byId.values();
  }

  get size(): number {
    return this.byId.size;
  }

  /** How many instances are in this phase now. */
  count(phase: Phase): number {
    return this.phases.get(phase) ?? 0;
  }

  /** How many instances are draining or stopping now. */
  terminatingCount(): number {
    return this.terminatingSet.size;
  }

  /** How many non-terminating instances of a revision are available now. */
  available(revision: string): number {
    return this.revisions.get(revision)?.available ?? 0;
  }

  /**
   * A reader of what changes: each call of the function returned gives the
   * ids added, removed, given a phase or `touch`ed since its previous call,
   * so a reader keeps its own answer up to date without a pass over the fleet.
   */
  touched(): () => Set<string> {
    let log = new Set<string>();
    const i = this.touchLogs.push(log) - 1;
    return () => {
      const out = log;
      log = new Set();
      this.touchLogs[i] = log;
      return out;
    };
  }

  /** Calls `fn` on every change of an instance's phase (removed ones' too), so a reader keeps a tally of its own. */
  onPhase(fn: (i: Instance, from: Phase) => void): void {
    this.phaseReaders.push(fn);
  }

  /** Something a reader of `touched` may care about changed (an address). */
  touch(i: Instance): void {
    for (const log of this.touchLogs) log.add(i.id);
  }

  /** Where an instance comes in `values()`: sorting by it gives their order there. */
  ordinal(i: Instance): number {
    return this.order.get(i.id) ?? Number.POSITIVE_INFINITY;
  }

  add(i: Instance): void {
    this.touch(i);
    if (!this.order.has(i.id)) this.order.set(i.id, this.nextOrder++);
    this.byId.set(i.id, i);
    const h = this.host(i.host);
    h.total++;
    this.enter(i);
  }

  remove(id: string): void {
    const i = this.byId.get(id);
    if (!i) return;
    this.touch(i);
    this.leave(i);
    this.byId.delete(id);
    this.order.delete(id);
    this.host(i.host).total--;
  }

  setPhase(i: Instance, phase: Phase): void {
    this.touch(i);
    const from = i.phase;
    if (from === phase) return;
    if (this.byId.has(i.id)) {
      this.leave(i);
      i.phase = phase;
      this.enter(i);
    } else {
      i.phase = phase;
    }
    for (const fn of this.phaseReaders) fn(i, from);
  }

  // --- FleetSnapshot --------------------------------------------------------

  counts(revision: string, replicas: number, hold: boolean): FleetCounts {
    let current = { revision, total: 0, available: 0 };
    const old: (Tally<Instance> & { revision: string })[] = [];
    for (const [rev, t] of this.revisions) {
      if (t.total === 0) continue;
      if (rev === revision) current = { revision, total: t.total, available: t.available };
      else old.push({ ...t, revision: rev });
    }
    // Oldest revision first, as countFleet orders them (core/fleet.ts).
    old.sort((a, b) => a.oldest - b.oldest || (a.revision < b.revision ? -1 : 1));
    return {
      replicas,
      current,
      old: old.map((t) => ({ revision: t.revision, total: t.total, available: t.available })),
      ...(hold ? { terminating: this.terminatingSet.size } : {}),
    };
  }

  terminating(): Iterable<Instance> {
    return this.terminatingSet;
  }

  draining(): ReadonlySet<Instance> {
    return this.drainingSet;
  }

  candidates(revision: string): Iterable<Instance> {
    return this.revisions.get(revision)?.members ?? [];
  }

  leastUseful(revision: string, n: number): Instance[] | undefined {
    let hosts = 0;
    for (const h of this.hosts.values()) if ((h.byRevision.get(revision) ?? 0) > 0) hosts++;
    if (hosts > 1) return undefined;
    const t = this.revisions.get(revision);
    if (!t) return [];
    if (t.dirty || t.stale > t.ranked.length / 2) {
      t.ranked = [...t.members].sort((a, b) => compareViewsForStop(b, a));
      t.dirty = false;
      t.stale = 0;
    }
    const ranked = t.ranked;
    while (ranked.length > 0 && !t.members.has(ranked[ranked.length - 1]!)) {
      ranked.pop();
      t.stale--;
    }
    const out: Instance[] = [];
    for (let k = ranked.length - 1; k >= 0 && out.length < n; k--) {
      const i = ranked[k]!;
      if (t.members.has(i)) out.push(i);
    }
    return out;
  }

  loads(revision: string): Map<string, HostLoad> {
    const out = new Map<string, HostLoad>();
    for (const [name, h] of this.hosts) out.set(name, { total: h.total, fresh: h.byRevision.get(revision) ?? 0, terminating: h.terminating });
    return out;
  }

  // --- bookkeeping ----------------------------------------------------------

  private host(name: string) {
    let h = this.hosts.get(name);
    if (!h) {
      h = { total: 0, terminating: 0, byRevision: new Map() };
      this.hosts.set(name, h);
    }
    return h;
  }

  private enter(i: Instance): void {
    this.phases.set(i.phase, (this.phases.get(i.phase) ?? 0) + 1);
    if (isTerminating(i.phase)) {
      this.terminatingSet.add(i);
      if (i.phase === 'draining') this.drainingSet.add(i);
      this.host(i.host).terminating++;
      return;
    }
    let t = this.revisions.get(i.revision);
    if (!t) {
      t = { total: 0, available: 0, oldest: i.created, members: new Set(), ranked: [], dirty: false, stale: 0 };
      this.revisions.set(i.revision, t);
    }
    if (i.created < t.oldest) t.oldest = i.created;
    t.total++;
    if (i.phase === 'available') t.available++;
    t.members.add(i);
    t.dirty = true;
    const h = this.host(i.host);
    h.byRevision.set(i.revision, (h.byRevision.get(i.revision) ?? 0) + 1);
  }

  private leave(i: Instance): void {
    this.phases.set(i.phase, (this.phases.get(i.phase) ?? 1) - 1);
    if (isTerminating(i.phase)) {
      this.terminatingSet.delete(i);
      this.drainingSet.delete(i);
      this.host(i.host).terminating--;
      return;
    }
    const t = this.revisions.get(i.revision);
    if (t) {
      t.total--;
      if (i.phase === 'available') t.available--;
      if (t.members.delete(i) && !t.dirty) t.stale++;
    }
    const h = this.host(i.host);
    h.byRevision.set(i.revision, (h.byRevision.get(i.revision) ?? 1) - 1);
  }
}
