/**
 * `--metrics HOST:PORT` for the commands that run a rollout (deploy, undo,
 * restart, resume): the option, its parser, and the wiring of the metrics
 * server (adapters/metricsServer.ts) to a rollout: a starting observation of
 * the fleet, the rollout's events, its end and health numbers. `watch` will
 * feed the same server its own observations and heals.
 */
import { Option } from '@commander-js/extra-typings';
import type { FleetMonitor } from '../adapters/metricsServer.js';
import type { Fleet } from '../config/load.js';
import type { DeployHealthReport } from '../core/deployHealth.js';
import type { Outcome } from '../core/fleetModel.js';
import { fleetSnapshot } from '../engine/observe.js';
import type { DeployDeps } from '../engine/rollout.js';
import { outcomeOf } from '../engine/records.js';
import { fieldError } from '../errors.js';
import { accessLogOpeners } from '../wiring.js';
import { parseDuration } from './args.js';

export interface Listen {
  host: string;
  port: number;
}

const ALLOWED = 'HOST:PORT, e.g. 127.0.0.1:9464, 0.0.0.0:9464 or [::1]:9464 (port 0 to 65535; 0 picks a free one)';

/** "127.0.0.1:9464", "localhost:0", "[::1]:9464" → where to listen. */
export function parseListen(flag: string) {
  return (value: string): Listen => {
    const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):([0-9]{1,5})$/.exec(value);
    const port = Number(m?.[3]);
    if (!m || port > 65535) throw fieldError(flag, `must be ${ALLOWED}, got ${JSON.stringify(value)}`);
    return { host: m[1] ?? m[2] ?? '', port };
  };
}

export const metricsOption = () =>
  new Option('--metrics <host:port>', 'serve Prometheus metrics at /metrics and a live page at / while the command runs (port 0: any free port)').argParser(
    parseListen('--metrics'),
  );

export const metricsLingerOption = () =>
  new Option(
    '--metrics-linger <duration>',
    'with --metrics: after the rollout, keep serving until /metrics was scraped once more, at most this long (e.g. 30s), so a scrape gets the outcome',
  ).argParser(parseDuration('--metrics-linger'));

/**
 * Starts the server, says where (on `say`: stderr when stdout carries --json)
 * and observes the fleet as it is. A rollout command then calls begin() and,
 * at its end, `endMonitor`; `watch` can use it the same way and feed it
 * observe(), phase() and heal() instead.
 */
export async function startMonitor(listen: Listen, fleet: Fleet, deps: DeployDeps, say: (line: string) => void): Promise<FleetMonitor> {
  // Loaded only with --metrics: prom-client and the page cost every other command (undo's switch-back among them) its start.
  const { startMetricsServer } = await import('../adapters/metricsServer.js');
  const monitor = await startMetricsServer({
    ...listen,
    service: fleet.service,
    balancers: deps.routers.map((r) => r.router.name),
    reloadFree: deps.routers.filter((r) => r.router.reloadFree).map((r) => r.router.name),
    accessLogs: accessLogOpeners(fleet, deps),
  }).catch((err: unknown) => {
    // Refused before the lock or any change: the same exit as a bad value (in use, not an address of this machine).
    throw fieldError('--metrics', `cannot listen on ${listen.host}:${listen.port}: ${(err as Error).message}`);
  });
  say(`metrics: ${monitor.url}`);
  // An observation that fails costs the page the old instances' names until the events name them; never the rollout.
  await fleetSnapshot(fleet.service, deps, fleet.hostParallelism)
    .then((s) => monitor.observe(s.instances, s.balancers))
    .catch(() => {});
  return monitor;
}

const OUTCOMES: Record<ReturnType<typeof outcomeOf>['outcome'], Outcome> = {
  complete: 'success',
  failed: 'failed',
  'rolled back': 'rolled_back',
  paused: 'paused',
  interrupted: 'interrupted',
  'in progress': 'failed',
};

/** Records how the rollout ended, serves the last figures to one more scrape when asked to, and closes the server. */
export async function endMonitor(
  monitor: FleetMonitor,
  end: { error?: unknown; health?: DeployHealthReport | undefined },
  lingerMs: number | undefined,
): Promise<void> {
  try {
    monitor.finish(end.error === undefined ? 'success' : OUTCOMES[outcomeOf(end.error).outcome], end.health);
    if (lingerMs) await monitor.scrapedAfterFinish(lingerMs);
  } finally {
    await monitor.close();
  }
}
