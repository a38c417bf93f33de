/**
 * The interfaces between the rollout engine and the outside world. The engine
 * (src/engine) only talks to these; src/adapters implements them with
 * dockerode, nginx and HTTP. Keeping them small is what lets one engine serve
 * real deploys and rehearsals alike.
 */
import type { ContainerConfig } from './core/container.js';
import type { SecretRef } from './config/secrets.js';
import type { DeployHealthReport } from './core/deployHealth.js';
import type { UpstreamEntry } from './core/upstream.js';
import type { StepCosts } from './core/stepCosts.js';

// Re-exported: the label contract travels with the ports (InstanceInfo.labels carries it), and their users import it from here.
export { LABELS } from './labels.js';

/**
 * Credentials for one registry, as the Docker engine takes them
 * (X-Registry-Auth). The password is a secret: never in a message or an event.
 */
export interface RegistryAuth {
  /** The registry host[:port] the credentials belong to. */
  serveraddress: string;
  username?: string | undefined;
  password?: string | undefined;
  /** An OAuth refresh token (docker login against some registries stores one instead of a password). */
  identitytoken?: string | undefined;
}

/** Looks up the credentials for a registry host (~/.docker/config.json); undefined when there are none. */
export type RegistryCredentials = (server: string) => Promise<RegistryAuth | undefined>;

/** What the engine knows of one image reference. */
export interface ImageInfo {
  /** The image ID, "sha256:..." (the same on every engine that has this build, pulled or loaded). */
  id: string;
  /** The image defines a HEALTHCHECK (readiness `{ healthcheck: true }` needs one, or the fleet's). */
  healthcheck?: boolean | undefined;
  /** "repo@sha256:..." for each registry the engine pulled it from or pushed it to. */
  repoDigests: string[];
}

/** What to run for one instance. */
export interface InstanceSpec {
  /** Container name, unique on its host. */
  name: string;
  image: string;
  /** Environment for the container. Values are secrets as far as logs go. */
  env: Record<string, string>;
  /** The app's port inside the container; undefined for a service nothing connects to (a worker). */
  port?: number | undefined;
  /** Docker network to join (must exist); undefined = the default bridge. */
  network?: string | undefined;
  labels: Record<string, string>;
  /** Seconds between SIGTERM and SIGKILL on stop (`--stop-timeout`). */
  stopTimeoutSeconds: number;
  /** Publish the app port on this host address; the instance's address is then addr:hostPort. */
  publishAddress?: string | undefined;
  /** Every other container field (command, mounts, limits, restart policy, ...). */
  container?: ContainerConfig | undefined;
  /** Secret files to mount under /run/secrets, by secret name: absolute paths on the host. */
  secretSources?: Record<string, string> | undefined;
}

/** One container as Docker reports it. */
export interface InstanceInfo {
  id: string;
  name: string;
  host: string;
  labels: Record<string, string>;
  /** Docker state: running, exited, created, restarting, dead, ... */
  state: string;
  running: boolean;
  /** Exit code when not running. */
  exitCode?: number | undefined;
  /** Address nginx and the prober use, "ip:port"; undefined when not running. */
  address?: string | undefined;
  /** How often the engine restarted it (its restart policy); only from inspect. A growing count is a crash loop. */
  restartCount?: number | undefined;
}

