/**
 * The Docker side of fleetroll: `DockerRuntime` implements the `Runtime` port with
 * dockerode against one engine (`unix://`, `tcp://` with optional TLS, or `ssh://`),
 * plus helpers the engine and tests share: networks, exec with exit code, and single
 * files in and out of a container through the archive API (works on images without a
 * shell, such as fleetroll/nginx-base).
 *
 * Idempotence follows Docker's status codes: stop → 304 (already stopped) and 404 (gone)
 * are success; remove → 404 is success, and a 409 "removal already in progress" is
 * waited out (retried until the container is gone, success if still in progress).
 * Create, start, stop and remove are retried after transient failures (./dockerRetry.ts).
 *
 * Environment values are secrets: they are never logged and never put in an error message.
 */
import { readFileSync } from 'node:fs';
import type { Agent } from 'node:http';
import { createRequire } from 'node:module';
import { userInfo } from 'node:os';
import { posix } from 'node:path';
import { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { FleetrollError, type ErrorCode } from '../errors.js';
import { dockerCreateBody } from '../core/container.js';
import { LABELS, type ContainerHealth, type ImageInfo, type InstanceInfo, type InstanceSpec, type RegistryAuth, type Runtime } from '../ports.js';
import { engineMessage, retryTransient, statusOf, type RetryOptions } from './dockerRetry.js';
import { SshDockerAgent } from './ssh.js';
import { createTar, readTar, type TarEntry } from './tar.js';

/** "addr:hostPort" of a container whose app port is published on its host's address. */
function publishedAddress(labels: Record<string, string>, hostPort: string | number | undefined): string | undefined {
  const addr = labels[LABELS.publishAddress];
  return addr && hostPort ? `${addr}:${hostPort}` : undefined;
}

/** One Docker host as the fleet file describes it. */
export interface DockerHostConfig {
  name: string;
  /** `unix:///path`, `tcp://host:port` or `ssh://user@host[:port]`. */
  docker: string;
  /** Client TLS for `tcp://` (paths to PEM files). */
  tls?: { ca: string; cert: string; key: string } | undefined;
  /** For `ssh://`: the private key to log in with (default: the agent, else ~/.ssh/id_*). */
  ssh?: { identityFile: string } | undefined;
}

function runtimeError(code: ErrorCode, message: string, cause: unknown, hint?: string): FleetrollError {
  return new FleetrollError(code, message, hint === undefined ? { cause } : { cause, hint });
}

/** dockerode's options plus the docker-modem ones its types leave out. */
export type DockerConnectOptions = Dockerode.DockerOptions & { agent?: Agent | undefined; pathPrefix?: string | undefined };

/**
 * dockerode options for an endpoint URL. Every connection key is set so DOCKER_HOST & co
 * (DOCKER_CERT_PATH, DOCKER_PATH_PREFIX, DOCKER_CLIENT_TIMEOUT) cannot leak in.
 * `ssh://` goes through SshDockerAgent (one shared SSH connection, host key checked
 * against known_hosts), not docker-modem's ssh support: see ./ssh.ts for why.
 */
export function dockerOptions(host: DockerHostConfig): DockerConnectOptions {
  const endpoint = host.docker;
  const where = `hosts[${host.name}]/docker`;
  const invalid = (msg: string) => new FleetrollError('E_INVALID', `${where}: ${msg}`);
  const base: DockerConnectOptions = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    username: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
    agent: undefined,
    pathPrefix: undefined,
    timeout: undefined,
  };
  if (endpoint.startsWith('unix://')) {
    const socketPath = endpoint.slice('unix://'.length);
    if (!socketPath.startsWith('/')) throw invalid(`${JSON.stringify(endpoint)}: expected unix:///absolute/path`);
    return { ...base, socketPath, protocol: 'http' };
  }
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw invalid(`${JSON.stringify(endpoint)} is not a URL (unix:///path, tcp://host:port or ssh://user@host)`);
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!hostname) throw invalid(`${JSON.stringify(endpoint)} has no host name`);
  if (url.protocol === 'tcp:') {
    if (host.tls) {
      const read = (what: string, file: string) => {
        try {
          return readFileSync(file);
        } catch (err) {
          throw new FleetrollError(
            'E_INVALID',
            `hosts[${host.name}]/tls/${what}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`,
            { cause: err },
          );
        }
      };
      return {
        ...base,
        host: hostname,
        port: url.port || '2376',
        protocol: 'https',
        ca: read('ca', host.tls.ca),
        cert: read('cert', host.tls.cert),
        key: read('key', host.tls.key),
      };
    }
    return { ...base, host: hostname, port: url.port || '2375', protocol: 'http' };
  }
  if (url.protocol === 'ssh:') {
    const username = decodeURIComponent(url.username) || userInfo().username;
    const port = Number(url.port || '22');
    // Plain HTTP spoken over the agent's dial-stdio channels; host/port only name it in URLs.
    return { ...base, host: hostname, port, protocol: 'http', agent: new SshDockerAgent({ host: hostname, port, username, ...(host.ssh ? { identityFile: host.ssh.identityFile } : {}) }) };
  }
  throw invalid(`unsupported scheme ${JSON.stringify(url.protocol)} in ${JSON.stringify(endpoint)} (use unix://, tcp:// or ssh://)`);
}

