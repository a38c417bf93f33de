/**
 * onFailure: rollback. Deploys the revision the fleet ran before, with the
 * same strategy limits, and still exits 1: the rollout failed, and the
 * message says so along with how the rollback went.
 */
import type { Fleet } from '../config/load.js';
import { RolloutFailedError } from '../errors.js';
import { LABELS, type InstanceInfo } from '../ports.js';
import { revisionOf } from './revision.js';
import type { DeployDeps, DeployOptions, DeployResult } from './types.js';

export type RunRollout = (target: Fleet, deps: DeployDeps, changeCause: string) => Promise<DeployResult>;

/** Rolls back when the fleet, the command or a failed analysis asks for it; else throws the failure as it is. */
export async function rollBackIfAsked(
  err: unknown,
  failed: Fleet,
  previous: Fleet | undefined,
  deps: DeployDeps,
  options: DeployOptions,
  run: RunRollout,
): Promise<never> {
  // A failed analysis always rolls back: the gate exists to stop a bad version spreading.
  const rollback =
    options.autoRollback === true || failed.onFailure === 'rollback' || (err instanceof RolloutFailedError && err.details.analysisFailed === true);
  if (!(err instanceof RolloutFailedError) || err.phase !== 'rollout' || !rollback) throw err;
  return rollBack(err, failed, previous, deps, run);
}

export async function rollBack(failure: RolloutFailedError, failed: Fleet, previous: Fleet | undefined, deps: DeployDeps, run: RunRollout): Promise<never> {
  const emit = deps.events ?? (() => {});
  if (!previous) {
    throw new RolloutFailedError(
      `${failure.message}\nno rollback: there was no earlier revision running when the rollout started`,
      failure.hint ?? '',
      failure.details,
    );
  }
  emit({ type: 'rollingBack', revision: revisionOf(previous), image: previous.image, version: previous.version });
  // A host that stopped answering (often why the rollout failed) cannot be
  // rolled back: roll back on the hosts that answer, and leave it out of
  // nginx, rather than fail the rollback too and leave every host mixed.
  const answers = await Promise.all(
    [...deps.runtimes].map(
      async ([name, rt]) =>
        [
          name,
          await rt.ping().then(
            () => true,
            () => false,
          ),
        ] as const,
    ),
  );
  const lost = answers.filter(([, ok]) => !ok).map(([name]) => name);
  const reachable = new Set(answers.filter(([, ok]) => ok).map(([name]) => name));
  let target = previous;
  let backDeps = deps;
  if (lost.length > 0 && reachable.size > 0) {
    target = { ...previous, hosts: previous.hosts.filter((h) => reachable.has(h.name)) };
    backDeps = { ...deps, runtimes: new Map([...deps.runtimes].filter(([name]) => reachable.has(name))) };
    emit({ type: 'info', message: `host ${lost.join(', ')} does not answer: rolling back on ${[...reachable].join(', ')} only` });
  }
  let back: DeployResult;
  try {
    back = await run(target, backDeps, `rollback after a failed rollout of ${failed.image}`);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    throw new RolloutFailedError(
      `${failure.message}\nthe rollback to ${previous.image} failed too:\n${why}`,
      'look at the instances with `docker ps`; fix and deploy a known-good image',
      failure.details,
    );
  }
  throw new RolloutFailedError(
    `${failure.message}\nrolled back (onFailure: rollback): every instance${target === previous ? '' : ` on ${[...reachable].join(', ')}`} runs revision ${back.revision} (${previous.image}, version ${back.version}) again, verified; ${back.waves} step(s), ${back.reloads} reload(s)` +
      (target === previous ? '' : `\nhost ${lost.join(', ')} did not answer: its instances were left as they are and out of nginx`),
    target === previous
      ? 'the fleet is back on the previous revision; fix the new version before deploying it again'
      : `bring ${lost.join(', ')} back, then deploy again: the next rollout brings its instances to the desired revision`,
    { ...failure.details, rolledBackTo: back.revision },
  );
}

/**
 * Rebuilds the spec of the revision most instances ran when the rollout
 * started, from one of its containers: image, the env keys fleetroll
 * recorded (values from the container), version and port labels.
 */
export async function previousFleet(
  fleet: Fleet,
  revision: string,
  infos: readonly InstanceInfo[],
  deps: Pick<DeployDeps, 'runtimes' | 'recordedSpec'>,
): Promise<Fleet | undefined> {
  const groups = new Map<string, InstanceInfo[]>();
  for (const i of infos) {
    const rev = i.labels[LABELS.revision] ?? 'unknown';
    if (rev === revision) continue;
    // Pushed, not copied: a copy per instance made a 20,000-instance fleet cost 2e8 element copies.
    const group = groups.get(rev);
    if (group) group.push(i);
    else groups.set(rev, [i]);
  }
  const created = (i: InstanceInfo) => Number(i.labels[LABELS.created] ?? 0) || 0;
  // A loop, not Math.max(...list): spreading a list that long overflows the argument stack.
  const newest = (list: InstanceInfo[]) => list.reduce((m, i) => Math.max(m, created(i)), Number.NEGATIVE_INFINITY);
  const best = [...groups.values()].sort((a, b) => b.length - a.length || newest(b) - newest(a))[0];
  const sample = best?.find((i) => i.running) ?? best?.[0];
  if (!sample) return undefined;
  const spec = await deps.runtimes
    .get(sample.host)
    ?.specOf(sample.id)
    .catch(() => undefined);
  if (!spec) return undefined;
  const keys = (sample.labels[LABELS.envKeys] ?? '').split(',').filter(Boolean);
  const env = Object.fromEntries(keys.filter((k) => k in spec.env).map((k) => [k, spec.env[k] ?? '']));
  const port = Number(sample.labels[LABELS.port] ?? fleet.port) || fleet.port;
  // A pinned revision's container runs the pinned reference; its labels keep the image as written and the digest the hash covers.
  const digest = sample.labels[LABELS.digest];
  const pinned = digest
    ? { image: sample.labels[LABELS.imageRef] ?? spec.image, digest, pinnedImage: spec.image }
    : { image: spec.image, digest: undefined, pinnedImage: undefined };
  // The failed spec's container fields would bring its breakage (a bad command, a missing mount) back into the rollback.
  const recorded = deps.recordedSpec?.(sample.labels[LABELS.revision] ?? '');
  return { ...fleet, ...pinned, env, port, version: sample.labels[LABELS.version] ?? fleet.version, hooks: undefined, ...recorded };
}
