/**
 * The options more than one command takes, each declared once: its flags, how
 * its value is parsed (a parser from args.ts, which names the flag and what is
 * allowed) and its default. A command adds them with `.addOption(...)`, and
 * @commander-js/extra-typings infers the command's options type from them.
 * Descriptions are per command (each command's help says what the flag means
 * there), so every factory takes one.
 */
import { Option, type Command, type OptionValues } from '@commander-js/extra-typings';
import { parseDuration, parseLogFormat, parseNginxMode } from './args.js';
import type { Listen } from './metrics.js';

const FILE = '-f, --file <fleet.yaml>';

/** `-f, --file <fleet.yaml>`, required. */
export const fleetFileOption = (description = 'fleet file') => new Option(FILE, description).makeOptionMandatory();

/** `-f, --file <fleet.yaml>` for commands that can do without a fleet file (plan, simulate). */
export const optionalFleetFileOption = (description: string) => new Option(FILE, description);

/** With -f naming a compose file: which of its services is the fleet (default: the one with an x-fleetroll: block). */
export const composeServiceOption = () =>
  new Option('--service <name>', 'with -f docker-compose.yml: the compose service to deploy (default: the one with an x-fleetroll: block, or the only one)');

export const jsonOption = (description: string) => new Option('--json', description);

export const maxSurgeOption = (description: string) => new Option('--max-surge <n|%>', description);

export const maxUnavailableOption = (description: string) => new Option('--max-unavailable <n|%>', description);

export const replacementPolicyOption = (description: string) => new Option('--replacement-policy <policy>', description);

export const lockWaitOption = (description: string) => new Option('--lock-wait <duration>', description).argParser(parseDuration('--lock-wait'));

export const autoRollbackOption = (description: string) => new Option('--auto-rollback', description);

export const logFormatOption = (description: string) => new Option('--log-format <text|json>', description).default('text').argParser(parseLogFormat);

/** rehearse's nginx: reload mode or the dynamic (Lua) mode. */
export const nginxModeOption = () =>
  new Option('--nginx-mode <reload|dynamic>', "nginx's mode: reload (rewrite the upstream file, reload) or dynamic (fleetroll's Lua balancer, no reload)")
    .default('reload' as 'reload' | 'dynamic')
    .argParser(parseNginxMode);

export const dockerEndpointOption = () => new Option('--docker <endpoint>', 'Docker engine to use').default('unix:///var/run/docker.sock');

/** The flags every command that runs a rollout of an existing fleet takes (undo, restart, resume). */
export function withRolloutOptions<A extends unknown[], O extends OptionValues, G extends OptionValues>(cmd: Command<A, O, G>) {
  return cmd
    .addOption(lockWaitOption('wait this long for another rollout of the fleet to finish'))
    .addOption(autoRollbackOption('on failure, roll back (same as onFailure: rollback)'))
    .addOption(jsonOption('print the result as JSON'))
    .addOption(logFormatOption('progress lines as text or JSON log lines'));
}

/** What executeRollout reads of a command's options: the rollout flags (deploy declares the same ones itself). */
export type RolloutOptions = ReturnType<ReturnType<typeof withRolloutOptions<[], {}, {}>>['opts']> & {
  /** --metrics and --metrics-linger (cli/metrics.ts), added by each command beside these (their types would make this one too long to emit). */
  metrics?: Listen | undefined;
  metricsLinger?: number | undefined;
};
