import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { placement, planStrategy, type BlueGreenPlan, type CanaryPlan, type Plan, type PlannedStep } from '../../core/plan.js';
import type { ResolvedStrategy } from '../../core/strategy.js';
import type { Fleet } from '../../config/load.js';
import { changesFromRunning } from '../../engine/records.js';
import { jsonOption } from '../options.js';
import type { FleetState } from '../../ports.js';
import { simulateRollout } from '../../sim/simulate.js';
import { pricedTimings, readStateBestEffort, type StateRead } from '../costs.js';
import { table, type Out } from '../output.js';
import { explainStrategy, secondsText, strategyFromOptions, withStrategyOptions } from '../strategy.js';

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
      return `keep the old set ${secondsText(step.seconds)} out of traffic (scaleDownDelaySeconds; undo is one reload)`;
    case 'removeOld':
      return `drain and stop the ${replicas} old instance${replicas === 1 ? '' : 's'}`;
    case 'setWeight':
      return `setWeight ${step.weight}${change}`;
    case 'pause':
      return step.seconds === null ? 'pause until `fleetroll promote` (or `abort`)' : `pause ${secondsText(step.seconds)}`;
    case 'analysis': {
      const keys = Object.keys(step.overrides);
      return `analysis${keys.length ? ` (overrides: ${keys.join(', ')})` : ' (the analysis settings)'}${change}`;
    }
  }
}

/**
 * The steps table of a blue-green or canary plan: its columns name the two
 * sides as that strategy does. False when there is nothing to do.
 */
function printSteps(p: BlueGreenPlan | CanaryPlan, headers: [string, string, string], row: (s: PlannedStep) => [string, string, string], out: Out): boolean {
  if (p.steps.length === 0) {
    out.line('nothing to do: 0 replicas');
    return false;
  }
  out.line('');
  out.line(
    table(
      ['step', 'action', ...headers, 'alive'],
      p.steps.map((s) => [String(s.index), actionText(s, p.replicas), ...row(s), String(s.alive)]),
    ),
  );
  out.line('');
  return true;
}

export function printBlueGreenPlan(p: BlueGreenPlan, delaySeconds: number, out: Out): void {
  if (!printSteps(p, ['old', 'new', 'traffic old/new'], (s) => [String(s.old), String(s.new), `${100 - s.trafficNewPercent}% / ${s.trafficNewPercent}%`], out))
    return;
  out.line(`peak alive: ${p.peakAlive} containers (the whole new set beside the old one)`);
  out.line(
    `mixed-version window: one reload (the switch); rollback: \`fleetroll undo\` ${delaySeconds > 0 ? `within ${secondsText(delaySeconds)} of the switch` : 'before the old set is removed'} is one reload back`,
  );
}

export function printCanaryPlan(p: CanaryPlan, out: Out): void {
  if (!printSteps(p, ['canary', 'stable', 'canary traffic'], (s) => [String(s.new), String(s.old), `${s.trafficNewPercent}%`], out)) return;
  const r = p.rolling;
  const [stable, canary] = r.waves[0] ?? [p.replicas, 0];
  out.line(
    `then a rolling update (maxSurge ${r.maxSurge}, maxUnavailable ${r.maxUnavailable}) from ${stable} stable and ${canary} canary instances; traffic follows the instances in service:`,
  );
  printPlan(r, out);
  out.line(`peak alive over the whole rollout: ${p.peakAlive} containers`);
}

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

/**
 * What the deploy would change from the running revision, field by field.
 * Best effort: plan works without reaching the hosts, so an unreachable
 * first host only says why there is no comparison.
 */
function printChanges(fleet: Fleet, read: { state?: FleetState | undefined; error?: string }, out: Out): void {
  if (read.error !== undefined) {
    out.line(`changes: unknown (cannot read the fleet's state: ${read.error})`);
    return;
  }
  const changes = changesFromRunning(fleet, read.state);
  if (!changes) out.line("changes: none running yet (no revision in the fleet's history)");
  else if (changes.lines.length === 0) out.line(`changes: none (the running revision ${changes.from.number} has this spec)`);
  else out.line(`changes from the running revision ${changes.from.number} (${changes.from.image}):\n  ${changes.lines.join('\n  ')}`);
}

/** The rollout's duration as simulate predicts it, priced with the fleet's recorded costs where it has some. */
async function printPredicted(strategy: ResolvedStrategy, fleet: Fleet, read: StateRead, out: Out): Promise<void> {
  const priced = await pricedTimings({}, fleet, async () => read);
  const r = await simulateRollout(strategy, priced.timings, priced.setup ?? {});
  out.line(`predicted duration: ${(r.durationMs / 1000).toFixed(1)} s (${priced.text}; \`fleetroll simulate -f\` for the details)`);
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
      const plan = planStrategy(strategy, { prePromotion: fleet?.hooks?.prePromotion !== undefined });
      if (o.json) {
        for (const n of strategy.notes) out.warn(n);
        out.json(planJson(strategy, plan));
        return;
      }
      const read = fleet ? await readStateBestEffort(fleet) : undefined;
      if (fleet && read) {
        out.line(`service ${fleet.service} (${fleet.source.file}), image ${fleet.image}`);
        printChanges(fleet, read, out);
      }
      explainStrategy(strategy, out);
      if (plan.type === 'BlueGreen') printBlueGreenPlan(plan, strategy.blueGreen?.scaleDownDelaySeconds ?? 0, out);
      else if (plan.type === 'Canary') printCanaryPlan(plan, out);
      else printPlan(plan.rolling, out);
      if (fleet && fleet.hosts.length > 1) {
        const p = placement(fleet.replicas, fleet.hosts);
        out.line(
          `placement: ${Object.entries(p.perHost)
            .map(([h, n]) => `${h} ${n}`)
            .join(', ')}${p.unplaced ? ` — ${p.unplaced} instance(s) fit on no host (maxInstances)` : ''}; surge instances go to hosts below maxInstances`,
        );
      }
      if (fleet && read && strategy.replicas > 0) await printPredicted(strategy, fleet, read, out);
    });
}
