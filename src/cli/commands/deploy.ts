import type { Command } from 'commander';
import { loadFleet, type Fleet } from '../../config/load.js';
import { runManaged, type ManagedResult } from '../../engine/session.js';
import { ExitCode, FleetrollError, UnsupportedStrategyError, fieldError } from '../../errors.js';
import { eventPrinter, type LogFormat } from '../events.js';
import type { Out } from '../output.js';
import { buildDeps, fleetHandles } from '../wiring.js';
import { explainStrategy } from './plan.js';
import { parseCount, parseDuration } from '../args.js';

export function parseLogFormat(v: string): LogFormat {
  if (v !== 'text' && v !== 'json') throw fieldError('--log-format', `must be "text" or "json", got ${JSON.stringify(v)}`);
  return v;
}

interface DeployOptions {
  file: string;
  image?: string;
  maxSurge?: string;
  maxUnavailable?: string;
  replacementPolicy?: string;
  changeCause?: string;
  autoRollback?: boolean;
  lockWait?: number;
  imageCopy?: boolean;
  hostParallelism?: number;
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
    .option('--replacement-policy <policy>', 'TerminationStarted (default: a replacement starts as soon as an instance is marked down) or TerminationComplete (only once its container is gone)')
    .option('--change-cause <text>', 'why this rollout happens (recorded on the new instances; default: the command line)')
    .option('--lock-wait <duration>', 'wait this long for another rollout of the fleet to finish (e.g. 30s, 5m)', parseDuration('--lock-wait'))
    .option('--auto-rollback', 'on failure, roll back to the previous revision (same as onFailure: rollback)')
    .option('--host-parallelism <n>', 'how many hosts may have Docker work in flight at once (default: the fleet\'s hostParallelism, else 8)', parseCount('--host-parallelism', 1, 1000))
    .option('--no-image-copy', 'do not copy the image to hosts that lack it (from another host or this machine)')
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
      const fleet = await loadFleet(o.file, { image: o.image, maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable, hostParallelism: o.hostParallelism, replacementPolicy: o.replacementPolicy });
      await executeRollout(fleet, out, o, { verb: 'deploying', changeCause: o.changeCause });
    });
}

export interface RolloutCliOptions {
  json?: boolean;
  imageCopy?: boolean;
  logFormat: LogFormat;
  lockWait?: number;
  autoRollback?: boolean;
}

/**
 * The shared body of deploy, undo, restart and resume: progress output,
 * Ctrl-C handling, the managed rollout, and the final line or JSON.
 * `prepare` may swap the fleet's spec once the fleet's state is readable.
 */
export async function executeRollout(
  fleet: Fleet,
  out: Out,
  o: RolloutCliOptions,
  what: { verb: string; changeCause?: string | undefined; continueRevision?: number | undefined },
): Promise<ManagedResult> {
  // Refused before the lock or any Docker call (the engine refuses too, for its other callers).
  if (fleet.strategy.type === 'BlueGreen' || fleet.strategy.type === 'Canary') throw new UnsupportedStrategyError(fleet.strategy.type, { file: fleet.source.file });
  const progress = o.json ? process.stderr : process.stdout;
  const events = eventPrinter(o.logFormat, progress);
  if (!o.json && o.logFormat === 'text') {
    out.line(`${what.verb} ${fleet.service}: ${fleet.replicas} × ${fleet.image} (version ${fleet.version})`);
    explainStrategy(fleet.strategy, out);
  }
  for (const n of fleet.strategy.notes) if (o.json) out.warn(n);
  let result: ManagedResult;
  const interrupt = onInterrupt((signal) => {
    process.stderr.write(`\n${signal}: finishing the step in progress, then stopping with the fleet consistent (${signal} again to exit at once)\n`);
  });
  try {
    const deps = await buildDeps(fleet, events);
    result = await runManaged(fleet, deps, fleetHandles(fleet, deps), {
      command: `fleetroll ${process.argv.slice(2).join(' ')}`,
      changeCause: what.changeCause,
      autoRollback: o.autoRollback,
      signal: interrupt.signal,
      lockWaitMs: o.lockWait,
      continueRevision: what.continueRevision,
      copyImages: o.imageCopy !== false,
    });
  } catch (err) {
    // --json callers get a parseable outcome on stdout either way.
    if (o.json && err instanceof FleetrollError) out.json({ outcome: err.code === 'E_PAUSED' ? 'paused' : 'failed', code: err.code, message: err.message, hint: err.hint });
    throw err;
  } finally {
    interrupt.dispose();
  }
  if (o.json) out.json({ outcome: 'complete', ...result });
  else out.line(`revision ${result.revisionNumber} done in ${(result.durationMs / 1000).toFixed(1)} s: ${result.waves} wave(s), ${result.reloads} nginx reload(s), ${result.instances.length} instance(s) verified at ${result.version}`);
  return result;
}
