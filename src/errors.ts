/**
 * One error hierarchy for the whole tool. Library code throws these and never
 * logs; the CLI is the only place that prints them and turns them into exit
 * codes, so every failure a user sees has a stable `code` and `exitCode`.
 *
 * The codes, their exit codes and meanings are the catalogue in
 * src/errorCodes.ts, re-exported here: import both from this module.
 */
import { ERROR_CODES, ExitCode, type ErrorCode, type ExitCodeValue } from './errorCodes.js';

export {
  ERROR_CODES,
  EXIT_CODE_MEANINGS,
  ExitCode,
  exitCodesOf,
  type ErrorCode,
  type ErrorCodeInfo,
  type ExitCodeName,
  type ExitCodeValue,
} from './errorCodes.js';

/** Machine-readable facts about an error, printed with it under `--json`. */
export type ErrorDetails = Readonly<Record<string, unknown>>;

export interface FleetrollErrorOptions {
  cause?: unknown;
  /** What the user can do next; printed after the message. */
  hint?: string;
  /**
   * Only for a code whose catalogue entry lists `otherExitCodes` (e.g.
   * E_REPORTED, E_ADOPT); otherwise the catalogue's exit code applies.
   */
  exitCode?: ExitCodeValue;
  details?: ErrorDetails;
}

export class FleetrollError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: ExitCodeValue;
  readonly hint: string | undefined;
  readonly details: ErrorDetails | undefined;

  /** The exit code comes from ERROR_CODES (or options.exitCode). */
  constructor(code: ErrorCode, message: string, options?: FleetrollErrorOptions);
  /** The exit code given first, as callers written before the catalogue do, and to pass on another error's. */
  constructor(code: ErrorCode, exitCode: ExitCodeValue, message: string, options?: FleetrollErrorOptions);
  constructor(code: ErrorCode, a: string | ExitCodeValue, b?: string | FleetrollErrorOptions, c?: FleetrollErrorOptions) {
    const [exitCode, message, options] = typeof a === 'string' ? [undefined, a, (b ?? {}) as FleetrollErrorOptions] : [a, b as string, c ?? {}];
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.exitCode = exitCode ?? options.exitCode ?? ERROR_CODES[code].exitCode;
    this.hint = options.hint;
    this.details = options.details;
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
  declare readonly details: { readonly issues: readonly FieldIssue[] };

  constructor(issues: readonly FieldIssue[], options: Pick<FleetrollErrorOptions, 'cause' | 'hint'> & { source?: string } = {}) {
    const where = options.source ? `${options.source}: ` : '';
    const lines = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message));
    const message = lines.length === 1 ? `${where}${lines[0]}` : `${where}${lines.length} problems\n  ${lines.join('\n  ')}`;
    super('E_INVALID', message, { ...options, details: { issues } });
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
  constructor(exitCode: ExitCodeValue = ExitCode.rolloutFailed) {
    super('E_REPORTED', '', { exitCode });
  }
}

/** Where a rollout failed: before anything changed, or during/after the change. */
export type FailurePhase = 'preflight' | 'preDeploy' | 'rollout';

/** One instance in a failed verification (engine/verify.ts). */
export interface VerifiedInstanceDetail {
  name: string;
  host: string;
  tries: number;
  address?: string;
  version?: string;
  /** Why its version could not be read. */
  error?: string;
  /** What is wrong with it (revision verification). */
  problem?: string;
}

/**
 * What a failed rollout says about itself, for code and for `--json`. Every
 * key is optional: each failure sets the ones that apply. A key added here is
 * part of the JSON contract (docs/errors.md).
 */
export type RolloutFailureDetails = {
  /** The analysis judged the new revision (or could not read an access log): a rollback follows. False: the analysis could not even start. */
  analysisFailed?: boolean;
  /** "analysis": the gate took the new revision out of traffic (rolled back, canary aborted or switched back). */
  stoppedBy?: 'analysis';
  /** How many analysis measurements were taken. */
  measurements?: number;
  /** The new instances that never became available before the progress deadline. */
  stuck?: string[];
  /** The new instance that exited within its monitor window (monitorSeconds) past maxFailures. */
  crashed?: string;
  /** The hook that failed (preDeploy, postWave, prePromotion, ...). */
  hook?: string;
  /** The instances a failed verification looked at. */
  instances?: VerifiedInstanceDetail[];
  /** With onFailure: rollback, the revision (spec hash) the fleet was rolled back to. */
  rolledBackTo?: string;
  /** Why a canary was aborted ("the analysis failed", "fleetroll abort", ...). */
  aborted?: string;
  /** A blue-green rollout switched traffic back to the old set. */
  switchedBack?: boolean;
  /** Blue-green switch times (ISO), as the revision record keeps them. */
  switchedAt?: string | undefined;
  switchIssuedAt?: string | undefined;
  switchedBackAt?: string | undefined;
  switchBackIssuedAt?: string | undefined;
  /** The new upstream failed `nginx -t`: every upstream file was restored and nothing reloaded. */
  nginxTestFailed?: boolean;
  /** The code of the host or nginx failure that stopped the rollout (E_DOCKER, E_NGINX_TEST, ...). */
  code?: ErrorCode;
};

/** A rollout that did not reach its goal. Exit code 1; the message says what to do next. */
export class RolloutFailedError extends FleetrollError {
  declare readonly details: RolloutFailureDetails;

  constructor(
    message: string,
    hint: string,
    details: RolloutFailureDetails = {},
    readonly phase: FailurePhase = 'rollout',
  ) {
    super('E_ROLLOUT_FAILED', message, { hint, details });
  }
}

/** Stopped by `fleetroll pause` with the fleet consistent. Exit code 4. */
export class PausedError extends FleetrollError {
  constructor(message: string) {
    super('E_PAUSED', message, { hint: 'continue with `fleetroll resume -f <fleet>` (from any machine)' });
  }
}

/** Interrupted by a signal; the fleet was left consistent. Exit code 130. */
export class InterruptedError extends FleetrollError {
  constructor(message: string, hint: string) {
    super('E_INTERRUPTED', message, { hint });
  }
}

/** What `--json` prints for a failed command: the code a script can branch on, its exit code and details. */
export function errorJson(err: FleetrollError): {
  code: ErrorCode;
  exitCode: ExitCodeValue;
  message: string;
  hint: string | undefined;
  details?: ErrorDetails;
} {
  return {
    code: err.code,
    exitCode: err.exitCode,
    message: err.message,
    hint: err.hint,
    ...(err.details !== undefined && Object.keys(err.details).length > 0 ? { details: err.details } : {}),
  };
}
