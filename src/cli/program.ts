import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { ExitCode, FleetrollError, ReportedFailure } from '../errors.js';
import { processOut, type Out } from './output.js';
import { registerDay2 } from './commands/day2.js';
import { registerDeploy } from './commands/deploy.js';
import { registerExperiment } from './commands/experiment.js';
import { registerPlan } from './commands/plan.js';
import { registerRehearse } from './commands/rehearse.js';
import { registerSimulate } from './commands/simulate.js';
import { registerValidate } from './commands/validate.js';

export function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

export function buildProgram(out: Out = processOut()): Command {
  const program = new Command('fleetroll')
    .description('Kubernetes-style rolling deploys for Docker fleets behind nginx')
    .version(packageVersion(), '-V, --version', 'print the version')
    .option('--verbose', 'show stack traces and debug output')
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
  registerDeploy(program, out);
  registerDay2(program, out);
  registerPlan(program, out);
  registerRehearse(program, out);
  registerExperiment(program, out);
  registerSimulate(program, out);
  registerValidate(program, out);
  for (const c of program.commands) c.exitOverride();
  return program;
}

/** Runs the CLI and returns the exit code; never throws. */
export async function run(argv: string[], out: Out = processOut()): Promise<number> {
  const program = buildProgram(out);
  const verbose = argv.includes('--verbose');
  try {
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
      process.stderr.write(`error: ${err.message}\n`);
      if (err.hint) process.stderr.write(`hint: ${err.hint}\n`);
      if (verbose && err.stack) process.stderr.write(`${err.stack}\n`);
      return err.exitCode;
    }
    const e = err as Error;
    process.stderr.write(`error: ${e?.message ?? String(err)}\n`);
    if (verbose && e?.stack) process.stderr.write(`${e.stack}\n`);
    else process.stderr.write('(an unexpected error: run again with --verbose for the stack trace)\n');
    return ExitCode.rolloutFailed;
  }
}
