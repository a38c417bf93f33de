import type { Command } from 'commander';
import { loadFleet, type Fleet } from '../../config/load.js';
import { placement, planStrategy, type BlueGreenPlan, type CanaryPlan, type Plan, type PlannedStep } from '../../core/plan.js';
import { MODE_DESCRIPTION, SOURCE_LABEL, resolveStrategy, type CanaryStep, type ResolvedStrategy } from '../../core/strategy.js';
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

/** "30 s", "5 min", "1 h 30 min" */
function seconds(n: number): string {
  if (n < 60 || n % 60 !== 0) return `${n} s`;
  if (n < 3600 || n % 3600 === 0) return n < 3600 ? `${n / 60} min` : `${n / 3600} h`;
  return `${Math.floor(n / 3600)} h ${(n % 3600) / 60} min`;
}

/** A canary step as a user writes it: "setWeight 10", "pause 30 s", "pause until promoted", "analysis". */
export function stepText(s: CanaryStep): string {
  switch (s.kind) {
    case 'setWeight':
      return `setWeight ${s.weight}`;
    case 'pause':
      return s.seconds === undefined ? 'pause until resumed or promoted' : `pause ${seconds(s.seconds)}`;
    case 'analysis': {
      const keys = Object.keys(s.overrides);
      return keys.length ? `analysis (${keys.join(', ')})` : 'analysis';
    }
  }
}

/** The rows of the rolling-update settings table. */
function rollingRows(s: ResolvedStrategy): string[][] {
  return [
    ['maxSurge', String(s.spec.maxSurge), String(s.maxSurge), SOURCE_LABEL[s.sources.maxSurge]],
    ['maxUnavailable', String(s.spec.maxUnavailable), String(s.maxUnavailable), SOURCE_LABEL[s.sources.maxUnavailable]],
  ];
}

/** The "where each value came from" block that plan and simulate print. */
export function explainStrategy(s: ResolvedStrategy, out: Out): void {
  out.line(`strategy ${s.type} (${SOURCE_LABEL[s.sources.type]}), ${s.replicas} replicas`);
  if (s.type === 'RollingUpdate') {
    out.line(table(['setting', 'given', 'resolved', 'from'], rollingRows(s), '  '));
    out.line(`  at most ${s.maxTotal} instances counted, at least ${s.minAvailable} available`);
    const peak = s.replacementPolicy === 'TerminationStarted' ? `more than ${s.maxTotal} containers may be alive while replaced ones drain` : `never more than ${s.maxTotal} containers alive`;
    out.line(`  replacementPolicy ${s.replacementPolicy} (${SOURCE_LABEL[s.sources.replacementPolicy]}): ${peak}`);
  } else if (s.type === 'BlueGreen') {
    const bg = s.blueGreen;
    out.line(
      table(
        ['setting', 'value', 'from'],
        [
          ['scaleDownDelaySeconds', String(bg.scaleDownDelaySeconds), SOURCE_LABEL[bg.sources.scaleDownDelaySeconds]],
          ['previewUpstream', bg.previewUpstream ?? '(none)', SOURCE_LABEL[bg.sources.previewUpstream]],
          ['autoPromote', String(bg.autoPromote), SOURCE_LABEL[bg.sources.autoPromote]],
        ],
        '  ',
      ),
    );
    out.line(`  the whole new set (${s.replicas}) starts beside the old one: at most ${s.maxTotal} instances alive, ${s.minAvailable} available throughout`);
  } else if (s.type === 'Canary') {
    const c = s.canary;
    out.line(
      table(
        ['setting', 'value', 'from'],
        [
          ['steps', c.steps.map(stepText).join(', '), SOURCE_LABEL[c.sources.steps]],
          ['stickyKey', c.stickyKey, SOURCE_LABEL[c.sources.stickyKey]],
          ['canaryReplicas', c.canaryReplicas === undefined ? 'as the weight needs: ceil(weight × replicas), at least 1' : String(c.canaryReplicas), SOURCE_LABEL[c.sources.canaryReplicas]],
        ],
        '  ',
      ),
    );
    out.line('  after the last step, a rolling update replaces the stable instances:');
    out.line(table(['setting', 'given', 'resolved', 'from'], rollingRows(s), '  '));
    out.line(`  replacementPolicy ${s.replacementPolicy} (${SOURCE_LABEL[s.sources.replacementPolicy]}); rolling mode ${MODE_DESCRIPTION[c.rollingMode]}`);
  }
  out.line(`mode: ${MODE_DESCRIPTION[s.mode]}`);
  for (const n of s.notes) out.line(`note: ${n}`);
}

