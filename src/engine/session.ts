/**
 * A rollout as operators run it day to day: under the fleet lock, recorded
 * as a revision in the fleet's history, journaled step by step, pausable from
 * another machine, and recovering cleanly when the previous run was killed.
 * deploy, undo, restart and resume all go through `runManaged`.
 */
import { randomBytes } from 'node:crypto';
import type { Fleet } from '../config/load.js';
import type { FleetLockPort, FleetState, JournalEntry, RevisionRecord, RolloutOutcome, StateStore, SwitchTimes } from '../ports.js';
import { journalWriter } from './journal.js';
import type { HealthWatch } from './health.js';
import { ExitCode, FleetrollError, ValidationError } from '../errors.js';
import type { DeployHealthReport } from '../core/deployHealth.js';
import { deploy, healthOf, InterruptedError, prepare, startHealthWatch, PausedError, RolloutFailedError, type DeployDeps, type DeployOptions, type DeployResult } from './rollout.js';
import type { RecordedSpec } from './types.js';
import { envOf, revisionOf, secretDigest } from './revision.js';
import { digestSecretFiles, NOT_KEPT, resolveSecretRefs, type SecretRef } from '../config/secrets.js';
import { renderUpstream } from '../core/upstream.js';
import { diffLines, diffSpecs } from '../core/specDiff.js';

export interface ManagedOptions extends DeployOptions {
  /** The command line, recorded with the lock. */
  command: string;
  /** Wait this long for a held lock (ms); 0 fails at once with exit 3. */
  lockWaitMs?: number;
  /** Continue this revision record instead of starting a new one (resume). */
  continueRevision?: number;
}

export interface FleetHandles {
  store: StateStore;
  lock: FleetLockPort;
  /** "user@host", recorded with each revision. */
  who: string;
}

export interface ManagedResult extends DeployResult {
  revisionNumber: number;
}

/** Applies the fleet's recorded restart marker (so a plain deploy does not undo a restart) and its revision key. */
export function withState(fleet: Fleet, state: FleetState | undefined): Fleet {
  return {
    ...fleet,
    ...(state?.restartedAt ? { restartedAt: state.restartedAt } : {}),
    ...(state?.revisionKey ? { revisionKey: state.revisionKey } : {}),
  };
}

/**
 * The fleet file's settings with the spec of a recorded revision (undo,
 * resume, restart): its literal env, its secrets resolved again from their
 * references (`strict`: a reference that cannot be resolved is exit 2 naming
 * it; otherwise, for status, it is left out), its container fields.
 */
export function fleetForRecord(fleet: Fleet, r: RevisionRecord, o: { strict?: boolean; lookup?: (name: string) => string | undefined; state?: FleetState | undefined } = {}): Fleet {
  const key = o.state?.revisionKey;
  const secrets = resolveSecretRefs(r.envSecrets ?? {}, { lookup: o.lookup ?? ((n) => process.env[n]), fleetFile: fleet.source.file, what: `revision ${r.number}`, strict: o.strict ?? true, digestOf: (v) => secretDigest(v, key) });
  const spec = recordedSpecOf(r);
  if (spec.secretIssues.length > 0 && (o.strict ?? true)) throw new ValidationError(spec.secretIssues.map((i) => ({ ...i, message: `revision ${r.number}: ${i.message}` })));
  const { secretIssues: _i, ...recorded } = spec;
  return {
    ...fleet,
    image: r.image,
    // Exactly the recorded build: undo, resume and restart run it, not what the tag names now.
    digest: r.digest,
    pinnedImage: undefined,
    version: r.version,
    port: r.port,
    env: { ...r.env, ...secrets },
    ...recorded,
    ...(o.state?.revisionKey ? { revisionKey: o.state.revisionKey } : {}),
  };
}

/**
 * What a revision's record holds beyond image, version, port and env values
 * (a rollback takes those from its containers). Secret files are read again,
 * as a deploy of the revision would mount them; those that cannot be read
 * are in `secretIssues`.
 */
