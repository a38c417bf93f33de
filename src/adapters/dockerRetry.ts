/**
 * Docker API errors, and retrying the ones that clear by themselves.
 *
 * A create/start/stop/remove can fail for reasons that have nothing to do with
 * the request: the connection to the engine is reset (a busy engine, an ssh
 * channel that closed), the engine answers 5xx while it is under load, or a
 * 409 says another removal of the same container is still in progress. Those
 * are tried again a few times with exponential backoff and jitter (p-retry);
 * everything else (404, a real name conflict, a bad request) fails at once so
 * the caller can say what it means. When the attempts run out the error names
 * what was being done, how often it was tried and the last cause.
 */
import { FleetrollError, type ErrorCode } from '../errors.js';

/** The Docker error shape docker-modem produces. */
interface DockerApiError {
  statusCode?: number;
  json?: unknown;
  code?: string;
  message?: string;
}

export function statusOf(err: unknown): number | undefined {
  if (err instanceof RetriesExhaustedError) return statusOf(err.lastCause);
  const code = (err as DockerApiError | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** The engine's own message (`json.message`), else the error message, without docker-modem's prefix. */
export function engineMessage(err: unknown): string {
  if (err instanceof RetriesExhaustedError) return `${causeText(err.lastCause)}; gave up after ${err.attempts} attempts`;
  const json = (err as DockerApiError | null)?.json;
  if (json && typeof json === 'object' && 'message' in json && typeof (json as { message: unknown }).message === 'string') {
    return (json as { message: string }).message.trim();
  }
  if (err instanceof Error) return err.message.replace(/^\(HTTP code \d+\) [^-]*- /, '').trim();
  return String(err);
}

/** engineMessage with what kind of failure it was: the HTTP status or the socket error code. */
function causeText(err: unknown): string {
  const text = engineMessage(err);
  const status = statusOf(err);
  const code = (err as DockerApiError | null)?.code;
  if (status !== undefined) return `HTTP ${status}: ${text}`;
  return code && !text.includes(code) ? `${text} (${code})` : text;
}

/** Socket-level failures: the request may not have reached the engine, or its answer was lost. */
const TRANSIENT_CODES = new Set(['ECONNRESET', 'EPIPE']);
/** 5xx answers that will not change by asking again. */
const PERMANENT_5XX = /port is already allocated|address already in use|OCI runtime|executable file not found|no such image/i;

/** True for a Docker API failure that may clear when the same request is sent again. */
export function isTransientDockerError(err: unknown): boolean {
  const e = err as DockerApiError | null;
  if (!e || typeof e !== 'object' || err instanceof RetriesExhaustedError) return false;
  if (e.code && TRANSIENT_CODES.has(e.code)) return true;
  const status = statusOf(err);
  if (status === undefined) return /socket hang up/i.test(e.message ?? '');
  if (status >= 500 && status < 600) return !PERMANENT_5XX.test(engineMessage(err));
  if (status === 409) return /already in progress/i.test(engineMessage(err));
  return false;
}

/**
 * A transient failure that did not clear within the attempts allowed.
 * Internal on purpose, and not a FleetrollError: it is a cause, not a verdict.
 * Every retryTransient call (adapters/docker.ts: create, start, stop, remove)
 * catches it and throws the E_DOCKER (or E_NAME_CONFLICT, E_CONTAINER_START, ...)
 * that says what failed, with this as its `cause` for --verbose; statusOf and
 * engineMessage read through it to the last engine answer.
 */
export class RetriesExhaustedError extends Error {
  constructor(
    readonly what: string,
    readonly attempts: number,
    readonly lastCause: unknown,
  ) {
    super(`${what}: gave up after ${attempts} attempts; last cause: ${causeText(lastCause)}`, { cause: lastCause });
    this.name = 'RetriesExhaustedError';
  }
}

export interface RetryOptions {
  /** Attempts in all, the first included (default 4). */
  attempts?: number;
  /** Delay before the first retry, doubled each time and randomised ×1–2 (default 200 ms). */
  minDelayMs?: number;
  /** Longest delay between two attempts (default 2 s). */
  maxDelayMs?: number;
  /**
   * Also retry when the engine could not bind a published port. Only right for
   * a port Docker picks itself (HostPort ""): another process (another engine
   * on the machine, an outgoing connection) can take the port between Docker's
   * choice and its bind, and the next start picks another one. A fixed port
   * that is taken stays taken, so this is off by default.
   */
  portClashIsTransient?: boolean;
}

const PORT_CLASH = /port is already allocated|address already in use/i;

/** isTransientDockerError, widened by the options of one call. */
function transientFor(err: unknown, o: RetryOptions): boolean {
  if (isTransientDockerError(err)) return true;
  return o.portClashIsTransient === true && !(err instanceof RetriesExhaustedError) && statusOf(err) === 500 && PORT_CLASH.test(engineMessage(err));
}

/**
 * Runs `fn`, again after a transient Docker failure (see isTransientDockerError),
 * at most `attempts` times in all. A failure that is not transient is thrown as it
 * is, at once; transient ones that persist become a RetriesExhaustedError naming
 * `what` (e.g. "stopping container web-1") and the last cause.
 */
export async function retryTransient<T>(what: string, fn: (attempt: number) => Promise<T>, o: RetryOptions = {}): Promise<T> {
  const attempts = Math.max(1, o.attempts ?? 4);
  let made = 0;
  const { default: pRetry } = await import('p-retry');
  try {
    return await pRetry(
      (n) => {
        made = n;
        return fn(n);
      },
      {
        retries: attempts - 1,
        minTimeout: o.minDelayMs ?? 200,
        maxTimeout: o.maxDelayMs ?? 2000,
        factor: 2,
        randomize: true,
        shouldRetry: ({ error }) => transientFor(error, o),
      },
    );
  } catch (err) {
    if (transientFor(err, o)) throw new RetriesExhaustedError(what, made, err);
    throw err;
  }
}

/** A failed Docker call as fleetroll reports it: a FleetrollError of `code` (its exit code from the catalogue), the engine's error as its cause. */
export function runtimeError(code: ErrorCode, message: string, cause: unknown, hint?: string): FleetrollError {
  return new FleetrollError(code, message, hint === undefined ? { cause } : { cause, hint });
}
