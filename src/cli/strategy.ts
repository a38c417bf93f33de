/**
 * The CLI's side of a rollout strategy: the flags plan and simulate share, the
 * strategy they resolve to (from a fleet file or from flags alone), and the
 * "where each value came from" block that plan, simulate, validate and deploy
 * print.
 */
import { Option, type Command, type OptionValues } from '@commander-js/extra-typings';
import type { Fleet } from '../config/load.js';
import { MODE_DESCRIPTION, SOURCE_LABEL, resolveStrategy, type ResolvedStrategy } from '../core/strategy.js';
import { ValidationError } from '../errors.js';
import { parseCount } from './args.js';
import { maxSurgeOption, maxUnavailableOption, optionalFleetFileOption, replacementPolicyOption } from './options.js';
import { table, type Out } from './output.js';

/** Adds the flags shared by plan and simulate. */
export function withStrategyOptions<A extends unknown[], O extends OptionValues, G extends OptionValues>(cmd: Command<A, O, G>) {
  return cmd
    .addOption(optionalFleetFileOption('fleet file to read replicas and strategy from'))
    .addOption(new Option('--replicas <n>', 'number of instances (without -f, or to override the file)').argParser(parseCount('--replicas', 0, 100000)))
    .addOption(maxSurgeOption('instances allowed above replicas, e.g. 1 or 25% (overrides the file)'))
    .addOption(maxUnavailableOption('instances allowed to be unavailable, e.g. 0 or 25% (overrides the file)'))
    .addOption(replacementPolicyOption('TerminationStarted (a replacement starts as soon as an instance is marked down) or TerminationComplete (only once its container is gone)'));
}

type StrategyOptions = ReturnType<ReturnType<typeof withStrategyOptions<[], {}, {}>>['opts']>;

/** The strategy for plan/simulate, from a fleet file or from flags alone. */
export async function strategyFromOptions(o: StrategyOptions): Promise<{ strategy: ResolvedStrategy; fleet?: Fleet }> {
  if (o.file) {
    // The fleet file's parser and schema (yaml, zod) load only when there is a file: plan --replicas 4 does without them.
    const { loadFleet } = await import('../config/load.js');
    const fleet = await loadFleet(o.file, { replicas: o.replicas, maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable, replacementPolicy: o.replacementPolicy });
    return { strategy: fleet.strategy, fleet };
  }
  if (o.replicas === undefined) {
    throw new ValidationError([{ path: '--replicas', message: 'is required without -f: give a fleet file (-f fleet.yaml) or a replica count (--replicas 4)' }]);
  }
  return { strategy: resolveStrategy({ replicas: o.replicas, cli: { maxSurge: o.maxSurge, maxUnavailable: o.maxUnavailable }, replacementPolicy: { cli: o.replacementPolicy }, paths: {} }) };
}

/** The "where each value came from" block that plan, simulate, validate and deploy print. */
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
