/**
 * `fleetroll rehearse`: a deploy rehearsed on a local fleet, under load,
 * measured. It builds what it needs, starts nginx and N instances of the
 * example app at one version, runs GET and POST probes through nginx, rolls
 * the fleet to the next version with the real engine, and reports what the
 * probes saw: failed requests, the mixed-version window, the versions served.
 */
import { chmod, mkdir, rm } from 'node:fs/promises';
import { fleetFromObject, type Fleet } from '../config/load.js';
import type { DeployHealthReport } from '../core/deployHealth.js';
import type { StrategyInput } from '../core/strategy.js';
import { parseUpstreamServers } from '../core/upstream.js';
import { containerFileAccessLog } from '../adapters/accessLog.js';
import { DockerRuntime, ensureNetwork } from '../adapters/docker.js';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../adapters/localImages.js';
import { isLocalEngine } from '../adapters/nginxPlace.js';
import { deploy, healthOf, systemClock, type AccessLogOpener, type DeployDeps, type DeployResult, type LoadBalancer } from '../engine/rollout.js';
import type { EventSink } from '../engine/events.js';
import { naiveReplace } from './naiveControl.js';
import { FleetrollError, RolloutFailedError } from '../errors.js';
import { LABELS, type Router } from '../ports.js';
import type { TimedEvent } from './phases.js';
import { mixedVersionWindow, summarizeRequests, type RequestRecord, type RequestSummary } from './metrics.js';
import { startLoad } from './probes.js';
import { scriptRollout, type ScriptOptions } from './scriptControl.js';
import { ACCESS_LOG, APP_PORT, demoNames, PEERS_MOUNT, stageConfDir, startNginx, teardown, UPSTREAM_FILE, waitForHttp, type DemoNames } from './demoStage.js';

// The stage, for the commands, the benchmark and the integration tests that set one up.
export { ACCESS_LOG, DEMO_LABEL, demoNames, startNginx, teardown, waitForHttp, type DemoNames } from './demoStage.js';

export interface RehearseOptions {
  /** Service name; also the prefix of the network and nginx container names. */
  name: string;
  docker: string;
  replicas: number;
  maxSurge?: string | undefined;
  maxUnavailable?: string | undefined;
  recreate?: boolean;
  /** Replace instances the way a typical script does (kill, start, no drain), as a control. */
  naive?: boolean;
  /** Replace instances with the proper hand-written script (src/experiment/scriptControl.ts), in batches, as a control. */
  script?: ScriptOptions | undefined;
  /** The fleet file's replacementPolicy; written into the fleet only when set. */
  replacementPolicy?: 'TerminationStarted' | 'TerminationComplete' | undefined;
  from: string;
  to: string;
  getPerSecond: number;
  postConcurrency: number;
  drainSeconds: number;
  warmupSeconds: number;
  minReadySeconds: number;
  /** Host port nginx is published on (127.0.0.1 only); 0 picks a free one. */
  port: number;
  keep: boolean;
  /** Env for the new version only, e.g. REPORT_VERSION to rehearse a mis-tagged build. */
  toEnv?: Record<string, string>;
  events: EventSink;
  log: (line: string) => void;
  /** How long POST /api/orders takes in the app (ORDER_DELAY_MS); default 200. */
  orderDelayMs?: number | undefined;
  /** How long the app keeps serving after SIGTERM (PRESTOP_SECONDS); default 1. */
  prestopSeconds?: number | undefined;
  /** The naive control's pause between two replaced instances; default 1000. */
  naiveIntervalMs?: number | undefined;
  /** Keep-alive connections from the probes to nginx; default false (a new connection per request). */
  keepAlive?: boolean | undefined;
  /** With keepAlive, resend a request a reused connection lost (default true); false: a strict client, which counts it failed. */
  resend?: boolean | undefined;
  /** The load balancer's mode: reload (default) or dynamic (fleetroll's Lua balancer, no reload; the nginx image needs Lua). */
  nginxMode?: 'reload' | 'dynamic' | undefined;
  /** Per-request timeout of the probes; default 5000. */
  timeoutMs?: number | undefined;
  /** Load before the deploy starts and after it ends, ms; defaults 1500 and 1000. */
  beforeMs?: number | undefined;
  afterMs?: number | undefined;
  /**
   * The rollout to `to` as the fleet file's strategy block (BlueGreen,
   * Canary); it wins over `recreate`. The fleet at `from` is always started
   * by a plain rolling update.
   */
  strategy?: StrategyInput | undefined;
  /** The fleet file's `analysis:` block for the rollout to `to` (the gate needs `accessLog`). */
  analysis?: Record<string, unknown> | undefined;
  /**
   * Pass nginx's access log (ACCESS_LOG, fleetroll_json) to the deploy to
   * `to`: the analysis gate reads it, and the deploy measures its health
   * numbers (DeployResult.health). Engine deploys only.
   */
  accessLog?: boolean | undefined;
  /** Users the probes' requests come from in turn (the X-User header a canary sticks on); default 0: none. */
  users?: number | undefined;
}