export function recordedSpecOf(r: RevisionRecord): RecordedSpec & { secretIssues: { path: string; message: string }[] } {
  const sources = Object.fromEntries(Object.entries(r.secretFiles ?? {}).map(([k, f]) => [k, f.path]));
  const digested = digestSecretFiles(sources, (name) => `secretFiles/${name}`);
  return {
    envSources: Object.fromEntries(Object.entries(r.envSecrets ?? {}).map(([k, ref]) => [k, ref.source])),
    restartedAt: r.restartedAt,
    // A revision recorded before container fields were kept had none.
    container: r.container ?? {},
    secretSources: sources,
    secretDigests: digested.digests,
    secretIssues: digested.issues,
  };
}

/** What the state keeps of a revision's env and secret files: literals as written, secrets as references and digests. */
export function recordSpec(fleet: Fleet, key: string | undefined): Pick<RevisionRecord, 'env' | 'envSecrets' | 'container' | 'secretFiles'> {
  const env: Record<string, string> = {};
  const envSecrets: Record<string, SecretRef> = {};
  for (const [k, v] of Object.entries(envOf(fleet))) {
    const source = fleet.envSources?.[k];
    if (source === undefined) env[k] = v;
    else envSecrets[k] = { source, digest: secretDigest(v, key) };
  }
  // The content's sha256 is keyed once more: a plain digest of a short secret could be guessed.
  const secretFiles = Object.fromEntries(Object.entries(fleet.secretSources ?? {}).map(([k, path]) => [k, { path, digest: secretDigest(fleet.secretDigests?.[k] ?? '', key) }]));
  return {
    env,
    // Always written, even empty: it marks the record as kept by reference, so scrubLegacySecrets leaves its literal env alone.
    envSecrets,
    ...(fleet.container && Object.keys(fleet.container).length ? { container: fleet.container } : {}),
    ...(Object.keys(secretFiles).length ? { secretFiles } : {}),
  };
}

/**
 * What changes from the fleet's running revision (the latest in its
 * history) to `fleet`, as lines for people; undefined when there is no
 * history yet. Secret values are compared by digest only.
 */
export function changesFromRunning(fleet: Fleet, state: FleetState | undefined): { from: RevisionRecord; lines: string[] } | undefined {
  const from = state?.revisions[state.revisions.length - 1];
  if (!from || from.hash.startsWith(ADOPTED_PREFIX)) return undefined;
  const f = withState(fleet, state);
  const to = { image: f.image, version: f.version, port: f.port, restartedAt: f.restartedAt, ...recordSpec(f, state?.revisionKey) };
  return { from, lines: diffLines(diffSpecs(from, to)) };
}

/**
 * State written before secrets were kept as references holds env values in
 * plaintext, and nothing says which were secret: every value of such a
 * record is replaced by a digest on the next write (undo to it then says
 * the value was not kept). A record recordSpec wrote always has envSecrets
 * (maybe empty), so its literal env is never mistaken for a legacy one.
 * Returns whether anything changed.
 */
export function scrubLegacySecrets(state: FleetState): boolean {
  let changed = false;
  for (const r of state.revisions) {
    if (r.envSecrets !== undefined || r.container !== undefined || Object.keys(r.env ?? {}).length === 0) continue;
    r.envSecrets = Object.fromEntries(Object.entries(r.env).map(([k, v]) => [k, { source: NOT_KEPT, digest: secretDigest(v, state.revisionKey) }]));
    r.env = {};
    changed = true;
  }
  return changed;
}

function outcomeOf(err: unknown): { outcome: RolloutOutcome; message: string } {
  if (err instanceof PausedError) return { outcome: 'paused', message: err.message };
  if (err instanceof InterruptedError) return { outcome: 'interrupted', message: err.message };
  if (err instanceof RolloutFailedError && err.details.rolledBackTo !== undefined) return { outcome: 'rolled back', message: err.message };
  if (err instanceof RolloutFailedError && err.details.switchedBack === true) return { outcome: 'rolled back', message: err.message };
  return { outcome: 'failed', message: err instanceof Error ? err.message : String(err) };
}