/** What the TLS errors a misconfigured tcp:// host gives mean, in words (Node's codes; the ALERT ones are the engine refusing). */
const TLS_CODES: Record<string, string> = {
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "the engine's certificate is not signed by tls.ca",
  SELF_SIGNED_CERT_IN_CHAIN: "the engine's certificate is not signed by tls.ca",
  DEPTH_ZERO_SELF_SIGNED_CERT: "the engine's certificate is self-signed and not tls.ca",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "the engine's certificate is not signed by tls.ca",
  ERR_TLS_CERT_ALTNAME_INVALID: "the engine's certificate does not name this host (subjectAltName)",
  CERT_HAS_EXPIRED: "the engine's certificate has expired",
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'the engine does not accept tls.cert (not signed by the CA it trusts)',
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: 'the engine does not accept tls.cert',
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: 'the engine wants a client certificate',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the engine does not speak TLS there (drop tls, or use its TLS port)',
  EPROTO: 'TLS handshake failed',
  ECONNRESET: 'the engine closed the connection (does it listen with TLS there?)',
};

/** The `ssh` command line that reaches an ssh:// endpoint, for hints. */
function sshCommand(endpoint: string): string {
  try {
    const u = new URL(endpoint);
    return `ssh ${u.port ? `-p ${u.port} ` : ''}${u.username ? `${decodeURIComponent(u.username)}@` : ''}${u.hostname}`;
  } catch {
    return 'ssh';
  }
}

