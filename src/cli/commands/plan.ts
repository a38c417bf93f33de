import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { placement, planRollout, type Plan } from '../../core/plan.js';
import { jsonOption } from '../options.js';
import { table, type Out } from '../output.js';
import { explainStrategy, strategyFromOptions, withStrategyOptions } from '../strategy.js';

function printPlan(p: Plan, out: Out): void {
  if (p.details.length === 0) {
    out.line('nothing to do: 0 replicas');
    return;
  }
  out.line('');
  out.line(
    table(
      ['wave', 'start', 'drain+stop', 'after (old/new)', 'available', 'peak alive'],
      p.details.map((w) => [
        String(w.index),
        String(w.started),
        String(w.stopped),
        `${w.after[0]} / ${w.after[1]}`,
        w.capacity.min === w.capacity.max ? String(w.capacity.min) : `${w.capacity.min}..${w.capacity.max}`,
        String(w.peakAlive),
      ]),
    ),
  );
  out.line('');
  out.line(`${p.details.length} wave${p.details.length === 1 ? '' : 's'}; a wave ends when the algorithm allows nothing more until new instances become ready`);
  const peak = Math.max(...p.details.map((w) => w.peakAlive));
  out.line(
    p.replacementPolicy === 'TerminationStarted'
      ? `peak alive: at most ${peak} containers (TerminationStarted: replacements start while the instances they replace still drain; TerminationComplete keeps it at ${p.maxTotal})`
      : `peak alive: ${peak} containers (${p.replacementPolicy}: a replacement starts once its predecessor is gone)`,
  );
}

export function registerPlan(program: CommandUnknownOpts, out: Out): void {
  withStrategyOptions(
    program
      .command('plan')
      .description('show the waves a rollout will take, and where each strategy value comes from')
      .addHelpText(
        'after',
        `
Examples:
  $ fleetroll plan -f fleet.yaml
  $ fleetroll plan --replicas 4 --max-surge 1 --max-unavailable 0
  $ fleetroll plan --replicas 10 --json
    {"replicas":10,"maxSurge":3,"maxUnavailable":2,"minAvailable":8,"maxTotal":13,"waves":[[10,0],[8,5],[3,10],[0,10]]}`,
      ),
  )
    .addOption(jsonOption('print the plan as JSON'))
    .action(async (o) => {
      const { strategy, fleet } = await strategyFromOptions(o);
      const plan = planRollout(strategy);
      if (o.json) {
        const { replicas, maxSurge, maxUnavailable, minAvailable, maxTotal, waves } = plan;
        for (const n of strategy.notes) out.warn(n);
        out.json({ replicas, maxSurge, maxUnavailable, minAvailable, maxTotal, waves });
        return;
      }
      if (fleet) out.line(`service ${fleet.service} (${fleet.source.file}), image ${fleet.image}`);
      explainStrategy(strategy, out);
      printPlan(plan, out);
      if (fleet && fleet.hosts.length > 1) {
        const p = placement(fleet.replicas, fleet.hosts);
        out.line(`placement: ${Object.entries(p.perHost).map(([h, n]) => `${h} ${n}`).join(', ')}${p.unplaced ? ` — ${p.unplaced} instance(s) fit on no host (maxInstances)` : ''}; surge instances go to hosts below maxInstances`);
      }
    });
}
