/**
 * `fleetroll adopt`. Which running containers `--match` takes: those carrying
 * a label (`key=value`) or whose name matches a pattern (`api-*`), never an
 * nginx of the fleet nor a container fleetroll already manages. The matching
 * is pure; `findAdoptable` asks each host's Runtime for its containers.
 * `adoptFleet` then records them in the fleet's state, where they stay until
 * a rollout has replaced them.
 */
import type { Fleet } from '../config/load.js';
import { renderUpstream } from '../core/upstream.js';
import { ExitCode, FleetrollError, fieldError } from '../errors.js';
import { LABELS, type FleetState, type InstanceInfo, type RevisionRecord, type Runtime, type StateStore } from '../ports.js';
import { ADOPTED_PREFIX } from './records.js';
import type { DeployDeps, FleetHandles } from './types.js';

export type AdoptMatch = { kind: 'label'; key: string; value: string; text: string } | { kind: 'name'; pattern: RegExp; text: string };

/** `--match` as given: `key=value` (split at the first `=`) or a name pattern of letters, digits, `_ . - * ?`. */
export function parseAdoptMatch(text: string): AdoptMatch {
  const eq = text.indexOf('=');
  if (eq >= 0) return { kind: 'label', key: text.slice(0, eq), value: text.slice(eq + 1), text };
  if (!/^[A-Za-z0-9_.*?-]+$/.test(text)) {
    throw fieldError('--match', `must be key=value or a name pattern of letters, digits, "_", ".", "-", "*", "?", got ${JSON.stringify(text)}`);
  }
  const pattern = new RegExp(`^${text.replace(/[.]/g, '\\.').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
  return { kind: 'name', pattern, text };
}

/**
 * Labels that mark a container as fleetroll's own: its instances, its state and
 * its lock (and their sub-labels such as `fleetroll.lock.service`). Image labels
 * such as fleetroll.image show up on containers too: they do not count.
 */
const OWN_LABELS = [LABELS.managed, LABELS.service, LABELS.state, LABELS.lock];

/** What `docker ps` lists without -a: the containers adopt looks at. */
const LIVE_STATES = new Set(['running', 'paused', 'restarting']);

/** True when `c` is one adopt takes for `match`; `exclude` holds the names of the fleet's nginx containers. */
export function isAdoptable(c: Pick<InstanceInfo, 'name' | 'labels' | 'state'>, match: AdoptMatch, exclude: ReadonlySet<string>): boolean {
  if (!LIVE_STATES.has(c.state)) return false;
  if (match.kind === 'label' ? c.labels[match.key] !== match.value : !match.pattern.test(c.name)) return false;
  if (exclude.has(c.name)) return false;
  return !Object.keys(c.labels).some((k) => OWN_LABELS.some((own) => k === own || k.startsWith(`${own}.`)));
}

export interface AdoptCandidate {
  id: string;
  name: string;
  host: string;
  /** The image the container was created from. */
  image: string;
}

/** The running containers on every host that adopt would take for `match`, hosts in order. */
export async function findAdoptable(runtimes: ReadonlyMap<string, Runtime>, match: AdoptMatch, exclude: ReadonlySet<string>): Promise<AdoptCandidate[]> {
  const found: AdoptCandidate[] = [];
  for (const [host, rt] of runtimes) {
    const listed = await rt.list(match.kind === 'label' ? { [match.key]: match.value } : {});
    for (const c of listed) {
      if (!isAdoptable(c, match, exclude)) continue;
      const spec = await rt.specOf(c.id);
      if (spec) found.push({ id: c.id, name: c.name, host, image: spec.image });
    }
  }
  return found;
}

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
  if (found.length === 0)
    throw new FleetrollError('E_ADOPT', `no running container matches ${o.match}`, {
      hint: 'match a label (key=value) or a name pattern (api-*) of the running containers',
    });
  // Adopting reads each container's version over HTTP and puts its address in nginx.
  const port = fleet.port;
  if (port === undefined)
    throw new FleetrollError('E_ADOPT', 'port: is required to adopt running containers (their address and version endpoint are reached through it)', {
      exitCode: ExitCode.invalidInput,
    });
  let image = await h.store.image();
  if (!image) {
    image = found[0]?.image ?? fleet.image;
    await h.store.ensure(image);
  }
  await h.lock.acquire(image, o.command, 0);
  try {
    const state = (await h.store.read()) ?? { service: fleet.service, nextRevision: 1, revisions: [] };
    if (state.revisions.length > 0 || state.adopted?.length) {
      throw new FleetrollError(
        'E_ADOPT',
        `${fleet.service} is already managed by fleetroll (${state.revisions.length} revision(s) in its history); adopt is for fleets it has never deployed`,
        { exitCode: ExitCode.invalidInput },
      );
    }
    const instances = [];
    for (const c of found) {
      const info = await deps.runtimes.get(c.host)?.inspect(c.id, fleet.port);
      if (!info?.address) throw new FleetrollError('E_ADOPT', `${c.name} on ${c.host} has no address on a Docker network fleetroll can reach`);
      const { ready, version } = await answerOf(deps, { id: info.id, host: c.host, address: info.address });
      instances.push({ name: info.name, host: c.host, address: info.address, version, ready, id: info.id });
    }
    const silent = instances.filter((i) => !i.version);
    if (silent.length > 0) {
      throw new FleetrollError(
        'E_ADOPT',
        `${silent.map((i) => `${i.name} on ${i.host}`).join(', ')} did not say its version${fleet.probes.version ? ` (GET ${fleet.probes.version.path})` : ''} within ${ADOPT_WAIT_MS / 1000} s`,
        {
          hint: 'check that the containers run the app on port: and that it answers there, then adopt again (nothing was recorded)',
        },
      );
    }
    const versions = [...new Set(instances.map((i) => i.version))];
    if (versions.length !== 1 || !versions[0]) {
      throw new FleetrollError(
        'E_ADOPT',
        `the matched containers do not report one version: ${instances.map((i) => `${i.name}=${JSON.stringify(i.version)}`).join(', ')}`,
        { hint: 'adopt one version at a time (narrow --match)' },
      );
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

/**
 * How long adopt waits for a matched container to be ready and say its
 * version: containers just started (`docker compose up -d` right before)
 * may not listen yet, and adopting one unready would leave it out of nginx.
 */
const ADOPT_WAIT_MS = 20_000;

/** A container's readiness and version, asked again every 200 ms until both answer or ADOPT_WAIT_MS is over (then what it had). */
async function answerOf(deps: DeployDeps, target: { id: string; host: string; address: string }): Promise<{ ready: boolean; version: string }> {
  const until = Date.now() + ADOPT_WAIT_MS;
  for (;;) {
    const ready = await deps.prober.ready(target);
    const version = await deps.prober.version(target.address).catch(() => '');
    if ((ready && version) || Date.now() >= until) return { ready, version };
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The adopted containers as the engine needs them, under the revision adopt recorded. */
export function adoptedOf(state: FleetState): DeployDeps['adopted'] {
  const rev = state.revisions.find((r) => r.hash.startsWith(ADOPTED_PREFIX));
  if (!state.adopted?.length || !rev) return undefined;
  return { instances: state.adopted, revision: rev.hash, version: rev.version };
}

/** Adopted containers a rollout replaced are gone: drop them from the state. */
export async function forgetRemovedAdopted(store: StateStore, deps: DeployDeps): Promise<void> {
  const s = await store.read();
  if (!s?.adopted?.length) return;
  const still = [];
  for (const a of s.adopted) if (await deps.runtimes.get(a.host)?.inspect(a.id)) still.push(a);
  if (still.length === s.adopted.length) return;
  s.adopted = still;
  await store.write(s);
}
