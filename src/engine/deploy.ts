/**
 * The rollout controller: observe the fleet through Docker and the probes,
 * ask the one rolling algorithm (core/fleet.ts nextWave) what to do, do it,
 * and repeat until the fleet is complete or the progress deadline passes.
 *
 * Level-triggered like the Kubernetes controller: nothing is remembered
 * between loops except readiness timestamps and which instances are being
 * drained; a rerun after a crash observes what is there and continues.
 *
 * Per wave:
 *   1. the instances to stop are marked `down` in every upstream (together
 *      with newly ready instances being enabled), every file is checked with
 *      `nginx -t`, then every nginx is reloaded: the reload is the drain;
 *   2. new instances that fit under maxTotal start meanwhile;
 *   3. after drainSeconds the marked instances are stopped gracefully and removed;
 *   4. the remaining new instances start.
 * New instances enter the upstream one by one as each passes readiness.
 */
import type { Fleet } from '../config/load.js';
import { nextWave, type ObservedInstance } from '../core/fleet.js';
import { parseUpstreamServers, renderUpstream, type UpstreamEntry } from '../core/upstream.js';
import { ExitCode, FleetrollError } from '../errors.js';
import { LABELS, type InstanceInfo, type InstanceSpec, type Prober, type Router, type Runtime } from '../ports.js';
import type { EventSink } from './events.js';
import { envOf, revisionOf } from './revision.js';

export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

export interface DeployDeps {
  /** One runtime per fleet host, keyed by host name. */
  runtimes: ReadonlyMap<string, Runtime>;
  /** One per load balancer, in the fleet file's order. */
  routers: readonly LoadBalancer[];
  prober: Prober;
  clock?: Clock;
  events?: EventSink;
  /** Suffix for new container names; random in production, fixed in tests. */
  nameSuffix?: () => string;
}

/** A load balancer: how to reach it, and what to write into its upstream file. */
export interface LoadBalancer {
  router: Router;
  /** Upstream file template (templates/upstream.conf.tmpl or the fleet's own). */
  template: string;
  upstream: string;
}

export interface DeployedInstance {
  name: string;
  host: string;
  address?: string | undefined;
  version: string;
}

export interface DeployResult {
  service: string;
  revision: string;
  version: string;
  durationMs: number;
  waves: number;
  reloads: number;
  instances: DeployedInstance[];
}

/** A rollout that did not reach its goal. Exit code 1; the message says what to do next. */
export class RolloutFailedError extends FleetrollError {
  constructor(message: string, hint: string, readonly details: Record<string, unknown> = {}) {
    super('E_ROLLOUT_FAILED', ExitCode.rolloutFailed, message, { hint });
  }
}

interface Tracked {
  /** When readiness started passing; -Infinity for instances found ready at the start. */
  readySince?: number | undefined;
  lastProbe: string;
}

/** An observed container plus what the probes know about it. */
interface Live {
  info: InstanceInfo;
  observed: ObservedInstance;
}

/** The container for one new instance of a revision: its labels are how the fleet's state is read back. */
export function instanceSpec(fleet: Fleet, revision: string, suffix: string, network: string | undefined, now: number, changeCause?: string): InstanceSpec {
  return {
    name: `${fleet.service}-${revision.slice(0, 7)}-${suffix}`,
    image: fleet.image,
    env: envOf(fleet),
    port: fleet.port,
    network,
    labels: {
      [LABELS.managed]: 'true',
      [LABELS.service]: fleet.service,
      [LABELS.revision]: revision,
      [LABELS.version]: fleet.version,
      [LABELS.created]: String(now),
      // Names only, never values: lets a later rollback rebuild this spec from the container.
      [LABELS.envKeys]: Object.keys(fleet.env ?? {}).sort().join(','),
      ...(changeCause ? { [LABELS.changeCause]: changeCause.slice(0, 256) } : {}),
    },
    stopTimeoutSeconds: fleet.terminationGracePeriodSeconds,
  };
}