/** Docker's container name, without the leading slash. */
function cleanName(name: string | undefined): string {
  return (name ?? '').replace(/^\//, '');
}

interface NetworkLike {
  IPAddress?: string;
}

/** "ip:port" from the first network with an IP, or undefined. */
function addressFrom(networks: Record<string, NetworkLike> | undefined, labels: Record<string, string>, preferred?: string): string | undefined {
  const port = labels[LABELS.port];
  if (!port || !networks) return undefined;
  const pick = (preferred && networks[preferred]?.IPAddress) || Object.values(networks).find((n) => n?.IPAddress)?.IPAddress;
  return pick ? `${pick}:${port}` : undefined;
}

/** Exit code from a listContainers Status such as "Exited (137) 3 seconds ago". */
function exitCodeFromStatus(status: string | undefined): number | undefined {
  const m = /\((-?\d+)\)/.exec(status ?? '');
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

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
    const DockerodeClass = createRequire(import.meta.url)('dockerode') as typeof Dockerode;
    this.docker = new DockerodeClass(dockerOptions(host) as Dockerode.DockerOptions);
  }

  private get where(): string {
    return `Docker host ${this.host} (${this.endpoint})`;
  }

  async ping(timeoutMs = 5000): Promise<void> {
    const ssh = (this.docker.modem as { agent?: unknown }).agent;
    if (ssh instanceof SshDockerAgent) ssh.lastProblem = undefined;
    try {
      // dockerode forwards abortSignal to the request; @types/dockerode does not declare the option.
      const ping = this.docker.ping.bind(this.docker) as unknown as (opts: { abortSignal: AbortSignal }) => Promise<unknown>;
      await ping({ abortSignal: AbortSignal.timeout(timeoutMs) });
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      // Over ssh, a channel that closes before the answer is "socket hang up": the agent knows why.
      const sshProblem = ssh instanceof SshDockerAgent ? ssh.lastProblem : undefined;
      const detail =
        e?.name === 'AbortError' || e?.name === 'TimeoutError'
          ? `no answer within ${timeoutMs} ms${sshProblem ? ` (${sshProblem})` : ''}`
          : sshProblem
            ? sshProblem
            : e?.code
              ? `${e.code}${this.tls && TLS_CODES[e.code] ? ` (${TLS_CODES[e.code]})` : ''}`
              : engineMessage(err);
      const hint = this.endpoint.startsWith('unix://')
        ? 'is dockerd running? try: sudo dockerd, or scripts/setup-host.sh'
        : this.endpoint.startsWith('ssh://')
          ? `check that \`${sshCommand(this.endpoint)} docker version\` works without a prompt (key in an ssh-agent, host in ~/.ssh/known_hosts) and that dockerd runs there`
          : 'is dockerd listening on that address (and TLS configured to match)?';
      throw runtimeError('E_DOCKER_UNREACHABLE', `cannot reach ${this.where}: ${detail}; ${hint}`, err, hint);
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
    return containers.map((c) => {
      const labels = c.Labels ?? {};
      const running = c.State === 'running';
      return {
        id: c.Id,
        name: cleanName(c.Names?.[0]),
        host: this.host,
        labels,
        state: c.State,
        running,
        exitCode: running ? undefined : exitCodeFromStatus(c.Status),
        address: running
          ? labels[LABELS.publishAddress]
            ? publishedAddress(labels, c.Ports?.find((p) => String(p.PrivatePort) === labels[LABELS.port] && p.PublicPort)?.PublicPort)
            : addressFrom(c.NetworkSettings?.Networks as Record<string, NetworkLike>, labels)
          : undefined,
      };
    });
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
    if (!info) return undefined;
    const labels: Record<string, string> = { ...(info.Config?.Labels ?? {}), ...(port !== undefined && !info.Config?.Labels?.[LABELS.port] ? { [LABELS.port]: String(port) } : {}) };
    const running = info.State?.Running === true;
    return {
      restartCount: info.RestartCount ?? 0,
      id: info.Id,
      name: cleanName(info.Name),
      host: this.host,
      labels,
      state: info.State?.Status ?? 'unknown',
      running,
      exitCode: running ? undefined : info.State?.ExitCode,
      address: running
        ? labels[LABELS.publishAddress]
          ? publishedAddress(labels, (info.NetworkSettings?.Ports as Record<string, { HostPort?: string }[] | null> | undefined)?.[`${labels[LABELS.port]}/tcp`]?.[0]?.HostPort)
          : addressFrom(info.NetworkSettings?.Networks as Record<string, NetworkLike>, labels, info.HostConfig?.NetworkMode)
        : undefined,
    };
  }

  /** True when an inspect succeeds, false on 404; anything else is an error naming what was asked. */
  private async present(what: string, inspect: () => Promise<unknown>): Promise<boolean> {
    try {
      await inspect();
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw runtimeError('E_DOCKER', `inspecting ${what} on ${this.where}: ${engineMessage(err)}`, err);
    }
  }

  /**
   * `docker pull`, with `auth` as the engine's X-Registry-Auth header for a
   * private registry; undefined when the engine has the image afterwards,
   * else its reason. The reason is the engine's message, which names the
   * registry and never the credentials.
   */
  async pullImage(image: string, auth?: RegistryAuth): Promise<string | undefined> {
    try {
      const stream = (await this.docker.pull(image, auth ? { authconfig: { ...auth } } : {})) as NodeJS.ReadableStream;
      await new Promise<void>((resolve, reject) => this.docker.modem.followProgress(stream, (err: unknown) => (err ? reject(err) : resolve())));
    } catch (err) {
      return engineMessage(err);
    }
    return (await this.imageExists(image)) ? undefined : 'the engine reported success but does not have the image';
  }

  /** `docker save` as a stream (the image's layers as a tar). */
  async saveImage(image: string): Promise<NodeJS.ReadableStream> {
    try {
      return await this.docker.getImage(image).get();
    } catch (err) {
      throw runtimeError('E_DOCKER', `exporting image ${image} from ${this.where}: ${engineMessage(err)}`, err);
    }
  }

  /** `docker load` from a stream; resolves when the engine has the image. */
  async loadImage(tar: NodeJS.ReadableStream): Promise<void> {
    let res: NodeJS.ReadableStream;
    try {
      res = await this.docker.loadImage(tar);
    } catch (err) {
      throw runtimeError('E_DOCKER', `loading an image into ${this.where}: ${engineMessage(err)}`, err);
    }
    // The answer is a stream of JSON progress messages; an error arrives as one of them.
    let text = '';
    for await (const chunk of res) text += chunk.toString();
    const failed = text.split('\n').map((l) => l.trim()).filter(Boolean).map((l) => { try { return JSON.parse(l) as { error?: string }; } catch { return {}; } }).find((m) => m.error);
    if (failed?.error) throw runtimeError('E_DOCKER', `loading an image into ${this.where}: ${failed.error}`, failed);
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
    const labels = { ...spec.labels, ...(spec.port !== undefined ? { [LABELS.port]: String(spec.port) } : {}), ...(spec.publishAddress ? { [LABELS.publishAddress]: spec.publishAddress } : {}) };
    let container: Dockerode.Container;
    try {
      container = await retryTransient(
        `creating container ${spec.name} (image ${spec.image}) on ${this.where}`,
        async (attempt) => {
          try {
            return await this.docker.createContainer(
              dockerCreateBody(
                { name: spec.name, image: spec.image, env: spec.env, labels, port: spec.port, network, stopTimeoutSeconds: spec.stopTimeoutSeconds, publishAddress: spec.publishAddress, secretSources: spec.secretSources },
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
        throw runtimeError(missing ? 'E_NETWORK_MISSING' : 'E_DOCKER', `connecting container ${spec.name} to network ${n.name} on ${this.where}: ${missing ? 'no such network' : engineMessage(err)}`, err, missing ? `create it on that host: docker network create ${n.name}` : undefined);
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

  async imageInfo(ref: string): Promise<ImageInfo | undefined> {
    try {
      const info = await this.docker.getImage(ref).inspect();
      const test = (info.Config as { Healthcheck?: { Test?: string[] } } | undefined)?.Healthcheck?.Test;
      return { id: info.Id, repoDigests: info.RepoDigests ?? [], healthcheck: Array.isArray(test) && test.length > 0 && test[0] !== 'NONE' };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw runtimeError('E_DOCKER', `inspecting image ${ref} on ${this.where}: ${engineMessage(err)}`, err);
    }
  }

  imageExists(image: string): Promise<boolean> {
    return this.present(`image ${image}`, () => this.docker.getImage(image).inspect());
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
          HostConfig: { NetworkMode: 'none', Mounts: left.map((p, i) => ({ Type: 'bind' as const, Source: p, Target: `/fleetroll-bind-check/${i}`, ReadOnly: true })) },
        });
        return missing;
      } catch (err) {
        const msg = engineMessage(err);
        const named = left.find((p) => msg.includes(p));
        if (!/does not exist|no such file/i.test(msg) || named === undefined) throw runtimeError('E_DOCKER', `checking bind sources on ${this.where}: ${msg}`, err);
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
      timer = setTimeout(() => reject(runtimeError('E_EXEC_TIMEOUT', `\`${cmd.join(' ')}\` in container ${id} on ${this.where} did not exit within ${timeoutMs} ms`, undefined)), timeoutMs);
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

/**
 * Splits Docker's multiplexed stream (8-byte frame headers) into `stdout` and
 * `stderr` chunks with dockerode's own demuxer, which passes output that is not
 * multiplexed (TTY) through as stdout. Resolves when the stream ends.
 */
function demux(docker: Dockerode, stream: NodeJS.ReadableStream, stdout: Buffer[], stderr: Buffer[]): Promise<void> {
  const sink = (chunks: Buffer[]) => ({ write: (c: Buffer) => chunks.push(Buffer.from(c)) > 0 }) as unknown as NodeJS.WritableStream;
  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const done = (err?: Error) => {
      if (settled) return;
      settled = true;
      if (err) reject(err);
      else resolve();
    };
    stream.on('end', () => done());
    stream.on('close', () => done());
    stream.on('error', (e: Error) => done(e));
    docker.modem.demuxStream(stream as Readable, sink(stdout), sink(stderr));
  });
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

export interface ExecResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

function containerError(err: unknown, container: string, doing: string): FleetrollError {
  const status = statusOf(err);
  const msg = engineMessage(err);
  if (status === 404 && /no such container/i.test(msg)) {
    return runtimeError('E_CONTAINER_MISSING', `${doing}: container ${container} does not exist`, err);
  }
  if (status === 409) {
    return runtimeError('E_CONTAINER_NOT_RUNNING', `${doing}: container ${container} is not running (${msg})`, err);
  }
  return runtimeError('E_DOCKER', `${doing} in container ${container}: ${msg}`, err);
}

/**
 * Run `cmd` (argument array, no shell) in a running container; capture exit code,
 * stdout and stderr. A non-zero exit is a result, not an error; a missing or stopped
 * container is a FleetrollError (E_CONTAINER_MISSING / E_CONTAINER_NOT_RUNNING).
 */
export async function execIn(docker: Dockerode, container: string, cmd: string[]): Promise<ExecResult> {
  const doing = `running \`${cmd.join(' ')}\``;
  let exec: Dockerode.Exec;
  let stream: NodeJS.ReadableStream;
  try {
    exec = await docker.getContainer(container).exec({ Cmd: cmd, AttachStdout: true, AttachStderr: true, Tty: false });
    stream = await exec.start({ hijack: true, stdin: false });
  } catch (err) {
    throw containerError(err, container, doing);
  }
  const out: Buffer[] = [];
  const errs: Buffer[] = [];
  await demux(docker, stream, out, errs).catch((err: Error) => {
    throw runtimeError('E_DOCKER', `${doing} in container ${container}: ${err.message}`, err);
  });
  // The stream can end a moment before the engine records the exit code.
  let exitCode: number | null | undefined;
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect().catch((err: unknown) => {
      throw containerError(err, container, doing);
    });
    exitCode = info.ExitCode;
    if (!info.Running && typeof exitCode === 'number') break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return { exitCode: typeof exitCode === 'number' ? exitCode : -1, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(errs).toString('utf8') };
}

function checkAbsolute(absPath: string): void {
  if (!posix.isAbsolute(absPath) || absPath.endsWith('/')) {
    throw new FleetrollError('E_INVALID', `expected an absolute file path, got ${JSON.stringify(absPath)}`);
  }
}

/**
 * Write one file into a container (running or just created) through the archive API:
 * an in-memory tar with a single entry, extracted into the file's directory (which must
 * exist). The engine replaces an existing file (unlink + create), owner root:root.
 */
export async function putFile(docker: Dockerode, container: string, absPath: string, content: string, mode = 0o644): Promise<void> {
  checkAbsolute(absPath);
  const tar = await createTar({ name: posix.basename(absPath), content, mode });
  try {
    await docker.getContainer(container).putArchive(tar, { path: posix.dirname(absPath) });
  } catch (err) {
    const status = statusOf(err);
    const msg = engineMessage(err);
    if (status === 404 && !/no such container/i.test(msg)) {
      throw runtimeError('E_PUT_FILE', `writing ${absPath} in container ${container}: directory ${posix.dirname(absPath)} does not exist (${msg})`, err);
    }
    throw containerError(err, container, `writing ${absPath}`);
  }
}

/** The raw tar entry for `absPath` in `container`, following symlinks; undefined when the file does not exist. */
export async function getFileEntry(docker: Dockerode, container: string, absPath: string, depth = 0): Promise<TarEntry | undefined> {
  checkAbsolute(absPath);
  let stream: NodeJS.ReadableStream;
  try {
    stream = await docker.getContainer(container).getArchive({ path: absPath });
  } catch (err) {
    const status = statusOf(err);
    const msg = engineMessage(err);
    if (status === 404 && !/no such container/i.test(msg)) return undefined;
    throw containerError(err, container, `reading ${absPath}`);
  }
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer | string>) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  const entry = (await readTar(Buffer.concat(chunks)))[0];
  if (!entry) return undefined;
  if (entry.type === 'symlink' && depth < 8) {
    const target = posix.resolve(posix.dirname(absPath), entry.linkname);
    return getFileEntry(docker, container, target, depth + 1);
  }
  if (entry.type !== 'file' && entry.type !== 'contiguous-file') {
    throw runtimeError('E_GET_FILE', `reading ${absPath} in container ${container}: not a regular file (${entry.type})`, undefined);
  }
  return entry;
}

/** One file's content (UTF-8) from a container; undefined when the file does not exist. */
export async function getFile(docker: Dockerode, container: string, absPath: string): Promise<string | undefined> {
  return (await getFileEntry(docker, container, absPath))?.content.toString('utf8');
}
