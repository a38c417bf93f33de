/**
 * The Prometheus series of `--metrics`, from the fleet model
 * (core/fleetModel.ts), with prom-client writing the text format. Each
 * server has its own Registry: two in one process (tests, a library
 * embedder) do not share or clash.
 *
 * What the model holds (instances, reloads, traffic totals) is read at scrape
 * time in `collect`, so a scrape always matches the model and nothing has to
 * remember to update a gauge. What happens once (a rollout ending, a heal) is
 * counted when it happens.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { isHealthUnavailable, type DeployHealthReport } from '../core/deployHealth.js';
import { instanceCounts, trafficRates, type FleetModel, type RolloutView } from '../core/fleetModel.js';

/**
 * Heal reasons whose series exist (at 0) before any heal, so a dashboard or an
 * alert on them has a series from the first scrape; `heal()` takes any other
 * reason as well.
 */
export const KNOWN_HEAL_REASONS = ['exited', 'unready', 'stuck', 'missing', 'address_changed'] as const;

export interface FleetMetrics {
  registry: Registry;
  heal(reason: string): void;
  rolloutEnded(r: RolloutView): void;
  deployHealth(h: DeployHealthReport): void;
}

export function fleetMetrics(model: () => FleetModel, now: () => number): FleetMetrics {
  const registry = new Registry();
  const service = model().service;
  new Gauge({
    name: 'fleetroll_instances',
    help: 'Instances by host, revision and phase (creating, starting, ready, available, draining, stopping, failed).',
    labelNames: ['service', 'host', 'revision', 'phase'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const r of instanceCounts(model())) this.set({ service, host: r.host, revision: r.revision, phase: r.phase }, r.count);
    },
  });
  const heals = new Counter({
    name: 'fleetroll_heals_total',
    help: 'Instances replaced or re-routed to keep the fleet at its revision, by reason.',
    labelNames: ['service', 'reason'] as const,
    registers: [registry],
  });
  for (const reason of KNOWN_HEAL_REASONS) heals.inc({ service, reason }, 0);
  new Counter({
    name: 'fleetroll_nginx_reloads_total',
    help: 'nginx reloads by load balancer (reload-free membership changes of mode: dynamic are not reloads).',
    labelNames: ['service', 'load_balancer'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [lb, n] of Object.entries(model().reloads)) this.inc({ service, load_balancer: lb }, n);
    },
  });
  const rollouts = new Counter({
    name: 'fleetroll_rollouts_total',
    help: 'Rollouts that ended, by strategy and outcome (success, failed, rolled_back, paused, interrupted).',
    labelNames: ['service', 'strategy', 'outcome'] as const,
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'fleetroll_rollout_duration_seconds',
    help: 'How long rollouts took, from the command starting them to their end, by outcome.',
    labelNames: ['service', 'outcome'] as const,
    buckets: [5, 10, 20, 30, 60, 120, 300, 600, 1200, 3600],
    registers: [registry],
  });
  new Gauge({
    name: 'fleetroll_rollout_in_progress',
    help: '1 while a rollout runs.',
    labelNames: ['service'] as const,
    registers: [registry],
    collect() {
      this.set({ service }, model().rollout ? 1 : 0);
    },
  });
  const health = {
    requests: new Gauge({
      name: 'fleetroll_last_deploy_requests',
      help: 'The last deploy: requests whose response ended in its window (access log).',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    failed: new Gauge({
      name: 'fleetroll_last_deploy_failed_requests',
      help: 'The last deploy: requests that got a 5xx in its window.',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    dropped: new Gauge({
      name: 'fleetroll_last_deploy_dropped_requests',
      help: "The last deploy: requests no instance answered (nginx's own 502/504).",
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    mixed: new Gauge({
      name: 'fleetroll_last_deploy_mixed_version_seconds',
      help: 'The last deploy: from the first new response to the last old one.',
      labelNames: ['service'] as const,
      registers: [registry],
    }),
    firstNew: new Gauge({
      name: 'fleetroll_last_deploy_first_new_instance_error_ratio',
      help: "The last deploy: the first new instance's error rate (0 to 1).",
      labelNames: ['service'] as const,
      registers: [registry],
    }),
  };
  const perRevision = (name: string, help: string, pick: (c: { requests: number; errors5xx: number }) => number, rate: boolean) =>
    rate
      ? new Gauge({
          name,
          help,
          labelNames: ['service', 'revision'] as const,
          registers: [registry],
          collect() {
            this.reset();
            for (const [rev, c] of Object.entries(trafficRates(model(), now()))) this.set({ service, revision: rev || 'unattributed' }, pick(c));
          },
        })
      : new Counter({
          name,
          help,
          labelNames: ['service', 'revision'] as const,
          registers: [registry],
          collect() {
            this.reset();
            for (const [rev, c] of Object.entries(model().totals)) this.inc({ service, revision: rev || 'unattributed' }, pick(c));
          },
        });
  perRevision(
    'fleetroll_requests_total',
    "Requests in nginx's access log by the revision that answered (unattributed: no fleet instance did).",
    (c) => c.requests,
    false,
  );
  perRevision('fleetroll_requests_5xx_total', 'Of those, the ones whose client got a 5xx.', (c) => c.errors5xx, false);
  perRevision('fleetroll_request_rate', 'Requests per second by revision over the last 10 s (from the access log).', (c) => c.requests, true);
  perRevision('fleetroll_request_5xx_rate', '5xx responses per second by revision over the last 10 s.', (c) => c.errors5xx, true);

  return {
    registry,
    heal: (reason) => heals.inc({ service, reason }),
    rolloutEnded(r) {
      const outcome = r.outcome ?? 'failed';
      rollouts.inc({ service, strategy: r.strategy, outcome });
      durations.observe({ service, outcome }, ((r.endedMs ?? now()) - r.startedMs) / 1000);
    },
    deployHealth(h) {
      if (isHealthUnavailable(h)) return;
      health.requests.set({ service }, h.requests);
      health.failed.set({ service }, h.failed5xx);
      health.dropped.set({ service }, h.dropped);
      health.mixed.set({ service }, h.mixedVersionWindowMs / 1000);
      if (h.firstNewInstance) health.firstNew.set({ service }, h.firstNewInstance.errorRate);
    },
  };
}