export function randomSuffix(): string {
  return Math.random().toString(36).slice(2, 7).padEnd(5, '0');
}

export interface DeployOptions {
  /** Why this rollout happens; recorded on the new instances. */
  changeCause?: string | undefined;
}

export async function deploy(fleet: Fleet, deps: DeployDeps, options: DeployOptions = {}): Promise<DeployResult> {
  return new Rollout(fleet, deps, options).run();
}

class Rollout {
  private readonly clock: Clock;
  private readonly emit: EventSink;
  private readonly revision: string;
  private readonly minReadyMs: number;
  private readonly track = new Map<string, Tracked>();
  private readonly draining = new Set<string>();
  private readonly lastContent: (string | undefined)[] = [];
  private lastUp = new Set<string>();
  private lastDown = new Set<string>();
  private reloads = 0;
  private waves = 0;
  private started = 0;
  private lastProgress = 0;

  constructor(
    private readonly fleet: Fleet,
    private readonly deps: DeployDeps,
    private readonly options: DeployOptions = {},
  ) {
    this.clock = deps.clock ?? systemClock;
    this.emit = deps.events ?? (() => {});
    this.revision = revisionOf(fleet);
    this.minReadyMs = fleet.minReadySeconds * 1000;
  }

  async run(): Promise<DeployResult> {
    const t0 = this.clock.now();
    await this.preflight();
    this.lastProgress = t0;
    let first = true;
    for (;;) {
      const live = await this.observe(first);
      if (first) {
        const byRevision: Record<string, number> = {};
        for (const l of live) byRevision[l.observed.revision] = (byRevision[l.observed.revision] ?? 0) + 1;
        this.emit({ type: 'observed', instances: live.length, byRevision, revision: this.revision });
        first = false;
      }
      const w = nextWave({ revision: this.revision, replicas: this.fleet.replicas }, live.map((l) => l.observed), this.fleet.strategy);
      if (w.complete) return this.finish(live, t0);
      const hasWork = w.stop.length + w.startNow + w.startAfterStops > 0;
      if (hasWork) {
        await this.runWave(live, w.stop.map((o) => o.id), w.startNow, w.startAfterStops);
        continue;
      }
      // Nothing allowed until something becomes ready: keep the upstream in
      // step with readiness, and watch the deadline.
      await this.syncUpstream(live, 'enable');
      if (this.clock.now() - this.lastProgress > this.fleet.progressDeadlineSeconds * 1000) {
        throw await this.deadlineFailure(live);
      }
      await this.clock.sleep(this.fleet.probes.readiness.periodMs);
    }
  }

