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
import { runHook } from './hooks.js';
import { HostWork, mapBounded } from './hostWork.js';
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
  /** Records a step before ("begin") and after ("end") it happens, awaited. */
  journal?: Journal;
  /** Asked before each wave: true stops the rollout cleanly (exit 4). */
  paused?: () => Promise<boolean>;
  /** The last rollout did not finish (a crash): reload once even if the files look current. */
  recovering?: boolean;
  /** Where to copy a missing image from besides the fleet's hosts: the local engine. */
  imageSource?: Runtime;
  /** Containers taken over with `fleetroll adopt`: they carry no fleetroll labels. */
  adopted?: { instances: readonly { id: string; host: string; port: number }[]; revision: string; version: string };
}

export type Journal = (step: string, phase?: 'begin' | 'end', detail?: Record<string, unknown>) => Promise<void>;

/** Stopped by `fleetroll pause` between waves; the fleet is consistent. Exit code 4. */
export class PausedError extends FleetrollError {
  constructor(message: string) {
    super('E_PAUSED', ExitCode.paused, message, { hint: 'continue with `fleetroll resume -f <fleet>` (from any machine)' });
  }
}

/**
 * Fault injection for the crash tests: FLEETROLL_FAULT=kill-at:<point>[:<n>]
 * SIGKILLs this process the n-th time (default 1st) it reaches <point>. Points:
 * after-mark-down, before-reload, after-stop, waiting-for-readiness.
 */
const faultCounts = new Map<string, number>();
function faultPoint(point: string): void {
  const spec = process.env.FLEETROLL_FAULT;
  if (!spec) return;
  const [kind, at, nth] = spec.split(':');
  if (kind !== 'kill-at' || at !== point) return;
  const n = (faultCounts.get(point) ?? 0) + 1;
  faultCounts.set(point, n);
  if (n === Number(nth ?? 1)) process.kill(process.pid, 'SIGKILL');
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
  constructor(
    message: string,
    hint: string,
    readonly details: Record<string, unknown> = {},
    readonly phase: FailurePhase = 'rollout',
  ) {
    super('E_ROLLOUT_FAILED', ExitCode.rolloutFailed, message, { hint });
  }
}

interface Placement {
  total: Map<string, number>;
  fresh: Map<string, number>;
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
  /** Roll back to the previous revision on failure, whatever the fleet's onFailure says. */
  autoRollback?: boolean | undefined;
  /** Aborted on SIGINT/SIGTERM: the rollout finishes or undoes its step and stops cleanly. */
  signal?: AbortSignal | undefined;
  /** Copy the image to hosts that lack it (default true). */
  copyImages?: boolean | undefined;
}

/** Where a rollout failed: before anything changed, or during/after the change. */
export type FailurePhase = 'preflight' | 'preDeploy' | 'rollout';

/** Interrupted by a signal; the fleet was left consistent. Exit code 130. */
export class InterruptedError extends FleetrollError {
  constructor(message: string, hint: string) {
    super('E_INTERRUPTED', ExitCode.interrupted, message, { hint });
  }
}

export async function deploy(fleet: Fleet, deps: DeployDeps, options: DeployOptions = {}): Promise<DeployResult> {
  const rollout = new Rollout(fleet, deps, options);
  try {
    try {
      return await rollout.run();
    } catch (err) {
      // A host or nginx that fails mid-rollout (unreachable engine, refused
      // call) fails the rollout like a deadline does, so onFailure applies.
      if (err instanceof FleetrollError && !(err instanceof RolloutFailedError) && !(err instanceof InterruptedError) && !(err instanceof PausedError) && err.exitCode === ExitCode.rolloutFailed) {
        throw new RolloutFailedError(`rollout of ${fleet.service} to ${fleet.version} stopped: ${err.message}`, 'the instances on the other hosts keep serving; fix the host and deploy again to continue', { code: err.code });
      }
      throw err;
    }
  } catch (err) {
    const rollback = options.autoRollback === true || fleet.onFailure === 'rollback';
    if (!(err instanceof RolloutFailedError) || err.phase !== 'rollout' || !rollback) throw err;
    return rollBack(err, rollout, deps, options);
  }
}

