/**
 * The CLI's side of a rollout strategy: the flags plan and simulate share, the
 * strategy they resolve to (from a fleet file or from flags alone), and the
 * "where each value came from" block that plan, simulate, validate and deploy
 * print.
 */
import { Option, type Command, type OptionValues } from '@commander-js/extra-typings';
import type { Fleet } from '../config/load.js';
import { MAX_REPLICAS, MODE_DESCRIPTION, SOURCE_LABEL, type CanaryStep, type ResolvedStrategy } from '../core/strategy.js';
import { ValidationError } from '../errors.js';
import { parseCount } from './args.js';
import { composeServiceOption, maxSurgeOption, maxUnavailableOption, optionalFleetFileOption, replacementPolicyOption } from './options.js';
import { table, type Out } from './output.js';

function addStrategyFlags<A extends unknown[], O extends OptionValues, G extends OptionValues>(cmd: Command<A, O, G>) {
  return cmd
    .addOption(optionalFleetFileOption('fleet file to read replicas and strategy from'))
    .addOption(composeServiceOption())
    .addOption(new Option('--replicas <n>', 'number of instances (without -f, or to override the file)').argParser(parseCount('--replicas', 0, MAX_REPLICAS)))
    .addOption(maxSurgeOption('instances allowed above replicas, e.g. 1 or 25% (overrides the file)'))
    .addOption(maxUnavailableOption('instances allowed to be unavailable, e.g. 0 or 25% (overrides the file)'))
    .addOption(
      replacementPolicyOption(
        'TerminationStarted (a replacement starts as soon as an instance is marked down) or TerminationComplete (only once its container is gone)',
      ),
    );
}

/**
 * The values of the flags addStrategyFlags adds, written out: the type
 * @commander-js/extra-typings infers for the command is too long for a
 * declaration file (TS7056), which `npm run build` emits for every module.
 */
interface StrategyFlagValues {
  file?: string | undefined;
  service?: string | undefined;
  replicas?: number | undefined;
  maxSurge?: string | undefined;
  maxUnavailable?: string | undefined;
  replacementPolicy?: string | undefined;
}

type Inferred = ReturnType<ReturnType<typeof addStrategyFlags<[], {}, {}>>['opts']>;
type Exactly<X, Y> = [X] extends [Y] ? ([Y] extends [X] ? true : false) : false;
type IsTrue<T extends true> = T;
/** Fails to compile unless StrategyFlagValues is exactly what commander infers from the flags. */
type StrategyFlagsChecked = IsTrue<Exactly<Required<Inferred>, Required<StrategyFlagValues>>>;

/** Adds the flags shared by plan and simulate. */
export function withStrategyOptions<A extends unknown[], O extends OptionValues, G extends OptionValues>(
  cmd: Command<A, O, G>,
): Command<A, O & StrategyFlagValues, G> {
  // The same command; only its type is spelled StrategyFlagValues (checked above).
  return addStrategyFlags(cmd) as unknown as Command<A, O & StrategyFlagValues, G>;
}

/** The strategy for plan/simulate, from a fleet file or from flags alone. */
export async function strategyFromOptions(o: StrategyFlagValues): Promise<{ strategy: ResolvedStrategy; fleet?: Fleet }> {
  if (o.file) {
    // The fleet file's parser and schema (yaml, zod) load only when there is a file: plan --replicas 4 does without them.
    const { loadFleet } = await import('../config/load.js');
    const fleet = await loadFleet(o.file, {
      service: o.service,
      replicas: o.replicas,
      maxSurge: o.maxSurge,
      maxUnavailable: o.maxUnavailable,
      replacementPolicy: o.replacementPolicy,
    });
    return { strategy: fleet.strategy, fleet };
  }
  if (o.replicas === undefined) {
    throw new ValidationError([{ path: '--replicas', message: 'is required without -f: give a fleet file (-f fleet.yaml) or a replica count (--replicas 4)' }]);
  }
  // The flags are checked by the fleet file's strategy schema: zod loads, the YAML parser does not.
  const { loadStrategy } = await import('../config/strategy.js');
  return {
    strategy: loadStrategy({
      replicas: o.replicas,
      cli: { maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable },
      replacementPolicy: { cli: o.replacementPolicy },
      paths: {},
    }),
  };
}

/** "30 s", "5 min", "1 h 30 min" */
export function secondsText(n: number): string {
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
      return s.seconds === undefined ? 'pause until promoted' : `pause ${secondsText(s.seconds)}`;
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

/** The "where each value came from" block that plan, simulate, validate and deploy print. */
export function explainStrategy(s: ResolvedStrategy, out: Out): void {
  out.line(`strategy ${s.type} (${SOURCE_LABEL[s.sources.type]}), ${s.replicas} replicas`);
  if (s.type === 'RollingUpdate') {
    out.line(table(['setting', 'given', 'resolved', 'from'], rollingRows(s), '  '));
    out.line(`  at most ${s.maxTotal} instances counted, at least ${s.minAvailable} available`);
    const peak =
      s.replacementPolicy === 'TerminationStarted'
        ? `more than ${s.maxTotal} containers may be alive while replaced ones drain`
        : `never more than ${s.maxTotal} containers alive`;
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
          ['force', c.force === undefined ? '(none)' : `${c.force}: "always" → canary, "never" → stable`, SOURCE_LABEL[c.sources.force]],
          [
            'canaryReplicas',
            c.canaryReplicas === undefined ? 'as the weight needs: ceil(weight × replicas), at least 1' : String(c.canaryReplicas),
            SOURCE_LABEL[c.sources.canaryReplicas],
          ],
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