/** One Docker host ("VM"). Every call is idempotent where Docker allows. */
export interface Runtime {
  readonly host: string;
  /** Fails with a clear message when the engine is not reachable. */
  ping(): Promise<void>;
  /** One container by id or name (undefined when gone); `port` is the app port of an adopted container. */
  inspect(id: string, port?: number): Promise<InstanceInfo | undefined>;
  /** Containers (any state) carrying every given label. */
  list(labels: Record<string, string>): Promise<InstanceInfo[]>;
  /** Create and start a container; resolves once it is running (not ready). */
  run(spec: InstanceSpec): Promise<InstanceInfo>;
  /** Graceful stop: SIGTERM, SIGKILL after the timeout. Already stopped or gone is success. */
  stop(id: string, timeoutSeconds: number): Promise<void>;
  /** Remove a (stopped) container. Already gone is success. */
  remove(id: string): Promise<void>;
  imageExists(image: string): Promise<boolean>;
  networkExists(name: string): Promise<boolean>;
  /** `docker save` / `docker load` through the API: how an image reaches a host without a registry. */
  saveImage(image: string): Promise<NodeJS.ReadableStream>;
  /** `docker pull` on the engine (with `auth` for a private registry): undefined when the image is there after it, else the engine's reason. */
  pullImage(image: string, auth?: RegistryAuth): Promise<string | undefined>;
  /** The image ID and registry digests of a reference (tag, digest or ID); undefined when the engine does not have it. Runtimes without it are not pinned. */
  /** The image's ID, registry digests and whether it has a HEALTHCHECK; undefined when the engine does not have it. */
  imageInfo?(ref: string): Promise<ImageInfo | undefined>;
  loadImage(tar: NodeJS.ReadableStream): Promise<void>;
  /** Creates a named volume unless it exists; fleetroll never removes one. Optional: a runtime without volumes skips it. */
  ensureVolume?(name: string, labels: Record<string, string>): Promise<void>;
  /** The given bind sources that do not exist on the host (checked with `image`, which the host has). */
  missingBindSources?(image: string, paths: readonly string[]): Promise<string[]>;
  /** Last lines of a container's output, for failure reports. */
  logs(id: string, tail: number): Promise<string>;
  /**
   * The image and environment a container was created with, to rebuild the
   * spec of an earlier revision for a rollback. Undefined when it is gone.
   * The env holds secrets: never log it.
   */
  specOf(id: string): Promise<{ image: string; env: Record<string, string> } | undefined>;
  /**
   * The container's health as Docker reports it (State.Health.Status); "none"
   * when it has no healthcheck. Throws when the container is gone.
   */
  health(id: string): Promise<ContainerHealth>;
  /**
   * Runs an argument array (no shell) inside the running container and
   * resolves to its exit code; rejects when it does not finish within
   * timeoutMs or the container is gone.
   */
  exec(id: string, cmd: readonly string[], timeoutMs: number): Promise<number>;
  /** The image ID a container was created from; undefined when it is gone. */
  containerImage(id: string): Promise<string | undefined>;
  /**
   * Optional: follows the engine's events for containers carrying every label
   * (adapters/dockerEvents.ts); returns the closer. `onEvent` gets each event,
   * and once, with `stream` set, the end of a stream that was open ('ended':
   * its engine stopped or restarted) or the engine's refusal to open one
   * ('refused'); the caller subscribes again. A runtime without it is looked at.
   */
  events?(labels: Record<string, string>, onEvent: (stream?: 'ended' | 'refused', e?: ContainerEvent) => void): () => void;
  /** Optional: sets the container's restart policy to "no", so that its engine does not bring it back (a crash in its monitor window). Gone is success. */
  disableRestart?(id: string): Promise<void>;
}

/**
 * One event of a container, as its engine reported it. `action` is Docker's:
 * die, kill, stop, pause, unpause, oom, start, destroy, health_status: unhealthy,
 * disconnect, connect. A network (dis)connect names the container by id only.
 */
export interface ContainerEvent {
  action: string;
  /** The container's id. */
  id: string;
  /** Its name, where the event carries it (not for a network event). */
  name?: string | undefined;
  /** die: the exit code. */
  exitCode?: number | undefined;
  /** kill: the signal's name or number, as Docker gives it. */
  signal?: string | undefined;
}

export type ContainerHealth = 'healthy' | 'unhealthy' | 'starting' | 'none';

