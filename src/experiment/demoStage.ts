/**
 * The local stage a rehearsal (and the experiment, and the integration
 * tests) plays on: the names of its network, nginx container and upstream,
 * an nginx in a container that proxies everything to the fleet and writes
 * the fleetroll_json access log, a wait for it to answer, and a teardown
 * that removes everything a rehearsal of that name created.
 */
import { mkdir, readdir, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type Dockerode from 'dockerode';
import { LOG_FORMAT, LOG_FORMAT_NAME } from '../core/accessLog.js';
import { defaultPeersFile, renderUpstream } from '../core/upstream.js';
import { putFile } from '../adapters/docker.js';
import { hostFiles } from '../adapters/nginxPlace.js';
import { retryTransient } from '../adapters/dockerRetry.js';
import { systemClock } from '../engine/rollout.js';
import { FleetrollError } from '../errors.js';
import { LABELS } from '../ports.js';

/** LABELS.demo under its older name, which test/integration/fixture.ts imports. */
export const DEMO_LABEL = LABELS.demo;

export interface DemoNames {
  service: string;
  network: string;
  nginx: string;
  upstream: string;
}

export function demoNames(name: string): DemoNames {
  return { service: name, network: `${name}-net`, nginx: `${name}-nginx`, upstream: name.replace(/-/g, '_') };
}

const CONF_D = '/etc/nginx/conf.d';
export const UPSTREAM_FILE = `${CONF_D}/upstream.conf`;
export const APP_PORT = 8080;
/**
 * Where the nginx startNginx starts writes the fleetroll_json access log (as
 * templates/nginx.conf.example does): a fleet's `accessLog:` for it.
 */
export const ACCESS_LOG = '/var/log/nginx/fleetroll.log';
/** Its conf.d file: the log_format and the access_log, beside the image's own log (to stdout). */
const ACCESS_LOG_CONF = `${CONF_D}/00-fleetroll-log.conf`;

function serverBlock(upstream: string): string {
  return `# Written by fleetroll rehearse: proxy everything to the fleet.
server {
    listen 80;
    location / {
        proxy_pass http://${upstream};
        proxy_connect_timeout 250ms;
        proxy_next_upstream error timeout;
    }
}
`;
}

/**
 * Where a stage's nginx on this machine's engine keeps its conf.d: a host
 * directory bind-mounted over /etc/nginx/conf.d (startNginx's confDir), so
 * fleetroll writes the upstream file as a plain file (1-2 ms) where Docker's
 * archive API takes 150-250 ms a write here: the way docs/nginx.md advises
 * running nginx in a container. A second nginx of the stage (its name
 * longer by a suffix) gets a directory of its own beside it.
 */
export function stageConfDir(nginx: string): string {
  return path.join(os.tmpdir(), `fleetroll-stage-${nginx}`);
}

/** Removes everything a rehearsal with this name created: instances, nginx, network, conf.d directories. */
export async function teardown(docker: Dockerode, names: DemoNames): Promise<number> {
  let removed = 0;
  for (const filter of [`${LABELS.service}=${names.service}`, `${LABELS.demo}=${names.service}`]) {
    const list = await docker.listContainers({ all: true, filters: { label: [filter] } });
    await Promise.all(
      list.map(async (c) => {
        await docker
          .getContainer(c.Id)
          .remove({ force: true, v: true })
          .catch((err: { statusCode?: number }) => {
            if (err.statusCode !== 404 && err.statusCode !== 409) throw err;
          });
        removed++;
      }),
    );
  }
  const nets = await docker.listNetworks({ filters: { label: [`${LABELS.demo}=${names.service}`] } });
  for (const n of nets)
    await docker
      .getNetwork(n.Id)
      .remove()
      .catch(() => {});
  const prefix = path.basename(stageConfDir(names.nginx));
  for (const d of await readdir(os.tmpdir()).catch(() => [] as string[])) {
    if (d === prefix || d.startsWith(`${prefix}-`)) await rm(path.join(os.tmpdir(), d), { recursive: true, force: true });
  }
  return removed;
}

const DYNAMIC_CONF = new URL('../../templates/nginx-dynamic.conf.example', import.meta.url);

/** templates/nginx-dynamic.conf.example for this upstream: the nginx.conf of a dynamic-mode stage. */
export async function dynamicNginxConf(upstream: string, peersFile?: string): Promise<string> {
  const conf = (await readFile(DYNAMIC_CONF, 'utf8')).replaceAll('bookstore_api', upstream);
  return peersFile === undefined ? conf : conf.replace(`peers = ${JSON.stringify(defaultPeersFile(upstream))}`, `peers = ${JSON.stringify(peersFile)}`);
}

/** Where a dynamic-mode stage's nginx finds a host directory bind-mounted for its peers file (startNginx's peersDir). */
export const PEERS_MOUNT = '/run/fleetroll';

/**
 * Starts the stage's nginx, published on 127.0.0.1:`port` (0: Docker picks).
 * mode reload: the image's nginx.conf with a server block, the access log
 * and an empty upstream file in conf.d. mode dynamic (an image with Lua,
 * ensureNginxBaseImage({ lua: true })): templates/nginx-dynamic.conf.example
 * as its nginx.conf; with `peersDir`, that host directory is bind-mounted at
 * PEERS_MOUNT and the peers file is there (fleetroll then writes it as a plain
 * file, not through Docker's archive API). mode reload with `confDir` (an
 * engine on this machine: stageConfDir): conf.d is that host directory,
 * bind-mounted, emptied first.
 */
export async function startNginx(
  docker: Dockerode,
  names: DemoNames,
  image: string,
  port: number,
  template: string,
  mode: 'reload' | 'dynamic' = 'reload',
  o: { peersDir?: string; confDir?: string } = {},
): Promise<number> {
  const confDir = mode === 'reload' ? o.confDir : undefined;
  const binds = [...(o.peersDir !== undefined ? [`${o.peersDir}:${PEERS_MOUNT}`] : []), ...(confDir !== undefined ? [`${confDir}:${CONF_D}`] : [])];
  const c = await docker.createContainer({
    name: names.nginx,
    Image: image,
    Labels: { [LABELS.demo]: names.service },
    ExposedPorts: { '80/tcp': {} },
    HostConfig: {
      NetworkMode: names.network,
      PortBindings: { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: port === 0 ? '' : String(port) }] },
      RestartPolicy: { Name: 'no' },
      ...(binds.length ? { Binds: binds } : {}),
    },
  });
  if (mode === 'dynamic')
    await putFile(
      docker,
      names.nginx,
      '/etc/nginx/nginx.conf',
      await dynamicNginxConf(names.upstream, o.peersDir !== undefined ? `${PEERS_MOUNT}/${names.upstream}.peers` : undefined),
    );
  else {
    if (confDir !== undefined) {
      await rm(confDir, { recursive: true, force: true });
      await mkdir(confDir, { recursive: true, mode: 0o755 });
    }
    const put = (file: string, text: string) =>
      confDir !== undefined ? hostFiles.write(path.join(confDir, path.posix.relative(CONF_D, file)), text) : putFile(docker, names.nginx, file, text);
    await put(`${CONF_D}/default.conf`, serverBlock(names.upstream));
    await put(
      ACCESS_LOG_CONF,
      `# Written by fleetroll: every request in the format fleetroll reads.\n${LOG_FORMAT}access_log ${ACCESS_LOG} ${LOG_FORMAT_NAME};\n`,
    );
    await put(UPSTREAM_FILE, renderUpstream(template, { service: names.service, upstream: names.upstream, servers: [] }));
  }
  // A port Docker chose can be taken between its choice and the bind (an
  // outgoing connection got it): the next start picks another one.
  await retryTransient(`starting ${names.nginx}`, () => c.start(), { portClashIsTransient: port === 0 });
  const info = await c.inspect();
  const bound = info.NetworkSettings.Ports['80/tcp']?.[0]?.HostPort;
  if (!bound) throw new FleetrollError('E_REHEARSE', `nginx container ${names.nginx} has no published port`);
  return Number(bound);
}

/**
 * One GET that resolves on any answer. node:http with its own connection
 * (no pool) and a timer of its own: with fetch and AbortSignal.timeout (an
 * unref'd timer) a process that had nothing else to wait for sometimes ended
 * mid-wait with exit 13 (an unsettled await) when test files ran side by side.
 */
function answers(url: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve());
      res.on('error', reject);
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
  });
}

/** nginx answers (a 502 with no backends is an answer). */
export async function waitForHttp(url: string, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    try {
      await answers(url, 1000);
      return;
    } catch (err) {
      if (Date.now() > until) throw new FleetrollError('E_REHEARSE', `nginx did not answer on ${url}: ${(err as Error).message}`);
      await systemClock.sleep(100);
    }
  }
}
