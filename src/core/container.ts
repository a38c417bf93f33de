/**
 * The container an instance runs, beyond image, env and port: everything a
 * team says today with `docker run` flags or a compose service, in one
 * normalized, Docker-ready shape (config/container.ts turns the fleet file's
 * compose-style spelling into it), and the mapping onto the Docker Engine
 * API's create body.
 *
 * PURE: no I/O. The mapping is data in, data out, so the unit tests pin
 * every field without an engine, and plan can show what a change would do.
 */

export interface MountSpec {
  type: 'bind' | 'volume' | 'tmpfs';
  /** Absolute host path (bind) or volume name (volume); absent for tmpfs. */
  source?: string | undefined;
  /** Absolute path in the container. */
  target: string;
  readOnly: boolean;
  /** volume: do not copy the image's content at the target into a new volume. */
  noCopy?: boolean | undefined;
  /** tmpfs: size limit in bytes. */
  sizeBytes?: number | undefined;
  /** tmpfs: file mode of the mount point. */
  mode?: number | undefined;
}

export interface UlimitSpec {
  name: string;
  soft: number;
  hard: number;
}

export interface HealthcheckSpec {
  /** Docker's form: ["CMD", ...], ["CMD-SHELL", "..."] or ["NONE"]. */
  test: string[];
  intervalMs?: number | undefined;
  timeoutMs?: number | undefined;
  retries?: number | undefined;
  startPeriodMs?: number | undefined;
  /** Probe interval during the start period (Docker API 1.44+; older engines ignore it). */
  startIntervalMs?: number | undefined;
}

/** A secret file mounted read-only at /run/secrets/<target>. */
export interface SecretMount {
  /** The secret's name (its definition in secretFiles). */
  name: string;
  /** File name under /run/secrets/. */
  target: string;
}

export interface ExtraNetwork {
  name: string;
  aliases: string[];
}

/** Every container field fleetroll sets beyond image, env, labels and port; all optional. */
export interface ContainerConfig {
  command?: string[] | undefined;
  entrypoint?: string[] | undefined;
  workingDir?: string | undefined;
  user?: string | undefined;
  mounts?: MountSpec[] | undefined;
  /** Path → Docker's tmpfs option string ("size=64m,mode=1777", may be empty). */
  tmpfs?: Record<string, string> | undefined;
  readOnly?: boolean | undefined;
  memoryBytes?: number | undefined;
  memoryReservationBytes?: number | undefined;
  nanoCpus?: number | undefined;
  pidsLimit?: number | undefined;
  restart?: { name: 'no' | 'always' | 'unless-stopped' | 'on-failure'; maxRetries?: number | undefined } | undefined;
  labels?: Record<string, string> | undefined;
  logging?: { driver: string; options: Record<string, string> } | undefined;
  /** "host:ip" entries. */
  extraHosts?: string[] | undefined;
  ulimits?: UlimitSpec[] | undefined;
  capAdd?: string[] | undefined;
  capDrop?: string[] | undefined;
  stopSignal?: string | undefined;
  shmSizeBytes?: number | undefined;
  sysctls?: Record<string, string> | undefined;
  devices?: { host: string; container: string; permissions: string }[] | undefined;
  /** GPU request: every GPU, or this many. */
  gpus?: 'all' | number | undefined;
  networks?: ExtraNetwork[] | undefined;
  healthcheck?: HealthcheckSpec | { disable: true } | undefined;
  secrets?: SecretMount[] | undefined;
  /** Validated extra Docker create options, merged last (config/container.ts says which keys). */
  createOptions?: Record<string, unknown> | undefined;
}

/**
 * The defaults fleetroll applies where the fleet file is silent. A restart
 * policy, because a container that crashes at night should not stay dead
 * until the next deploy (Kamal's default too); a capped json-file log,
 * because Docker's default log grows until the disk is full.
 */
export const CONTAINER_DEFAULTS = {
  restart: { name: 'unless-stopped' as const },
  logging: { driver: 'json-file', options: { 'max-size': '10m', 'max-file': '3' } },
};

