/**
 * Which running containers `fleetroll adopt --match` takes: those carrying a
 * label (`key=value`) or whose name matches a pattern (`api-*`), never an nginx
 * of the fleet nor a container fleetroll already manages. The matching is pure;
 * `findAdoptable` asks each host's Runtime for its containers.
 */
import { fieldError } from '../errors.js';
import { LABELS, type InstanceInfo, type Runtime } from '../ports.js';

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
