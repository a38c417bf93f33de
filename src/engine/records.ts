/**
 * What the fleet's state keeps of each revision, and how a fleet is rebuilt
 * from it: the spec recorded when a rollout begins (env literals, secrets as
 * references and digests, container fields), the outcome written when it
 * ends, and the fleet file's settings with a recorded revision's spec for
 * undo, resume, restart and status.
 */
import type { Fleet } from '../config/load.js';
import { digestSecretFiles, NOT_KEPT, resolveSecretRefs, type SecretRef } from '../config/secrets.js';
import type { DeployHealthReport } from '../core/deployHealth.js';
import { diffLines, diffSpecs } from '../core/specDiff.js';
import { addCosts, type CostSample } from '../core/stepCosts.js';
import { InterruptedError, PausedError, RolloutFailedError, ValidationError } from '../errors.js';
import type { FleetState, RevisionRecord, RolloutOutcome, StateStore, SwitchTimes } from '../ports.js';
import { envOf, secretDigest } from './revision.js';
import type { RecordedSpec } from './types.js';

/** The hash prefix of the revision `fleetroll adopt` records for containers it did not start. */
export const ADOPTED_PREFIX = 'adopted-';

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
export function fleetForRecord(
  fleet: Fleet,
  r: RevisionRecord,
  o: { strict?: boolean; lookup?: (name: string) => string | undefined; state?: FleetState | undefined } = {},
): Fleet {
  const key = o.state?.revisionKey;
  const secrets = resolveSecretRefs(r.envSecrets ?? {}, {
    lookup: o.lookup ?? ((n) => process.env[n]),
    fleetFile: fleet.source.file,
    what: `revision ${r.number}`,
    strict: o.strict ?? true,
    digestOf: (v) => secretDigest(v, key),
  });
  const spec = recordedSpecOf(r);
  if (spec.secretIssues.length > 0 && (o.strict ?? true))
    throw new ValidationError(spec.secretIssues.map((i) => ({ ...i, message: `revision ${r.number}: ${i.message}` })));
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
  const secretFiles = Object.fromEntries(
    Object.entries(fleet.secretSources ?? {}).map(([k, path]) => [k, { path, digest: secretDigest(fleet.secretDigests?.[k] ?? '', key) }]),
  );
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

/** The switch times a failed blue-green rollout carries in its details (controller switchTimes). */
export function switchTimesOf(err: unknown): SwitchTimes {
  if (!(err instanceof RolloutFailedError)) return {};
  const t: SwitchTimes = {};
  for (const k of SWITCH_KEYS) if (typeof err.details[k] === 'string') t[k] = err.details[k] as string;
  return t;
}

const SWITCH_KEYS = ['switchedAt', 'switchIssuedAt', 'switchedBackAt', 'switchBackIssuedAt'] as const;

/** Ends a revision record: its outcome, and the health numbers of this rollout (replacing an earlier rollout's); adds its step costs to the fleet's. */
export async function finishRecord(
  store: StateStore,
  n: number,
  outcome: RolloutOutcome,
  message: string,
  health: DeployHealthReport | undefined,
  switches: SwitchTimes = {},
  costs: readonly CostSample[] = [],
): Promise<void> {
  const s = await store.read();
  if (!s) return;
  const r = s.revisions.find((x) => x.number === n);
  if (!r) return;
  r.outcome = outcome;
  r.finishedAt = new Date().toISOString();
  const kept = addCosts(s.costs, costs, r.finishedAt);
  if (kept) s.costs = kept;
  else delete s.costs;
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

/**
 * How a rollout that threw ended, as its record (and the --metrics rollout
 * counter) names it. Here rather than in session.ts: cli/metrics.ts needs it,
 * and undo's switch-back path must not load the whole engine with it.
 */
export function outcomeOf(err: unknown): { outcome: RolloutOutcome; message: string } {
  if (err instanceof PausedError) return { outcome: 'paused', message: err.message };
  if (err instanceof InterruptedError) return { outcome: 'interrupted', message: err.message };
  if (err instanceof RolloutFailedError && err.details.rolledBackTo !== undefined) return { outcome: 'rolled back', message: err.message };
  if (err instanceof RolloutFailedError && err.details.switchedBack === true) return { outcome: 'rolled back', message: err.message };
  return { outcome: 'failed', message: err instanceof Error ? err.message : String(err) };
}
