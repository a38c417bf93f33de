/**
 * User hooks: argument arrays run on the machine running fleetroll, with the
 * rollout's context in FLEETROLL_* environment variables. A hook that exits
 * non-zero or runs past its timeout fails the rollout; that is how a user
 * plugs in an analysis gate (an error-rate check after each wave).
 */
import type { Fleet } from '../config/load.js';
import { ExitCode, FleetrollError } from '../errors.js';
import type { EventSink } from './events.js';

export type HookName = 'preDeploy' | 'prePromotion' | 'postWave' | 'postDeploy' | 'onFailure';

/** The context hooks get, as FLEETROLL_* environment variables. */
export function hookContext(
  fleet: Pick<Fleet, 'service' | 'image' | 'version' | 'replicas'>,
  revision: string,
  name: HookName,
  wave: number,
  counts: { fresh: number; freshAvailable: number; old: number },
): Record<string, string> {
  return {
    FLEETROLL_HOOK: name,
    FLEETROLL_SERVICE: fleet.service,
    FLEETROLL_IMAGE: fleet.image,
    FLEETROLL_VERSION: fleet.version,
    FLEETROLL_REVISION: revision,
    FLEETROLL_REPLICAS: String(fleet.replicas),
    FLEETROLL_WAVE: String(wave),
    FLEETROLL_NEW_INSTANCES: String(counts.fresh),
    FLEETROLL_NEW_AVAILABLE: String(counts.freshAvailable),
    FLEETROLL_OLD_INSTANCES: String(counts.old),
  };
}

/** Longest FLEETROLL_ERROR_REASON: an environment variable, and the full message is in the deploy's output anyway. */
const MAX_REASON = 4000;

/**
 * hooks.onFailure: runs once a rollout has failed for good (exit 1: after
 * its rollback, if any; not for a pause or an interrupt, which are asked
 * for), with the error's stable code and its message. Its own failure is a
 * warning: the rollout already failed, and that outcome is what CI acts on.
 */
export async function runOnFailure(hooks: Fleet['hooks'], context: Record<string, string>, err: unknown, emit: EventSink): Promise<void> {
  const argv = hooks?.onFailure;
  if (!argv) return;
  const exitCode = err instanceof FleetrollError ? err.exitCode : ExitCode.rolloutFailed;
  if (exitCode !== ExitCode.rolloutFailed) return;
  const message = err instanceof Error ? err.message : String(err);
  const env = {
    ...context,
    FLEETROLL_ERROR_CODE: err instanceof FleetrollError ? err.code : 'E_INTERNAL',
    FLEETROLL_ERROR_REASON: message.length > MAX_REASON ? `${message.slice(0, MAX_REASON)}…` : message,
    FLEETROLL_OUTCOME: err instanceof FleetrollError && err.details && 'rolledBackTo' in err.details ? 'rolled back' : 'failed',
  };
  const r = await runHook('onFailure', argv, env, (hooks?.timeoutSeconds ?? 60) * 1000, emit).catch((e: unknown) => ({
    ok: false,
    outcome: `could not run: ${(e as Error).message}`,
    output: '',
  }));
  if (!r.ok) emit({ type: 'info', message: `warning: hooks.onFailure ${r.outcome}; the rollout's outcome (failed, exit 1) stands` });
}

export interface HookResult {
  ok: boolean;
  /** "exited with 3", "timed out after 60 s", "was killed by SIGKILL", "could not start: ENOENT" */
  outcome: string;
  output: string;
}

/** Lines of output kept for the log and the failure message. */
const MAX_OUTPUT_LINES = 40;

export async function runHook(
  name: HookName,
  argv: readonly string[],
  context: Record<string, string>,
  timeoutMs: number,
  emit: EventSink,
): Promise<HookResult> {
  const [file, ...args] = argv;
  if (!file) return { ok: true, outcome: 'nothing to run', output: '' };
  emit({ type: 'info', message: `hook ${name}: running ${argv.map((a) => (/\s/.test(a) ? JSON.stringify(a) : a)).join(' ')}` });
  let r: Awaited<ReturnType<typeof import('execa').execa>>;
  try {
    const { execa } = await import('execa');
    r = await execa(file, args, {
      reject: false,
      stdin: 'ignore',
      all: true,
      timeout: timeoutMs,
      env: context,
      // The hook inherits the environment it was started from (PATH, HOME, ...).
      extendEnv: true,
    });
  } catch (err) {
    // execa throws, despite reject: false, for what it checks before spawning
    // (a NUL byte in an argument is a TypeError); a hook that cannot run is a
    // failed hook like one that exits non-zero, never an error out of the rollout.
    const e = err as NodeJS.ErrnoException;
    const outcome = `could not start: ${e.code ?? e.name}: ${firstLine(e.message)}`;
    emit({ type: 'info', message: `hook ${name}: ${outcome}` });
    return { ok: false, outcome, output: '' };
  }
  const lines = String(r.all ?? '')
    .split('\n')
    .filter((l) => l.trim() !== '');
  const output = lines.slice(-MAX_OUTPUT_LINES).join('\n');
  for (const l of lines.slice(-MAX_OUTPUT_LINES)) emit({ type: 'info', message: `hook ${name}| ${l}` });
  let outcome: string;
  if (r.timedOut) outcome = `timed out after ${timeoutMs / 1000} s`;
  else if (r.exitCode !== undefined) outcome = `exited with ${r.exitCode}`;
  else if (r.signal !== undefined) outcome = `was killed by ${r.signal}`;
  else outcome = `could not start: ${(r.cause as NodeJS.ErrnoException | undefined)?.code ?? firstLine(r.shortMessage ?? 'no reason given')}`;
  const ok = !r.failed && r.exitCode === 0;
  emit({ type: 'info', message: `hook ${name}: ${ok ? 'ok' : outcome}` });
  return { ok, outcome, output };
}

/** The first line of a message, control characters escaped (the message may quote a bad argument). */
function firstLine(text: string): string {
  return (text.split('\n')[0] ?? text).replace(/[\u0000-\u001f\u007f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
