import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { loadFleet } from '../../config/load.js';
import { fleetFileOption, jsonOption } from '../options.js';
import type { Out } from '../output.js';
import { explainStrategy } from '../strategy.js';

export function registerValidate(program: CommandUnknownOpts, out: Out): void {
  program
    .command('validate')
    .description('check a fleet file (and its shared defaults) without touching anything')
    .addOption(fleetFileOption())
    .addOption(jsonOption('print the effective fleet as JSON'))
    .addHelpText('after', '\nExit status: 0 valid, 2 invalid (every problem is listed with its field path).\n\nExample:\n  $ fleetroll validate -f examples/fleet.yaml')
    .action(async (o) => {
      const fleet = await loadFleet(o.file);
      if (o.json) {
        // env values may be secrets: show their names only.
        out.json({ ...fleet, env: Object.keys(fleet.env ?? {}) });
        return;
      }
      out.line(`${o.file}: valid`);
      out.line(`service ${fleet.service}: ${fleet.replicas} × ${fleet.image} (version ${fleet.version}) on ${fleet.hosts.length} host(s), ${fleet.loadBalancers.length} load balancer(s)`);
      explainStrategy(fleet.strategy, out);
      const t = fleet.timingSources;
      out.line(
        `timings: minReadySeconds ${fleet.minReadySeconds} (${t.minReadySeconds}), progressDeadlineSeconds ${fleet.progressDeadlineSeconds} (${t.progressDeadlineSeconds}), drainSeconds ${fleet.drainSeconds} (${t.drainSeconds}), terminationGracePeriodSeconds ${fleet.terminationGracePeriodSeconds} (${t.terminationGracePeriodSeconds}), hostParallelism ${fleet.hostParallelism} (${t.hostParallelism})`,
      );
    });
}