const ENDED = ['complete', 'failed', 'paused', 'interrupted', 'rolled back'];

export type SwitchBackResult = { outcome: 'switched back'; ms: number } | { outcome: 'too late' };

/**
 * `fleetroll undo` while a blue-green rollout of the fleet waits out
 * scaleDownDelaySeconds (its journal has a switch and no end yet): asks that
 * rollout, through the fleet state, to switch traffic back, and waits until
 * it says the old set serves again. The running deploy does the switch-back
 * (it holds the lock and knows both sets): one write and one reload per
 * nginx, then it drains and removes the new set. Returns undefined when no
 * such rollout is running, "too late" when it ended first (the old set was
 * already going), and otherwise the milliseconds from the request to the
 * reload in force, on this machine's clock.
 */
export async function requestSwitchBack(store: StateStore, o: { sleep: (ms: number) => Promise<void>; timeoutMs: number }): Promise<SwitchBackResult | undefined> {
  const ofLast = (journal: JournalEntry[]) => {
    const last = journal[journal.length - 1]?.rollout;
    return journal.filter((e) => e.rollout === last);
  };
  const mine = ofLast(await store.journal());
  if (mine.some((e) => ENDED.includes(e.step)) || !mine.some((e) => e.step === 'switch')) return undefined;
  const rollout = mine[0]?.rollout;
  const state = await store.read();
  if (!state) return undefined;
  const t0 = Date.now();
  await store.write({ ...state, switchBack: true });
  const clear = async () => {
    const s = await store.read();
    if (s?.switchBack) await store.write({ ...s, switchBack: undefined });
  };
  for (;;) {
    const entries = (await store.journal()).filter((e) => e.rollout === rollout);
    const back = entries.find((e) => e.step === 'switched-back');
    if (back) return { outcome: 'switched back', ms: Math.max(0, Date.parse(back.at) - t0) };
    if (entries.some((e) => ENDED.includes(e.step))) {
      await clear();
      return { outcome: 'too late' };
    }
    if (Date.now() - t0 > o.timeoutMs) {
      await clear();
      throw new FleetrollError('E_SWITCH_BACK', `the running blue-green rollout did not switch back within ${o.timeoutMs / 1000} s`, { hint: 'see fleetroll status; the rollout may be stopping the old set already' });
    }
    await o.sleep(50);
  }
}

/** The last rollout in the journal, if it never reached an end (complete, failed, ...). */
function unfinishedRollout(journal: JournalEntry[]): { rollout: string; last: JournalEntry } | undefined {
  const last = journal[journal.length - 1];
  if (!last) return undefined;
  const mine = journal.filter((e) => e.rollout === last.rollout);
  const ended = mine.some((e) => ENDED.includes(e.step));
  return ended ? undefined : { rollout: last.rollout, last };
}

