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
 *
 * This file decides when to write and reload and confirms what a reload put
 * in force; what is in force and how the wanted servers differ from it is
 * inForce.ts, the files and their all-or-nothing write upstreamFiles.ts.
 */
import type { ForceKey, StickyKey, UpstreamEntry } from '../core/upstream.js';
import { RolloutFailedError } from '../errors.js';
import type { ChangeParts, Clock, Journal } from '../ports.js';
import type { EventSink } from './events.js';
import { faultPoint } from './faults.js';
import { InForce, splitSignature } from './inForce.js';
import { UpstreamFiles, type LoadBalancer } from './upstreamFiles.js';
import { UpstreamList } from './upstreamList.js';

export type { LoadBalancer } from './upstreamFiles.js';

export interface TrafficOptions {
  service: string;
  balancers: readonly LoadBalancer[];
  clock: Clock;
  emit: EventSink;
  journal: Journal;
  /** How long a change waits for others to share its reload. */
  coalesceMs: number;
  /** Creates + starts in flight now and begun so far (Lifecycle.starts): a change is priced by those beside it (core/stepCosts.ts). */
  starts?: (() => { now: number; begun: number }) | undefined;
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
  /**
   * Whether the instance at an address no longer serves (its container
   * exited, was killed or crashed): a change that only takes such servers out
   * goes to every nginx at once, with no `nginx -t` before its reload
   * (UpstreamFiles.writeAll `trusted`).
   */
  gone?: ((address: string) => boolean) | undefined;
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

export class Traffic {
  /** What nginx has in force. */
  private readonly loaded = new InForce();
  private readonly files: UpstreamFiles;
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

  constructor(private readonly o: TrafficOptions) {
    this.files = new UpstreamFiles({
      service: o.service,
      balancers: o.balancers,
      restored: () => this.o.emit({ type: 'upstream', action: 'restore', down: [], up: [], reloads: this.reloads }),
    });
  }

  /**
   * Reads what every nginx has now (preflight has checked them), so an
   * unchanged upstream costs no reload. After a crash nginx may run a config
   * older than its file: `recovering` reloads every nginx once.
   */
  async load(recovering: boolean): Promise<void> {
    const contents = await this.files.read();
    const first = contents.findIndex((c) => c !== undefined);
    this.loaded.load(contents[first] ?? '', this.o.balancers[first]?.upstream, this.o.preview?.upstream);
    this.recoveryReload = recovering;
  }

  /** nginx may send requests to this address: it is up in a config in force or being written. */
  routes(address: string | undefined): boolean {
    if (address === undefined) return false;
    return this.loaded.up.has(address) || (this.writingUp?.has(address) ?? false);
  }

  /** Up in the config every nginx has confirmed in force (not merely in one being written). */
  inForce(address: string | undefined): boolean {
    return address !== undefined && this.loaded.up.has(address);
  }

  /** Up in the preview upstream of the config in force. */
  inPreview(address: string | undefined): boolean {
    return address !== undefined && this.loaded.preview.has(address);
  }