/** An upstream file as the engine writes it: its text and the servers it lists, each spelled out when first asked. */
export interface UpstreamFile {
  text(): string;
  servers(): readonly UpstreamEntry[];
  /**
   * What changed since an earlier file of the same writer, in order (the last
   * change of an address wins: its entry after it, none = no longer listed),
   * or undefined when the writer cannot say. For a reader whose addresses are
   * each listed once (the simulated world's), so a reload costs its changes.
   */
  changesSince?(earlier: UpstreamFile): Iterable<{ address: string; after: UpstreamEntry | undefined }> | undefined;
}

/** One nginx load balancer. */
export interface Router {
  /** Human name for messages, e.g. "nginx fleetroll-demo-nginx on local". */
  readonly name: string;
  /** Fails when nginx cannot be reached or its current config does not pass `nginx -t`. */
  check(): Promise<void>;
  /** The upstream file's current content, or undefined when it does not exist. */
  read(): Promise<string | undefined>;
  /** Write the file (atomically where possible), `nginx -t`; on failure put the previous content back and throw nginx's message. */
  writeAndTest(content: string): Promise<void>;
  /**
   * Optional, in place of writeAndTest: the same file as the servers it lists
   * (every one, in order: core/upstream listsOnlyServers) and its text, both on demand,
   * for a router that reads servers rather than nginx config. The simulated
   * nginx has it, so a reload per instance costs neither rendering nor parsing
   * the whole fleet's file; a real nginx needs the text and leaves it out.
   */
  writeServers?(file: UpstreamFile): Promise<void>;
  /** `nginx -s reload`: new workers take the new config, old ones finish in-flight requests. */
  reload(): Promise<void>;
  /**
   * Optional: write and reload a change that only marks servers down in what nginx runs now (the watch's eject),
   * with `nginx -t` only if nginx refuses it; the file is then put back and nginx's message thrown. A router without
   * it gets writeAndTest + reload.
   */
  writeAndReloadTrusted?(content: string): Promise<void>;
  /** True where reload() only changes membership, with no nginx reload (the dynamic mode): none is counted. */
  readonly reloadFree?: boolean;
  /** Optional (the dynamic mode): requests in flight on each server marked down, as nginx counts them; a drain ends at 0. */
  inFlight?(): Promise<ReadonlyMap<string, number> | undefined>;
  /** Optional: what the last write + test and reload cost, by part (ChangeParts), for the upstream events and the log. */
  lastChange?(): ChangeParts | undefined;
  /**
   * `nginx -T`: the whole configuration nginx would load, every included file
   * with it, for checks that read how the user's nginx.conf uses what
   * fleetroll writes. Optional: a router that cannot show it skips them.
   */
  config?(): Promise<string>;
}

/**
 * One load-balancer change by part, in ms (absent: did not happen). Raw: file, `nginx -t`, `nginx -s reload` or
 * SIGHUP (Docker's kill API, nginx as PID 1). Not raw: workers (the list from before), confirm (until every
 * worker is new) and, of it, handover (first new worker to last old one gone: nginx's own 100 ms hold).
 */
export interface ChangeParts {
  file?: number | undefined;
  'nginx -t'?: number | undefined;
  workers?: number | undefined;
  'nginx -s reload'?: number | undefined;
  SIGHUP?: number | undefined;
  confirm?: number | undefined;
  handover?: number | undefined;
  /** Dynamic mode: from the call (the peers file's write starting) to nginx's Lua having the set in force, by nginx's clock. */
  inForce?: number | undefined;
}

/** The instance a readiness probe looks at: a healthcheck or exec probe reaches the container through its host's Runtime. */
export interface ProbeTarget {
  /** Docker's container id (or its name: both are unique on the host). */
  id: string;
  host: string;
  /** "ip:port" for HTTP and TCP probes; undefined for a container without a port or network address. */
  address?: string | undefined;
}

/** Readiness and version probes (HTTP, TCP, Docker healthcheck or exec: adapters/probes.ts). */
export interface Prober {
  /** True when the readiness probe passes now (HTTP 2xx, a TCP connect, Docker's "healthy", exit code 0) within the timeout. */
  ready(target: ProbeTarget): Promise<boolean>;
  /**
   * The version the instance reports (trimmed body of the version path); throws when the fleet has no version endpoint.
   * When the instance answered with another HTTP status than 2xx, the error carries it as `status`.
   */
  version(address: string): Promise<string>;
}

