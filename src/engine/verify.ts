/**
 * The end of every rollout: prove that each instance runs the new revision.
 * With a version endpoint, ask each instance for its version: a rollout that
 * reached every step but serves the wrong version (an image tagged with the
 * wrong version, a stale cache) is a failed rollout, not a success. Without
 * one (`probes.version: false`, a worker), check what Docker knows: the
 * container runs the image ID the host's engine has for the fleet's image,
 * carries the new revision label, and its readiness probe passes.
 */
import type { Fleet } from '../config/load.js';
import { InterruptedError, RolloutFailedError } from '../errors.js';
import { LABELS, type Clock, type Prober, type Runtime } from '../ports.js';
import type { EventSink } from './events.js';

export interface Verified {
  name: string;
  host: string;
  address: string;
  version: string;
}

/** An instance as the controller leaves it: name, host, Docker id and address when known. */
export interface ToVerify {
  id: string;
  host: string;
  dockerId?: string | undefined;
  address?: string | undefined;
}

/**
 * How long the check may ask. A converged fleet on a busy machine can miss a
 * probe's timeout, so an instance that does not answer is asked again, with
 * backoff, until the budget runs out: the rollout passes for what remains of
 * its progress deadline.
 */
export interface VerifyOptions {
  clock: Clock;
  /** From the start of the check; rollout.ts passes progressDeadlineSeconds (the controller's end was the last progress). */
  budgetMs: number;
  /** Stops the retries: the check ends as interrupted. */
  signal?: AbortSignal | undefined;
  /** The jitter of the backoff, in [0, 1); Math.random unless a test seeds it. */
  random?: (() => number) | undefined;
}

/** Verification as the fleet's probes ask for it. */
export function verify(
  fleet: Fleet,
  revision: string,
  instances: readonly ToVerify[],
  deps: { prober: Prober; runtimes: ReadonlyMap<string, Runtime> },
  emit: EventSink,
  o: VerifyOptions,
): Promise<Verified[]> {
  return fleet.probes?.version === false
    ? verifyRevision(fleet, revision, instances, deps, emit, o)
    : verifyVersions(fleet, instances, deps.prober, emit, o, (i) => lookAgain(deps.runtimes, i, fleet.port));
}

/** What a second look at an instance that did not answer found: why it never will, or where it is now. */
export interface LookedAgain {
  /** Its container is gone or stopped (someone removed it, it crashed): the check fails at once instead of asking until the deadline. */
  gone?: string | undefined;
  /** Its address now, while it runs: one that moved (a network reconnect, an engine restart) is asked there, not waited on. */
  address?: string | undefined;
}

async function lookAgain(runtimes: ReadonlyMap<string, Runtime>, i: ToVerify, port: number | undefined): Promise<LookedAgain> {
  const rt = runtimes.get(i.host);
  // No way to ask (no runtime, the engine does not answer): it may still run, so the check keeps asking it.
  const info = rt ? await rt.inspect(i.dockerId ?? i.id, port).catch(() => 'unknown' as const) : 'unknown';
  if (info === 'unknown') return {};
  if (!info) return { gone: 'its container is gone' };
  if (!info.running) return { gone: `its container is ${info.state}${info.exitCode !== undefined ? ` (exit code ${info.exitCode})` : ''}` };
  return { address: info.address };
}

/** The first wait between two tries of one instance; it doubles up to BACKOFF_MAX_MS. */
const BACKOFF_FIRST_MS = 250;
const BACKOFF_MAX_MS = 2000;

interface Tried<T> {
  /** The instance's definite answer; undefined when it gave none within the budget. */
  answer?: T | undefined;
  /** Why the last try got no answer. */
  last?: string | undefined;
  tries: number;
  elapsedMs: number;
  interrupted: boolean;
}

/** A wait on the engine's clock that an abort ends early. */
function pause(clock: Clock, ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (!signal) return clock.sleep(ms);
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const onAbort = () => {
      t.cancel();
      resolve();
    };
    const t = clock.timer(ms, () => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    });
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Tries `once` until it answers, the deadline passes or the signal aborts,
 * always at least once; between tries an exponential backoff with jitter (half
 * the delay fixed, half random), so many instances on one busy machine do not
 * ask again all at the same instant.
 */
