/**
 * `fleetroll status`: desired vs observed. Desired is what the latest rollout
 * aimed at (deploy --image, undo and restart all differ from the file), before
 * any rollout the file; observed is every instance on every host (adopted ones
 * included), its readiness, and whether each nginx upstream has it in, down or
 * not at all. `watchRollout` follows the latest rollout until it ends.
 */
import type { Fleet } from '../config/load.js';
import { parseUpstreamServers } from '../core/upstream.js';
import { FleetrollError } from '../errors.js';
import { LABELS } from '../ports.js';
import type { DeployDeps } from './rollout.js';
import { revisionOf } from './revision.js';
import { ADOPTED_PREFIX, fleetForRecord, withState } from './records.js';
import type { FleetHandles } from './types.js';

/** What status reads of the fleet's state and lock. */
export interface StatusHandles {
  store: Pick<FleetHandles['store'], 'read'>;
  lock: Pick<FleetHandles['lock'], 'info'>;
  /** `fleetroll watch`'s own lock (held while a watch runs). */
  watchLock?: Pick<FleetHandles['lock'], 'info'> | undefined;
}

type RevisionRecord = NonNullable<Awaited<ReturnType<StatusHandles['store']['read']>>>['revisions'][number];

/** Env values may be secrets: outside the state they travel by name only. */
export const publicRecord = ({ envSecrets, secretFiles, ...r }: RevisionRecord) => ({
  ...r,
  env: [...Object.keys(r.env), ...Object.keys(envSecrets ?? {})].sort(),
  ...(envSecrets && Object.keys(envSecrets).length > 0 ? { secrets: Object.fromEntries(Object.entries(envSecrets).map(([k, s]) => [k, s.source])) } : {}),
  ...(secretFiles ? { secretFiles: Object.fromEntries(Object.entries(secretFiles).map(([k, f]) => [k, f.path])) } : {}),
});

export interface InstanceStatus {
  name: string;
  host: string;
  revision: string;
  version: string;
  state: string;
  ready: boolean;
  /** How often Docker restarted it (its restart policy); CRASH_LOOP_RESTARTS or more is reported as a crash loop. */
  restarts: number;
  /** "ip:port" nginx should reach it at, while it runs. */
  address?: string | undefined;
  /** Per load balancer (by its name): the instance's server line; moved: listed under its name at another address (it came back with a new one). */
  upstreams: Record<string, 'up' | 'down' | 'absent' | 'moved'>;
}

/**
 * `hostsDown: 'name'` (the status command): a host that does not answer is
 * named in `unreachable` and the report covers the others; otherwise (the
 * watch's looks) its error fails the report, as the watch must not take a
 * host it cannot see for one without instances.
 */