export interface RehearseResult {
  requests: RequestSummary;
  versions: { expected: string; instances: { name: string; version: string }[] };
  mixedVersionWindowMs: number;
  durationMs: number;
  deploy?: DeployResult | undefined;
  /** Set when the deploy itself failed (its message). */
  deployError?: string | undefined;
  nginxUrl: string;
  records: RequestRecord[];
}

/** The fleet at `version`; `target`: the one rolled to, with the options' strategy, analysis and access log. */
async function demoFleet(o: RehearseOptions, names: DemoNames, version: string, env: Record<string, string> = {}, target = false): Promise<Fleet> {
  const strategy = target && o.strategy ? o.strategy : o.recreate ? { type: 'Recreate' } : { type: 'RollingUpdate' };
  return fleetFromObject(
    {
      service: names.service,
      image: `fleetroll-example:${version}`,
      replicas: o.replicas,
      port: APP_PORT,
      env: { WARMUP_SECONDS: String(o.warmupSeconds), PRESTOP_SECONDS: String(o.prestopSeconds ?? 1), ORDER_DELAY_MS: String(o.orderDelayMs ?? 200), ...env },
      hosts: [{ name: 'local', docker: o.docker, network: names.network }],
      probes: { readiness: { path: '/health/ready', periodMs: 100, timeoutMs: 1000 }, version: { path: '/api/version' } },
      strategy,
      ...(target && o.analysis ? { analysis: o.analysis } : {}),
      ...(o.replacementPolicy !== undefined ? { replacementPolicy: o.replacementPolicy } : {}),
      minReadySeconds: o.minReadySeconds,
      progressDeadlineSeconds: 60 + o.minReadySeconds,
      drainSeconds: o.drainSeconds,
      terminationGracePeriodSeconds: 10,
      loadBalancers: [
        {
          nginx: {
            container: names.nginx,
            host: 'local',
            ...(o.nginxMode === 'dynamic'
              ? { mode: 'dynamic', ...(isLocalEngine(o.docker) ? { peersFile: `${PEERS_MOUNT}/${names.upstream}.peers` } : {}) }
              : { upstreamFile: UPSTREAM_FILE }),
            upstream: names.upstream,
            ...(target && o.accessLog ? { accessLog: ACCESS_LOG } : {}),
          },
        },
      ],
    },
    `rehearse (${names.service})`,
    { maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable },
  );
}

/** What one rollout under load recorded, on one clock: ms since the probes started. */
export interface UnderLoadResult {
  records: RequestRecord[];
  /** The deploy's events and the runner's markers (deploy start/end, each nginx reload). */
  events: TimedEvent[];
  deployStartMs: number;
  deployEndMs: number;
  /** When the probes stopped sending. */
  loadEndMs: number;
  /** Instances in service when the deploy started. */
  initial: string[];
  /** The fleet rolled to (its resolved strategy and timings). */
  toFleet: Fleet;
  deploy?: DeployResult | undefined;
  /** What the steps of the deploy that started the fleet at `from` cost (before the measured one: an experiment's calibration). */
  initialCosts?: DeployResult['costs'];
  /** Set when the deploy itself failed (its message). */
  deployError?: string | undefined;
  /** The deploy failed because the analysis gate failed: the new version was taken out of traffic and the fleet rolled back. */
  stoppedByAnalysis: boolean;
  /** The deploy's health numbers from nginx's access log (with `accessLog`, engine deploys), completed or failed. */
  health?: DeployHealthReport | undefined;
  versions: { expected: string; instances: { name: string; version: string }[] };
  nginxUrl: string;
}

/**
 * Passes every call through, and after each successful reload (a membership
 * change in the dynamic mode, marked reloadFree) tells `onReload`
 * which servers the upstream file it loaded lists up and down: the naive
 * control writes nginx without engine events, and this is how its reloads
 * (and everyone's reload count) are still recorded.
 */
