/**
 * The Docker side of fleetroll: `DockerRuntime` implements the `Runtime` port with
 * dockerode against one engine (`unix://`, `tcp://` with optional TLS, or `ssh://`),
 * plus `ensureNetwork`. Its parts each have a file: connecting and what a failure to
 * connect means (./dockerConnect.ts), Docker's answers as InstanceInfo
 * (./dockerInspect.ts), images (./dockerImages.ts), exec and single files in and out
 * of a container (./dockerFiles.ts), error wording and retries (./dockerRetry.ts).
 *
 * Idempotence follows Docker's status codes: stop → 304 (already stopped) and 404 (gone)
 * are success; remove → 404 is success, and a 409 "removal already in progress" is
 * waited out (retried until the container is gone, success if still in progress).
 * Create, start, stop and remove are retried after transient failures (./dockerRetry.ts).
 *
 * Environment values are secrets: they are never logged and never put in an error message.
 */
import { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { FleetrollError } from '../errors.js';
import { dockerCreateBody } from '../core/container.js';
import {
  LABELS,
  type ContainerEvent,
  type ContainerHealth,
  type ImageInfo,
  type InstanceInfo,
  type InstanceSpec,
  type RegistryAuth,
  type Runtime,
} from '../ports.js';
import { dockerOptions, unreachableError, type DockerHostConfig } from './dockerConnect.js';
import { demux, execIn } from './dockerFiles.js';
import { dockerodeClass } from './dockerodeLoad.js';
import * as images from './dockerImages.js';
import { instanceFromInspect, instanceFromList, present } from './dockerInspect.js';
import { engineMessage, retryTransient, runtimeError, statusOf, type RetryOptions } from './dockerRetry.js';
import { SshDockerAgent } from './ssh.js';

// The Docker adapter's face: callers (the nginx router, rehearse, the tests) import these from here.
import { containerEvents } from './dockerEvents.js';
export { dockerOptions, type DockerConnectOptions, type DockerHostConfig } from './dockerConnect.js';
export { execIn, getFile, getFileEntry, putFile, type ExecResult } from './dockerFiles.js';

export class DockerRuntime implements Runtime {
  readonly host: string;
  /** The endpoint URL this runtime talks to (for messages). */
  readonly endpoint: string;
  /** The underlying dockerode client (engine helpers, tests). */
  readonly docker: Dockerode;
  /** tcp:// with client TLS (errors then get their TLS meaning spelled out). */
  private readonly tls: boolean;
  /** How create/start/stop/remove retry transient failures. */
  private readonly retry: RetryOptions;

  constructor(host: DockerHostConfig, opts: { retry?: RetryOptions } = {}) {
    this.host = host.name;
    this.endpoint = host.docker;
    this.tls = host.tls !== undefined && host.docker.startsWith('tcp://');
    this.retry = opts.retry ?? {};
    // Loaded on the first runtime, not with this module: commands that never talk to Docker do not pay for it.
    const DockerodeClass = dockerodeClass();
    this.docker = new DockerodeClass(dockerOptions(host) as Dockerode.DockerOptions);
  }

  private get where(): string {
    return `Docker host ${this.host} (${this.endpoint})`;
  }

  /** Over ssh a ping also pays for the handshake and a remote `docker system dial-stdio`: 15 s (at load 20-30 it took over 5). */
  async ping(timeoutMs = this.endpoint.startsWith('ssh://') ? 15_000 : 5000): Promise<void> {
    const ssh = (this.docker.modem as { agent?: unknown }).agent;
    if (ssh instanceof SshDockerAgent) ssh.lastProblem = undefined;
    try {
      // dockerode forwards abortSignal to the request; @types/dockerode does not declare the option.
      const ping = this.docker.ping.bind(this.docker) as unknown as (opts: { abortSignal: AbortSignal }) => Promise<unknown>;
      await ping({ abortSignal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      // Over ssh, a channel that closes before the answer is "socket hang up": the agent knows why.
      throw unreachableError(this.where, this.endpoint, this.tls, err, timeoutMs, ssh instanceof SshDockerAgent ? ssh.lastProblem : undefined);
    }
  }

  async list(labels: Record<string, string>): Promise<InstanceInfo[]> {
    const label = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
    let containers: Dockerode.ContainerInfo[];
    try {
      containers = await this.docker.listContainers({ all: true, ...(label.length ? { filters: { label } } : {}) });
    } catch (err) {
      throw runtimeError('E_DOCKER', `listing containers on ${this.where}: ${engineMessage(err)}`, err);
    }
    return containers.map((c) => instanceFromList(c, this.host));
  }

  /** Wakes `onEvent` on changes to containers with these labels (adapters/dockerEvents.ts); returns the closer. */
  events(labels: Record<string, string>, onEvent: (stream?: 'ended' | 'refused', e?: ContainerEvent) => void): () => void {
    return containerEvents(this.docker, labels, onEvent);
  }

  /** `docker update --restart no`: a container that crashed in its monitor window is not brought back by its engine. */
  async disableRestart(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).update({ RestartPolicy: { Name: 'no', MaximumRetryCount: 0 } });
    } catch (err) {
      if (statusOf(err) !== 404) throw runtimeError('E_DOCKER', `switching off the restart policy of ${id} on ${this.where}: ${engineMessage(err)}`, err);
    }
  }

  /** The engine's inspect of a container; undefined when it does not exist. */
  private async inspectContainer(id: string): Promise<Dockerode.ContainerInspectInfo | undefined> {
    try {
      return await this.docker.getContainer(id).inspect();
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw runtimeError('E_DOCKER', `inspecting container ${id} on ${this.where}: ${engineMessage(err)}`, err);
    }
  }

  /** One container by id or name; `port` supplies the app port for containers fleetroll did not create (adopted). */
  async inspect(id: string, port?: number): Promise<InstanceInfo | undefined> {
    const info = await this.inspectContainer(id);
    return info ? instanceFromInspect(info, this.host, port) : undefined;
  }

  private present(what: string, inspect: () => Promise<unknown>): Promise<boolean> {
    return present(this.where, what, inspect);
  }

  pullImage(image: string, auth?: RegistryAuth): Promise<string | undefined> {
    return images.pull(this.docker, this.where, image, auth);
  }

  saveImage(image: string): Promise<NodeJS.ReadableStream> {
    return images.save(this.docker, this.where, image);
  }

  loadImage(tar: NodeJS.ReadableStream): Promise<void> {
    return images.load(this.docker, this.where, tar);
  }

  networkExists(name: string): Promise<boolean> {
    return this.present(`network ${name}`, () => this.docker.getNetwork(name).inspect());
  }

  async specOf(id: string): Promise<{ image: string; env: Record<string, string> } | undefined> {
    const info = await this.inspectContainer(id);
    if (!info) return undefined;
    const env: Record<string, string> = {};
    for (const kv of info.Config?.Env ?? []) {
      const i = kv.indexOf('=');
      if (i > 0) env[kv.slice(0, i)] = kv.slice(i + 1);
    }
    return { image: info.Config?.Image ?? '', env };
  }

  async run(spec: InstanceSpec): Promise<InstanceInfo> {
    const network = spec.network ?? 'bridge';
    const labels = {
      ...spec.labels,
      ...(spec.port !== undefined ? { [LABELS.port]: String(spec.port) } : {}),
      ...(spec.publishAddress ? { [LABELS.publishAddress]: spec.publishAddress } : {}),
    };
    let container: Dockerode.Container;
    try {
      container = await retryTransient(
        `creating container ${spec.name} (image ${spec.image}) on ${this.where}`,
        async (attempt) => {
          try {
            return await this.docker.createContainer(
              dockerCreateBody(
                {
                  name: spec.name,
                  image: spec.image,
                  env: spec.env,
                  labels,
                  port: spec.port,
                  network,
                  stopTimeoutSeconds: spec.stopTimeoutSeconds,
                  publishAddress: spec.publishAddress,
                  secretSources: spec.secretSources,
                },
                spec.container,
              ) as Dockerode.ContainerCreateOptions,
            );
          } catch (err) {
            // An earlier attempt whose answer was lost may have created it: then the name holds this very spec.
            const mine = attempt > 1 && statusOf(err) === 409 ? await this.createdAs(spec.name, spec.image, labels) : undefined;
            if (mine) return mine;
            throw err;
          }
        },
        this.retry,
      );
    } catch (err) {
      const status = statusOf(err);
      const msg = engineMessage(err);
      if (status === 409) {
        throw runtimeError(
          'E_NAME_CONFLICT',
          `cannot create container ${spec.name} on ${this.where}: the name is already in use (${msg})`,
          err,
          `remove the old container (docker rm ${spec.name}) or let fleetroll pick a new name`,
        );
      }
      if (status === 404 && /network/i.test(msg)) {
        throw runtimeError('E_NETWORK_MISSING', `cannot create container ${spec.name} on ${this.where}: network ${network} not found`, err);
      }
      if (status === 404) {
        throw runtimeError(
          'E_IMAGE_MISSING',
          `image ${spec.image} is not present on ${this.where} (needed for container ${spec.name})`,
          err,
          `build or load it on that host (docker load / docker build), or pull it there`,
        );
      }
      throw runtimeError('E_DOCKER', `creating container ${spec.name} (image ${spec.image}) on ${this.where}: ${msg}`, err);
    }
    // Networks beyond the first are joined between create and start (older engines take one network at create).
    for (const n of spec.container?.networks ?? []) {
      if (n.name === network) continue;
      try {
        await this.docker.getNetwork(n.name).connect({ Container: container.id, EndpointConfig: n.aliases.length ? { Aliases: n.aliases } : {} });
      } catch (err) {
        await container.remove({ force: true, v: true }).catch(() => {});
        const missing = statusOf(err) === 404;
        throw runtimeError(
          missing ? 'E_NETWORK_MISSING' : 'E_DOCKER',
          `connecting container ${spec.name} to network ${n.name} on ${this.where}: ${missing ? 'no such network' : engineMessage(err)}`,
          err,
          missing ? `create it on that host: docker network create ${n.name}` : undefined,
        );
      }
    }
    try {
      await retryTransient(
        `starting container ${spec.name} (image ${spec.image}) on ${this.where}`,
        async () => {
          try {
            await container.start();
          } catch (err) {
            if (statusOf(err) !== 304) throw err; // already started (by an attempt whose answer was lost)
          }
        },
        // The published port is one Docker picks: a clash clears on the next start.
        spec.publishAddress ? { ...this.retry, portClashIsTransient: true } : this.retry,
      );
    } catch (err) {
      // Leave no half-made instance behind: a rerun would hit a name conflict.
      await container.remove({ force: true, v: true }).catch(() => {});
      const msg = engineMessage(err);
      const code = statusOf(err) === 404 && /network/i.test(msg) ? 'E_NETWORK_MISSING' : 'E_CONTAINER_START';
      throw runtimeError(code, `starting container ${spec.name} (image ${spec.image}) on ${this.where}: ${msg}`, err);
    }
    const info = await this.inspect(container.id);
    if (!info) throw runtimeError('E_DOCKER', `container ${spec.name} vanished on ${this.where} right after it started`, undefined);
    return info;
  }

  /** The container named `name` when it has exactly this image and these labels (created by a lost attempt), else undefined. */
  private async createdAs(name: string, image: string, labels: Record<string, string>): Promise<Dockerode.Container | undefined> {
    const info = await this.inspectContainer(name).catch(() => undefined);
    const has = info?.Config?.Labels ?? {};
    if (!info || info.Config?.Image !== image || Object.entries(labels).some(([k, v]) => has[k] !== v)) return undefined;
    return this.docker.getContainer(info.Id);
  }

  async stop(id: string, timeoutSeconds: number): Promise<void> {
    const doing = `stopping container ${id} on ${this.where}`;
    try {
      await retryTransient(
        doing,
        async () => {
          try {
            await this.docker.getContainer(id).stop({ t: Math.max(0, Math.round(timeoutSeconds)) });
          } catch (err) {
            const status = statusOf(err);
            if (status !== 304 && status !== 404) throw err; // already stopped, or gone: done
          }
        },
        this.retry,
      );
    } catch (err) {
      throw runtimeError('E_DOCKER', `${doing}: ${engineMessage(err)}`, err);
    }
  }

  async remove(id: string): Promise<void> {
    const doing = `removing container ${id} on ${this.where}`;
    try {
      await retryTransient(
        doing,
        async () => {
          try {
            await this.docker.getContainer(id).remove({ force: false, v: true });
          } catch (err) {
            if (statusOf(err) !== 404) throw err; // gone: done
          }
        },
        this.retry,
      );
    } catch (err) {
      const msg = engineMessage(err);
      // Another removal of it was still under way after the retries: it is going away, as asked.
      if (statusOf(err) === 409 && /already in progress/i.test(msg)) return;
      throw runtimeError('E_DOCKER', `${doing}: ${msg}`, err);
    }
  }

  imageInfo(ref: string): Promise<ImageInfo | undefined> {
    return images.info(this.docker, this.where, ref);
  }

  imageExists(image: string): Promise<boolean> {
    return images.exists(this.docker, this.where, image);
  }

  /** Creates the named volume unless it exists (labelled as fleetroll's, never removed by it). */
  async ensureVolume(name: string, labels: Record<string, string>): Promise<void> {
    if (await this.present(`volume ${name}`, () => this.docker.getVolume(name).inspect())) return;
    try {
      await this.docker.createVolume({ Name: name, Labels: labels });
    } catch (err) {
      // Created meanwhile by a concurrent deploy: the same outcome.
      if (await this.present(`volume ${name}`, () => this.docker.getVolume(name).inspect()).catch(() => false)) return;
      throw runtimeError('E_DOCKER', `creating volume ${name} on ${this.where}: ${engineMessage(err)}`, err);
    }
  }

  /**
   * The bind sources among `paths` that do not exist on this host. The engine
   * is the only one that can tell for a remote host, and it does so exactly
   * when asked to create a container that mounts them: one is created (never
   * started) from `image`, and removed at once.
   */
  async missingBindSources(image: string, paths: readonly string[]): Promise<string[]> {
    const missing: string[] = [];
    let left = [...paths];
    // The engine names the first missing source only: ask again without it.
    for (let round = 0; round <= paths.length && left.length > 0; round++) {
      let created: Dockerode.Container | undefined;
      try {
        created = await this.docker.createContainer({
          Image: image,
          Labels: { [LABELS.managed]: 'probe' },
          HostConfig: {
            NetworkMode: 'none',
            Mounts: left.map((p, i) => ({ Type: 'bind' as const, Source: p, Target: `/fleetroll-bind-check/${i}`, ReadOnly: true })),
          },
        });
        return missing;
      } catch (err) {
        const msg = engineMessage(err);
        const named = left.find((p) => msg.includes(p));
        if (!/does not exist|no such file/i.test(msg) || named === undefined)
          throw runtimeError('E_DOCKER', `checking bind sources on ${this.where}: ${msg}`, err);
        missing.push(named);
        left = left.filter((p) => p !== named);
      } finally {
        await created?.remove({ force: true }).catch(() => {});
      }
    }
    return missing;
  }

  async logs(id: string, tail: number): Promise<string> {
    let raw: unknown;
    try {
      raw = await this.docker.getContainer(id).logs({ stdout: true, stderr: true, tail: Math.max(0, Math.floor(tail)), follow: false });
    } catch (err) {
      if (statusOf(err) === 404) return '';
      throw runtimeError('E_DOCKER', `reading the logs of container ${id} on ${this.where}: ${engineMessage(err)}`, err);
    }
    // docker-modem hands back a Buffer, or parsed JSON when the text happens to be valid JSON (TTY containers).
    const buf = Buffer.isBuffer(raw) ? raw : Buffer.from(typeof raw === 'string' ? raw : JSON.stringify(raw));
    const all: Buffer[] = [];
    await demux(this.docker, Readable.from([buf]), all, all);
    return Buffer.concat(all).toString('utf8');
  }

  // --- probes (readiness from Docker's healthcheck or an exec, verification by image ID) ---

  async health(id: string): Promise<ContainerHealth> {
    const info = await this.inspectContainer(id);
    if (!info) throw runtimeError('E_CONTAINER_MISSING', `container ${id} does not exist on ${this.where}`, undefined);
    const status = (info.State as { Health?: { Status?: string } } | undefined)?.Health?.Status;
    return status === 'healthy' || status === 'unhealthy' || status === 'starting' ? status : 'none';
  }

  async exec(id: string, cmd: readonly string[], timeoutMs: number): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    const run = execIn(this.docker, id, [...cmd]);
    // The command may outlive the timeout (Docker cannot kill an exec): its late answer is dropped.
    run.catch(() => {});
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(runtimeError('E_EXEC_TIMEOUT', `\`${cmd.join(' ')}\` in container ${id} on ${this.where} did not exit within ${timeoutMs} ms`, undefined)),
        timeoutMs,
      );
    });
    try {
      return (await Promise.race([run, late])).exitCode;
    } finally {
      clearTimeout(timer);
    }
  }

  async containerImage(id: string): Promise<string | undefined> {
    return (await this.inspectContainer(id))?.Image;
  }
}

function dockerOf(target: DockerRuntime | Dockerode): Dockerode {
  return target instanceof DockerRuntime ? target.docker : target;
}

/**
 * Create a bridge network `name` (with `labels`) unless one with exactly that name exists.
 * Idempotent and safe against a concurrent creator. Resolves to the network id.
 */
export async function ensureNetwork(target: DockerRuntime | Dockerode, name: string, labels: Record<string, string> = {}): Promise<string> {
  const docker = dockerOf(target);
  const find = async () => {
    // The name filter matches substrings: compare exactly.
    const nets = await docker.listNetworks({ filters: { name: [name] } });
    return nets.find((n) => n.Name === name)?.Id;
  };
  try {
    const existing = await find();
    if (existing) return existing;
    try {
      const net = await docker.createNetwork({ Name: name, Driver: 'bridge', CheckDuplicate: true, Labels: labels });
      return net.id;
    } catch (err) {
      if (statusOf(err) === 409) {
        const raced = await find();
        if (raced) return raced;
      }
      throw err;
    }
  } catch (err) {
    if (err instanceof FleetrollError) throw err;
    throw runtimeError('E_DOCKER', `creating Docker network ${name}: ${engineMessage(err)}`, err);
  }
}