/**
 * onFailure: rollback. Deploys the revision the fleet ran before, with the
 * same strategy limits, and still exits 1: the rollout failed, and the
 * message says so along with how the rollback went.
 */
async function rollBack(failure: RolloutFailedError, failed: Rollout, deps: DeployDeps, options: DeployOptions): Promise<never> {
  const emit = deps.events ?? (() => {});
  const previous = failed.previous;
  if (!previous) {
    throw new RolloutFailedError(`${failure.message}\nno rollback: there was no earlier revision running when the rollout started`, failure.hint ?? '', failure.details);
  }
  emit({ type: 'info', message: `rolling back to revision ${revisionOf(previous)} (${previous.image}, version ${previous.version})` });
  // A host that stopped answering (often why the rollout failed) cannot be
  // rolled back: roll back on the hosts that answer, and leave it out of
  // nginx, rather than fail the rollback too and leave every host mixed.
  const answers = await Promise.all([...deps.runtimes].map(async ([name, rt]) => [name, await rt.ping().then(() => true, () => false)] as const));
  const lost = answers.filter(([, ok]) => !ok).map(([name]) => name);
  const reachable = new Set(answers.filter(([, ok]) => ok).map(([name]) => name));
  let target = previous;
  let backDeps = deps;
  if (lost.length > 0 && reachable.size > 0) {
    target = { ...previous, hosts: previous.hosts.filter((h) => reachable.has(h.name)) };
    backDeps = { ...deps, runtimes: new Map([...deps.runtimes].filter(([name]) => reachable.has(name))) };
    emit({ type: 'info', message: `host ${lost.join(', ')} does not answer: rolling back on ${[...reachable].join(', ')} only` });
  }
  let back: DeployResult;
  try {
    back = await new Rollout(target, backDeps, { ...options, changeCause: `rollback after a failed rollout of ${failed.fleet.image}` }).run();
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new RolloutFailedError(`${failure.message}\nthe rollback to ${previous.image} failed too:\n${why}`, 'look at the instances with `docker ps`; fix and deploy a known-good image', failure.details);
  }
  throw new RolloutFailedError(
    `${failure.message}\nrolled back (onFailure: rollback): every instance${target === previous ? '' : ` on ${[...reachable].join(', ')}`} runs revision ${back.revision} (${previous.image}, version ${back.version}) again, verified; ${back.waves} wave(s), ${back.reloads} reload(s)` +
      (target === previous ? '' : `\nhost ${lost.join(', ')} did not answer: its instances were left as they are and out of nginx`),
    target === previous
      ? 'the fleet is back on the previous revision; fix the new version before deploying it again'
      : `bring ${lost.join(', ')} back, then deploy again: the next rollout brings its instances to the desired revision`,
    { ...failure.details, rolledBackTo: back.revision },
  );
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
  private needsRecoveryReload = false;
  private waves = 0;
  private started = 0;
  private lastProgress = 0;
  /** Every Docker call that changes a host goes through here: parallel between hosts, ordered on each. */
  private readonly work: HostWork;

  constructor(
    readonly fleet: Fleet,
    private readonly deps: DeployDeps,
    private readonly options: DeployOptions = {},
  ) {
    this.clock = deps.clock ?? systemClock;
    this.emit = deps.events ?? (() => {});
    this.revision = revisionOf(fleet);
    this.minReadyMs = fleet.minReadySeconds * 1000;
    this.work = new HostWork(fleet.hostParallelism);
    this.needsRecoveryReload = deps.recovering === true;
  }

  /** The fleet as it was before this rollout (its most common old revision), for a rollback. */
  previous: Fleet | undefined;

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
        this.previous = await this.previousFleet(live);
        first = false;
        await this.hook('preDeploy', live, 'preDeploy');
        if (await this.removeOrphans(live)) continue;
        if (this.needsRecoveryReload) await this.syncUpstream(live, 'final');
      }
      if (this.options.signal?.aborted) await this.stopCleanly(live);
      const w = nextWave({ revision: this.revision, replicas: this.fleet.replicas }, live.map((l) => l.observed), this.fleet.strategy);
      if (w.complete) {
        if (this.waves > 0) await this.hook('postWave', live);
        return await this.finish(live, t0);
      }
      const hasWork = w.stop.length + w.startNow + w.startAfterStops > 0;
      if (hasWork) {
        if (this.deps.paused && (await this.deps.paused())) await this.stopCleanly(live, 'paused');
        // The analysis gate for the wave before this one, now that its instances are in.
        if (this.waves > 0) await this.hook('postWave', live);
        await this.runWave(live, w.stop.map((o) => o.id), w.startNow, w.startAfterStops);
        continue;
      }
      // Nothing allowed until something becomes ready: keep the upstream in
      // step with readiness, and watch the deadline.
      await this.syncUpstream(live, 'enable');
      if (this.clock.now() - this.lastProgress > this.fleet.progressDeadlineSeconds * 1000) {
        throw await this.deadlineFailure(live);
      }
      faultPoint('waiting-for-readiness');
      await this.pause(this.fleet.probes.readiness.periodMs);
    }
  }

  /**
   * Before the first wave, remove what no rollout step would: containers
   * created but never started (only a crash between create and start leaves
   * them; run() cleans up its own failures), and instances of the target
   * revision that had already exited when this rollout began (a host that
   * restarted stops its containers). Counted as new instances, the exited ones
   * would block the rollout until its deadline; removed, they are replaced
   * under the strategy's limits. Instances that exit during this rollout stay,
   * as evidence for the deadline report.
   */
  private async removeOrphans(live: Live[]): Promise<boolean> {
    const stale = (l: Live) => l.info.state === 'created' || (!l.info.running && l.observed.revision === this.revision);
    const orphans = live.filter(stale);
    await settleAll(
      orphans.map((o) =>
        this.work.run(o.info.host, async () => {
          await this.runtime(o.info.host).remove(o.info.id);
          const why = o.info.state === 'created' ? 'created but never started (left by an interrupted rollout)' : `already ${o.info.state} when this rollout began (its host restarted, or it crashed); a new one replaces it`;
          this.emit({ type: 'info', message: `removed ${o.info.name} on ${o.info.host}: ${why}` });
          await this.journal('orphan-removed', 'end', { name: o.info.name });
        }),
      ),
    );
    return orphans.length > 0;
  }

  /** Sleeps, but wakes at once on an interrupt. */
  private pause(ms: number): Promise<void> {
    const signal = this.options.signal;
    if (!signal) return this.clock.sleep(ms);
    if (signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        signal.removeEventListener('abort', done);
        resolve();
      };
      signal.addEventListener('abort', done);
      void this.clock.sleep(ms).then(done);
    });
  }

  /**
   * On an interrupt between steps: nothing is draining any more, so write the
   * upstream as the fleet is (every ready instance in, none left down), and stop.
   */
  private async stopCleanly(live: Live[], reason: 'interrupted' | 'paused' = 'interrupted'): Promise<never> {
    this.draining.clear();
    await this.syncUpstream(live, 'final');
    const fresh = live.filter((l) => l.observed.revision === this.revision).length;
    const inService = live.filter((l) => l.observed.ready).length;
    this.emit({ type: 'failed', reason });
    await this.journal(reason, 'end', { waves: this.waves });
    if (reason === 'paused') {
      throw new PausedError(`paused after ${this.waves} wave(s) (fleetroll pause): ${live.length - fresh} old and ${fresh} new instance(s), ${inService} in service, none left marked down`);
    }
    throw new InterruptedError(
      `interrupted after ${this.waves} wave(s): the fleet is consistent, ${live.length - fresh} old and ${fresh} new instance(s), ${inService} in service, none left marked down`,
      'run the same deploy again to continue from here (or deploy the previous image to go back)',
    );
  }

  /** The context hooks get, as FLEETROLL_* environment variables. */
  private hookContext(name: string, live: Live[]): Record<string, string> {
    const fresh = live.filter((l) => l.observed.revision === this.revision);
    return {
      FLEETROLL_HOOK: name,
      FLEETROLL_SERVICE: this.fleet.service,
      FLEETROLL_IMAGE: this.fleet.image,
      FLEETROLL_VERSION: this.fleet.version,
      FLEETROLL_REVISION: this.revision,
      FLEETROLL_REPLICAS: String(this.fleet.replicas),
      FLEETROLL_WAVE: String(this.waves),
      FLEETROLL_NEW_INSTANCES: String(fresh.length),
      FLEETROLL_NEW_AVAILABLE: String(fresh.filter((l) => l.observed.available).length),
      FLEETROLL_OLD_INSTANCES: String(live.length - fresh.length),
    };
  }

  private async hook(name: 'preDeploy' | 'postWave' | 'postDeploy', live: Live[], phase: FailurePhase = 'rollout'): Promise<void> {
    const argv = this.fleet.hooks?.[name];
    if (!argv) return;
    const timeoutMs = (this.fleet.hooks?.timeoutSeconds ?? 60) * 1000;
    const r = await runHook(name, argv, this.hookContext(name, live), timeoutMs, this.emit);
    if (r.ok) return;
    this.emit({ type: 'failed', reason: `hook ${name} ${r.outcome}` });
    const changed = phase === 'preDeploy' ? 'nothing was changed' : `the rollout stopped after wave ${this.waves}`;
    throw new RolloutFailedError(
      `hooks.${name} (${argv.join(' ')}) ${r.outcome}: ${changed}${r.output ? `\n  its last output:\n    ${r.output.split('\n').join('\n    ')}` : ''}`,
      phase === 'preDeploy' ? 'fix what the hook reports, then deploy again' : 'the fleet is left as it is (unready instances are out of nginx); deploy again to continue, or deploy the previous image to go back',
      { hook: name },
      phase,
    );
  }

  /**
   * Rebuilds the spec of the revision most instances ran when the rollout
   * started, from one of its containers: image, the env keys fleetroll
   * recorded (values from the container), version and port labels.
   */
  private async previousFleet(live: Live[]): Promise<Fleet | undefined> {
    const counts = new Map<string, Live[]>();
    for (const l of live) {
      if (l.observed.revision === this.revision) continue;
      counts.set(l.observed.revision, [...(counts.get(l.observed.revision) ?? []), l]);
    }
    const best = [...counts.values()].sort((a, b) => b.length - a.length || Math.max(...b.map((l) => l.observed.created)) - Math.max(...a.map((l) => l.observed.created)))[0];
    const sample = best?.find((l) => l.info.running) ?? best?.[0];
    if (!sample) return undefined;
    const spec = await this.runtime(sample.info.host).specOf(sample.info.id).catch(() => undefined);
    if (!spec) return undefined;
    const keys = (sample.info.labels[LABELS.envKeys] ?? '').split(',').filter(Boolean);
    const env = Object.fromEntries(keys.filter((k) => k in spec.env).map((k) => [k, spec.env[k] ?? '']));
    const port = Number(sample.info.labels['fleetroll.port'] ?? this.fleet.port) || this.fleet.port;
    return { ...this.fleet, image: spec.image, env, port, version: sample.info.labels[LABELS.version] ?? this.fleet.version, hooks: undefined };
  }

  /**
   * Copies the image to a host that lacks it, from another host or the local
   * engine that has it (docker save | docker load through the API, streamed),
   * so no registry is needed. Returns false when no source has it.
   */
  private async copyImage(to: string, target: Runtime): Promise<boolean> {
    const sources = [...this.deps.runtimes.entries()].filter(([n]) => n !== to);
    if (this.deps.imageSource) sources.push(['this machine', this.deps.imageSource]);
    for (const [from, src] of sources) {
      if (!(await src.imageExists(this.fleet.image).catch(() => false))) continue;
      const t0 = this.clock.now();
      this.emit({ type: 'info', message: `copying image ${this.fleet.image} from ${from} to host ${to}` });
      const tar = await src.saveImage(this.fleet.image);
      let bytes = 0;
      let reported = 0;
      const { PassThrough } = await import('node:stream');
      const counted = new PassThrough();
      counted.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes - reported >= 25 * 1024 * 1024) {
          reported = bytes;
          this.emit({ type: 'info', message: `  ${(bytes / 1048576).toFixed(0)} MB copied to ${to}` });
        }
      });
      tar.pipe(counted);
      await target.loadImage(counted);
      this.emit({ type: 'info', message: `copied image ${this.fleet.image} to host ${to}: ${(bytes / 1048576).toFixed(1)} MB in ${((this.clock.now() - t0) / 1000).toFixed(1)} s` });
      return true;
    }
    return false;
  }

  /** Where a registry is configured for the host's engine, pull what no host could copy. */
  private async pullImage(name: string, rt: Runtime): Promise<boolean> {
    const failed = await rt.pullImage(this.fleet.image);
    const ok = failed === undefined;
    this.emit({ type: 'info', message: ok ? `pulled image ${this.fleet.image} on host ${name}` : `could not pull image ${this.fleet.image} on host ${name}: ${failed}` });
    return ok;
  }

  /** Before touching anything: every host answers, the image is on every host, every nginx is valid. */
  private async preflight(): Promise<void> {
    // Hosts are checked (and sent the image) in parallel, so a slow link to
    // one host does not hold up the others; problems are listed in host order.
    const perHost = await Promise.all(
      [...this.deps.runtimes].map(([name, rt]) =>
        this.work.run(name, async () => {
          const found: string[] = [];
          try {
            await rt.ping();
            const present =
              (await rt.imageExists(this.fleet.image)) ||
              (this.options.copyImages !== false && (await this.copyImage(name, rt))) ||
              (await this.pullImage(name, rt));
            if (!present) found.push(`image ${this.fleet.image} is not present on host ${name}`);
            const network = this.fleet.hosts.find((h) => h.name === name)?.network;
            if (network && !(await rt.networkExists(network))) found.push(`network ${network} does not exist on host ${name} (docker network create ${network})`);
          } catch (err) {
            found.push((err as Error).message);
          }
          return found;
        }),
      ),
    );
    const problems = perHost.flat();
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
      throw new RolloutFailedError(`preflight failed, nothing was changed:\n  ${problems.join('\n  ')}`, 'fix the problems above and run the deploy again', {}, 'preflight');
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
    const lists = await mapBounded([...this.deps.runtimes.values()], this.fleet.hostParallelism, (rt) => rt.list(labels));
    const infos = [...lists.flat(), ...(await this.adoptedInstances())];
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
              void this.journal('ready', 'end', { name: info.name });
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
          host: info.host,
        },
      };
    });
  }

  private async journal(step: string, phase?: 'begin' | 'end', detail?: Record<string, unknown>): Promise<void> {
    await this.deps.journal?.(step, phase, detail);
  }

  /** Adopted containers that still exist, dressed in the labels fleetroll would have given them. */
  private async adoptedInstances(): Promise<InstanceInfo[]> {
    const a = this.deps.adopted;
    if (!a) return [];
    const found = await Promise.all(
      a.instances.map(async (x) => {
        const info = await this.deps.runtimes.get(x.host)?.inspect(x.id, x.port);
        if (!info) return undefined;
        const labels: Record<string, string> = { ...info.labels, [LABELS.managed]: 'true', [LABELS.service]: this.fleet.service, [LABELS.revision]: a.revision, [LABELS.version]: a.version, [LABELS.created]: '0' };
        const dressed: InstanceInfo = { ...info, labels };
        return dressed;
      }),
    );
    return found.filter((i): i is InstanceInfo => i !== undefined);
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
    await this.journal('wave', 'begin', { wave: this.waves, stop: stopNames, start: startNow + startAfter });
    await this.syncUpstream(live, 'drain');
    faultPoint('after-mark-down');
    const watcher = this.watchReadiness();
    try {
      await this.waveBody(live, victims, wereUp, startNow, startAfter, watcher);
    } finally {
      await watcher.stop();
    }
    await watcher.failure();
    this.progress();
  }

  /**
   * While a wave drains, stops and starts, instances started earlier keep
   * becoming ready: put each into nginx when it does (as the next loop would,
   * a drain later), so capacity comes back and "ready" is reported on time.
   * The first failure (an nginx that refuses the config, a host gone) stops
   * the watch and is rethrown by failure() once the wave's own work is done.
   */
  private watchReadiness(): { stop(): Promise<void>; failure(): Promise<void> } {
    let stopped = false;
    let wake: () => void = () => {};
    let error: unknown;
    const loop = (async () => {
      while (!stopped) {
        await new Promise<void>((resolve) => {
          wake = resolve;
          void this.clock.sleep(this.fleet.probes.readiness.periodMs).then(resolve);
        });
        if (stopped || this.options.signal?.aborted) return;
        try {
          const live = await this.observe(false);
          if (stopped) return;
          await this.syncUpstream(live, 'enable');
        } catch (err) {
          error = err;
          return;
        }
      }
    })();
    return {
      stop: async () => {
        stopped = true;
        wake();
        await loop;
      },
      failure: async () => {
        if (error !== undefined) throw error;
      },
    };
  }

  private async waveBody(live: Live[], victims: Live[], wereUp: Live[], startNow: number, startAfter: number, watcher: { stop(): Promise<void> }): Promise<void> {
    const placed = this.countPerHost(live);
    const early = settleAll(this.startInstances(startNow, placed));
    early.catch(() => undefined);
    if (wereUp.length > 0 && this.fleet.drainSeconds > 0) {
      this.emit({ type: 'draining', names: wereUp.map((v) => v.info.name), seconds: this.fleet.drainSeconds });
      await this.pause(this.fleet.drainSeconds * 1000);
    }
    if (this.options.signal?.aborted) {
      // Interrupted before anything was stopped: undo the step by putting the
      // drained instances back (stopCleanly rewrites the upstream without them down).
      await early;
      await watcher.stop();
      await this.stopCleanly(await this.observe(false));
    }
    if (victims.length > 0) await this.journal('stop', 'begin', { names: victims.map((v) => v.info.name) });
    // Each finished stop frees room for one of the starts that had to wait
    // for stops (the surge bound counts instances, not hosts), so a host that
    // is slow to stop holds back one start, not the whole wave.
    const afterStops: Promise<void>[] = [];
    let released = 0;
    const release = (v: Live) => {
      placed.total.set(v.info.host, (placed.total.get(v.info.host) ?? 1) - 1);
      if (v.observed.revision === this.revision) placed.fresh.set(v.info.host, (placed.fresh.get(v.info.host) ?? 1) - 1);
      if (released < startAfter) {
        released++;
        afterStops.push(...this.startInstances(1, placed));
      }
    };
    const stops = settleAll(
      victims.map((v) =>
        this.work.run(v.info.host, async () => {
          const rt = this.runtime(v.info.host);
          await rt.stop(v.info.id, this.fleet.terminationGracePeriodSeconds);
          await rt.remove(v.info.id);
          this.track.delete(v.info.name);
          this.draining.delete(v.info.name);
          this.emit({ type: 'stopped', name: v.info.name, host: v.info.host });
          release(v);
        }),
      ),
    );
    // Whatever fails, wait for the work in flight before reporting it, so the
    // journal and the fleet agree when the failure is handled.
    const stopped = await stops.then(
      () => undefined,
      (err: unknown) => err,
    );
    if (victims.length > 0 && stopped === undefined) await this.journal('stop', 'end', { names: victims.map((v) => v.info.name) });
    if (stopped === undefined) {
      faultPoint('after-stop');
      if (released < startAfter) afterStops.push(...this.startInstances(startAfter - released, placed));
    }
    const results = await Promise.allSettled([early, settleAll(afterStops)]);
    if (stopped !== undefined) throw stopped;
    for (const r of results) if (r.status === 'rejected') throw r.reason;
  }

  /** Instances per host: all of them (for maxInstances) and those of the new revision (for an even spread). */
  private countPerHost(live: Live[]): Placement {
    const total = new Map<string, number>([...this.deps.runtimes.keys()].map((h) => [h, 0]));
    const fresh = new Map<string, number>([...this.deps.runtimes.keys()].map((h) => [h, 0]));
    for (const l of live) {
      total.set(l.info.host, (total.get(l.info.host) ?? 0) + 1);
      if (l.observed.revision === this.revision) fresh.set(l.info.host, (fresh.get(l.info.host) ?? 0) + 1);
    }
    return { total, fresh };
  }

  /**
   * Starts n instances. Each goes to the host with the fewest instances of the
   * new revision (so the finished fleet is spread evenly), then the fewest
   * overall, among hosts below their maxInstances. The starts are queued on
   * their hosts (parallel between hosts, in order on each); the caller awaits
   * them, and may do so late: each is marked handled so that a failure while
   * nobody awaits yet is not an unhandled rejection.
   */
  private startInstances(n: number, placed: Placement): Promise<void>[] {
    const jobs: Promise<void>[] = [];
    const count = (m: Map<string, number>, h: string) => m.get(h) ?? 0;
    for (let i = 0; i < n; i++) {
      const host = this.fleet.hosts
        .filter((h) => h.maxInstances === undefined || count(placed.total, h.name) < h.maxInstances)
        .sort((a, b) => count(placed.fresh, a.name) - count(placed.fresh, b.name) || count(placed.total, a.name) - count(placed.total, b.name))[0];
      const job = host
        ? this.work.run(host.name, () => this.startOne(host.name, host.network, host.publishAddress))
        : Promise.reject(new RolloutFailedError('no host has room for another instance (every host is at maxInstances)', 'raise maxInstances or add a host'));
      job.catch(() => undefined);
      jobs.push(job);
      if (!host) break;
      placed.total.set(host.name, count(placed.total, host.name) + 1);
      placed.fresh.set(host.name, count(placed.fresh, host.name) + 1);
    }
    return jobs;
  }

  private async startOne(host: string, network: string | undefined, publishAddress: string | undefined): Promise<void> {
    const spec = { ...instanceSpec(this.fleet, this.revision, (this.deps.nameSuffix ?? randomSuffix)(), network, this.clock.now(), this.options.changeCause), publishAddress };
    await this.journal('start', 'begin', { name: spec.name, host });
    const info = await this.runtime(host).run(spec);
    await this.journal('start', 'end', { name: spec.name, host, address: info.address });
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
    // After a crash nginx may still run a config older than its file: reload them all once.
    const toReload = this.needsRecoveryReload ? this.deps.routers.map((_, i) => i) : written;
    if (!reload && !this.needsRecoveryReload) return;
    this.needsRecoveryReload = false;
    faultPoint('before-reload');
    for (const i of toReload) {
      await this.deps.routers[i]?.router.reload();
      this.reloads++;
    }
    await this.journal('reload', 'end', { up: servers.filter((e) => !e.down).map((e) => e.name), down: servers.filter((e) => e.down).map((e) => e.name) });
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
    await this.hook('postDeploy', live);
    this.emit({ type: 'complete', revision: this.revision, version: this.fleet.version });
    await this.journal('complete', 'end', { waves: this.waves, reloads: this.reloads });
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

/** Like Promise.all, but waits for every promise to settle before throwing the first failure. */
async function settleAll<T>(promises: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((r) => (r as PromiseFulfilledResult<T>).value);
}
