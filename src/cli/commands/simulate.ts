import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { simulateRollout, type SimulationResult } from '../../sim/simulate.js';
import { parseCostsSource, parseCount, parseFraction, parseSeconds } from '../args.js';
import { placesText, pricedTimings, typicalText } from '../costs.js';
import { jsonOption } from '../options.js';
import { table, type Out } from '../output.js';
import { explainStrategy, strategyFromOptions, withStrategyOptions } from '../strategy.js';

const fmtS = (ms: number) => `${(ms / 1000).toFixed(ms % 1000 === 0 ? 0 : 1)} s`;

/** What the peak is made of: surge means a different thing per strategy. */
function peakParts(r: SimulationResult): string {
  if (r.strategyType === 'BlueGreen') return `replicas ${r.replicas} + the whole new set beside them`;
  if (r.strategyType === 'Canary') return `replicas ${r.replicas} + the canary instances of the steps, then the rolling update's surge ${r.maxSurge}`;
  return `replicas ${r.replicas} + surge ${r.maxSurge}`;
}

function printSimulation(r: SimulationResult, out: Out): void {
  out.line('');
  out.line(
    table(
      ['predicted', ''],
      [
        ['duration', fmtS(r.durationMs)],
        ['waves', String(r.waves)],
        [
          'peak instances',
          `${r.peakInstances} containers alive (${peakParts(r)}${r.replacementPolicy === 'TerminationStarted' ? ', plus those still draining: TerminationStarted' : ''})`,
        ],
        ['lowest capacity', `${r.lowestCapacity} of ${r.replicas} in service`],
        ['mixed-version window', fmtS(r.mixedVersionWindowMs)],
        ['load-balancer reloads', String(r.reloads)],
        ...(r.timings.idleDrainMs !== undefined
          ? [
              [
                'drains',
                `end when their requests do, ${fmtS(r.timings.idleDrainMs)} after the mark-down (nginx in the dynamic mode; drainSeconds at most)`,
              ] as [string, string],
            ]
          : []),
      ],
    ),
  );
}

export function registerSimulate(program: CommandUnknownOpts, out: Out): void {
  withStrategyOptions(
    program
      .command('simulate')
      .description("predict a rollout's duration, capacity and mixed-version window on a virtual clock")
      .addHelpText(
        'after',
        `
Timings are in seconds. --drain and --min-ready default to the fleet file's
drainSeconds and minReadySeconds (2 and 0 without a file).

With -f, the Docker and nginx steps are priced with what they cost this
fleet in its last deploys (create+start, start to ready, stop, a
load-balancer change, preflight and the final check, kept in its state);
--costs nominal, or a fleet never deployed, prices them at nothing, with a
warm-up of 3 s and a stop of 1 s. A flag given wins over a recorded cost.

Examples:
  $ fleetroll simulate --replicas 10 --max-surge 25% --max-unavailable 0 --startup 5
  $ fleetroll simulate -f fleet.yaml
  $ fleetroll simulate -f fleet.yaml --costs nominal --jitter 0.3 --seed 7 --json`,
      ),
  )
    .option('--startup <s>', 'seconds from container start to readiness (default: the recorded cost, else 3)', parseSeconds('--startup'))
    .option('--drain <s>', 'seconds an instance stays marked down before it is stopped', parseSeconds('--drain'))
    .option('--stop <s>', 'seconds a graceful stop takes (default: the recorded cost, else 1)', parseSeconds('--stop'))
    .option('--min-ready <s>', 'minReadySeconds', parseSeconds('--min-ready'))
    .option('--jitter <fraction>', 'spread startup and stop times by ± this fraction', parseFraction('--jitter'), 0)
    .option('--seed <n>', 'seed for the jitter', parseCount('--seed', 0, 2 ** 31), 1)
    .option('--costs <source>', "recorded (the fleet's measured step costs; the default with -f) or nominal", parseCostsSource)
    .addOption(jsonOption('print the prediction as JSON'))
    .action(async (o) => {
      const { strategy, fleet } = await strategyFromOptions(o);
      const priced = await pricedTimings(o, fleet);
      const result = await simulateRollout(strategy, priced.timings, priced.setup ?? {});
      if (o.json) {
        for (const n of strategy.notes) out.warn(n);
        const { deploy: _deploy, ...json } = result;
        out.json({
          ...json,
          costs: {
            source: priced.source,
            text: priced.text,
            ...(priced.recorded
              ? { deploys: priced.recorded.deploys, lastAt: priced.recorded.lastAt, typical: priced.recorded.typical, places: priced.recorded.places }
              : {}),
          },
        });
        return;
      }
      explainStrategy(strategy, out);
      out.line(priced.text);
      if (priced.recorded) {
        out.line(`  ${typicalText(priced.recorded.typical)} (medians)`);
        for (const l of placesText(priced.recorded.places)) out.line(`  ${l}`);
      }
      printSimulation(result, out);
    });
}