async function tryUntil<T>(once: () => Promise<{ answer: T } | { retry: string }>, deadline: number, o: VerifyOptions): Promise<Tried<T>> {
  const start = o.clock.now();
  const random = o.random ?? Math.random;
  let delay = BACKOFF_FIRST_MS;
  for (let tries = 1; ; tries++) {
    const got = await once();
    const elapsedMs = o.clock.now() - start;
    if ('answer' in got) return { answer: got.answer, tries, elapsedMs, interrupted: false };
    const left = deadline - o.clock.now();
    if (left <= 0 || o.signal?.aborted) return { last: got.retry, tries, elapsedMs, interrupted: o.signal?.aborted === true };
    await pause(o.clock, Math.min(left, delay / 2 + (random() * delay) / 2), o.signal);
    if (o.signal?.aborted) return { last: got.retry, tries, elapsedMs: o.clock.now() - start, interrupted: true };
    delay = Math.min(BACKOFF_MAX_MS, delay * 2);
  }
}

const triesText = (n: number) => (n === 1 ? '1 try' : `${n} tries`);
const secondsText = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/**
 * An HTTP status the instance answered the version probe with (adapters/http.ts
 * sets it), unless it is one a busy instance gives (5xx, 408, 429): a 404 does
 * not change by asking again.
 */
function definiteStatus(err: unknown): number | undefined {
  const status = (err as { status?: unknown } | undefined)?.status;
  if (typeof status !== 'number' || status >= 500 || status === 408 || status === 429) return undefined;
  return status;
}

function interrupted(fleet: Fleet, verified: number, total: number): InterruptedError {
  return new InterruptedError(
    `interrupted while verifying: ${verified} of ${total} instance(s) of ${fleet.service} verified; the rollout itself had finished`,
    'run the same deploy again to finish the check (every instance already runs the revision, so nothing is replaced)',
  );
}

/** One instance's outcome: verified, a definite wrong answer, or no answer within the budget. */
type Checked = {
  name: string;
  host: string;
  address: string;
  version: string;
  tries: number;
  elapsedMs: number;
  error?: string;
  kind: 'verified' | 'wrong' | 'refused' | 'unanswered' | 'interrupted';
};

