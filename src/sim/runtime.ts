/**
 * The simulated Docker host: the Runtime port over a SimWorld (./ports.ts).
 * Its own file: the largest of the simulated ports, it depends on the world
 * while nothing in the world depends on it.
 */
import { FleetrollError } from '../errors.js';
import { Overlaps, type Overlap } from '../core/stepCosts.js';
import { LABELS, type ContainerEvent, type ContainerHealth, type ImageInfo, type InstanceInfo, type InstanceSpec, type Runtime } from '../ports.js';
import { isReady, simImageId, type SimContainer, type SimWorld } from './ports.js';

function info(c: SimContainer): InstanceInfo {
  const running = c.state === 'running';
  return {
    id: c.id,
    name: c.name,
    host: c.host,
    labels: c.labels,
    state: c.state,
    running,
    exitCode: running ? undefined : 0,
    address: running && c.port !== undefined ? c.address : undefined,
  };
}

/** Every label of `labels` on `c`: without an entries array per container, as a listing visits the whole fleet. */
function hasLabels(c: SimContainer, labels: Record<string, string>): boolean {
  for (const k in labels) if (c.labels[k] !== labels[k]) return false;
  return true;
}

export class SimRuntime implements Runtime {
  /** Warm-ups on this host while SimTimings.startupQueuedMs prices them by how many warm up at once. */
  private readonly warmups = new Overlaps();
  private warming: { c: SimContainer; item: Overlap; from: number; ms: number }[] = [];

  constructor(
    readonly host: string,
    private readonly w: SimWorld,
  ) {}

  private check(): void {
    if (this.w.faults.hostsGone?.has(this.host))
      throw new FleetrollError('E_DOCKER_UNREACHABLE', `host ${this.host}: the Docker engine does not answer (simulated)`);
  }

  async ping(): Promise<void> {
    this.check();
  }

  async inspect(id: string): Promise<InstanceInfo | undefined> {
    this.check();
    const c = this.w.containers.get(id);
    return c ? info(c) : undefined;
  }

  async list(labels: Record<string, string>): Promise<InstanceInfo[]> {
    this.check();
    const out: InstanceInfo[] = [];
    for (const c of this.w.containers.values()) {
      if (c.host !== this.host) continue;
      if (hasLabels(c, labels)) out.push(info(c));
    }
    return out;
  }

  async run(spec: InstanceSpec): Promise<InstanceInfo> {
    this.check();
    const t = this.w.at(this.host);
    const queued = t.runQueuedMs ?? 0;
    const overlap = this.w.startsInFlight.begin(this.host);
    try {
      // Starts issued together (one decision) all register before any is priced: they share the engine.
      if (queued > 0) await this.w.clock.sleep(0);
      const ms = t.runMs + queued * (overlap.max - 1);
      if (ms > 0) await this.w.clock.sleep(ms);
    } finally {
      this.w.startsInFlight.end(this.host, overlap);
    }
    this.check();
    const c = this.w.make(this.host, spec.name, spec.labels, spec.port, spec.image);
    const version = spec.labels[LABELS.version] ?? '';
    const f = this.w.faults;
    if (!f.neverReady?.has(version)) {
      c.readyAt = this.w.clock.now() + this.w.spread(t.startupMs);
      if ((t.startupQueuedMs ?? 0) > 0) this.warm(c, t.startupQueuedMs ?? 0);
      if (f.crashAfterReadyMs?.versions.has(version)) this.w.clock.timer(c.readyAt - this.w.clock.now() + f.crashAfterReadyMs.ms, () => this.w.exit(c, 1));
    }
    this.w.emit({ kind: 'started', c });
    return info(c);
  }

  async stop(id: string): Promise<void> {
    this.check();
    const c = this.w.containers.get(id);
    if (!c || c.state !== 'running') return;
    if ((this.w.faults.failStops ?? 0) > 0) {
      this.w.faults.failStops = (this.w.faults.failStops ?? 1) - 1;
      throw new FleetrollError('E_DOCKER', `host ${this.host}: stopping ${c.name} failed: 500 server error (simulated)`);
    }
    c.stopping = true;
    this.w.emit({ kind: 'stopping', c });
    await this.w.clock.sleep(this.w.spread(this.w.at(this.host).stopMs));
    this.w.exit(c);
  }

