import type { Command } from 'commander';
import { loadFleet, type Fleet } from '../../config/load.js';
import { placement, planRollout, type Plan } from '../../core/plan.js';
import { MODE_DESCRIPTION, SOURCE_LABEL, resolveStrategy, type ResolvedStrategy } from '../../core/strategy.js';
import { ValidationError } from '../../errors.js';
import { parseCount } from '../args.js';
import { table, type Out } from '../output.js';

export interface StrategyOptions {
  file?: string;
  replicas?: number;
  maxSurge?: string;
  maxUnavailable?: string;
  replacementPolicy?: string;
}

/** Adds the flags shared by plan and simulate. */
export function addStrategyOptions(cmd: Command): Command {
  return cmd
    .option('-f, --file <fleet.yaml>', 'fleet file to read replicas and strategy from')
    .option('--replicas <n>', 'number of instances (without -f, or to override the file)', parseCount('--replicas', 0, 100000))
    .option('--max-surge <n|%>', 'instances allowed above replicas, e.g. 1 or 25% (overrides the file)')
    .option('--max-unavailable <n|%>', 'instances allowed to be unavailable, e.g. 0 or 25% (overrides the file)')
    .option('--replacement-policy <policy>', 'TerminationStarted (a replacement starts as soon as an instance is marked down) or TerminationComplete (only once its container is gone)');
}

/** The strategy for plan/simulate, from a fleet file or from flags alone. */
export async function strategyFromOptions(o: StrategyOptions): Promise<{ strategy: ResolvedStrategy; fleet?: Fleet }> {
  if (o.file) {
    const fleet = await loadFleet(o.file, { replicas: o.replicas, maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable, replacementPolicy: o.replacementPolicy });
    return { strategy: fleet.strategy, fleet };
  }
  if (o.replicas === undefined) {
    throw new ValidationError([{ path: '--replicas', message: 'is required without -f: give a fleet file (-f fleet.yaml) or a replica count (--replicas 4)' }]);
  }
  return { strategy: resolveStrategy({ replicas: o.replicas, cli: { maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable }, replacementPolicy: { cli: o.replacementPolicy }, paths: {} }) };
}

/** The "where each value came from" block that plan and simulate print. */
export function explainStrategy(s: ResolvedStrategy, out: Out): void {
  out.line(`strategy ${s.type} (${SOURCE_LABEL[s.sources.type]}), ${s.replicas} replicas`);
  if (s.type === 'RollingUpdate') {
    out.line(
      table(
        ['setting', 'given', 'resolved', 'from'],
        [
          ['maxSurge', String(s.spec.maxSurge), String(s.maxSurge), SOURCE_LABEL[s.sources.maxSurge]],
          ['maxUnavailable', String(s.spec.maxUnavailable), String(s.maxUnavailable), SOURCE_LABEL[s.sources.maxUnavailable]],
        ],
        '  ',
      ),
    );
    out.line(`  at most ${s.maxTotal} instances counted, at least ${s.minAvailable} available`);
    const peak = s.replacementPolicy === 'TerminationStarted' ? `more than ${s.maxTotal} containers may be alive while replaced ones drain` : `never more than ${s.maxTotal} containers alive`;
    out.line(`  replacementPolicy ${s.replacementPolicy} (${SOURCE_LABEL[s.sources.replacementPolicy]}): ${peak}`);
  }
  out.line(`mode: ${MODE_DESCRIPTION[s.mode]}`);
  for (const n of s.notes) out.line(`note: ${n}`);
}

export function printPlan(p: Plan, out: Out): void {
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

export function registerPlan(program: Command, out: Out): void {
  addStrategyOptions(
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
    .option('--json', 'print the plan as JSON')
    .action(async (o: StrategyOptions & { json?: boolean }) => {
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