export async function verifyVersions(
  fleet: Fleet,
  instances: readonly ToVerify[],
  prober: Prober,
  emit: EventSink,
  o: VerifyOptions,
  again?: (i: ToVerify) => Promise<LookedAgain>,
): Promise<Verified[]> {
  const deadline = o.clock.now() + o.budgetMs;
  const results = await Promise.all(
    instances.map(async (i): Promise<Checked> => {
      let address = i.address ?? '';
      const base = { name: i.id, host: i.host, address };
      if (!address) return { ...base, version: '', tries: 0, elapsedMs: 0, error: 'no address to ask for its version', kind: 'refused' };
      const t = await tryUntil<{ version: string } | { error: string }>(
        () =>
          prober.version(address).then(
            (version) => ({ answer: { version } }),
            async (err: unknown) => {
              if (definiteStatus(err) !== undefined) return { answer: { error: (err as Error).message } };
              const now = (await again?.(i)) ?? {};
              if (now.gone !== undefined) return { answer: { error: `${now.gone} (last: ${(err as Error).message})` } };
              if (now.address !== undefined && now.address !== address) {
                emit({ type: 'info', message: `${i.id} on ${i.host} moved from ${address} to ${now.address}: asking it there` });
                address = base.address = now.address;
              }
              return { retry: (err as Error).message };
            },
          ),
        deadline,
        o,
      );
      const counted = { tries: t.tries, elapsedMs: t.elapsedMs };
      if (t.answer === undefined) return { ...base, ...counted, version: '', error: t.last ?? '', kind: t.interrupted ? 'interrupted' : 'unanswered' };
      if ('error' in t.answer) return { ...base, ...counted, version: '', error: t.answer.error, kind: 'refused' };
      return { ...base, ...counted, version: t.answer.version, kind: t.answer.version === fleet.version ? 'verified' : 'wrong' };
    }),
  );
  for (const r of results) if (r.kind === 'verified') emit({ type: 'verified', name: r.name, version: r.version, tries: r.tries, elapsedMs: r.elapsedMs });
  const verified = results.filter((r) => r.kind === 'verified').length;
  if (results.some((r) => r.kind === 'interrupted')) throw interrupted(fleet, verified, results.length);
  const failed = results.filter((r) => r.kind !== 'verified');
  if (failed.length > 0) {
    const lines = failed.map((r) => {
      const at = `${r.name} on ${r.host}`;
      if (r.kind === 'wrong') return `${at} reports version ${JSON.stringify(r.version)}, expected ${JSON.stringify(fleet.version)}`;
      if (r.kind === 'unanswered') return `${at}: no answer in ${triesText(r.tries)} over ${secondsText(r.elapsedMs)} (last: ${r.error})`;
      return `${at}: ${r.error}`;
    });
    const path = fleet.probes?.version === false ? undefined : fleet.probes?.version.path;
    const hints: [Checked['kind'], string, string][] = [
      [
        'wrong',
        'a wrong version',
        'the instances are serving; check that the image was built with the version it is tagged with (or set `version:` in the fleet file), then deploy again',
      ],
      ['refused', 'an error answer', `check that probes.version.path${path ? ` (${path})` : ''} is where the app reports its version, then deploy again`],
      [
        'unanswered',
        'no answer',
        `the rollout converged but an instance did not answer the version probe in time: it may be slow or overloaded, or the machine busy; check that probes.version.path${path ? ` (${path})` : ''} answers within probes.readiness.timeoutMs, then deploy again to check again`,
      ],
    ];
    const present = hints.filter(([kind]) => failed.some((r) => r.kind === kind));
    const hint = present.length === 1 ? present[0]![2] : present.map(([, label, text]) => `for ${label}: ${text}`).join('; ');
    const all = failed.every((r) => r.kind === 'wrong') ? 'do not serve' : 'could not be verified to serve';
    throw new RolloutFailedError(
      `rollout of ${fleet.service} finished but ${failed.length} of ${results.length} instance(s) ${all} version ${fleet.version}:\n  ${lines.join('\n  ')}`,
      hint,
      {
        instances: results.map(({ name, host, address, version, tries, error }) => ({
          name,
          host,
          address,
          version,
          tries,
          ...(error !== undefined ? { error } : {}),
        })),
      },
    );
  }
  return results.map(({ name, host, address, version }) => ({ name, host, address, version }));
}

/** "sha256:0123456789ab…" → "sha256:0123456789ab" (enough to tell images apart in a message). */
function shortId(id: string): string {
  return id.replace(/^(sha256:[0-9a-f]{12})[0-9a-f]+$/, '$1');
}

interface RevisionCheck {
  problem?: string | undefined;
  /** The readiness probe never passed within the budget (not a wrong image or label). */
  unready?: boolean | undefined;
  interrupted?: boolean | undefined;
  address?: string | undefined;
  tries: number;
  elapsedMs: number;
}

