/**
 * The default wiring: builds the engine's dependencies from a fleet: one Docker runtime per host,
 * one router per nginx, the prober (HTTP, TCP, healthcheck or exec) and the upstream templates,
 * the fleet's state store and lock, the access-log readers. The only place that knows which
 * adapter serves which port. Outside src/cli so that the library (src/index.ts) gives an
 * embedder the same wiring as the CLI without loading the CLI.
 */
import { existsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readTextFile } from './config/document.js';
import { MAX_TEMPLATE_BYTES } from './config/checks.js';
import type { Fleet } from './config/load.js';
import { ContainerLogStreamAccessLog, LocalFileAccessLog, containerFileAccessLog } from './adapters/accessLog.js';
import { DockerRuntime } from './adapters/docker.js';
import { EtcdSwitchBackAsks, EtcdYieldAsks } from './adapters/etcdAsks.js';
import { EtcdFleetLock, EtcdStateStore } from './adapters/etcdState.js';
import { FleetLock, FleetStateStore, whoAmI } from './adapters/fleetState.js';
import { SwitchBackContainers, YieldAskContainer } from './adapters/switchAsks.js';
import { NginxContainerRouter } from './adapters/nginx.js';
import { NginxExecRouter } from './adapters/nginxExec.js';
import { DynamicNginxRouter, defaultPeersFile } from './adapters/nginxDynamic.js';
import { containerPlace, execPlace } from './adapters/nginxPlace.js';
import { buildProber } from './adapters/probes.js';
import { dockerConfigCredentials } from './adapters/registryAuth.js';
import { postWebhook } from './adapters/webhook.js';
import type { AccessLogOpener, DeployDeps, LoadBalancer } from './engine/rollout.js';
import type { EventSink } from './engine/events.js';
import { FleetrollError } from './errors.js';
import type { FleetLockPort, FleetState, LockInfo, StateStore } from './ports.js';
import type { SwitchBackAsks, YieldAsks } from './engine/types.js';
import { upstreamTemplateProblem } from './core/upstream.js';

const DEFAULT_TEMPLATE = new URL('../templates/upstream.conf.tmpl', import.meta.url);

async function readTemplate(path: string | URL, where: string): Promise<string> {
  let text: string;
  try {
    text = await readTextFile(typeof path === 'string' ? path : fileURLToPath(path), 'upstream template', MAX_TEMPLATE_BYTES);
  } catch (err) {
    if (!(err instanceof FleetrollError)) throw err;
    throw new FleetrollError(err.code, err.exitCode, `${where}: ${err.message}`, { cause: err });
  }
  const problem = upstreamTemplateProblem(text);
  if (problem !== undefined) throw new FleetrollError('E_INVALID', `${where}: ${problem}`);
  return text;
}

export function readDefaultTemplate(): Promise<string> {
  return readTemplate(DEFAULT_TEMPLATE, 'built-in template');
}

export async function buildDeps(fleet: Fleet, events?: EventSink): Promise<DeployDeps> {
  const runtimes = new Map(fleet.hosts.map((h) => [h.name, new DockerRuntime(h)] as const));
  const routers: LoadBalancer[] = [];
  for (const [i, { nginx: lb }] of fleet.loadBalancers.entries()) {
    const template = lb.template
      ? await readTemplate(resolve(dirname(fleet.source.file), lb.template), `loadBalancers/${i}/nginx/template`)
      : await readTemplate(DEFAULT_TEMPLATE, 'built-in template');
    const hostName = lb.host ?? fleet.hosts[0]?.name ?? 'local';
    const runtime = runtimes.get(hostName);
    const prefixArgs = lb.config ? ['-c', lb.config] : [];
    const router =
      lb.mode === 'dynamic'
        ? new DynamicNginxRouter({
            place: lb.container && runtime ? containerPlace(runtime, lb.container, hostName) : execPlace({ prefixArgs }),
            upstream: lb.upstream,
            peersFile: lb.peersFile ?? defaultPeersFile(lb.upstream),
            stickyKey: fleet.strategy.type === 'Canary' ? fleet.strategy.canary.stickyKey : undefined,
            preview: fleet.strategy.type === 'BlueGreen' ? fleet.strategy.blueGreen.previewUpstream : undefined,
            force: fleet.strategy.type === 'Canary' ? fleet.strategy.canary.force : undefined,
          })
        : lb.container && runtime
          ? new NginxContainerRouter({ runtime, container: lb.container, upstreamFile: lb.upstreamFile!, hostName })
          : new NginxExecRouter({ upstreamFile: lb.upstreamFile!, prefixArgs });
    routers.push({ router, template, upstream: lb.upstream });
  }
  const prober = buildProber(fleet.probes, runtimes);
  // A host without the image gets it copied from the engine on this machine
  // when that engine is not one of the fleet's hosts already.
  const local = 'unix:///var/run/docker.sock';
  const imageSource =
    !fleet.hosts.some((h) => h.docker === local) && existsSync('/var/run/docker.sock') ? new DockerRuntime({ name: 'this machine', docker: local }) : undefined;
  return {
    runtimes,
    routers,
    prober,
    credentials: dockerConfigCredentials(),
    webhookPost: postWebhook,
    ...(events ? { events } : {}),
    ...(imageSource ? { imageSource } : {}),
  };
}