export async function runManaged(fleetIn: Fleet, deps: DeployDeps, h: FleetHandles, o: ManagedOptions): Promise<ManagedResult> {
  const emit = deps.events ?? (() => {});
  // The state and lock containers never run; they need some image present on
  // the first host: the state container's own, else the fleet's, else a placeholder.
  const firstHost = fleetIn.hosts[0]?.name ?? '';
  const first = deps.runtimes.get(firstHost);
  // They live on the first host: an error reaching it (TLS, ssh, down) is a preflight failure naming it.
  try {
    await first?.ping();
  } catch (err) {
    const hint = err instanceof FleetrollError && err.hint ? err.hint : 'fix the problem above and run the deploy again';
    throw new RolloutFailedError(`preflight failed, nothing was changed:\n  ${(err as Error).message}`, hint, err instanceof FleetrollError ? { code: err.code } : {}, 'preflight');
  }
  let image = await h.store.image();
  if (!image) {
    // Without the fleet's image there yet, a placeholder image: preflight then
    // copies or pulls the fleet's image to the host (or fails, naming it).
    image = (await first?.imageExists(fleetIn.image)) ? fleetIn.image : await h.store.placeholderImage();
    await h.store.ensure(image);
  }
  h.lock.onTakeover = (prev) => emit({ type: 'info', message: `took over a stale lock of ${prev.holder} (pid ${prev.pid}, ${prev.command}): its holder is gone` });
  await h.lock.acquire(image, o.command, o.lockWaitMs ?? 0);
  let healthWatch: HealthWatch | undefined;
  try {
    const state = (await h.store.read()) ?? { service: fleetIn.service, nextRevision: 1, revisions: [] };
    if (state.paused && o.continueRevision === undefined) {
      throw new FleetrollError('E_PAUSED', `fleet ${fleetIn.service} is paused (fleetroll pause)`, { hint: 'continue the paused rollout with `fleetroll resume -f <fleet>`' });
    }
    // The key of the revision hash: made once, kept in the state, never shown.
    state.revisionKey ??= randomBytes(16).toString('hex');
    scrubLegacySecrets(state);
    // Preflight and pinning first: the digest the image resolves to is part of the revision recorded below.
    // The health window opens before preflight, and before the deploy's duration starts counting.
    healthWatch = deps.accessLogs ? await startHealthWatch(withState(fleetIn, state), deps) : undefined;
    const t0 = Date.now();
    const fleet = await prepare(withState(fleetIn, state), deps, o);
    const preparedMs = Date.now() - t0;
    const hash = revisionOf(fleet);
    const changes = changesFromRunning(fleetIn, state);
    if (changes && changes.from.hash !== hash) {
      emit({ type: 'info', message: changes.lines.length ? `changes from revision ${changes.from.number} (${changes.from.hash}):\n  ${changes.lines.join('\n  ')}` : `revision ${changes.from.number} (${changes.from.hash}) differs only in what it was recorded with (the revision key)` });
    }
    const rollout = `${new Date().toISOString()}-${randomBytes(3).toString('hex')}`;

    const journal = await h.store.journal();
    const crashed = unfinishedRollout(journal);
    const write = journalWriter(h.store, rollout, (e) => emit({ type: 'info', message: `journal: ${(e as Error).message}` }));
    if (crashed) {
      const msg = `recovering: the previous rollout (${crashed.rollout}) stopped without finishing; its last step was ${crashed.last.step}${crashed.last.phase ? ` (${crashed.last.phase})` : ''}${crashed.last.detail ? ` ${JSON.stringify(crashed.last.detail)}` : ''}`;
      emit({ type: 'info', message: msg });
      write('recovered', 'end', { from: crashed.rollout, lastStep: crashed.last.step, lastDetail: crashed.last.detail });
    }

    // The revision record: continue one (resume), or start a new one.
    let record: RevisionRecord;
    const existing = o.continueRevision !== undefined ? state.revisions.find((r) => r.number === o.continueRevision) : undefined;
    if (existing) {
      record = existing;
      record.outcome = 'in progress';
    } else {
      const latest = state.revisions[state.revisions.length - 1];
      if (latest && latest.hash === hash) {
        // The same spec as the latest revision (after a failure or a crash, or
        // simply again): the same revision, continued; no new number.
        record = latest;
        record.outcome = 'in progress';
      } else {
        record = {
          number: state.nextRevision++,
          hash,
          image: fleet.image,
          digest: fleet.digest,
          version: fleet.version,
          port: fleet.port,
          ...recordSpec(fleet, state.revisionKey),
          restartedAt: fleet.restartedAt,
          changeCause: o.changeCause ?? o.command,
          who: h.who,
          when: new Date().toISOString(),
          outcome: 'in progress',
        };
        state.revisions.push(record);
      }
    }
    // A switch-back asked of an earlier rollout is not this one's to act on.
    state.switchBack = undefined;
    state.promote = undefined;
    state.abort = undefined;
    // A continued record's numbers were an earlier rollout's: this one measures its own.
    delete record.health;
    // revisionHistoryLimit old revisions are kept, plus the current one.
    state.revisions = state.revisions.slice(-(fleet.revisionHistoryLimit + 1));
    await h.store.write(state);
    // The one entry awaited: from here on a crash is recognised as an unfinished rollout.
    write('begin', 'begin', { revision: record.number, hash, image: fleet.image, version: fleet.version });
    await write.flush();

    const paused = async () => (await h.store.read())?.paused === true;
    const adopted = adoptedOf(state);
    try {
      const switchBack = async () => (await h.store.read())?.switchBack === true;
      const promoted = async () => (await h.store.read())?.promote === true;
      const aborted = async () => (await h.store.read())?.abort === true;
      // A rollback rebuilds the revision the fleet ran from its record (engine/rollout.ts previousFleet).
      const recordedSpec = (revision: string) => {
        const r = state.revisions.findLast((x) => x.hash === revision);
        if (!r) return undefined;
        const { secretIssues: _i, ...spec } = recordedSpecOf(r);
        return spec;
      };
      const result = await deploy(fleet, { ...deps, journal: write, paused, switchBack, promoted, aborted, recordedSpec, recovering: crashed !== undefined, ...(adopted ? { adopted } : {}) }, { ...o, prepared: true, preparedMs, healthWatch });
      await write.flush();
      await finishRecord(h.store, record.number, 'complete', `${result.waves} wave(s), ${result.reloads} reload(s), ${result.instances.length} instance(s) verified`, result.health, { switchedAt: result.switchedAt, switchIssuedAt: result.switchIssuedAt });
      return { ...result, revisionNumber: record.number };
    } catch (err) {
      const { outcome, message } = outcomeOf(err);
      await finishRecord(h.store, record.number, outcome, message.split('\n')[0] ?? message, healthOf(err), switchTimesOf(err));
      write(outcome, 'end', { message: message.split('\n')[0] });
      await write.flush();
      throw err;
    }
  } finally {
    await healthWatch?.abandon();
    await forgetRemovedAdopted(h.store, deps).catch(() => {});
    await h.lock.release();
  }
}