/** What is wrong with one instance, or no problem when it runs the revision's image, carries its label and is ready. */
async function revisionProblem(
  fleet: Fleet,
  revision: string,
  i: ToVerify,
  rt: Runtime | undefined,
  wanted: (host: string) => Promise<string | undefined>,
  prober: Prober,
  deadline: number,
  o: VerifyOptions,
): Promise<RevisionCheck> {
  if (!rt) return { problem: `no runtime for host ${i.host}`, tries: 0, elapsedMs: 0 };
  const id = i.dockerId ?? i.id;
  const info = await rt.inspect(id);
  const none = { tries: 0, elapsedMs: 0 };
  if (!info) return { problem: 'its container is gone', ...none };
  if (!info.running)
    return { problem: `its container is ${info.state}${info.exitCode !== undefined ? ` (exit code ${info.exitCode})` : ''}`, address: info.address, ...none };
  const label = info.labels[LABELS.revision];
  if (label !== revision) return { problem: `carries revision ${JSON.stringify(label ?? '(none)')}, expected ${revision}`, address: info.address, ...none };
  const [has, want] = await Promise.all([rt.containerImage(id), wanted(i.host)]);
  if (want === undefined) return { problem: `the engine on host ${i.host} has no image ${fleet.image} to compare with`, address: info.address, ...none };
  if (has !== want)
    return {
      problem: `runs image ${has === undefined ? '(unknown)' : shortId(has)}, but ${fleet.image} is ${shortId(want)} on host ${i.host}`,
      address: info.address,
      ...none,
    };
  // A busy host can miss a probe's timeout (an exec that starts a runtime): asked again with backoff before calling it failed.
  const t = await tryUntil<true>(
    () =>
      prober.ready({ id, host: i.host, address: info.address }).then(
        (ok) => (ok ? { answer: true as const } : { retry: '' }),
        (err: unknown) => ({ retry: (err as Error).message }),
      ),
    deadline,
    o,
  );
  const counted = { address: info.address, tries: t.tries, elapsedMs: t.elapsedMs };
  if (t.answer) return counted;
  if (t.interrupted) return { ...counted, interrupted: true };
  return {
    ...counted,
    unready: true,
    problem: `its readiness probe no longer passes (${triesText(t.tries)} over ${secondsText(t.elapsedMs)}${t.last ? `, last: ${t.last}` : ''})`,
  };
}

export async function verifyRevision(
  fleet: Fleet,
  revision: string,
  instances: readonly ToVerify[],
  deps: { prober: Prober; runtimes: ReadonlyMap<string, Runtime> },
  emit: EventSink,
  o: VerifyOptions,
): Promise<Verified[]> {
  const deadline = o.clock.now() + o.budgetMs;
  // One image lookup per host: the same tag can name different builds on different engines.
  const byHost = new Map<string, Promise<string | undefined>>();
  const wanted = (host: string) => {
    let p = byHost.get(host);
    if (!p) {
      // The build the deploy pinned (engine/pin.ts), not what the tag names now.
      p =
        deps.runtimes
          .get(host)
          ?.imageInfo?.(fleet.pinnedImage ?? fleet.image)
          .then((x) => x?.id) ?? Promise.resolve(undefined);
      byHost.set(host, p);
    }
    return p;
  };
  const results = await Promise.all(
    instances.map(async (i) => {
      const r = await revisionProblem(fleet, revision, i, deps.runtimes.get(i.host), wanted, deps.prober, deadline, o).catch((err: unknown): RevisionCheck => ({
        problem: (err as Error).message,
        address: i.address,
        tries: 0,
        elapsedMs: 0,
      }));
      return { ...r, name: i.id, host: i.host, address: r.address ?? i.address ?? '', version: fleet.version };
    }),
  );
  for (const r of results)
    if (r.problem === undefined && !r.interrupted) emit({ type: 'verified', name: r.name, version: r.version, tries: r.tries, elapsedMs: r.elapsedMs });
  const wrong = results.filter((r) => r.problem !== undefined);
  if (results.some((r) => r.interrupted)) throw interrupted(fleet, results.length - wrong.length - results.filter((r) => r.interrupted).length, results.length);
  if (wrong.length > 0) {
    const hints = [
      ...(wrong.some((r) => !r.unready)
        ? ['the image may have changed under its tag while the rollout ran (rebuilt or pulled again): deploy again to replace what runs the old build']
        : []),
      ...(wrong.some((r) => r.unready)
        ? [
            'an instance whose readiness probe stopped passing may be slow or overloaded, or the machine busy (the rollout saw it ready): check its logs and probes.readiness.timeoutMs, then deploy again to check again',
          ]
        : []),
    ];
    throw new RolloutFailedError(
      `rollout of ${fleet.service} finished but ${wrong.length} of ${results.length} instance(s) do not run revision ${revision} (image ${fleet.image}):\n  ${wrong.map((r) => `${r.name} on ${r.host}: ${r.problem}`).join('\n  ')}`,
      hints.join('; '),
      { instances: results.map(({ name, host, problem, tries }) => ({ name, host, tries, ...(problem !== undefined ? { problem } : {}) })) },
    );
  }
  return results.map(({ name, host, address, version }) => ({ name, host, address, version }));
}