/** Where secret files are mounted in the container, as compose does. */
export const SECRETS_DIR = '/run/secrets';

/** What the Docker create body needs besides the container config. */
export interface CreateBase {
  name: string;
  image: string;
  env: Record<string, string>;
  labels: Record<string, string>;
  /** The app's port; undefined for a service with no port (a worker). */
  port?: number | undefined;
  network: string;
  stopTimeoutSeconds: number;
  publishAddress?: string | undefined;
  /** Host paths of the secret files, by secret name (written by the runtime before create). */
  secretSources?: Record<string, string> | undefined;
}

const ms = (v: number | undefined) => (v === undefined ? undefined : Math.round(v * 1e6));

/**
 * The Docker Engine API's create body for one instance. Fields the fleet does
 * not set are left out, so Docker's (or the image's) own defaults apply.
 */
export function dockerCreateBody(base: CreateBase, c: ContainerConfig = {}): Record<string, unknown> {
  const restart = c.restart ?? CONTAINER_DEFAULTS.restart;
  const logging = c.logging ?? CONTAINER_DEFAULTS.logging;
  const mounts: Record<string, unknown>[] = (c.mounts ?? []).map((m) => ({
    Type: m.type,
    ...(m.source !== undefined ? { Source: m.source } : {}),
    Target: m.target,
    ReadOnly: m.readOnly,
    ...(m.type === 'volume' && m.noCopy ? { VolumeOptions: { NoCopy: true } } : {}),
    ...(m.type === 'tmpfs' && (m.sizeBytes !== undefined || m.mode !== undefined)
      ? { TmpfsOptions: { ...(m.sizeBytes !== undefined ? { SizeBytes: m.sizeBytes } : {}), ...(m.mode !== undefined ? { Mode: m.mode } : {}) } }
      : {}),
  }));
  for (const s of c.secrets ?? []) {
    const source = base.secretSources?.[s.name];
    if (source !== undefined) mounts.push({ Type: 'bind', Source: source, Target: `${SECRETS_DIR}/${s.target}`, ReadOnly: true });
  }
  const hostConfig: Record<string, unknown> = {
    Init: true,
    NetworkMode: base.network,
    RestartPolicy: {
      Name: restart.name,
      ...(restart.name === 'on-failure' && restart.maxRetries !== undefined ? { MaximumRetryCount: restart.maxRetries } : {}),
    },
    LogConfig: { Type: logging.driver, Config: logging.options },
    ...(mounts.length ? { Mounts: mounts } : {}),
    ...(c.tmpfs && Object.keys(c.tmpfs).length ? { Tmpfs: c.tmpfs } : {}),
    ...(c.readOnly ? { ReadonlyRootfs: true } : {}),
    ...(c.memoryBytes !== undefined ? { Memory: c.memoryBytes } : {}),
    ...(c.memoryReservationBytes !== undefined ? { MemoryReservation: c.memoryReservationBytes } : {}),
    ...(c.nanoCpus !== undefined ? { NanoCpus: c.nanoCpus } : {}),
    ...(c.pidsLimit !== undefined ? { PidsLimit: c.pidsLimit } : {}),
    ...(c.extraHosts?.length ? { ExtraHosts: c.extraHosts } : {}),
    ...(c.ulimits?.length ? { Ulimits: c.ulimits.map((u) => ({ Name: u.name, Soft: u.soft, Hard: u.hard })) } : {}),
    ...(c.capAdd?.length ? { CapAdd: c.capAdd } : {}),
    ...(c.capDrop?.length ? { CapDrop: c.capDrop } : {}),
    ...(c.shmSizeBytes !== undefined ? { ShmSize: c.shmSizeBytes } : {}),
    ...(c.sysctls && Object.keys(c.sysctls).length ? { Sysctls: c.sysctls } : {}),
    ...(c.devices?.length ? { Devices: c.devices.map((d) => ({ PathOnHost: d.host, PathInContainer: d.container, CgroupPermissions: d.permissions })) } : {}),
    ...(c.gpus !== undefined ? { DeviceRequests: [{ Driver: '', Count: c.gpus === 'all' ? -1 : c.gpus, Capabilities: [['gpu']] }] } : {}),
    // On another machine nginx cannot reach container IPs: publish the app
    // port on the host's address (a free port Docker picks).
    ...(base.publishAddress && base.port !== undefined ? { PortBindings: { [`${base.port}/tcp`]: [{ HostIp: base.publishAddress, HostPort: '' }] } } : {}),
  };
  const hc = c.healthcheck;
  // networks: naming hosts[].network itself (a compose service on the fleet's
  // network, with aliases): the runtime joins only the other networks, so its
  // aliases go on the endpoint made at create, or they would be lost.
  const ownAliases = [...new Set((c.networks ?? []).filter((n) => n.name === base.network).flatMap((n) => n.aliases))];
  const body: Record<string, unknown> = {
    name: base.name,
    Image: base.image,
    Env: Object.entries(base.env).map(([k, v]) => `${k}=${v}`),
    Labels: base.labels,
    ...(base.port !== undefined ? { ExposedPorts: { [`${base.port}/tcp`]: {} } } : {}),
    StopTimeout: base.stopTimeoutSeconds,
    ...(c.command ? { Cmd: c.command } : {}),
    ...(c.entrypoint ? { Entrypoint: c.entrypoint } : {}),
    ...(c.workingDir ? { WorkingDir: c.workingDir } : {}),
    ...(c.user ? { User: c.user } : {}),
    ...(c.stopSignal ? { StopSignal: c.stopSignal } : {}),
    ...(hc === undefined
      ? {}
      : 'disable' in hc
        ? { Healthcheck: { Test: ['NONE'] } }
        : {
            Healthcheck: {
              Test: hc.test,
              ...(hc.intervalMs !== undefined ? { Interval: ms(hc.intervalMs) } : {}),
              ...(hc.timeoutMs !== undefined ? { Timeout: ms(hc.timeoutMs) } : {}),
              ...(hc.retries !== undefined ? { Retries: hc.retries } : {}),
              ...(hc.startPeriodMs !== undefined ? { StartPeriod: ms(hc.startPeriodMs) } : {}),
              ...(hc.startIntervalMs !== undefined ? { StartInterval: ms(hc.startIntervalMs) } : {}),
            },
          }),
    HostConfig: hostConfig,
    // Not here: the other `networks`. Engines before API 1.44 take one network
    // at create, so the runtime connects each extra one (with its aliases)
    // between create and start (adapters/docker.ts).
    ...(ownAliases.length ? { NetworkingConfig: { EndpointsConfig: { [base.network]: { Aliases: ownAliases } } } } : {}),
  };
  return mergeCreateOptions(body, c.createOptions);
}

/** The escape hatch merged in: top-level keys replace, HostConfig keys merge one level deep. */
function mergeCreateOptions(body: Record<string, unknown>, extra: Record<string, unknown> | undefined): Record<string, unknown> {
  if (!extra) return body;
  const { HostConfig: extraHost, ...rest } = extra as { HostConfig?: Record<string, unknown> };
  return { ...body, ...rest, HostConfig: { ...(body.HostConfig as Record<string, unknown>), ...(extraHost ?? {}) } };
}

/** Named volumes the container mounts: created on each host when missing, never removed by fleetroll. */
export function namedVolumes(c: ContainerConfig | undefined): string[] {
  return [...new Set((c?.mounts ?? []).filter((m) => m.type === 'volume' && m.source !== undefined).map((m) => m.source!))];
}

/** Bind sources that must exist on every host before anything is touched. */
export function bindSources(c: ContainerConfig | undefined): string[] {
  return [...new Set((c?.mounts ?? []).filter((m) => m.type === 'bind' && m.source !== undefined).map((m) => m.source!))];
}