/** Time, as a port: the engine never reads the system clock itself, so simulate and the tests run it on a virtual one. */
export interface Clock {
  now(): number;
  sleep(ms: number): Promise<void>;
  /** Calls fn after ms unless cancelled first (a pending timer must not keep a finished process alive). */
  timer(ms: number, fn: () => void): { cancel(): void };
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  timer: (ms, fn) => {
    const t = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(t) };
  },
};

/** Records a step of a rollout; never awaited in front of the step itself (see engine/journal.ts). */
export type Journal = (step: string, phase?: 'begin' | 'end', detail?: Record<string, unknown>) => void;

export type RolloutOutcome = 'in progress' | 'complete' | 'failed' | 'rolled back' | 'paused' | 'interrupted';

/**
 * Blue-green's switch as users saw it: in force (every nginx confirmed the
 * reload) and issued (nginx moves traffic between the two), and the same
 * for a switch back (undo, or a failed analysis). ISO times.
 */
export interface SwitchTimes {
  switchedAt?: string | undefined;
  switchIssuedAt?: string | undefined;
  switchedBackAt?: string | undefined;
  switchBackIssuedAt?: string | undefined;
}

export interface RevisionRecord extends SwitchTimes {
  /** 1, 2, 3, ... never reused. */
  number: number;
  /** The spec hash (the instances' fleetroll.revision label). */
  hash: string;
  image: string;
  /** The build `image` resolved to when the revision was deployed (repo@sha256:... or sha256:...); undo runs exactly it. */
  digest?: string | undefined;
  version: string;
  /** The app port; absent for a worker without one. */
  port?: number | undefined;
  /** The env entries written literally in the fleet file (undo recreates the revision from them); shown by name only. */
  env: Record<string, string>;
  /** The secret env entries (from a variable or an env file): where each came from and a digest, never the value. */
  envSecrets?: Record<string, SecretRef> | undefined;
  /** The container fields of the revision (core/container.ts), for undo and for `plan`'s field-by-field diff. */
  container?: ContainerConfig | undefined;
  /** Secret files: the path mounted and a digest of its content, by secret name. */
  secretFiles?: Record<string, { path: string; digest: string }> | undefined;
  restartedAt?: string | undefined;
  changeCause: string;
  who: string;
  when: string;
  outcome: RolloutOutcome;
  finishedAt?: string | undefined;
  message?: string | undefined;
  /**
   * The health numbers of the revision's last rollout, from the load
   * balancers' access logs (core/deployHealth.ts), or why they are
   * unavailable. Absent for rollouts before fleetroll measured them.
   */
  health?: DeployHealthReport | undefined;
}

export interface AdoptedInstance {
  id: string;
  name: string;
  host: string;
  port: number;
}

export interface FleetState {
  service: string;
  /** Random, made on the first rollout: keys the revision hash of a spec with secrets (engine/revision.ts). Never in a label or output. */
  revisionKey?: string | undefined;
  nextRevision: number;
  revisions: RevisionRecord[];
  /** What each kind of step cost in the last deploys (core/stepCosts.ts), bounded; simulate and plan price a rollout with it. */
  costs?: StepCosts | undefined;
  /** Set by `fleetroll restart`: part of the spec hash, so changing it replaces every instance. */
  restartedAt?: string | undefined;
  /** Set by `fleetroll pause`; a running deploy stops after its current wave. */
  paused?: boolean | undefined;
  /** Set by `fleetroll undo` while a blue-green rollout waits out scaleDownDelaySeconds: switch traffic back. */
  switchBack?: boolean | undefined;
  /** Set by `fleetroll promote`: a rollout waiting to be promoted (blue-green with autoPromote false) goes on. */
  promote?: boolean | undefined;
  /** Set by `fleetroll abort`: a canary rollout sends all traffic back to stable and removes the canary. */
  abort?: boolean | undefined;
  adopted?: AdoptedInstance[] | undefined;
}