  /** Before touching anything: every host answers, the image is on every host, every nginx is valid. */
  private async preflight(): Promise<void> {
    const problems: string[] = [];
    for (const [name, rt] of this.deps.runtimes) {
      try {
        await rt.ping();
        if (!(await rt.imageExists(this.fleet.image))) problems.push(`image ${this.fleet.image} is not present on host ${name}`);
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    for (const { router: r } of this.deps.routers) {
      try {
        await r.check();
        this.lastContent.push(await r.read());
      } catch (err) {
        problems.push((err as Error).message);
      }
    }
    // Start from what nginx has now, so an unchanged upstream costs no reload.
    const current = parseUpstreamServers(this.lastContent.find((c) => c !== undefined) ?? '');
    this.lastUp = new Set(current.filter((e) => !e.down).map((e) => e.address));
    this.lastDown = new Set(current.filter((e) => e.down).map((e) => e.address));
    if (problems.length > 0) {
      throw new RolloutFailedError(`preflight failed, nothing was changed:\n  ${problems.join('\n  ')}`, 'fix the problems above and run the deploy again');
    }
  }

  private runtime(host: string): Runtime {
    const rt = this.deps.runtimes.get(host);
    if (!rt) throw new FleetrollError('E_INTERNAL', 1, `no runtime for host ${host}`);
    return rt;
  }

  /** Lists the service's containers on every host and probes the ones whose readiness matters. */
  private async observe(first: boolean): Promise<Live[]> {
    const labels = { [LABELS.service]: this.fleet.service, [LABELS.managed]: 'true' };
    const lists = await Promise.all([...this.deps.runtimes.values()].map((rt) => rt.list(labels)));
    const infos = lists.flat();
    const now = this.clock.now();
    await Promise.all(
      infos.map(async (info) => {
        let t = this.track.get(info.name);
        if (!t) {
          t = { lastProbe: 'not probed yet' };
          this.track.set(info.name, t);
        }
        if (!info.running || !info.address) {
          t.readySince = undefined;
          t.lastProbe = `container ${info.state}${info.exitCode !== undefined ? `, exit code ${info.exitCode}` : ''}`;
          return;
        }
        // Available instances are not re-probed: once available, Kubernetes
        // too keeps counting them until something else says otherwise.
        if (t.readySince !== undefined && now - t.readySince >= this.minReadyMs) return;
        if (this.draining.has(info.name)) return;
        const ok = await this.deps.prober.ready(info.address);
        if (ok) {
          if (t.readySince === undefined) {
            // Found ready when fleetroll started: it has been serving; count it as available.
            t.readySince = first ? Number.NEGATIVE_INFINITY : now;
            if (!first) {
              this.emit({ type: 'ready', name: info.name });
              this.progress();
            }
          } else if (now - t.readySince >= this.minReadyMs) {
            this.emit({ type: 'available', name: info.name });
            this.progress();
          }
          t.lastProbe = 'ready';
        } else {
          t.readySince = undefined;
          t.lastProbe = 'readiness probe failing';
        }
      }),
    );
    return infos.map((info) => {
      const t = this.track.get(info.name);
      const ready = info.running && t?.readySince !== undefined;
      return {
        info,
        observed: {
          id: info.name,
          revision: info.labels[LABELS.revision] ?? 'unknown',
          running: info.running,
          ready,
          available: ready && now - (t?.readySince ?? now) >= this.minReadyMs,
          created: Number(info.labels[LABELS.created] ?? 0) || 0,
        },
      };
    });
  }

  private progress(): void {
    this.lastProgress = this.clock.now();
  }

  private async runWave(live: Live[], stopNames: string[], startNow: number, startAfter: number): Promise<void> {
    this.waves++;
    this.emit({ type: 'wave', index: this.waves, start: startNow + startAfter, stop: stopNames });
    const victims = live.filter((l) => stopNames.includes(l.info.name));
    const wereUp = victims.filter((v) => this.lastUp.has(v.info.address ?? ''));
    for (const v of victims) this.draining.add(v.info.name);
    await this.syncUpstream(live, 'drain');
    const placed = this.countPerHost(live);
    const early = this.startInstances(startNow, placed);
    if (wereUp.length > 0 && this.fleet.drainSeconds > 0) {
      this.emit({ type: 'draining', names: wereUp.map((v) => v.info.name), seconds: this.fleet.drainSeconds });
      await this.clock.sleep(this.fleet.drainSeconds * 1000);
    }
    await Promise.all(
      victims.map(async (v) => {
        const rt = this.runtime(v.info.host);
        await rt.stop(v.info.id, this.fleet.terminationGracePeriodSeconds);
        await rt.remove(v.info.id);
        this.track.delete(v.info.name);
        this.draining.delete(v.info.name);
        this.emit({ type: 'stopped', name: v.info.name, host: v.info.host });
      }),
    );
    await early;
    for (const v of victims) placed.set(v.info.host, (placed.get(v.info.host) ?? 1) - 1);
    await this.startInstances(startAfter, placed);
    this.progress();
  }

  private countPerHost(live: Live[]): Map<string, number> {
    const m = new Map<string, number>([...this.deps.runtimes.keys()].map((h) => [h, 0]));
    for (const l of live) m.set(l.info.host, (m.get(l.info.host) ?? 0) + 1);
    return m;
  }

  /** Starts n instances, each on the host with the fewest instances that has headroom. */
  private async startInstances(n: number, placed: Map<string, number>): Promise<void> {
    const jobs: Promise<void>[] = [];
    for (let i = 0; i < n; i++) {
      const host = this.fleet.hosts
        .filter((h) => h.maxInstances === undefined || (placed.get(h.name) ?? 0) < h.maxInstances)
        .sort((a, b) => (placed.get(a.name) ?? 0) - (placed.get(b.name) ?? 0))[0];
      if (!host) throw new RolloutFailedError('no host has room for another instance (every host is at maxInstances)', 'raise maxInstances or add a host');
      placed.set(host.name, (placed.get(host.name) ?? 0) + 1);
      jobs.push(this.startOne(host.name, host.network));
    }
    await Promise.all(jobs);
  }

  private async startOne(host: string, network: string | undefined): Promise<void> {
    const spec = instanceSpec(this.fleet, this.revision, (this.deps.nameSuffix ?? randomSuffix)(), network, this.clock.now(), this.options.changeCause);
    const info = await this.runtime(host).run(spec);
    this.started++;
    this.track.set(spec.name, { lastProbe: 'starting' });
    this.emit({ type: 'started', name: spec.name, host, address: info.address });
  }

  /** The upstream as the fleet is now: ready instances up, draining ones down. */
  private upstreamEntries(live: Live[]): { up: UpstreamEntry[]; down: UpstreamEntry[] } {
    const up: UpstreamEntry[] = [];
    const down: UpstreamEntry[] = [];
    const sorted = [...live].sort((a, b) => (a.info.name < b.info.name ? -1 : 1));
    for (const l of sorted) {
      if (!l.info.address || !l.info.running) continue;
      if (this.draining.has(l.info.name)) down.push({ address: l.info.address, down: true, name: l.info.name });
      else if (l.observed.ready) up.push({ address: l.info.address, down: false, name: l.info.name });
    }
    return { up, down };
  }

  /**
   * Writes the upstream when what nginx should send traffic to has changed:
   * a server went up, or a new one must be drained. Lines of instances that
   * are already gone are dropped at the next such write rather than costing a
   * reload of their own.
   */
  private async syncUpstream(live: Live[], action: 'drain' | 'enable' | 'final'): Promise<void> {
    const { up, down } = this.upstreamEntries(live);
    const upSet = new Set(up.map((e) => e.address));
    const upChanged = upSet.size !== this.lastUp.size || [...upSet].some((a) => !this.lastUp.has(a));
    const newDown = down.some((e) => !this.lastDown.has(e.address));
    if (!upChanged && !newDown && action !== 'final') return;
    const reloadsBefore = this.reloads;
    await this.applyAll([...up, ...down], upChanged || newDown);
    if (this.reloads > reloadsBefore) {
      const prevUp = this.lastUp;
      this.emit({
        type: 'upstream',
        action,
        down: down.filter((e) => !this.lastDown.has(e.address)).map((e) => e.name),
        up: up.filter((e) => !prevUp.has(e.address)).map((e) => e.name),
        reloads: this.reloads,
      });
    }
    this.lastUp = upSet;
    this.lastDown = new Set(down.map((e) => e.address));
  }

  /**
   * Writes and `nginx -t`-checks every load balancer before reloading any: if
   * one check fails, the ones already written are put back and nothing is
   * reloaded, so traffic does not change anywhere.
   */
  private async applyAll(servers: UpstreamEntry[], reload: boolean): Promise<void> {
    const contents = this.deps.routers.map((lb) => renderUpstream(lb.template, { service: this.fleet.service, upstream: lb.upstream, servers }));
    const written: number[] = [];
    for (const [i, { router: r }] of this.deps.routers.entries()) {
      if (contents[i] === this.lastContent[i]) continue;
      try {
        await r.writeAndTest(contents[i] ?? '');
        written.push(i);
      } catch (err) {
        for (const j of written) {
          const prev = this.lastContent[j];
          if (prev !== undefined) await this.deps.routers[j]?.router.writeAndTest(prev).catch(() => {});
        }
        this.emit({ type: 'upstream', action: 'restore', down: [], up: [], reloads: this.reloads });
        throw new RolloutFailedError(
          `${r.name}: the new upstream failed nginx -t; every upstream file was restored and nothing was reloaded:\n${(err as Error).message}`,
          'nginx keeps serving its previous config. Fix the nginx config or the upstream template, then deploy again: the rollout continues from where it stopped.',
        );
      }
    }
    for (const i of written) this.lastContent[i] = contents[i];
    if (!reload) return;
    for (const i of written) {
      await this.deps.routers[i]?.router.reload();
      this.reloads++;
    }
  }

  private async finish(live: Live[], t0: number): Promise<DeployResult> {
    await this.syncUpstream(live, 'final');
    const results = await Promise.all(
      live.map(async (l) => {
        const address = l.info.address ?? '';
        try {
          return { name: l.info.name, host: l.info.host, address, version: await this.deps.prober.version(address) };
        } catch (err) {
          return { name: l.info.name, host: l.info.host, address, version: '', error: (err as Error).message };
        }
      }),
    );
    const wrong = results.filter((r) => r.version !== this.fleet.version);
    for (const r of results) if (r.version === this.fleet.version) this.emit({ type: 'verified', name: r.name, version: r.version });
    if (wrong.length > 0) {
      const lines = wrong.map((r) => (r.error ? `${r.name} on ${r.host}: ${r.error}` : `${r.name} on ${r.host} reports version ${JSON.stringify(r.version)}, expected ${JSON.stringify(this.fleet.version)}`));
      throw new RolloutFailedError(
        `rollout of ${this.fleet.service} finished but ${wrong.length} of ${results.length} instance(s) do not serve version ${this.fleet.version}:\n  ${lines.join('\n  ')}`,
        'the instances are serving; check that the image was built with the version it is tagged with (or set `version:` in the fleet file), then deploy again',
        { instances: results },
      );
    }
    this.emit({ type: 'complete', revision: this.revision, version: this.fleet.version });
    return {
      service: this.fleet.service,
      revision: this.revision,
      version: this.fleet.version,
      durationMs: this.clock.now() - t0,
      waves: this.waves,
      reloads: this.reloads,
      instances: results.map(({ name, host, address, version }) => ({ name, host, address, version })),
    };
  }

  private async deadlineFailure(live: Live[]): Promise<RolloutFailedError> {
    const stuck = live.filter((l) => l.observed.revision === this.revision && !l.observed.available);
    const lines = await Promise.all(
      stuck.map(async (l) => {
        const t = this.track.get(l.info.name);
        const logs = (await this.runtime(l.info.host).logs(l.info.id, 5).catch(() => '')).trim();
        const tail = logs ? `\n      last log lines:\n        ${logs.split('\n').slice(-5).join('\n        ')}` : '';
        return `${l.info.name} on ${l.info.host}: ${t?.lastProbe ?? 'unknown'}${tail}`;
      }),
    );
    const old = live.filter((l) => l.observed.revision !== this.revision);
    const serving = live.filter((l) => l.observed.ready && !this.draining.has(l.info.name)).length;
    this.emit({ type: 'failed', reason: 'progress deadline exceeded' });
    return new RolloutFailedError(
      `rollout of ${this.fleet.service} to ${this.fleet.version} made no progress for ${this.fleet.progressDeadlineSeconds} s (progressDeadlineSeconds) and is marked failed. ` +
        `The fleet is left as it is: ${serving} instance(s) in service, ${old.length} of the old revision.\n` +
        `  instances that never became available:\n    ${lines.join('\n    ') || '(none started)'}`,
      `fix the image and deploy again (the rollout continues from here), or deploy the previous image to go back`,
      { stuck: stuck.map((l) => l.info.name) },
    );
  }
}
