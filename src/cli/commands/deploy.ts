import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { loadFleet, type Fleet } from '../../config/load.js';
import { healthOf } from '../../engine/rollout.js';
import { runManaged, type ManagedResult } from '../../engine/session.js';
import type { RolloutKind } from '../../engine/notifyRollout.js';
import { ExitCode, FleetrollError, RolloutFailedError } from '../../errors.js';
import { parseCount } from '../args.js';
import { eventPrinter } from '../events.js';
import {
  autoRollbackOption,
  composeServiceOption,
  fleetFileOption,
  jsonOption,
  lockWaitOption,
  logFormatOption,
  maxSurgeOption,
  maxUnavailableOption,
  replacementPolicyOption,
  type RolloutOptions,
} from '../options.js';
import { printFailureJson, type Out } from '../output.js';
import { healthLines } from '../health.js';
import { endMonitor, metricsLingerOption, metricsOption, startMonitor } from '../metrics.js';
import type { FleetMonitor } from '../../adapters/metricsServer.js';
import { explainStrategy } from '../strategy.js';
import { accessLogOpeners, buildDeps, fleetHandles } from '../../wiring.js';

/**
 * SIGINT/SIGTERM abort the rollout's signal: it finishes (or, while draining,
 * undoes) the step in progress and stops with the fleet consistent. A second
 * signal exits at once.
 */
function onInterrupt(notify: (signal: string) => void): { signal: AbortSignal; dispose(): void } {
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

export function registerDeploy(program: CommandUnknownOpts, out: Out): void {
  program
    .command('deploy')
    .description('roll the fleet to the spec in the fleet file (or to --image), draining each instance out of nginx first')
    .addOption(fleetFileOption())
    .addOption(composeServiceOption())
    .option('--image <image>', "deploy this image instead of the file's (its tag becomes the expected version)")
    .addOption(maxSurgeOption('override maxSurge for this rollout'))
    .addOption(maxUnavailableOption('override maxUnavailable for this rollout'))
    .addOption(
      replacementPolicyOption(
        'TerminationStarted (default: a replacement starts as soon as an instance is marked down) or TerminationComplete (only once its container is gone)',
      ),
    )
    .option('--change-cause <text>', 'why this rollout happens (recorded on the new instances; default: the command line)')
    .addOption(lockWaitOption('wait this long for another rollout of the fleet to finish (e.g. 30s, 5m)'))
    .addOption(autoRollbackOption('on failure, roll back to the previous revision (same as onFailure: rollback)'))
    .option(
      '--host-parallelism <n>',
      "how many hosts may have Docker work in flight at once (default: the fleet's hostParallelism, else 8)",
      parseCount('--host-parallelism', 1, 1000),
    )
    .option('--no-image-copy', 'do not copy the image to hosts that lack it (from another host or this machine)')
    .addOption(jsonOption('print the result as JSON on stdout (progress goes to stderr)'))
    .addOption(logFormatOption('progress lines as text or as JSON log lines'))
    .addOption(metricsOption())
    .addOption(metricsLingerOption())
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
  $ fleetroll deploy -f fleet.yaml --max-surge 1 --max-unavailable 0 --json
  $ fleetroll deploy -f fleet.yaml --metrics 127.0.0.1:9464   # Prometheus at /metrics, a live page at /`,
    )
    .action(async (o) => {
      const fleet = await loadFleet(o.file, {
        service: o.service,
        image: o.image,
        maxSurge: o.maxSurge,
        maxUnavailable: o.maxUnavailable,
        hostParallelism: o.hostParallelism,
        replacementPolicy: o.replacementPolicy,
      });
      await executeRollout(fleet, out, o, { verb: 'deploying', kind: 'deploy', changeCause: o.changeCause, copyImages: o.imageCopy });
    });
}

/**
 * The shared body of deploy, undo, restart and resume: progress output,
 * Ctrl-C handling, the managed rollout, and the final line or JSON.
 */
export async function executeRollout(
  fleet: Fleet,
  out: Out,
  o: RolloutOptions,
  what: { verb: string; kind: RolloutKind; changeCause?: string | undefined; continueRevision?: number | undefined; copyImages?: boolean },
): Promise<ManagedResult> {
  // Refused before the lock or any Docker call (the engine refuses too, for its other callers).
  const progress = o.json ? process.stderr : process.stdout;
  const printer = eventPrinter(o.logFormat, progress);
  // The deps are built with their event sink before the metrics server exists: it joins the sink once started.
  let monitor: FleetMonitor | undefined;
  const events = (e: Parameters<typeof printer>[0]) => {
    printer(e);
    monitor?.event(e);
  };
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
    if (o.metrics) {
      monitor = await startMonitor(o.metrics, fleet, deps, (l) => (o.json ? process.stderr.write(`${l}\n`) : out.line(l)));
      monitor.begin(fleet.strategy.type, fleet.version);
    }
    result = await runManaged(fleet, { ...deps, accessLogs: accessLogOpeners(fleet, deps) }, fleetHandles(fleet, deps), {
      command: `fleetroll ${process.argv.slice(2).join(' ')}`,
      changeCause: what.changeCause,
      autoRollback: o.autoRollback,
      signal: interrupt.signal,
      lockWaitMs: o.lockWait,
      continueRevision: what.continueRevision,
      kind: what.kind,
      copyImages: what.copyImages !== false,
    });
  } catch (err) {
    // A failed (paused, interrupted) rollout reports what its users saw too.
    const health = healthOf(err);
    // --json callers get a parseable outcome on stdout either way.
    if (o.json && err instanceof FleetrollError) {
      // stoppedBy "analysis": the gate took the new version out of traffic (rolled back, canary aborted or switched back).
      const stoppedBy = err instanceof RolloutFailedError ? err.details.stoppedBy : undefined;
      // phase "preflight": nothing was changed, so a retry is safe.
      const phase = err instanceof RolloutFailedError ? err.phase : undefined;
      printFailureJson(out, err, {
        ...(phase !== undefined ? { phase } : {}),
        ...(stoppedBy !== undefined ? { stoppedBy } : {}),
        ...(health ? { health } : {}),
      });
    } else if (health) for (const l of healthLines(health)) out.line(l);
    if (monitor) await endMonitor(monitor, { error: err, health }, o.metricsLinger);
    monitor = undefined;
    throw err;
  } finally {
    interrupt.dispose();
  }
  if (o.json) out.json({ outcome: 'complete', ...result });
  else {
    out.line(
      `revision ${result.revisionNumber} done in ${(result.durationMs / 1000).toFixed(1)} s: ${result.waves} wave(s), ${result.reloads} nginx reload(s), ${result.instances.length} instance(s) verified at ${result.version}`,
    );
    if (result.health) for (const l of healthLines(result.health)) out.line(l);
  }
  if (monitor) await endMonitor(monitor, { health: result.health }, o.metricsLinger);
  return result;
}