/** The fleet's state and lock live on its first host. */
/** A fleet's hosts as its etcd state records them ("name=endpoint"): another fleet of the same service name shares none. */
export function fleetIdentity(fleet: Fleet): string[] {
  return fleet.hosts.map((h) => `${h.name}=${h.docker}`);
}

/** The state store as the CLI uses it: the port, and a read-change-write for pause, resume and the like. */
export type ManagedStateStore = StateStore & { update(image: string, change: (s: FleetState) => void): Promise<FleetState> };
/** The lock as the CLI uses it: the port, and `lock release`. */
export type ManagedLock = FleetLockPort & { breakLock(force: boolean): Promise<LockInfo | undefined> };

export function fleetHandles(
  fleet: Fleet,
  deps: Pick<DeployDeps, 'runtimes'>,
): { store: ManagedStateStore; lock: ManagedLock; watchLock: ManagedLock; asks: SwitchBackAsks; yieldAsks: YieldAsks; who: string } {
  const first = fleet.hosts[0];
  const rt = first ? deps.runtimes.get(first.name) : undefined;
  if (!first || !(rt instanceof DockerRuntime)) throw new FleetrollError('E_INTERNAL', 'the fleet has no first host');
  const etcd = fleet.state?.etcd;
  // The store's writes are conditioned on this lock while this process holds it (fenced).
  const etcdLock = etcd ? new EtcdFleetLock(etcd, fleet.service) : undefined;
  // A watch holds a lock of its own for as long as it runs: a second watch of the fleet waits on it, a deploy does not.
  return {
    ...(etcd
      ? {
          store: new EtcdStateStore(
            etcd,
            fleet.service,
            {
              where: `the Docker volume fleetroll-state-${fleet.service} on ${first.name}`,
              exists: () => new FleetStateStore(rt.docker, fleet.service, first.name).exists(),
            },
            fleetIdentity(fleet),
            () => etcdLock?.fence(),
          ),
          lock: etcdLock!,
          watchLock: new EtcdFleetLock(etcd, fleet.service, 'watch-lock'),
          // With etcd, nothing of fleetroll's is created on a Docker host: the asks are keys too.
          asks: new EtcdSwitchBackAsks(etcd, fleet.service, () => etcdLock?.fence()),
          yieldAsks: new EtcdYieldAsks(etcd, fleet.service, whoAmI()),
        }
      : {
          store: new FleetStateStore(rt.docker, fleet.service, first.name),
          lock: new FleetLock(rt.docker, fleet.service),
          watchLock: new FleetLock(rt.docker, `${fleet.service}-watch`),
          asks: new SwitchBackContainers(rt.docker, fleet.service),
          yieldAsks: new YieldAskContainer(rt.docker, fleet.service, whoAmI()),
        }),
    who: whoAmI(),
  };
}

/**
 * One opener per load balancer that names its access log (`accessLog:`), for
 * the deploy's health numbers: a file inside the nginx container (docker
 * exec stat/tail, or the archive API where the image has neither), a file on
 * this machine (exec: true), or the container's log stream ("stdout").
 */
export function accessLogOpeners(fleet: Fleet, deps: Pick<DeployDeps, 'runtimes'>): AccessLogOpener[] {
  const openers: AccessLogOpener[] = [];
  for (const { nginx: lb } of fleet.loadBalancers) {
    const path = lb.accessLog;
    if (path === undefined) continue;
    if (lb.exec || !lb.container) {
      openers.push({ name: `access log ${path} on this machine`, open: async () => new LocalFileAccessLog(path) });
      continue;
    }
    const container = lb.container;
    const hostName = lb.host ?? fleet.hosts[0]?.name ?? 'local';
    const runtime = deps.runtimes.get(hostName);
    const where = `container ${container} on ${hostName}`;
    const docker = async () => {
      if (!(runtime instanceof DockerRuntime)) throw new FleetrollError('E_ACCESS_LOG', `no Docker host ${hostName} to reach ${container} on`);
      return runtime.docker;
    };
    openers.push(
      path === 'stdout'
        ? { name: `log stream of ${where}`, open: async () => ContainerLogStreamAccessLog.open(await docker(), container) }
        : { name: `access log ${path} in ${where}`, open: async () => containerFileAccessLog(await docker(), container, path) },
    );
  }
  return openers;
}
