/**
 * Simulated ports: Docker hosts, nginx load balancers and readiness probes
 * as in-memory objects on a virtual clock. `simulate` drives the real
 * controller with them; the unit tests drive it with them too, inject
 * failures through `SimFaults`, and check invariants on `SimWorld` after
 * every event (`onEvent`).
 *
 * Each container has a readiness time (start + startup, jittered) and a stop
 * duration (jittered); nginx configs take effect when a reload finishes.
 *
 * The world and its nginx refer to each other and stay here; the simulated
 * Docker host (SimRuntime) only uses the world and is in ./runtime.ts.
 */
import { parseUpstreamServers, PLACEHOLDER_ADDRESS, type UpstreamEntry } from '../core/upstream.js';
import { Overlaps } from '../core/stepCosts.js';
import { FleetrollError } from '../errors.js';
import { LABELS, type Clock, type ContainerEvent, type ProbeTarget, type Prober, type Router, type UpstreamFile } from '../ports.js';

export interface SimTimings {
  /** From container start to readiness passing, ms. */
  startupMs: number;
  /** Graceful stop (the app's shutdown), ms. */
  stopMs: number;
  /** docker create + start, ms. */
  runMs: number;
  /** Added to a create + start for each other start in flight beside it on its host, ms (default 0). */
  runQueuedMs?: number;
  /** nginx reload until the new workers are in force, ms. */
  reloadMs: number;
  /** Writing the upstream file and `nginx -t`, ms (0 if not given). */
  testMs?: number;
  /** 0..1: relative spread of startup and stop times. */
  jitter: number;
  /** Added to a warm-up (startupMs) for each other instance warming up beside it on its host, ms (default 0). */
  startupQueuedMs?: number | undefined;
  /** Per host (by name): its own figures, where recorded per host; the ones above elsewhere. */
  hosts?: Readonly<Record<string, HostSimTimings>> | undefined;
  /** Per load balancer (by name): its own reload, where recorded per load balancer. */
  loadBalancers?: Readonly<Record<string, LoadBalancerSimTimings>> | undefined;
  /** Added to a reload for each create + start in flight (on any host) when it begins, ms (default 0). */
  reloadQueuedMs?: number | undefined;
}

export interface LoadBalancerSimTimings {
  reloadMs: number;
  reloadQueuedMs?: number | undefined;
}

export type HostSimTimings = Partial<Pick<SimTimings, 'startupMs' | 'startupQueuedMs' | 'stopMs' | 'runMs' | 'runQueuedMs'>>;

/** Failures to inject, by version label (the simulated fleet goes from "old" to "new"); all optional. */
export interface SimFaults {
  /** Instances of these versions never pass readiness. */
  neverReady?: ReadonlySet<string>;
  /** Instances of these versions exit (code 1) this long after becoming ready. */
  crashAfterReadyMs?: { versions: ReadonlySet<string>; ms: number };
  /**
   * Docker's restart policy (unless-stopped): a container that exits on its
   * own runs again this long after, and is ready a startup later (and crashes
   * again as crashAfterReadyMs says), until its policy is switched off.
   */
  restartAfterExitMs?: number;
  /** The next n stops fail (the engine answers 500). */
  failStops?: number;
  /** Hosts whose engine no longer answers. */
  hostsGone?: Set<string>;
  /** The next n `nginx -t` checks of this load balancer (by name) refuse the config. */
  refuseTest?: Map<string, number>;
  /** The next n reloads of this load balancer fail. */
  failReload?: Map<string, number>;
  /** Instances that exit on their own as soon as they are marked down (a container dying while drained). */
  exitWhenMarkedDown?: boolean;
  /**
   * The fleet found at the start fails its readiness probe until this time
   * (ms on the virtual clock), although nginx routes to it: a healthcheck
   * that times out on a busy machine.
   */
  oldUnreadyUntilMs?: number;
}

