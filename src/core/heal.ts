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
 * An instance that stays unready once it is out of nginx is reported (the
 * fleet is not whole) and waited for: a slow start or a passing overload
 * answers again and goes back in. Once it has been unready for longer than
 * `stuckAfterMs` (the watch passes progressDeadlineSeconds: how long an
 * instance may take to become ready, the same bound a deploy gives it) it is
 * `stuck`: replaced, as a deploy would fail an instance that never became
 * ready. Kubernetes replaces only what exits (a liveness probe restarts a
 * hung container); fleetroll has no liveness probe, so without this a
 * deadlocked app would hold one of `replicas` forever.
 *
 * PURE.
 */

export type HealReason = 'missing' | 'exited' | 'unready' | 'stuck' | 'out of traffic' | 'moved' | 'stray' | 'old revision';

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
  /** Since when (ms, the watch's clock) each running instance has been seen unready, look after look. */
  unreadySince?: ReadonlyMap<string, number> | undefined;
  /** The time of this look (ms, the same clock). */
  now?: number | undefined;
  /** An instance unready this long is replaced (`stuck`); undefined: never. */
  stuckAfterMs?: number | undefined;
}

/** Restarts from which a growing count is called a crash loop (as `status` calls it). */
export const CRASH_LOOP_AT = 3;

export function assessFleet(f: HealInput): HealFinding[] {
  const out: HealFinding[] = [];
  const lbs = (i: SeenInstance, want: (s: string) => boolean) =>
    Object.entries(i.upstreams)
      .filter(([, s]) => want(s))
      .map(([lb]) => lb);
  let alive = 0;
  for (const i of f.instances) {
    if (i.revision !== f.revision) {
      const mine = f.known.includes(i.revision);
      out.push({
        reason: mine ? 'old revision' : 'unknown revision',
        name: i.name,
        detail: mine
          ? `${i.name} runs revision ${i.revision}, not the current ${f.revision}`
          : `${i.name} carries revision ${i.revision}, which the fleet's history does not know: left alone`,
        act: mine,
      });
      continue;
    }
    const before = f.restartsBefore?.get(i.name);
    if (i.restarts >= CRASH_LOOP_AT && (before === undefined || i.restarts > before)) {
      out.push({
        reason: 'crash loop',
        name: i.name,
        detail: `${i.name} keeps being restarted by Docker (${i.restarts} restarts): kept out of traffic; see docker logs ${i.name}`,
        act: false,
      });
    }
    if (i.state !== 'running' && i.state !== 'restarting') {
      out.push({ reason: 'exited', name: i.name, detail: `${i.name} is ${i.state}`, act: true });
      continue;
    }
    alive++;
    const moved = lbs(i, (s) => s === 'moved');
    if (moved.length > 0)
      out.push({
        reason: 'moved',
        name: i.name,
        detail: `${moved.join(', ')} list${moved.length === 1 ? 's' : ''} ${i.name} at an address it no longer has`,
        act: true,
      });
    const routed = lbs(i, (s) => s === 'up');
    const since = f.unreadySince?.get(i.name);
    // Only a running container: one Docker is restarting is a crash loop's business (reported above).
    const stuck =
      !i.ready && i.state === 'running' && since !== undefined && f.now !== undefined && f.stuckAfterMs !== undefined && f.now - since >= f.stuckAfterMs;
    if (stuck)
      out.push({
        reason: 'stuck',
        name: i.name,
        detail: `${i.name} has not answered its readiness probe since ${stamp(since)} (${Math.round(f.stuckAfterMs! / 1000)} s, progressDeadlineSeconds): replaced`,
        act: true,
      });
    else if (!i.ready && routed.length > 0)
      out.push({
        reason: 'unready',
        name: i.name,
        detail: `${i.name} does not answer its readiness probe, and ${routed.join(', ')} send${routed.length === 1 ? 's' : ''} it users`,
        act: true,
      });
    else if (!i.ready && i.state === 'running') {
      // Out of traffic and waited for: said (the fleet is not whole), not acted on until it is stuck.
      const until = since !== undefined && f.stuckAfterMs !== undefined ? `; replaced if still unready at ${stamp(since + f.stuckAfterMs)}` : '';
      out.push({
        reason: 'unready',
        name: i.name,
        detail: `${i.name}: unready, out of traffic${since !== undefined ? ` since ${stamp(since)}` : ''}${until}`,
        act: false,
      });
    }
    const outOf = lbs(i, (s) => s !== 'up' && s !== 'moved');
    if (i.ready && outOf.length > 0)
      out.push({ reason: 'out of traffic', name: i.name, detail: `${i.name} is ready but out of ${outOf.join(', ')}`, act: true });
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
  const order: HealReason[] = ['exited', 'missing', 'stuck', 'unready', 'moved', 'out of traffic', 'stray', 'old revision'];
  return order.filter((r) => acted.has(r));
}

/** Whether a look found the fleet whole: nothing to act on, and no instance of it unready out of traffic (waited for, or soon replaced). */
export function isWhole(findings: readonly HealFinding[]): boolean {
  return findings.every((x) => !x.act && x.reason !== 'unready');
}

/** The instances a heal replaces although they run: stuck ones (the controller stops them, and starts their replacements under the fleet's limits). */
export function toReplace(findings: readonly HealFinding[]): string[] {
  return findings.filter((x) => x.act && x.reason === 'stuck' && x.name !== undefined).map((x) => x.name!);
}

/** A time of the watch's clock as people read it (the same text at every look: said once). */
function stamp(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
