import { readFileSync } from 'node:fs';
import { Command, CommanderError, type CommandUnknownOpts } from '@commander-js/extra-typings';
import { ExitCode, FleetrollError, ReportedFailure } from '../errors.js';
import { printFailureJson, processOut, type Out } from './output.js';

type Register = (program: CommandUnknownOpts, out: Out) => void;

/**
 * Each command's module with the command names it registers, in help order. A
 * module is imported only when one of its commands runs (all of them for help or
 * an unknown command), so one command's dependencies (Docker, ssh, charts, the
 * fleet file's parser) never slow down the start of another, nor --version.
 */
const COMMANDS: { names: string[]; load: () => Promise<Register> }[] = [
  { names: ['deploy'], load: async () => (await import('./commands/deploy.js')).registerDeploy },
  {
    names: ['history', 'undo', 'restart', 'pause', 'promote', 'abort', 'resume', 'status', 'adopt', 'lock'],
    load: async () => (await import('./commands/day2.js')).registerDay2,
  },
  { names: ['watch'], load: async () => (await import('./commands/watch.js')).registerWatch },
  { names: ['state'], load: async () => (await import('./commands/state.js')).registerState },
  { names: ['plan'], load: async () => (await import('./commands/plan.js')).registerPlan },
  { names: ['rehearse'], load: async () => (await import('./commands/rehearse.js')).registerRehearse },
  { names: ['experiment'], load: async () => (await import('./commands/experiment.js')).registerExperiment },
  { names: ['simulate'], load: async () => (await import('./commands/simulate.js')).registerSimulate },
  { names: ['validate'], load: async () => (await import('./commands/validate.js')).registerValidate },
];

/** The command modules `argv` needs: the one naming its command, none for a bare --version, else all. */
function commandsFor(argv: readonly string[]): typeof COMMANDS {
  const first = argv.find((a) => !a.startsWith('-'));
  if (first === undefined) return argv.some((a) => a === '-V' || a === '--version') && !argv.some((a) => a === '-h' || a === '--help') ? [] : COMMANDS;
  const one = COMMANDS.find((c) => c.names.includes(first));
  return one ? [one] : COMMANDS;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** The program with the commands `argv` needs (every command when argv is not given). */
async function buildProgram(out: Out = processOut(), argv?: readonly string[]): Promise<CommandUnknownOpts> {
  const program = new Command('fleetroll')
    .description('Kubernetes-style rolling deploys for Docker fleets behind nginx')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('--verbose', 'on an error, show its stack trace and the chain of its causes')
    .showHelpAfterError('(run with --help for usage)')
    .exitOverride()
    .addHelpText(
      'after',
      `
Exit status: 0 success, 1 rollout failed, 2 invalid input, 3 lock held,
4 paused (fleetroll pause), 130 interrupted.

Start here:
  $ fleetroll plan --replicas 4 --max-surge 1 --max-unavailable 0
  $ fleetroll validate -f examples/fleet.yaml`,
    );
  const registers = await Promise.all((argv ? commandsFor(argv) : COMMANDS).map((c) => c.load()));
  for (const register of registers) register(program, out);
  for (const c of program.commands) c.exitOverride();
  return program;
}

/**
 * What --verbose prints for an error: its stack, then each cause (`err.cause`,
 * recursively, and each error of an AggregateError) as "caused by: " with its
 * own stack, so the reason under a wrapped failure (a socket error under a
 * Docker error under a rollout failure) is not lost.
 */
export function causeChain(err: unknown, maxDepth = 10): string {
  const lines: string[] = [];
  const seen = new Set<unknown>();
  const visit = (e: unknown, prefix: string, depth: number) => {
    if (seen.has(e) || depth > maxDepth) return;
    seen.add(e);
    if (e instanceof Error) {
      const frames = (e.stack ?? '').split('\n').filter((l) => /^\s+at /.test(l));
      lines.push([`${prefix}${e.name}: ${e.message}`, ...frames].join('\n'));
      if (e instanceof AggregateError) e.errors.forEach((inner, i) => visit(inner, `caused by (${i + 1} of ${e.errors.length}): `, depth + 1));
      if (e.cause !== undefined) visit(e.cause, 'caused by: ', depth + 1);
    } else {
      let text: string;
      try {
        text = typeof e === 'string' ? e : (JSON.stringify(e) ?? String(e));
      } catch {
        text = String(e);
      }
      lines.push(`${prefix}${text}`);
    }
  };
  visit(err, '', 0);
  return lines.join('\n');
}

/** Runs the CLI and returns the exit code; never throws. */
export async function run(argv: string[], out: Out = processOut()): Promise<number> {
  const verbose = argv.includes('--verbose');
  const json = argv.includes('--json');
  try {
    const program = await buildProgram(out, argv);
    await program.parseAsync(argv, { from: 'user' });
    return ExitCode.ok;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and --version end here with code 0; usage errors are invalid input.
      if (err.exitCode === 0) return ExitCode.ok;
      return ExitCode.invalidInput;
    }
    if (err instanceof FleetrollError) {
      if (err instanceof ReportedFailure) return err.exitCode;
      if (json) printFailureJson(out, err);
      process.stderr.write(`error: ${err.message}\n`);
      if (err.hint) process.stderr.write(`hint: ${err.hint}\n`);
      if (verbose) process.stderr.write(`${causeChain(err)}\n`);
      return err.exitCode;
    }
    const e = err as Error;
    if (json) printFailureJson(out, err);
    process.stderr.write(`error: ${e?.message ?? String(err)}\n`);
    if (verbose) process.stderr.write(`${causeChain(err)}\n`);
    else process.stderr.write('(an unexpected error: run again with --verbose for the stack trace and its causes)\n');
    return ExitCode.rolloutFailed;
  } finally {
    // A fleet whose state is in etcd leaves its gRPC connections open: closed here, so that the command ends at once.
    await (await import('../adapters/etcdClients.js')).closeEtcdClients().catch(() => {});
  }
}