  /**
   * Prices `c`'s warm-up, and those warming beside it, by the most warming
   * up at once on this host while each warmed (what the recorder measures,
   * engine/stepCosts.ts): one that joins slows those already warming too.
   * Warm-ups that are over leave when the next one joins: only a join can
   * raise a count, so nothing needs a timer.
   */
  private warm(c: SimContainer, queuedMs: number): void {
    const now = this.w.clock.now();
    this.warming = this.warming.filter((x) => {
      const on = x.c.state === 'running' && !x.c.stopping && now < x.c.readyAt;
      if (!on) this.warmups.end(this.host, x.item);
      return on;
    });
    this.warming.push({ c, item: this.warmups.begin(this.host), from: now, ms: c.readyAt - now });
    for (const x of this.warming) x.c.readyAt = x.from + x.ms + queuedMs * (x.item.max - 1);
  }

  /** Docker's events for this host's containers carrying every label. */
  events(labels: Record<string, string>, onEvent: (stream?: 'ended' | 'refused', e?: ContainerEvent) => void): () => void {
    const listener = (e: ContainerEvent, host: string) => {
      const c = this.w.containers.get(e.id);
      // As Docker's: a network event is the network's, so any container's (dis)connect passes the label filter (adapters/dockerEvents.ts).
      const network = e.action === 'connect' || e.action === 'disconnect';
      if (host === this.host && (network || (c && hasLabels(c, labels)))) onEvent(undefined, e);
    };
    this.w.streams.add(listener);
    return () => this.w.streams.delete(listener);
  }

  async disableRestart(id: string): Promise<void> {
    const c = this.w.containers.get(id);
    if (c) c.noRestart = true;
  }

  async remove(id: string): Promise<void> {
    this.check();
    const c = this.w.containers.get(id);
    if (!c) return;
    this.w.exit(c);
    this.w.forget(c);
    this.w.emit({ kind: 'removed', c });
  }

  async imageExists(): Promise<boolean> {
    return true;
  }

  async networkExists(): Promise<boolean> {
    return true;
  }

  saveImage(): Promise<NodeJS.ReadableStream> {
    throw new Error('simulated hosts do not copy images');
  }

  async pullImage(): Promise<string | undefined> {
    return undefined;
  }

  async loadImage(): Promise<void> {}

  async logs(id: string): Promise<string> {
    const c = this.w.containers.get(id);
    return c ? `simulated ${c.name}` : '';
  }

  async specOf(): Promise<undefined> {
    return undefined;
  }

  private container(id: string): SimContainer {
    this.check();
    const c = this.w.containers.get(id);
    if (!c) throw new FleetrollError('E_CONTAINER_MISSING', `container ${id} does not exist on ${this.host} (simulated)`);
    return c;
  }

  /** Docker's healthcheck passes once the app is ready (every simulated image has one). */
  async health(id: string): Promise<ContainerHealth> {
    const c = this.container(id);
    return isReady(this.w, c) ? 'healthy' : c.state === 'running' ? 'starting' : 'unhealthy';
  }

  /** Any command exits 0 once the app is ready, 1 before. */
  async exec(id: string, _cmd: readonly string[], _timeoutMs: number): Promise<number> {
    const c = this.container(id);
    if (c.state !== 'running') throw new FleetrollError('E_CONTAINER_NOT_RUNNING', `container ${id} on ${this.host} is not running (simulated)`);
    return isReady(this.w, c) ? 0 : 1;
  }

  async imageInfo(image: string): Promise<ImageInfo> {
    this.check();
    return { id: simImageId(image), repoDigests: [], healthcheck: true };
  }

  async containerImage(id: string): Promise<string | undefined> {
    this.check();
    return this.w.containers.get(id)?.imageId;
  }
}