/** The adopted containers as the engine needs them, under the revision adopt recorded. */
function adoptedOf(state: FleetState): DeployDeps['adopted'] {
  const rev = state.revisions.find((r) => r.hash.startsWith(ADOPTED_PREFIX));
  if (!state.adopted?.length || !rev) return undefined;
  return { instances: state.adopted, revision: rev.hash, version: rev.version };
}

/** Adopted containers a rollout replaced are gone: drop them from the state. */
async function forgetRemovedAdopted(store: StateStore, deps: DeployDeps): Promise<void> {
  const s = await store.read();
  if (!s?.adopted?.length) return;
  const still = [];
  for (const a of s.adopted) if (await deps.runtimes.get(a.host)?.inspect(a.id)) still.push(a);
  if (still.length === s.adopted.length) return;
  s.adopted = still;
  await store.write(s);
}

export const ADOPTED_PREFIX = 'adopted-';

export interface AdoptResult {
  instances: { name: string; host: string; address: string; version: string; ready: boolean }[];
  revision: RevisionRecord;
  reloads: number;
}

/**
 * `fleetroll adopt`: takes running containers that fleetroll did not start
 * under management without restarting them. Docker cannot relabel a
 * container, so they are recorded in the fleet's state as revision 1, and
 * the upstream is written from them; from then on deploy replaces them like
 * any old revision.
 */
