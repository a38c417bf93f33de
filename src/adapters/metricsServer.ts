/**
 * `--metrics HOST:PORT`: one HTTP server for a command's lifetime serving
 *   /metrics  Prometheus text (./promMetrics.ts, prom-client)
 *   /         the live page (core/livePage.ts)
 *   /events   server-sent events: the page's sections, re-rendered on change
 *
 * Everything it shows comes from one fleet model (core/fleetModel.ts) fed by
 * its caller through the FleetMonitor below: `deploy` (and undo, restart,
 * resume) feed the rollout's events; `watch` will feed its observations,
 * phases and heals. The access logs are read here (./trafficFeed.ts).
 *
 * close() ends everything it opened (the listening socket, every keep-alive
 * and event-stream connection, timers, the log readers): a command that is
 * done exits without waiting on it.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { DeployHealthReport } from '../core/deployHealth.js';
import {
  addTraffic,
  applyEvent,
  beginRollout,
  endRollout,
  newFleetModel,
  observeFleet,
  recordHeal,
  setPhase,
  type FleetModel,
  type InstanceView,
  type ObservedInstance,
  type Outcome,
  type Phase,
  type RolloutView,
} from '../core/fleetModel.js';
import { renderPage, renderSections } from '../core/livePage.js';
import { fleetMetrics } from './promMetrics.js';
import { TrafficFeed, type LogOpener } from './trafficFeed.js';

export interface MetricsServerOptions {
  host: string;
  /** 0: any free port (the URL says which). */
  port: number;
  service: string;
  /** Load balancer names (router names), so their series exist before the first change; those in `reloadFree` never count reloads. */
  balancers?: readonly string[];
  reloadFree?: readonly string[];
  /** The access logs to read request rates and answering versions from. */
  accessLogs?: readonly LogOpener[];
  /** How often the access logs are read (default 1000 ms). */
  logEveryMs?: number;
  now?: () => number;
}

/** What a command tells the server; one writer, many readers (scrapes, pages). */
export interface FleetMonitor {
  /** "http://127.0.0.1:9464/" */
  readonly url: string;
  /** A RolloutEvent (engine/events.ts), as the engine emits it; unknown types are ignored. */
  event(e: { type: string }): void;
  /** What the fleet is now (a starting observation, or every pass of watch): instances, and the servers each load balancer has. */
  observe(instances: readonly ObservedInstance[], balancers?: Record<string, readonly { name: string; down: boolean }[]>): void;
  /** watch: one instance's phase (creating, failed, ... that no rollout event carries). */
  phase(name: string, phase: Phase, more?: Partial<Pick<InstanceView, 'host' | 'revision' | 'address'>>): void;
  /** watch: it healed the fleet (replaced a dead instance, followed a new address, ...). */
  heal(reason: string): void;
  /** A rollout begins: its strategy, and the version it rolls to. */
  begin(strategy: string, version?: string): void;
  /** The rollout ended (outcome: the command's; default: what its events said), with its health numbers when measured. */
  finish(outcome?: Outcome, health?: DeployHealthReport): RolloutView | undefined;
  /** Resolves once /metrics was scraped after finish() (or after `maxMs`): a Prometheus scrape gets the last figures. */
  scrapedAfterFinish(maxMs: number): Promise<void>;
  /** The model, read-only (tests, and watch's own checks). */
  readonly model: FleetModel;
  close(): Promise<void>;
}

/** How often open pages get the time-based parts (ages, the versions strip) again, when nothing else changed. */
const TICK_MS = 1000;
/** Changes closer together than this go out as one push. */
const PUSH_DELAY_MS = 150;

export async function startMetricsServer(o: MetricsServerOptions): Promise<FleetMonitor> {
  const now = o.now ?? Date.now;
  const model = newFleetModel(o.service, { balancers: o.balancers, reloadFree: o.reloadFree });
  const metrics = fleetMetrics(() => model, now);
  const clients = new Set<ServerResponse>();
  let pushTimer: NodeJS.Timeout | undefined;
  let finishedAt: number | undefined;
  let scrapeWaiters: (() => void)[] = [];

  const push = () => {
    pushTimer = undefined;
    if (clients.size === 0) return;
    const data = `data: ${JSON.stringify(renderSections(model, now()))}\n\n`;
    for (const c of clients) c.write(data);
  };
  let ended = false;
  const changed = () => {
    if (!ended) pushTimer ??= setTimeout(push, PUSH_DELAY_MS);
  };
  const tick = setInterval(() => {
    if (clients.size > 0) changed();
  }, TICK_MS);

  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD' }).end();
      return;
    }
    if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text);
          if (finishedAt !== undefined) {
            for (const w of scrapeWaiters) w();
            scrapeWaiters = [];
          }
        },
        (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`),
      );
    } else if (path === '/') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' }).end(renderPage(model, now()));
    } else if (path === '/events') {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
      res.write(`retry: 2000\ndata: ${JSON.stringify(renderSections(model, now()))}\n\n`);
      clients.add(res);
      req.on('close', () => clients.delete(res));
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try / or /metrics\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;

  const feed = new TrafficFeed(
    o.accessLogs ?? [],
    (records) => {
      addTraffic(model, records);
      changed();
    },
    o.logEveryMs,
  );
  // Opening a log (a docker exec, a log stream) is not waited for: the server answers meanwhile.
  const feedStarted = feed.start();

  let closed: Promise<void> | undefined;
  return {
    url: `http://${host}:${addr.port}/`,
    model,
    event(e) {
      applyEvent(model, e, now());
      changed();
    },
    observe(instances, balancers) {
      observeFleet(model, instances, now(), balancers);
      changed();
    },
    phase(name, phase, more) {
      setPhase(model, name, phase, now(), more);
      changed();
    },
    heal(reason) {
      recordHeal(model, reason);
      metrics.heal(reason);
      changed();
    },
    begin(strategy, version) {
      finishedAt = undefined;
      beginRollout(model, strategy, now(), version);
      changed();
    },
    finish(outcome, health) {
      const r = endRollout(model, now(), outcome);
      if (r) metrics.rolloutEnded(r);
      if (health) metrics.deployHealth(health);
      finishedAt = now();
      changed();
      return r;
    },
    scrapedAfterFinish(maxMs) {
      return new Promise((resolve) => {
        const t = setTimeout(done, maxMs);
        function done() {
          clearTimeout(t);
          resolve();
        }
        scrapeWaiters.push(done);
      });
    },
    close() {
      closed ??= (async () => {
        ended = true;
        clearInterval(tick);
        clearTimeout(pushTimer);
        push();
        for (const w of scrapeWaiters) w();
        for (const c of clients) c.end();
        clients.clear();
        await feedStarted;
        await feed.close();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
      })();
      return closed;
    },
  };
}