export interface SimContainer {
  id: string;
  name: string;
  host: string;
  address: string;
  labels: Record<string, string>;
  /** The app port; undefined for a worker (then Docker reports no address). */
  port?: number | undefined;
  /** The image ID it runs (simImageId of its image). */
  imageId: string;
  state: 'running' | 'exited';
  readyAt: number;
  /** Set while a stop is in progress. */
  stopping: boolean;
  /** Time it stopped running (for checks), undefined while running. */
  stoppedAt?: number | undefined;
  /** Its restart policy was switched off (Runtime.disableRestart). */
  noRestart?: boolean | undefined;
  /** How often its engine restarted it. */
  restarts?: number | undefined;
}

export type SimEvent =
  | { kind: 'started'; c: SimContainer }
  | { kind: 'stopping'; c: SimContainer }
  | { kind: 'exited'; c: SimContainer }
  | { kind: 'removed'; c: SimContainer }
  | { kind: 'written'; lb: SimRouter; up: () => string[] }
  | { kind: 'reloaded'; lb: SimRouter };

/** mulberry32-based spread: a factor in [1 - jitter, 1 + jitter]. */
export class SimWorld {
  readonly containers = new Map<string, SimContainer>();
  private readonly byAddr = new Map<string, SimContainer>();
  private nextIp = 1;
  private running = 0;
  readonly routers: SimRouter[] = [];
  /** Creates + starts in flight per host (SimTimings.runQueuedMs). */
  readonly startsInFlight = new Overlaps();
  /** Peak of containers alive (running or stopping) at once. */
  peakAlive = 0;
  /** Called after every change of the simulated world. */
  onEvent: ((e: SimEvent) => void) | undefined;
  /** Docker's event streams (Runtime.events): each container event, with its host. */
  readonly streams = new Set<(e: ContainerEvent, host: string) => void>();

  constructor(
    readonly clock: Clock,
    readonly timings: SimTimings,
    readonly rand: () => number,
    readonly faults: SimFaults = {},
  ) {}

  /** The timings at one host: its own figures over the world's. */
  at(host: string): SimTimings {
    const own = this.timings.hosts?.[host];
    return own ? { ...this.timings, ...own } : this.timings;
  }

  spread(ms: number): number {
    return this.timings.jitter > 0 ? Math.round(ms * (1 + this.timings.jitter * (2 * this.rand() - 1))) : ms;
  }

  /** Containers running now (draining and stopping ones included). */
  alive(): number {
    return this.running;
  }

  /** Puts a running, ready container in place (the fleet before the rollout). */
  seed(host: string, name: string, labels: Record<string, string>, port: number | undefined, image = 'simulated:old'): SimContainer {
    const c = this.make(host, name, labels, port, image);
    c.readyAt = this.clock.now();
    return c;
  }

  make(host: string, name: string, labels: Record<string, string>, port: number | undefined, image = 'simulated:new'): SimContainer {
    const n = this.nextIp++;
    const ip = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
    const c: SimContainer = {
      id: `sim-${n}`,
      name,
      host,
      // A worker's still gets a unique key here; info() reports no address for it.
      address: port === undefined ? ip : `${ip}:${port}`,
      labels,
      port,
      imageId: simImageId(image),
      state: 'running',
      readyAt: Number.POSITIVE_INFINITY,
      stopping: false,
    };
    this.containers.set(c.id, c);
    this.byAddr.set(c.address, c);
    this.running++;
    this.peakAlive = Math.max(this.peakAlive, this.running);
    return c;
  }

  byAddress(address: string): SimContainer | undefined {
    return this.byAddr.get(address);
  }

  forget(c: SimContainer): void {
    this.containers.delete(c.id);
    if (this.byAddr.get(c.address) === c) this.byAddr.delete(c.address);
  }

  emit(e: SimEvent): void {
    this.onEvent?.(e);
  }

  /** `c` exits; `code` for one that ends on its own (a crash), which its restart policy may bring back. */
  exit(c: SimContainer, code = 0): void {
    if (c.state !== 'running') return;
    c.state = 'exited';
    c.stoppedAt = this.clock.now();
    this.running--;
    this.emit({ kind: 'exited', c });
    for (const l of this.streams) l({ action: 'die', id: c.id, name: c.name, exitCode: code }, c.host);
    const after = this.faults.restartAfterExitMs;
    if (after !== undefined && !c.stopping && code !== 0) this.clock.timer(after, () => this.restart(c));
  }