export async function adoptFleet(
  fleet: Fleet,
  deps: DeployDeps,
  h: FleetHandles,
  found: { id: string; name: string; host: string; image: string }[],
  o: { command: string; match: string },
): Promise<AdoptResult> {
  if (found.length === 0) throw new FleetrollError('E_ADOPT', `no running container matches ${o.match}`, { hint: 'match a label (key=value) or a name pattern (api-*) of the running containers' });
  // Adopting reads each container's version over HTTP and puts its address in nginx.
  const port = fleet.port;
  if (port === undefined) throw new FleetrollError('E_ADOPT', 'port: is required to adopt running containers (their address and version endpoint are reached through it)', { exitCode: ExitCode.invalidInput });
  let image = await h.store.image();
  if (!image) {
    image = found[0]?.image ?? fleet.image;
    await h.store.ensure(image);
  }
  await h.lock.acquire(image, o.command, 0);
  try {
    const state = (await h.store.read()) ?? { service: fleet.service, nextRevision: 1, revisions: [] };
    if (state.revisions.length > 0 || state.adopted?.length) {
      throw new FleetrollError('E_ADOPT', `${fleet.service} is already managed by fleetroll (${state.revisions.length} revision(s) in its history); adopt is for fleets it has never deployed`, { exitCode: ExitCode.invalidInput });
    }
    const instances = [];
    for (const c of found) {
      const info = await deps.runtimes.get(c.host)?.inspect(c.id, fleet.port);
      if (!info?.address) throw new FleetrollError('E_ADOPT', `${c.name} on ${c.host} has no address on a Docker network fleetroll can reach`);
      const ready = await deps.prober.ready({ id: info.id, host: c.host, address: info.address });
      const version = await deps.prober.version(info.address).catch(() => '');
      instances.push({ name: info.name, host: c.host, address: info.address, version, ready, id: info.id });
    }
    const versions = [...new Set(instances.map((i) => i.version))];
    if (versions.length !== 1 || !versions[0]) {
      throw new FleetrollError('E_ADOPT', `the matched containers do not report one version: ${instances.map((i) => `${i.name}=${JSON.stringify(i.version)}`).join(', ')}`, { hint: 'adopt one version at a time (narrow --match)' });
    }
    const images = [...new Set(found.map((c) => c.image))];
    const record: RevisionRecord = {
      number: state.nextRevision++,
      hash: `${ADOPTED_PREFIX}${state.nextRevision - 1}`,
      image: images.join(', '),
      version: versions[0],
      port: fleet.port,
      env: {},
      changeCause: `adopted ${instances.length} running container(s) matching ${o.match}`,
      who: h.who,
      when: new Date().toISOString(),
      outcome: 'complete',
      finishedAt: new Date().toISOString(),
    };
    state.revisions.push(record);
    state.adopted = instances.map((i) => ({ id: i.id, name: i.name, host: i.host, port }));
    await h.store.write(state);

    // Write every upstream from the ready ones: check all, then reload all.
    const servers = instances.filter((i) => i.ready).map((i) => ({ address: i.address, down: false, name: i.name }));
    const contents = deps.routers.map((lb) => renderUpstream(lb.template, { service: fleet.service, upstream: lb.upstream, servers }));
    for (const [i, lb] of deps.routers.entries()) await lb.router.writeAndTest(contents[i] ?? '');
    for (const lb of deps.routers) await lb.router.reload();
    return { instances: instances.map(({ id: _id, ...rest }) => rest), revision: record, reloads: deps.routers.length };
  } finally {
    await h.lock.release();
  }
}

/** Ends a revision record: its outcome, and the health numbers of this rollout (replacing an earlier rollout's). */
/** The switch times a failed blue-green rollout carries in its details (controller switchTimes). */
function switchTimesOf(err: unknown): SwitchTimes {
  if (!(err instanceof RolloutFailedError)) return {};
  const t: SwitchTimes = {};
  for (const k of SWITCH_KEYS) if (typeof err.details[k] === 'string') t[k] = err.details[k] as string;
  return t;
}

const SWITCH_KEYS = ['switchedAt', 'switchIssuedAt', 'switchedBackAt', 'switchBackIssuedAt'] as const;

async function finishRecord(store: StateStore, n: number, outcome: RolloutOutcome, message: string, health: DeployHealthReport | undefined, switches: SwitchTimes = {}): Promise<void> {
  const s = await store.read();
  if (!s) return;
  const r = s.revisions.find((x) => x.number === n);
  if (!r) return;
  r.outcome = outcome;
  r.finishedAt = new Date().toISOString();
  r.message = message.slice(0, 500);
  if (health) r.health = health;
  else delete r.health;
  for (const k of SWITCH_KEYS) {
    const v = switches[k];
    if (v) r[k] = v;
    else delete r[k];
  }
  await store.write(s);
}