function observedRouter(r: Router, onReload: (up: string[], down: string[]) => void): Router {
  let written: string | undefined;
  return {
    name: r.name,
    check: () => r.check(),
    read: () => r.read(),
    ...(r.config ? { config: () => r.config!() } : {}),
    ...(r.lastChange ? { lastChange: () => r.lastChange!() } : {}),
    // The dynamic mode: its changes are no reloads, and its counts end drains.
    ...(r.reloadFree ? { reloadFree: true } : {}),
    ...(r.inFlight ? { inFlight: () => r.inFlight!() } : {}),
    async writeAndTest(content) {
      await r.writeAndTest(content);
      written = content;
    },
    async reload() {
      await r.reload();
      const servers = parseUpstreamServers(written ?? (await r.read()) ?? '');
      onReload(
        servers.filter((e) => !e.down).map((e) => e.name),
        servers.filter((e) => e.down).map((e) => e.name),
      );
    },
  };
}

/**
 * The deploy failed because the analysis gate failed, and the new version
 * was taken out of traffic: whatever the strategy (RollingUpdate's rollback,
 * a canary's abort, a blue-green switch back), the engine says so with
 * `stoppedBy: 'analysis'` in the error's details.
 */
export function stoppedByAnalysisGate(err: unknown): boolean {
  return err instanceof RolloutFailedError && err.details.stoppedBy === 'analysis';
}

/**
 * One rollout on a fresh local fleet, under load: remove leftovers of the same
 * name, start the network and nginx, deploy `from`, start the probes, deploy
 * `to` (or run the naive or the script control), stop the probes, ask every instance for its
 * version, and tear down (unless `keep`). Images must exist already.
 */
export async function runUnderLoad(
  o: RehearseOptions,
  runtime: DockerRuntime,
  makeDeps: (fleet: Fleet) => Promise<DeployDeps>,
  template: string,
  nginxImage: string,
): Promise<UnderLoadResult> {
  const names = demoNames(o.name);
  const docker = runtime.docker;
  const removed = await teardown(docker, names);
  if (removed > 0) o.log(`removed ${removed} container(s) left from an earlier rehearsal`);
  await ensureNetwork(docker, names.network, { [LABELS.demo]: names.service });
  const port = await startNginx(
    docker,
    names,
    nginxImage,
    o.port,
    template,
    o.nginxMode,
    isLocalEngine(runtime.endpoint) ? { confDir: stageConfDir(names.nginx), ...(o.nginxMode === 'dynamic' ? { peersDir: await peersDir(names) } : {}) } : {},
  );
  const nginxUrl = `http://127.0.0.1:${port}`;
  await waitForHttp(nginxUrl, 10_000);
  o.log(`nginx ${names.nginx} listening on ${nginxUrl}`);

  try {
    const fromFleet = await demoFleet(o, names, o.from);
    o.log(`starting ${o.replicas} instance(s) at ${o.from}`);
    const initialDeploy = await deploy(fromFleet, await makeDeps(fromFleet));
    const initial = initialDeploy.instances.map((i) => i.name);

    const toFleet = await demoFleet(o, names, o.to, o.toEnv, true);
    const load = startLoad(nginxUrl, {
      getPerSecond: o.getPerSecond,
      postConcurrency: o.postConcurrency,
      timeoutMs: o.timeoutMs ?? 5000,
      keepAlive: o.keepAlive ?? false,
      resend: o.resend ?? true,
      users: o.users ?? 0,
    });
    const events: TimedEvent[] = [{ t: load.elapsed(), source: 'runner', event: { type: 'load-start' } }];
    const mark = (event: TimedEvent['event'], source: TimedEvent['source'] = 'runner') => events.push({ t: load.elapsed(), source, event });
    await systemClock.sleep(o.beforeMs ?? 1500);
    o.log(`rolling ${o.from} -> ${o.to} under load (${o.getPerSecond} GET/s, ${o.postConcurrency} POST stream(s))`);
    const sink: EventSink = (e) => {
      mark(e, 'engine');
      o.events(e);
    };
    let reloads = 0;
    let result: DeployResult | undefined;
    let deployError: string | undefined;
    let stoppedByAnalysis = false;
    let health: DeployHealthReport | undefined;
    let deps: DeployDeps | undefined;
    const accessLogs: AccessLogOpener[] | undefined = o.accessLog
      ? [{ name: `access log ${ACCESS_LOG} in container ${names.nginx}`, open: async () => containerFileAccessLog(docker, names.nginx, ACCESS_LOG) }]
      : undefined;
    mark({ type: 'deploy-start' });
    const deployStartMs = load.elapsed();
    // The deploy's step cost `prepare` starts here, where its measured duration does: making its deps included.
    const startedAtMs = Date.now();
    try {
      deps = await makeDeps(toFleet);
      const routers: LoadBalancer[] = deps.routers.map((lb, i) => ({
        ...lb,
        router: observedRouter(lb.router, (up, down) =>
          mark({ type: 'reload', lb: i, up, down, count: ++reloads, ...(lb.router.reloadFree ? { reloadFree: true } : {}) }),
        ),
      }));
      if (o.naive) await naiveReplace(toFleet, { ...deps, routers, events: sink }, { intervalMs: o.naiveIntervalMs ?? 1000 });
      else if (o.script) await scriptRollout(toFleet, { ...deps, routers, events: sink }, o.script);
      else {
        result = await deploy(toFleet, { ...deps, routers, events: sink, ...(accessLogs ? { accessLogs } : {}) }, { startedAtMs });
        health = result.health;
      }
    } catch (err) {
      if (!(err instanceof FleetrollError)) {
        await load.stop();
        throw err;
      }
      deployError = err.message;
      stoppedByAnalysis = stoppedByAnalysisGate(err);
      health = healthOf(err);
    }
    const deployEndMs = load.elapsed();
    mark({
      type: 'deploy-end',
      outcome: deployError === undefined ? 'complete' : stoppedByAnalysis ? 'stopped' : 'failed',
      ...(deployError !== undefined ? { error: deployError } : {}),
    });
    await systemClock.sleep(o.afterMs ?? 1000);
    const loadEndMs = load.elapsed();
    mark({ type: 'load-stop' });
    const records = await load.stop();

    const instances = await runtime.list({ [LABELS.service]: names.service, [LABELS.managed]: 'true' });
    const prober = (deps ?? (await makeDeps(toFleet))).prober;
    const versions = await Promise.all(
      instances.map(async (i) => ({
        name: i.name,
        version: i.address ? await prober.version(i.address).catch((e: Error) => `error: ${e.message}`) : `not running (${i.state})`,
      })),
    );
    versions.sort((a, b) => (a.name < b.name ? -1 : 1));
    return {
      records,
      events,
      deployStartMs,
      deployEndMs,
      loadEndMs,
      initial,
      toFleet,
      deploy: result,
      initialCosts: initialDeploy.costs,
      deployError,
      stoppedByAnalysis,
      ...(health ? { health } : {}),
      versions: { expected: stoppedByAnalysis ? o.from : o.to, instances: versions },
      nginxUrl,
    };
  } finally {
    if (!o.keep) {
      await teardown(docker, names);
      o.log(`removed the rehearsal fleet (${names.service}); use --keep to leave it running`);
    }
  }
}

