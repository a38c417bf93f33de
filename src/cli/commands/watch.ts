import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { loadFleet } from '../../config/load.js';
import type { HealReason } from '../../core/heal.js';
import type { Phase } from '../../core/fleetModel.js';
import { notifyHeal } from '../../engine/notify.js';
import type { StatusReport } from '../../engine/status.js';
import { watchFleet } from '../../engine/watch.js';
import { ExitCode, FleetrollError } from '../../errors.js';
import { parseDuration } from '../args.js';
import { eventPrinter } from '../events.js';
import { metricsOption, startMonitor } from '../metrics.js';
import { composeServiceOption, fleetFileOption, logFormatOption } from '../options.js';
import type { Out } from '../output.js';
import { buildDeps, fleetHandles } from '../../wiring.js';

/** The heals_total label of a reason: Prometheus label values without spaces; a moved instance is an address change. */
const metricReason = (r: HealReason) => (r === 'moved' ? 'address_changed' : r.replace(/ /g, '_'));

/** What the live page and the instances gauge get from one look: each instance's phase and what each nginx routes to. */
function observed(r: StatusReport) {
  const instances = r.instances.map((i) => ({
    name: i.name,
    host: i.host,
    revision: i.revision,
    version: i.version,
    address: i.address,
    running: i.state === 'running',
  }));
  const lbs = Object.keys(r.instances[0]?.upstreams ?? {});
  const balancers = Object.fromEntries(
    lbs.map((lb) => [lb, r.instances.filter((i) => i.upstreams[lb] !== 'absent').map((i) => ({ name: i.name, down: i.upstreams[lb] !== 'up' }))]),
  );
  const phases = r.instances.map((i) => [i.name, (i.state !== 'running' ? 'failed' : i.ready ? 'available' : 'starting') as Phase] as const);
  return { instances, balancers, phases };
}

export function registerWatch(program: CommandUnknownOpts, out: Out): void {
  program
    .command('watch')
    .description(
      'keep the fleet at its current revision between deploys: replace what died or stays unready, take out what stopped answering, follow new addresses',
    )
    .addOption(fleetFileOption())
    .addOption(composeServiceOption())
    .option('--interval <duration>', 'how often to look at the fleet (e.g. 2s)', parseDuration('--interval'), 2000)
    .option(
      '--settle <duration>',
      'heal a fault only once it has lasted this long (a restart gets its chance; faults together are healed together)',
      parseDuration('--settle'),
      1000,
    )
    .option('--once', 'look once, heal what needs it, and exit: 0 when the fleet is whole, 1 when not')
    .addOption(metricsOption())
    .addOption(logFormatOption('progress lines as text or as JSON log lines'))
    .addHelpText(
      'after',
      `
The current revision is the one the last deploy (undo, restart, resume)
completed. An instance of it that exited or is gone is replaced; one that
stops answering readiness is taken out of every nginx at once and put back
when it answers again, reported while it does not, and replaced once it has
been unready for progressDeadlineSeconds (stuck); one that came back at a new address (a restart, a
reboot) gets it in nginx; a server nginx sends users to that no instance has
is taken out. Each heal is a rollout of the same revision under the fleet's
lock: the same controller, drains and nginx writes as a deploy. Instances of
a revision the fleet's history does not know are reported, not touched.

While a deploy, undo or restart holds the lock, or the latest revision is
not complete, the watch steps back; it keeps the new revision once a deploy
completes it. A second watch of the same fleet waits for the first.
SIGINT or SIGTERM stop it (a heal in progress ends cleanly first); exit 0.

Examples:
  $ fleetroll watch -f fleet.yaml
  $ fleetroll watch -f fleet.yaml --interval 5s --metrics 127.0.0.1:9464
  $ fleetroll watch -f fleet.yaml --once        # from cron`,
    )
    .action(async (o) => {
      const fleet = await loadFleet(o.file, { service: o.service });
      const events = eventPrinter(o.logFormat, process.stdout);
      const deps = await buildDeps(fleet, events);
      const h = fleetHandles(fleet, deps);
      const log = (message: string) => events({ type: 'info', message: `watch: ${message}` });
      const monitor = o.metrics ? await startMonitor(o.metrics, fleet, deps, (l) => out.line(l)) : undefined;
      const controller = new AbortController();
      const stop = (signal: NodeJS.Signals) => {
        if (controller.signal.aborted) process.exit(ExitCode.interrupted);
        log(`${signal}: stopping (a heal in progress ends cleanly first; ${signal} again to exit at once)`);
        controller.abort();
      };
      process.on('SIGINT', stop);
      process.on('SIGTERM', stop);
      try {
        const end = await watchFleet({
          fleet,
          deps: monitor ? { ...deps, events: (e) => (events(e), monitor.event(e)) } : deps,
          h,
          signal: controller.signal,
          intervalMs: o.interval,
          settleMs: o.settle,
          once: o.once === true,
          log,
          onLook: (r) => {
            if (!monitor) return;
            const seen = observed(r);
            monitor.observe(seen.instances, seen.balancers);
            for (const [name, phase] of seen.phases) monitor.phase(name, phase);
          },
          onHeal: (reasons, ok) => {
            if (!ok) return;
            for (const r of reasons) monitor?.heal(metricReason(r));
            void h.store
              .read()
              .then((s) => {
                const latest = s?.revisions[s.revisions.length - 1];
                if (!latest || !deps.webhookPost || !fleet.notify?.webhooks?.length) return;
                return notifyHeal(
                  fleet.notify.webhooks,
                  deps.webhookPost,
                  {
                    service: fleet.service,
                    revision: latest.number,
                    revisionHash: latest.hash,
                    version: latest.version,
                    image: latest.image,
                    reason: reasons.join(', '),
                  },
                  (f) => events({ type: 'notifyFailed', ...f }),
                );
              })
              .catch(() => {});
          },
        });
        if (o.once && !end.whole)
          throw new FleetrollError('E_ROLLOUT_FAILED', `${fleet.service} is not whole after one look and heal`, {
            hint: `fleetroll status -f ${o.file} shows what is wrong`,
          });
        log(o.once ? `${fleet.service} is whole (${end.heals} heal(s))` : `stopped after ${end.heals} heal(s)`);
      } finally {
        process.off('SIGINT', stop);
        process.off('SIGTERM', stop);
        await monitor?.close();
      }
    });
}