export interface JournalEntry {
  at: string;
  rollout: string;
  step: string;
  phase?: 'begin' | 'end' | undefined;
  detail?: Record<string, unknown> | undefined;
}

export interface LockHolder {
  holder: string;
  pid: number;
  command: string;
  started: string;
}

export interface LockInfo extends LockHolder {
  /** Last lease renewal (ISO time); a holder that stopped renewing is gone. */
  lease: string;
  stale: boolean;
  /** The holder's note (FleetLockPort.note), with when it was left. */ note?: { at: string; text: string } | undefined;
}

/**
 * The fleet's state (revision history, pause flag, journal), kept with the
 * fleet (adapters/fleetState.ts: a volume on the first host) so every machine
 * pointed at the fleet reads the same history.
 */
export interface StateStore {
  /** The image the state container uses, or undefined when the fleet has no state yet. */
  image(): Promise<string | undefined>;
  /** An image that is always available on the state's host, for a fleet whose image is not there yet. */
  placeholderImage(): Promise<string>;
  /** Creates the state (idempotent); `image` is any image present on its host. */
  ensure(image: string): Promise<void>;
  read(): Promise<FleetState | undefined>;
  write(state: FleetState): Promise<void>;
  journal(): Promise<JournalEntry[]>;
  appendJournal(entries: JournalEntry[]): Promise<void>;
  /**
   * Optional: calls `onWrite` soon after anyone writes the state (another
   * process's undo, promote, abort or pause); returns a function that stops
   * it. Polls use it to look at once; they still poll, as it may miss one.
   */
  watch?(onWrite: () => void): () => void;
}

/** One rollout at a time per fleet, across machines. */
export interface FleetLockPort {
  /** Told when a stale lock is taken over. */
  onTakeover: ((previous: LockInfo) => void) | undefined;
  /** Takes the lock or throws (exit 3) naming the holder; waits up to waitMs for it. */
  acquire(image: string, command: string, waitMs?: number): Promise<void>;
  release(): Promise<void>;
  /** Who holds the lock now, if anyone (status). */
  info(): Promise<LockInfo | undefined>;
  /** Optional: a line the holder leaves with the lock for `status` (fleetroll watch: its last action). */ note?(text: string): Promise<void>;
  /**
   * Optional (a lock on a lease, etcd): tells `listener` once if the lock is
   * lost while held (its lease not renewed in time); returns a function that
   * stops telling. The session then stops the rollout after its step.
   */
  onLost?(listener: (why: string) => void): () => void;
}

/** What an access log reader noticed on the way; each number is a reason lines may be missing or late. */
export interface AccessLogCounters {
  /** The file was replaced under the reader (renamed away, or a new file at the path). */
  rotations: number;
  /** The file shrank or was rewritten in place (copytruncate, `> access.log`): read again from 0. */
  truncations: number;
  /** Rotations or truncations after which the rest of the old file could not be read: lines may be missing. */
  lostRotations: number;
  /** Lines dropped before read() returned them: longer than the line limit, or not fleetroll_json on a mixed stream. */
  skippedLines: number;
}

/**
 * One load balancer's access log, read incrementally during a rollout: each
 * read() returns the complete lines written since the previous one, in the
 * order nginx wrote them, each once. A line nginx is still writing waits for
 * the next read. Implementations (src/adapters/accessLog.ts): a file on this
 * machine, a file inside the nginx container, the container's own log stream.
 * Parse the lines with src/core/accessLog.ts.
 */
export interface AccessLogSource {
  /** For messages, e.g. "access log /var/log/nginx/access.log in container depwork-nginx". */
  readonly name: string;
  readonly counters: AccessLogCounters;
  read(): Promise<string[]>;
  /** Releases files and streams; read() after close() returns []. */
  close(): Promise<void>;
}