export async function rehearse(o: RehearseOptions, makeDeps: (fleet: Fleet) => Promise<DeployDeps>, template: string): Promise<RehearseResult> {
  const runtime = new DockerRuntime({ name: 'local', docker: o.docker });
  await runtime.ping();

  o.log('building images (reused when up to date)');
  const imageOpts = { log: o.log, ...(o.docker.startsWith('unix://') ? {} : { dockerHost: o.docker }) };
  const base = await ensureNodeBaseImage(imageOpts);
  for (const v of new Set([o.from, o.to])) await buildAppImage({ ...imageOpts, version: v, base });
  const nginxImage = await ensureNginxBaseImage({ ...imageOpts, lua: o.nginxMode === 'dynamic' });

  const r = await runUnderLoad(o, runtime, makeDeps, template, nginxImage);
  return {
    requests: summarizeRequests(r.records),
    versions: r.versions,
    mixedVersionWindowMs: mixedVersionWindow(r.records, o.from, o.to)?.windowMs ?? 0,
    durationMs: Math.round(r.deployEndMs - r.deployStartMs),
    deploy: r.deploy,
    deployError: r.deployError,
    nginxUrl: r.nginxUrl,
    records: r.records,
  };
}

/**
 * The dynamic mode's peers file on a local engine: a host directory
 * bind-mounted into nginx (removed by teardown with the stage's conf.d), so
 * fleetroll writes it as a plain file and reads nginx's status file the same
 * way, as docs/nginx.md advises; through Docker's archive API each change took
 * about 0.5 s here. Writable by nginx's workers, which write the status file.
 */
async function peersDir(names: DemoNames): Promise<string> {
  const dir = `${stageConfDir(names.nginx)}-peers`;
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  await chmod(dir, 0o1777);
  return dir;
}