  /** Its engine runs `c` again (its restart policy), unless the policy was switched off or it was removed meanwhile. */
  private restart(c: SimContainer): void {
    if (c.noRestart || c.stopping || c.state === 'running' || this.containers.get(c.id) !== c) return;
    c.state = 'running';
    c.stoppedAt = undefined;
    c.restarts = (c.restarts ?? 0) + 1;
    this.running++;
    this.peakAlive = Math.max(this.peakAlive, this.running);
    const now = this.clock.now();
    c.readyAt = now + this.spread(this.at(c.host).startupMs);
    const crash = this.faults.crashAfterReadyMs;
    if (crash?.versions.has(c.labels[LABELS.version] ?? '')) this.clock.timer(c.readyAt - now + crash.ms, () => this.exit(c, 1));
    this.emit({ kind: 'started', c });
    for (const l of this.streams) l({ action: 'start', id: c.id, name: c.name }, c.host);
  }
}

/** The image ID a simulated engine has for an image reference. */
export function simImageId(image: string): string {
  // A container created from an image ID (a pinned build) runs that very ID.
  return image.startsWith('sha256:') ? image : `sha256:sim-${image}`;
}

/** Readiness as the simulated app has it: running, not stopping, past its startup. */
export function isReady(w: SimWorld, c: SimContainer): boolean {
  return c.state === 'running' && !c.stopping && w.clock.now() >= c.readyAt;
}

/** A file as the simulated nginx holds it: its text rendered only if someone reads it. */
interface SimFile {
  text(): string;
  /** Every server it lists (core/upstream listsOnlyServers), when known without parsing the text. */
  servers?: (() => readonly UpstreamEntry[]) | undefined;
  /** As the engine wrote it (for its changes since the file in force). */
  written?: UpstreamFile | undefined;
}

/** An nginx: a file, `nginx -t`, and a reload that puts the file in force after reloadMs. */
export class SimRouter implements Router {
  private written: SimFile | undefined;
  private loaded: SimFile | undefined;
  /** Addresses listed up in the config in force. */
  up = new Set<string>();
  /** Addresses listed down in the config in force, with the time that took effect. */
  downSince = new Map<string, number>();
  reloads = 0;
  /** The dynamic nginx mode: changes are no reloads (Router.reloadFree). */
  readonly reloadFree: boolean;
  /** The dynamic nginx mode: requests in flight on each server marked down (Router.inFlight); absent in reload mode. */
  readonly inFlight?: () => Promise<Map<string, number>>;

  constructor(
    readonly name: string,
    private readonly w: SimWorld,
    initial?: string,
    o: { reloadFree?: boolean; inFlight?: ((address: string, downForMs: number) => number) | undefined } = {},
  ) {
    this.reloadFree = o.reloadFree === true;
    const count = o.inFlight;
    if (count) this.inFlight = () => Promise.resolve(new Map([...this.downSince].map(([a, since]) => [a, count(a, this.w.clock.now() - since)] as const)));
    this.written = initial === undefined ? undefined : { text: () => initial };
    this.loaded = this.written;
    this.parse();
    w.routers.push(this);
  }

  /** The upstream file. */
  get file(): string | undefined {
    return this.written?.text();
  }

  /** The config nginx serves with. */
  get inForce(): string | undefined {
    return this.loaded?.text();
  }

  async check(): Promise<void> {}

  async read(): Promise<string | undefined> {
    return this.file;
  }

  async writeAndTest(content: string): Promise<void> {
    await this.write({ text: () => content });
  }

  async writeServers(file: UpstreamFile): Promise<void> {
    let text: string | undefined;
    await this.write({ text: () => (text ??= file.text()), servers: () => file.servers(), written: file });
  }