export async function statusReport(
  fleetIn: Fleet,
  deps: Pick<DeployDeps, 'runtimes' | 'routers' | 'prober'>,
  h: StatusHandles,
  o: { hostsDown?: 'name' } = {},
) {
  const state = await h.store.read();
  const latest = state?.revisions[state.revisions.length - 1];
  const fleet = latest ? fleetForRecord(fleetIn, latest, { strict: false, state }) : withState(fleetIn, state);
  // The latest rollout's own hash: its secrets need not be resolvable here to say what it aimed at.
  const desired = latest?.hash ?? revisionOf(fleet);
  const labels = { [LABELS.service]: fleet.service, [LABELS.managed]: 'true' };
  const adoptedRev = state?.revisions.find((r) => r.hash.startsWith(ADOPTED_PREFIX));
  const adopted = await Promise.all(
    (state?.adopted ?? []).map(async (a) => {
      const i = await deps.runtimes
        .get(a.host)
        ?.inspect(a.id, a.port)
        .catch((err: unknown) => {
          if (o.hostsDown !== 'name') throw err;
          return undefined;
        });
      return i ? { ...i, labels: { ...i.labels, [LABELS.revision]: adoptedRev?.hash ?? 'adopted', [LABELS.version]: adoptedRev?.version ?? '?' } } : undefined;
    }),
  );
  const unreachable: { host: string; error: string }[] = [];
  const listed = await Promise.all(
    [...deps.runtimes.entries()].map(([host, rt]) =>
      rt.list(labels).catch((err: unknown) => {
        if (o.hostsDown !== 'name') throw err;
        unreachable.push({ host, error: (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '' });
        return [];
      }),
    ),
  );
  const infos = [...listed.flat(), ...adopted.filter((i) => i !== undefined)];
  const upstreams = await Promise.all(
    deps.routers.map(async (lb) => ({ name: lb.router.name, servers: parseUpstreamServers((await lb.router.read().catch(() => undefined)) ?? '') })),
  );
  const instances: InstanceStatus[] = await Promise.all(
    infos.map(async (i) => ({
      name: i.name,
      host: i.host,
      revision: i.labels[LABELS.revision] ?? '?',
      version: i.labels[LABELS.version] ?? '?',
      state: i.state,
      ready: i.running ? await deps.prober.ready({ id: i.id, host: i.host, address: i.address }).catch(() => false) : false,
      // Only inspect says how often the engine restarted a container.
      restarts:
        i.restartCount ??
        (
          await deps.runtimes
            .get(i.host)
            ?.inspect(i.id)
            .catch(() => undefined)
        )?.restartCount ??
        0,
      ...(i.running && i.address !== undefined ? { address: i.address } : {}),
      upstreams: Object.fromEntries(
        upstreams.map((u) => {
          const s = u.servers.find((x) => x.name === i.name);
          const moved = s !== undefined && i.running && i.address !== undefined && s.address !== i.address;
          return [u.name, !s ? 'absent' : moved ? 'moved' : s.down ? 'down' : 'up'] as const;
        }),
      ),
    })),
  );
  instances.sort((a, b) => (a.name < b.name ? -1 : 1));
  const current = instances.filter((i) => i.revision === desired);
  // Servers nginx sends users to that are no running instance's address (gone, or moved away): each load balancer's.
  const live = new Set(instances.flatMap((i) => (i.address !== undefined ? [i.address] : [])));
  const strays = Object.fromEntries(
    upstreams.map((u) => [u.name, u.servers.filter((s) => !s.down && !live.has(s.address)).map((s) => `${s.name} (${s.address})`)] as const),
  );
  return {
    service: fleet.service,
    desired: { replicas: fleet.replicas, revision: desired, image: fleet.image, ...(fleet.digest ? { digest: fleet.digest } : {}), version: fleet.version },
    observed: {
      instances: instances.length,
      current: current.length,
      ready: current.filter((i) => i.ready).length,
      byRevision: Object.fromEntries([...new Set(instances.map((i) => i.revision))].map((r) => [r, instances.filter((i) => i.revision === r).length])),
    },
    upToDate: current.length === fleet.replicas && instances.length === fleet.replicas && current.every((i) => i.ready),
    instances,
    lastRollout: latest ? publicRecord(latest) : null,
    strays,
    paused: state?.paused === true,
    lock: (await h.lock.info()) ?? null,
    watch: await watchStatus(h.watchLock),
    ...(unreachable.length > 0 ? { unreachable } : {}),
  };
}

/** Whether a watch runs (its lock is held by a live holder), since when, and what it last did (its note on the lock). */
async function watchStatus(
  lock: StatusHandles['watchLock'],
): Promise<{ running: boolean; holder: string; pid: number; since: string; lastAction?: { at: string; what: string } } | null> {
  const info = lock ? await lock.info().catch(() => undefined) : undefined;
  if (!info) return null;
  return {
    running: !info.stale,
    holder: info.holder,
    pid: info.pid,
    since: info.started,
    ...(info.note ? { lastAction: { at: info.note.at, what: info.note.text } } : {}),
  };
}

/**
 * Restarts from which `status` calls an instance crash-looping. Like
 * Kubernetes' CrashLoopBackOff, restarts are a failure signal, not a fix:
 * the rollout already keeps such an instance out of traffic (it is not ready
 * while it restarts) and fails at the progress deadline.
 */
export const CRASH_LOOP_RESTARTS = 3;

export type StatusReport = Awaited<ReturnType<typeof statusReport>>;

/**
 * `status --watch`, like `kubectl rollout status`, for CI jobs: reads the
 * latest rollout every `pollMs` and tells `onLine` each time its line changes;
 * resolves when it completes, throws when it ends otherwise or after `timeoutMs`.
 */
export async function watchRollout(store: StatusHandles['store'], timeoutMs: number, onLine: (line: string) => void, pollMs = 1000): Promise<void> {
  const until = Date.now() + timeoutMs;
  let said = '';
  for (;;) {
    const state = await store.read();
    const last = state?.revisions[state.revisions.length - 1];
    const line = last ? `revision ${last.number} (${last.image}): ${last.outcome}` : 'no rollout recorded yet';
    if (line !== said) {
      onLine(line);
      said = line;
    }
    if (last?.outcome === 'complete') return;
    // `fleetroll resume` clears the pause flag first and records its rollout a moment later: a
    // paused record without the flag is a rollout being resumed, not one that ended.
    const resuming = last?.outcome === 'paused' && state?.paused !== true;
    if (last && last.outcome !== 'in progress' && !resuming) {
      throw new FleetrollError('E_ROLLOUT_FAILED', `rollout of revision ${last.number} ${last.outcome}${last.message ? `: ${last.message}` : ''}`);
    }
    if (Date.now() > until) throw new FleetrollError('E_TIMEOUT', `timed out after ${timeoutMs / 1000} s waiting for ${line}`);
    await new Promise((r) => setTimeout(r, pollMs));
  }
}
