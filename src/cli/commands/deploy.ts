import type { Command } from 'commander';
import { loadFleet } from '../../config/load.js';
import { deploy } from '../../engine/deploy.js';
import { ExitCode, FleetrollError, fieldError } from '../../errors.js';
import { eventPrinter, type LogFormat } from '../events.js';
import type { Out } from '../output.js';
import { buildDeps } from '../wiring.js';
import { explainStrategy } from './plan.js';

export function parseLogFormat(v: string): LogFormat {
  if (v !== 'text' && v !== 'json') throw fieldError('--log-format', `must be "text" or "json", got ${JSON.stringify(v)}`);
  return v;
}

interface DeployOptions {
  file: string;
  image?: string;
  maxSurge?: string;
  maxUnavailable?: string;
  changeCause?: string;
  autoRollback?: boolean;
  json?: boolean;
  logFormat: LogFormat;
}

/**
 * SIGINT/SIGTERM abort the rollout's signal: it finishes (or, while draining,
 * undoes) the step in progress and stops with the fleet consistent. A second
 * signal exits at once.
 */
export function onInterrupt(notify: (signal: string) => void): { signal: AbortSignal; dispose(): void } {
  const controller = new AbortController();
  const handler = (signal: NodeJS.Signals) => {
    if (controller.signal.aborted) process.exit(ExitCode.interrupted);
    notify(signal);
    controller.abort();
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
  return {
    signal: controller.signal,
    dispose: () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    },
  };
}

export function registerDeploy(program: Command, out: Out): void {
  program
    .command('deploy')
    .description('roll the fleet to the spec in the fleet file (or to --image), draining each instance out of nginx first')
    .requiredOption('-f, --file <fleet.yaml>', 'fleet file')
    .option('--image <image>', 'deploy this image instead of the file\'s (its tag becomes the expected version)')
    .option('--max-surge <n|%>', 'override maxSurge for this rollout')
    .option('--max-unavailable <n|%>', 'override maxUnavailable for this rollout')
    .option('--change-cause <text>', 'why this rollout happens (recorded on the new instances; default: the command line)')
    .option('--auto-rollback', 'on failure, roll back to the previous revision (same as onFailure: rollback)')
    .option('--json', 'print the result as JSON on stdout (progress goes to stderr)')
    .option('--log-format <text|json>', 'progress lines as text or as JSON log lines', parseLogFormat, 'text')
    .addHelpText(
      'after',
      `
Each wave marks the instances to replace "down" in every nginx upstream,
checks the config with nginx -t, reloads (a graceful drain), waits
drainSeconds, stops them gracefully, starts new instances, and puts each one
in the upstream as soon as its readiness probe passes. At the end every
instance is asked for its version.

On failure (progress deadline, a failing hook, wrong versions) the fleet is
left as it is, unready instances out of nginx (onFailure: pause, the default),
or rolled back to the previous revision with the same limits
(onFailure: rollback, or --auto-rollback). Ctrl-C finishes or undoes the step
in progress and stops with no ready instance left marked down.

Exit status: 0 done and verified, 1 rollout failed (the message says what to
do next), 2 invalid fleet file or flags (nothing changed), 130 interrupted.

Examples:
  $ fleetroll deploy -f fleet.yaml --image bookstore-api:1.1.0
  $ fleetroll deploy -f fleet.yaml --max-surge 1 --max-unavailable 0 --json`,
    )
    .action(async (o: DeployOptions) => {
      const fleet = await loadFleet(o.file, { image: o.image, maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable });
      const progress = o.json ? process.stderr : process.stdout;
      const events = eventPrinter(o.logFormat, progress);
      if (!o.json && o.logFormat === 'text') {
        out.line(`deploying ${fleet.service}: ${fleet.replicas} × ${fleet.image} (version ${fleet.version})`);
        explainStrategy(fleet.strategy, out);
      }
      for (const n of fleet.strategy.notes) if (o.json) out.warn(n);
      let result;
      const interrupt = onInterrupt((signal) => {
        process.stderr.write(`\n${signal}: finishing the step in progress, then stopping with the fleet consistent (${signal} again to exit at once)\n`);
      });
      try {
        result = await deploy(fleet, await buildDeps(fleet, events), {
          changeCause: o.changeCause ?? `fleetroll ${process.argv.slice(2).join(' ')}`,
          autoRollback: o.autoRollback,
          signal: interrupt.signal,
        });
      } catch (err) {
        // --json callers get a parseable outcome on stdout either way.
        if (o.json && err instanceof FleetrollError) out.json({ outcome: 'failed', code: err.code, message: err.message, hint: err.hint });
        throw err;
      } finally {
        interrupt.dispose();
      }
      if (o.json) {
        out.json({ outcome: 'complete', ...result });
        return;
      }
      out.line(`done in ${(result.durationMs / 1000).toFixed(1)} s: ${result.waves} wave(s), ${result.reloads} nginx reload(s), ${result.instances.length} instance(s) verified at ${result.version}`);
    });
}