  private async write(f: SimFile): Promise<void> {
    const testMs = this.w.timings.testMs ?? 0;
    if (testMs > 0) await this.w.clock.sleep(testMs);
    const refuse = this.w.faults.refuseTest?.get(this.name) ?? 0;
    if (refuse > 0) {
      this.w.faults.refuseTest?.set(this.name, refuse - 1);
      throw new Error(`nginx: [emerg] invalid config (simulated) in ${this.name}`);
    }
    this.written = f;
    // Read only if a listener asks (the invariant checks do; simulate does not).
    this.w.emit({
      kind: 'written',
      lb: this,
      up: () =>
        servers(f)
          .filter((x) => !x.down)
          .map((x) => x.address),
    });
  }

  async reload(): Promise<void> {
    const fail = this.w.faults.failReload?.get(this.name) ?? 0;
    if (fail > 0) {
      this.w.faults.failReload?.set(this.name, fail - 1);
      throw new FleetrollError('E_NGINX_RELOAD', `${this.name}: reload failed (simulated)`);
    }
    const own = this.w.timings.loadBalancers?.[this.name];
    const queued = own?.reloadQueuedMs ?? this.w.timings.reloadQueuedMs ?? 0;
    // A wave's starts are issued with its change: they register first, and the change shares the engine with them.
    if (queued > 0) await this.w.clock.sleep(0);
    const reloadMs = (own?.reloadMs ?? this.w.timings.reloadMs) + queued * this.w.startsInFlight.inProgress();
    if (reloadMs > 0) await this.w.clock.sleep(reloadMs);
    const previous = this.loaded;
    this.loaded = this.written;
    if (!this.reloadFree) this.reloads++;
    this.parse(previous);
    this.w.emit({ kind: 'reloaded', lb: this });
    if (this.w.faults.exitWhenMarkedDown) {
      for (const a of this.downSince.keys()) {
        const c = this.w.byAddress(a);
        if (c && !c.stopping) this.w.exit(c);
      }
    }
  }

  private parse(previous?: SimFile): void {
    const now = this.w.clock.now();
    const changes = previous?.written && this.loaded?.written?.changesSince?.(previous.written);
    if (changes) {
      // Only what changed since the file in force before: a reload per instance costs its change, not the fleet.
      const last = new Map<string, UpstreamEntry | undefined>();
      for (const c of changes) last.set(c.address, c.after);
      for (const [a, e] of last) {
        if (a === PLACEHOLDER_ADDRESS) continue;
        if (e === undefined) {
          this.up.delete(a);
          this.downSince.delete(a);
        } else if (e.down) {
          this.up.delete(a);
          if (!this.downSince.has(a)) this.downSince.set(a, now);
        } else {
          this.downSince.delete(a);
          this.up.add(a);
        }
      }
      return;
    }
    const up = new Set<string>();
    const down = new Map<string, number>();
    for (const s of this.loaded ? servers(this.loaded) : []) {
      if (s.down) down.set(s.address, this.downSince.get(s.address) ?? now);
      else up.add(s.address);
    }
    this.up = up;
    this.downSince = down;
  }
}

/** What nginx reads from a file: every server once (the first line naming it), the placeholder left out. */
function servers(f: SimFile): UpstreamEntry[] {
  if (!f.servers) return parseUpstreamServers(f.text());
  const seen = new Set<string>();
  const out: UpstreamEntry[] = [];
  for (const s of f.servers()) {
    if (s.address === PLACEHOLDER_ADDRESS || seen.has(s.address)) continue;
    seen.add(s.address);
    out.push(s);
  }
  return out;
}

/** Readiness and version as the simulated containers have them. */
export class SimProber implements Prober {
  constructor(private readonly w: SimWorld) {}

  async ready(target: ProbeTarget): Promise<boolean> {
    const c = target.address !== undefined ? this.w.byAddress(target.address) : this.w.containers.get(target.id);
    return c !== undefined && isReady(this.w, c);
  }

  async version(address: string): Promise<string> {
    const c = this.w.byAddress(address);
    if (!c || c.state !== 'running') throw new Error(`${address}: connection refused (simulated)`);
    return c.labels[LABELS.version] ?? '';
  }
}
