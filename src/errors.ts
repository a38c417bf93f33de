/**
 * One error hierarchy for the whole tool. Library code throws these and never
 * logs; the CLI is the only place that prints them and turns them into exit
 * codes, so every failure a user sees has a stable `code` and `exitCode`.
 */

export const ExitCode = {
  ok: 0,
  rolloutFailed: 1,
  invalidInput: 2,
  lockHeld: 3,
  /** The rollout stopped because someone ran `fleetroll pause`. */
  paused: 4,
  interrupted: 130,
} as const;

export interface FleetrollErrorOptions {
  cause?: unknown;
  /** What the user can do next; printed after the message. */
  hint?: string;
}

export class FleetrollError extends Error {
  readonly code: string;
  readonly exitCode: number;
  readonly hint: string | undefined;

  constructor(code: string, exitCode: number, message: string, options: FleetrollErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.exitCode = exitCode;
    this.hint = options.hint;
  }
}

/** One problem with one field, addressed by a slash path such as `strategy/rollingUpdate/maxSurge`. */
export interface FieldIssue {
  path: string;
  message: string;
}

/**
 * Invalid user input (fleet file, defaults file, CLI flags). Carries every
 * problem found, not just the first, so a user can fix a file in one pass.
 */
export class ValidationError extends FleetrollError {
  readonly issues: readonly FieldIssue[];

  constructor(issues: readonly FieldIssue[], options: FleetrollErrorOptions & { source?: string } = {}) {
    const where = options.source ? `${options.source}: ` : '';
    const lines = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message));
    const message =
      lines.length === 1 ? `${where}${lines[0]}` : `${where}${lines.length} problems\n  ${lines.join('\n  ')}`;
    super('E_INVALID', ExitCode.invalidInput, message, options);
    this.issues = issues;
  }
}

export function fieldError(path: string, message: string): ValidationError {
  return new ValidationError([{ path, message }]);
}

/**
 * A failure the command has already reported in its own output (e.g. a
 * rehearsal summary that shows failed requests): the CLI only sets the exit code.
 */
export class ReportedFailure extends FleetrollError {
  constructor(exitCode: number = ExitCode.rolloutFailed) {
    super('E_REPORTED', exitCode, '');
  }
}

/** Where a rollout failed: before anything changed, or during/after the change. */
export type FailurePhase = 'preflight' | 'preDeploy' | 'rollout';

/** A rollout that did not reach its goal. Exit code 1; the message says what to do next. */
export class RolloutFailedError extends FleetrollError {
  constructor(
    message: string,
    hint: string,
    readonly details: Record<string, unknown> = {},
    readonly phase: FailurePhase = 'rollout',
  ) {
    super('E_ROLLOUT_FAILED', ExitCode.rolloutFailed, message, { hint });
  }
}

/** Stopped by `fleetroll pause` with the fleet consistent. Exit code 4. */
export class PausedError extends FleetrollError {
  constructor(message: string) {
    super('E_PAUSED', ExitCode.paused, message, { hint: 'continue with `fleetroll resume -f <fleet>` (from any machine)' });
  }
}

/** Interrupted by a signal; the fleet was left consistent. Exit code 130. */
export class InterruptedError extends FleetrollError {
  constructor(message: string, hint: string) {
    super('E_INTERRUPTED', ExitCode.interrupted, message, { hint });
  }
}

