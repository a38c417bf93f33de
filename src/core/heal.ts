/**
 * What `fleetroll watch` sees wrong with a fleet between deploys, and whether
 * it acts on it. The watch reads the fleet as `status` does (every container,
 * its readiness and restarts, what each nginx routes to) and asks this
 * function; what it acts on it hands to the same controller a deploy uses.
 *
 * Acted on (a heal of the current revision): an instance of it that exited
 * or is gone (replaced), one that stopped answering readiness while nginx
 * sends it users (taken out), one that answers again but is out of nginx (put
 * back), one nginx lists at an address it no longer has (a restart, a
 * reconnect), a server nginx sends users to that no container has, and an
 * instance of an earlier revision of the fleet's history. Reported only: an
 * instance of a revision the history does not know (someone else's), and a
 * crash loop (Docker restarting it, more each look), which the controller
 * keeps out of traffic anyway.
 *
 * PURE.
 */

export type HealReason = 'missing' | 'exited' | 'unready' | 'out of traffic' | 'moved' | 'stray' | 'old revision';

export interface HealFinding {
  reason: HealReason | 'unknown revision' | 'crash loop';
  /** The instance (or, for a stray, the server) it is about. */
  name?: string | undefined;
  /** For people: what is wrong. */
  detail: string;
  /** True: the watch heals it; false: it reports it. */
  act: boolean;
}

export interface SeenInstance {
  name: string;
  revision: string;
  /** Docker's state: running, restarting, exited, created, dead, ... */
  state: string;
  ready: boolean;
  restarts: number;
  /** Per load balancer: its server line for this instance. */
  upstreams: Record<string, 'up' | 'down' | 'absent' | 'moved'>;
}

export interface HealInput {
  replicas: number;
  /** The revision the last deploy completed: the one to keep. */
  revision: string;
  /** Every revision in the fleet's history. */
  known: readonly string[];
  instances: readonly SeenInstance[];
  /** Per load balancer: servers it sends users to that no running instance has ("name (ip:port)"). */
  strays: Record<string, readonly string[]>;
  /** Restarts per instance at the previous look: a count that grows is a crash loop. */
  restartsBefore?: ReadonlyMap<string, number> | undefined;
}

/** Restarts from which a growing count is called a crash loop (as `status` calls it). */
export const CRASH_LOOP_AT = 3;

export function assessFleet(f: HealInput): HealFinding[] {
  const out: HealFinding[] = [];
  const lbs = (i: SeenInstance, want: (s: string) => boolean) => Object.entries(i.upstreams).filter(([, s]) => want(s)).map(([lb]) => lb);
  let alive = 0;
  for (const i of f.instances) {
    if (i.revision !== f.revision) {
      const mine = f.known.includes(i.revision);
      out.push({ reason: mine ? 'old revision' : 'unknown revision', name: i.name, detail: mine ? `${i.name} runs revision ${i.revision}, not the current ${f.revision}` : `${i.name} carries revision ${i.revision}, which the fleet's history does not know: left alone`, act: mine });
      continue;
    }
    const before = f.restartsBefore?.get(i.name);
    if (i.restarts >= CRASH_LOOP_AT && (before === undefined || i.restarts > before)) {
      out.push({ reason: 'crash loop', name: i.name, detail: `${i.name} keeps being restarted by Docker (${i.restarts} restarts): kept out of traffic; see docker logs ${i.name}`, act: false });
    }
    if (i.state !== 'running' && i.state !== 'restarting') {
      out.push({ reason: 'exited', name: i.name, detail: `${i.name} is ${i.state}`, act: true });
      continue;
    }
    alive++;
    const moved = lbs(i, (s) => s === 'moved');
    if (moved.length > 0) out.push({ reason: 'moved', name: i.name, detail: `${moved.join(', ')} list${moved.length === 1 ? 's' : ''} ${i.name} at an address it no longer has`, act: true });
    const routed = lbs(i, (s) => s === 'up');
    if (!i.ready && routed.length > 0) out.push({ reason: 'unready', name: i.name, detail: `${i.name} does not answer its readiness probe, and ${routed.join(', ')} send${routed.length === 1 ? 's' : ''} it users`, act: true });
    const outOf = lbs(i, (s) => s !== 'up' && s !== 'moved');
    if (i.ready && outOf.length > 0) out.push({ reason: 'out of traffic', name: i.name, detail: `${i.name} is ready but out of ${outOf.join(', ')}`, act: true });
  }
  if (alive < f.replicas) out.push({ reason: 'missing', detail: `${alive} of ${f.replicas} instance(s) of revision ${f.revision} run`, act: true });
  for (const [lb, servers] of Object.entries(f.strays)) {
    for (const s of servers) out.push({ reason: 'stray', name: s, detail: `${lb} sends users to ${s}, which no running instance is`, act: true });
  }
  return out;
}

/** The reasons a heal acts on, in a stable order, for its log line and the heals_total metric. */
export function healReasons(findings: readonly HealFinding[]): HealReason[] {
  const acted = new Set(findings.filter((x) => x.act).map((x) => x.reason as HealReason));
  const order: HealReason[] = ['exited', 'missing', 'unready', 'moved', 'out of traffic', 'stray', 'old revision'];
  return order.filter((r) => acted.has(r));
}