/** What a blue-green or canary step does, for people. */
export function actionText(step: PlannedStep, replicas: number): string {
  const canaries = (k: number) => `${k} canary instance${k === 1 ? '' : 's'}`;
  const change = step.started > 0 ? `: start ${canaries(step.started)}` : step.stopped > 0 ? `: drain and stop ${canaries(step.stopped)}` : '';
  switch (step.kind) {
    case 'startNew':
      return `start ${replicas} new instance${replicas === 1 ? '' : 's'} out of traffic; wait until every one is available`;
    case 'preview':
      return `write the new set into upstream ${step.upstream} (the preview; one reload per load balancer)`;
    case 'prePromotion':
      return 'run hooks.prePromotion (a failure keeps all traffic on the old set)';
    case 'awaitPromote':
      return 'wait for `fleetroll promote` (autoPromote: false)';
    case 'switch':
      return 'switch every upstream to the new set: one rewrite and one reload per load balancer';
    case 'scaleDownDelay':
      return `keep the old set ${seconds(step.seconds)} out of traffic (scaleDownDelaySeconds; undo is one reload)`;
    case 'removeOld':
      return `drain and stop the ${replicas} old instance${replicas === 1 ? '' : 's'}`;
    case 'setWeight':
      return `setWeight ${step.weight}${change}`;
    case 'pause':
      return step.seconds === null ? 'pause until `fleetroll resume` or `promote`' : `pause ${seconds(step.seconds)}`;
    case 'analysis': {
      const keys = Object.keys(step.overrides);
      return `analysis${keys.length ? ` (overrides: ${keys.join(', ')})` : ' (the analysis settings)'}${change}`;
    }
  }
}

export function printBlueGreenPlan(p: BlueGreenPlan, delaySeconds: number, out: Out): void {
  if (p.steps.length === 0) {
    out.line('nothing to do: 0 replicas');
    return;
  }
  out.line('');
  out.line(
    table(
      ['step', 'action', 'old', 'new', 'traffic old/new', 'alive'],
      p.steps.map((s) => [String(s.index), actionText(s, p.replicas), String(s.old), String(s.new), `${100 - s.trafficNewPercent}% / ${s.trafficNewPercent}%`, String(s.alive)]),
    ),
  );
  out.line('');
  out.line(`peak alive: ${p.peakAlive} containers (the whole new set beside the old one)`);
  out.line(`mixed-version window: one reload (the switch); rollback: \`fleetroll undo\` ${delaySeconds > 0 ? `within ${seconds(delaySeconds)} of the switch` : 'before the old set is removed'} is one reload back`);
}

export function printCanaryPlan(p: CanaryPlan, out: Out): void {
  if (p.steps.length === 0) {
    out.line('nothing to do: 0 replicas');
    return;
  }
  out.line('');
  out.line(
    table(
      ['step', 'action', 'canary', 'stable', 'canary traffic', 'alive'],
      p.steps.map((s) => [String(s.index), actionText(s, p.replicas), String(s.new), String(s.old), `${s.trafficNewPercent}%`, String(s.alive)]),
    ),
  );
  out.line('');
  const r = p.rolling;
  const [stable, canary] = r.waves[0] ?? [p.replicas, 0];
  out.line(`then a rolling update (maxSurge ${r.maxSurge}, maxUnavailable ${r.maxUnavailable}) from ${stable} stable and ${canary} canary instances; traffic follows the instances in service:`);
  printPlan(r, out);
  out.line(`peak alive over the whole rollout: ${p.peakAlive} containers`);
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

/**
 * `plan --json`. RollingUpdate / Recreate: exactly the six fields of before.
 * BlueGreen / Canary add `type`, `steps` (each with index, kind and its own
 * fields, old/new alive after it, started/stopped, trafficNewPercent, alive)
 * and `peakAlive`. Their `waves`: blue-green's [[N,0],[N,N],[0,N]]; a canary's
 * final rolling update, from where its last step left the fleet, which is also
 * what a canary's maxSurge / maxUnavailable / minAvailable / maxTotal describe.
 */
export function planJson(s: ResolvedStrategy, plan: ReturnType<typeof planStrategy>): Record<string, unknown> {
  const { replicas, maxSurge, maxUnavailable, minAvailable, maxTotal } = s;
  if (plan.type === 'RollingUpdate' || plan.type === 'Recreate') {
    const { replicas, maxSurge, maxUnavailable, minAvailable, maxTotal, waves } = plan.rolling;
    return { replicas, maxSurge, maxUnavailable, minAvailable, maxTotal, waves };
  }
  const waves = plan.type === 'BlueGreen' ? plan.waves : plan.rolling.waves;
  return { type: plan.type, replicas, maxSurge, maxUnavailable, minAvailable, maxTotal, waves, steps: plan.steps, peakAlive: plan.peakAlive };
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
      const plan = planStrategy(strategy, { prePromotion: fleet?.hooks?.prePromotion !== undefined });
      if (o.json) {
        for (const n of strategy.notes) out.warn(n);
        out.json(planJson(strategy, plan));
        return;
      }
      if (fleet) out.line(`service ${fleet.service} (${fleet.source.file}), image ${fleet.image}`);
      explainStrategy(strategy, out);
      if (plan.type === 'BlueGreen') printBlueGreenPlan(plan, strategy.blueGreen?.scaleDownDelaySeconds ?? 0, out);
      else if (plan.type === 'Canary') printCanaryPlan(plan, out);
      else printPlan(plan.rolling, out);
      if (plan.type === 'BlueGreen' || plan.type === 'Canary') out.line(`(${plan.type} rollouts are planned and explained here; deploy support lands with the controller work)`);
      if (fleet && fleet.hosts.length > 1) {
        const p = placement(fleet.replicas, fleet.hosts);
        out.line(`placement: ${Object.entries(p.perHost).map(([h, n]) => `${h} ${n}`).join(', ')}${p.unplaced ? ` — ${p.unplaced} instance(s) fit on no host (maxInstances)` : ''}; surge instances go to hosts below maxInstances`);
      }
    });
}