  /** Listed `down` in the config in force. */
  markedDown(address: string | undefined): boolean {
    return address !== undefined && this.loaded.down.has(address);
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

  /** What waits goes out now, not within coalesceMs: a switch back that users are waiting on shares its reload with nothing. */
  hurry(): void {
    this.heldUntil = 0;
    if (this.timer) this.arm(0);
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
    const d = this.loaded.diff(desired, servers);
    const preview = this.o.preview ? { upstream: this.o.preview.upstream, servers: this.o.preview.servers() } : undefined;
    const previewSet = new Set((preview?.servers ?? []).filter((e) => !e.down).map((e) => e.address));
    const previewChanged = preview !== undefined && (previewSet.size !== this.loaded.preview.size || [...previewSet].some((a) => !this.loaded.preview.has(a)));
    const hash = wanted.hash;
    const f = this.o.force;
    const up = f ? servers().filter((e) => !e.down) : [];
    const force = f ? { key: f.key, canary: up.filter((e) => f.canary(e.address)), stable: up.filter((e) => !f.canary(e.address)) } : undefined;
    const split = splitSignature(hash, list && list.weighted === 0 ? [] : servers(), force);
    const upChanged = d.upAdded.length + d.upRemoved.length > 0;
    const reload = upChanged || d.newDown.length > 0 || previewChanged || split !== this.loaded.split || this.recoveryReload;
    if (!reload && !final) return;
    this.writingUp = new Set(d.upAdded);
    const began = this.o.clock.now();
    const startsAt = this.o.starts?.();
    try {
      const previous = this.files.snapshot();
      const gone = this.o.gone;
      const takedown =
        gone !== undefined &&
        reload &&
        !final &&
        !this.recoveryReload &&
        !previewChanged &&
        split === this.loaded.split &&
        d.upAdded.length === 0 &&
        d.newUp.length === 0 &&
        d.newDown.length + d.upRemoved.length > 0 &&
        d.newDown.every((e) => gone(e.address)) &&
        d.upRemoved.every((a) => gone(a));
      const { written, reloaded: inForceAlready } = await this.files.writeAll(
        servers,
        { preview, hash, force },
        list && { list, version },
        upChanged || d.newDown.length > 0,
        takedown,
      );
      if (!reload) {
        // A tidy-up (stopped servers left out) changes no routing; a reload-free router takes it only when told.
        await Promise.all(
          written
            .map((i) => this.o.balancers[i]?.router)
            .filter((r) => r?.reloadFree)
            .map((r) => r?.reload()),
        );
        return;
      }
      const toReload = this.recoveryReload ? this.o.balancers.map((_, i) => i) : written;
      this.recoveryReload = false;
      faultPoint('before-reload');
      const issuedAt = this.o.clock.now();
      // Every nginx at once: the routing is in force when the slowest has confirmed, not the sum.
      const balancers: Record<string, number> = {};
      const parts: Record<string, ChangeParts> = {};
      const reloaded = await Promise.allSettled(
        toReload.map(async (i) => {
          const lb = this.o.balancers[i];
          if (!inForceAlready.has(i)) await lb?.router.reload();
          if (!lb?.router.reloadFree) this.reloads++;
          if (lb) {
            balancers[lb.router.name] = this.o.clock.now() - began;
            const p = lb.router.lastChange?.();
            if (p) parts[lb.router.name] = p;
          }
        }),
      );
      const refused = reloaded.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (refused) {
        // Reload-free membership is all-or-nothing like the files: the ones that took the change get the previous set back.
        const took = toReload.filter((i, k) => reloaded[k]?.status === 'fulfilled' && this.o.balancers[i]?.router.reloadFree);
        if (took.length === 0) throw refused.reason;
        const stuck = await this.files.restore(took, previous);
        const names = took.map((i) => this.o.balancers[i]?.router.name).filter((n) => n !== undefined && !stuck.includes(n));
        throw new RolloutFailedError(
          `${refused.reason instanceof Error ? refused.reason.message : String(refused.reason)}; ${names.length ? `${names.join(', ')} put back on the previous servers` : ''}${stuck.length ? `${names.length ? '; ' : ''}${stuck.join(', ')} could NOT be put back` : ''}`,
          'every load balancer serves the same servers again; fix the one that failed, then deploy again: the rollout continues from where it stopped',
        );
      }
      this.reloadIssuedAt = issuedAt;
      this.loaded.confirm(d, previewSet, split);
      this.o.emit({
        type: 'upstream',
        action: d.newDown.length > 0 ? 'drain' : final ? 'final' : 'enable',
        down: d.newDown.map((e) => e.name),
        up: d.newUp.map((e) => e.name),
        reloads: this.reloads,
        ms: this.o.clock.now() - began,
        balancers,
        // Those in flight when it began and those begun since: every start that shared the engine with it.
        ...(startsAt ? { beside: startsAt.now + ((this.o.starts?.().begun ?? startsAt.begun) - startsAt.begun) } : {}),
        ...(Object.keys(parts).length ? { parts } : {}),
        ...(toReload.every((i) => this.o.balancers[i]?.router.reloadFree) ? { reloadFree: true } : {}),
      });
      this.o.journal('reload', 'end', { up: new Names(servers, false), down: new Names(servers, true) });
      this.o.applied(this.loaded.up, this.loaded.down, [...d.upAdded, ...d.upRemoved]);
    } finally {
      this.writingUp = undefined;
    }
  }
}
