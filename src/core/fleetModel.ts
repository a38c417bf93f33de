/**
 * The fleet as an onlooker sees it (`--metrics`: the Prometheus series and
 * the live page), rebuilt from what a rollout reports: a starting
 * observation of the fleet, then the rollout's events, then (for `watch`)
 * heals and phases it reports itself, and the access log's records.
 *
 * Events come in as the engine's RolloutEvent (src/engine/events.ts); this
 * module names only the fields it reads (ModelEvent, checked against
 * RolloutEvent by test/unit/fleet-model.test.ts), because core imports
 * nothing from the engine. Unknown event types are ignored, so an event added
 * later never breaks a scrape.
 *
 * PURE: the caller passes the time of each change (`atMs`); the functions
 * update the model they are given (one writer: the metrics server) and
 * return it, so a test reads as a fold over events.
 */
import type { AccessRecord } from './accessLog.js';

export type Phase = 'creating' | 'starting' | 'ready' | 'available' | 'draining' | 'stopping' | 'failed';
/** Every phase, in the order an instance goes through them: the gauge's phase label values, the page's order. */
export const PHASES: readonly Phase[] = ['creating', 'starting', 'ready', 'available', 'draining', 'stopping', 'failed'];

export type Outcome = 'success' | 'failed' | 'rolled_back' | 'paused' | 'interrupted';

export interface InstanceView {
  name: string;
  host: string;
  revision: string;
  address?: string | undefined;
  phase: Phase;
  sinceMs: number;
}

/** What a starting observation (or `watch`, on every pass) knows of one instance. */
export interface ObservedInstance {
  name: string;
  host: string;
  revision: string;
  version?: string | undefined;
  address?: string | undefined;
  running: boolean;
  /** Explicit phase (watch knows it); else running and routed → available, running → starting, not running → failed. */
  phase?: Phase | undefined;
}

export interface RolloutView {
  strategy: string;
  startedMs: number;
  /** The version it rolls to, as the caller named it before the `observed` event said which revision that is. */
  version?: string | undefined;
  /** The revision being rolled out (from `observed`; a rollback's own `observed` moves it back). */
  target?: string | undefined;
  wave?: number | undefined;
  canary?: { index: number; kind: string; weight: number; held?: boolean; done?: boolean } | undefined;
  /** The latest strategy milestone, for people (e.g. "switched: old set kept 30 s"). */
  note?: string | undefined;
  rollingBack?: boolean | undefined;
  endedMs?: number | undefined;
  outcome?: Outcome | undefined;
}

/** Requests whose response ended in one second, by revision (address → instance → revision) and by answering version. */
export interface TrafficSecond {
  sec: number;
  byRevision: Record<string, { requests: number; errors5xx: number }>;
  byVersion: Record<string, number>;
}

export interface FleetModel {
  service: string;
  instances: Record<string, InstanceView>;
  /** Per load balancer (its router name): server (instance) name → routed up or marked down. */
  balancers: Record<string, Record<string, 'up' | 'down'>>;
  /** Load balancers whose membership changes need no reload (mode: dynamic). */
  reloadFree: string[];
  reloads: Record<string, number>;
  heals: Record<string, number>;
  versions: Record<string, string>;
  rollout?: RolloutView | undefined;
  lastRollout?: RolloutView | undefined;
  traffic: TrafficSecond[];
  /** Since the model began: per revision; '' = no fleet instance answered (nginx's own 502s, unknown addresses). */
  totals: Record<string, { requests: number; errors5xx: number }>;
  /** The newest access log time seen (ms). */
  trafficMs: number;
  /** Every instance address seen → its revision (a reused address takes the newer instance's). */
  addresses: Record<string, string>;
  /** Revisions in the order they were first seen: the page gives each its colour by this order, so two never look alike. */
  revisions: string[];
}

/** The fields of the RolloutEvent variants the model reads. */
export type ModelEvent =
  | { type: 'observed'; revision: string }
  | { type: 'wave'; index: number }
  | {
      type: 'upstream';
      action: string;
      down: string[];
      up: string[];
      reloads: number;
      balancers?: Record<string, number> | undefined;
      reloadFree?: boolean | undefined;
    }
  | { type: 'draining'; names: string[] }
  | { type: 'drained'; name: string }
  | { type: 'stopped'; name: string }
  | { type: 'started'; name: string; host: string; address?: string | undefined }
  | { type: 'ready'; name: string }
  | { type: 'available'; name: string }
  | { type: 'complete'; revision: string; version: string }
  | { type: 'failed'; reason: string }
  | { type: 'canaryStep'; index: number; kind: string; weight: number }
  | { type: 'canaryHeld'; index: number; weight: number }
  | { type: 'canaryDone'; promoted: boolean }
  | { type: 'canaryAborted'; reason: string }
  | { type: 'awaitingPromote'; instances: number }
  | { type: 'promoted' }
  | { type: 'switch'; instances: number }
  | { type: 'switched'; kept: number; seconds: number }
  | { type: 'switchingBack'; cause: string }
  | { type: 'switchedBack'; ms: number }
  | { type: 'rollingBack'; revision: string; version: string };

/** How many seconds of traffic the model keeps (the page's strip shows the last 60). */
export const TRAFFIC_SECONDS = 120;

export function newFleetModel(service: string, o: { reloadFree?: readonly string[]; balancers?: readonly string[] } = {}): FleetModel {
  return {
    service,
    instances: {},
    balancers: Object.fromEntries((o.balancers ?? []).map((b) => [b, {}])),
    reloadFree: [...(o.reloadFree ?? [])],
    reloads: Object.fromEntries((o.balancers ?? []).filter((b) => !o.reloadFree?.includes(b)).map((b) => [b, 0])),
    heals: {},
    versions: {},
    traffic: [],
    totals: {},
    trafficMs: 0,
    addresses: {},
    revisions: [],
  };
}

/**
 * Replaces what is known of the instances and, when given, of the load
 * balancers' servers. An instance seen before keeps its phase unless the
 * observation names one (or it stopped running): an observation sees less
 * than the events did.
 */
export function observeFleet(
  m: FleetModel,
  instances: readonly ObservedInstance[],
  atMs: number,
  balancers?: Record<string, readonly { name: string; down: boolean }[]>,
): FleetModel {
  const routed = new Set(Object.values(balancers ?? {}).flatMap((servers) => servers.filter((s) => !s.down).map((s) => s.name)));
  const next: Record<string, InstanceView> = {};
  for (const i of instances) {
    const before = m.instances[i.name];
    const guessed: Phase = !i.running ? 'failed' : routed.has(i.name) ? 'available' : 'starting';
    const phase = i.phase ?? (before && i.running ? before.phase : guessed);
    next[i.name] = {
      name: i.name,
      host: i.host,
      revision: i.revision,
      address: i.address ?? before?.address,
      phase,
      sinceMs: before?.phase === phase ? before.sinceMs : atMs,
    };
    if (i.version !== undefined) m.versions[i.revision] ??= i.version;
  }
  // Old revisions first (by name, stable across runs), before the one a rollout brings.
  for (const rev of [...new Set(instances.map((i) => i.revision))].sort()) seen(m, rev);
  m.instances = next;
  if (balancers) {
    for (const [lb, servers] of Object.entries(balancers)) m.balancers[lb] = Object.fromEntries(servers.map((s) => [s.name, s.down ? 'down' : 'up'] as const));
    for (const lb of Object.keys(balancers)) if (!m.reloadFree.includes(lb)) m.reloads[lb] ??= 0;
  }
  return m;
}

/** `watch` reports a phase the rollout events do not carry (creating, failed). */
export function setPhase(
  m: FleetModel,
  name: string,
  phase: Phase,
  atMs: number,
  more: Partial<Pick<InstanceView, 'host' | 'revision' | 'address'>> = {},
): FleetModel {
  const i = m.instances[name];
  if (i) {
    if (i.phase !== phase) i.sinceMs = atMs;
    i.phase = phase;
    Object.assign(i, Object.fromEntries(Object.entries(more).filter(([, v]) => v !== undefined)));
  } else {
    m.instances[name] = { name, host: more.host ?? '?', revision: more.revision ?? m.rollout?.target ?? '?', address: more.address, phase, sinceMs: atMs };
    seen(m, m.instances[name].revision);
  }
  return m;
}

export function recordHeal(m: FleetModel, reason: string): FleetModel {
  m.heals[reason] = (m.heals[reason] ?? 0) + 1;
  return m;
}

/** A rollout begins (the CLI knows its strategy and version before the first event). */
export function beginRollout(m: FleetModel, strategy: string, atMs: number, version?: string): FleetModel {
  m.rollout = { strategy, startedMs: atMs, version };
  return m;
}

/**
 * The rollout ends: its outcome is the caller's when given (the CLI knows how
 * the command ended), else what the events said. Returns the ended rollout.
 */
export function endRollout(m: FleetModel, atMs: number, outcome?: Outcome): RolloutView | undefined {
  const r = m.rollout;
  if (!r) return undefined;
  r.endedMs = atMs;
  r.outcome = outcome ?? r.outcome ?? 'failed';
  m.lastRollout = r;
  m.rollout = undefined;
  return r;
}

const failedOutcome = (reason: string): Outcome =>
  reason === 'paused'
    ? 'paused'
    : reason === 'interrupted'
      ? 'interrupted'
      : reason === 'switched back' || reason.startsWith('canary aborted')
        ? 'rolled_back'
        : 'failed';

function seen(m: FleetModel, revision: string): void {
  if (!m.revisions.includes(revision)) m.revisions.push(revision);
}

function instance(m: FleetModel, name: string, phase: Phase, atMs: number): void {
  const i = m.instances[name];
  if (i && i.phase !== phase) {
    i.phase = phase;
    i.sinceMs = atMs;
  }
}

/** One rollout event; any other `type` (info, verified, ...) leaves the model as it is. */
export function applyEvent(m: FleetModel, event: { type: string }, atMs: number): FleetModel {
  const e = event as ModelEvent;
  // Events outside beginRollout (a library caller, watch's own rollouts) still make a rollout to show.
  if (e.type === 'observed' && !m.rollout) m.rollout = { strategy: 'unknown', startedMs: atMs };
  const r = m.rollout;
  switch (e.type) {
    case 'observed':
      seen(m, e.revision);
      if (!r) break;
      r.target = e.revision;
      if (r.version !== undefined && !r.rollingBack) m.versions[e.revision] ??= r.version;
      r.outcome = undefined;
      break;
    case 'wave':
      if (r) r.wave = e.index;
      break;
    case 'started':
      m.instances[e.name] = { name: e.name, host: e.host, revision: r?.target ?? '?', address: e.address, phase: 'starting', sinceMs: atMs };
      break;
    case 'ready':
      instance(m, e.name, 'ready', atMs);
      break;
    case 'available':
      instance(m, e.name, 'available', atMs);
      break;
    case 'draining':
      for (const n of e.names) instance(m, n, 'draining', atMs);
      break;
    case 'drained':
      instance(m, e.name, 'stopping', atMs);
      break;
    case 'stopped':
      delete m.instances[e.name];
      for (const servers of Object.values(m.balancers)) delete servers[e.name];
      break;
    case 'upstream': {
      if (e.action === 'restore') break;
      const named = Object.keys(e.balancers ?? {});
      const lbs = named.length > 0 ? named : Object.keys(m.balancers);
      for (const lb of lbs) {
        const servers = (m.balancers[lb] ??= {});
        for (const n of e.up) servers[n] = 'up';
        for (const n of e.down) servers[n] = 'down';
        // A reload-free change (mode: dynamic) moves traffic without a reload: it is not counted as one.
        if (!e.reloadFree && !m.reloadFree.includes(lb)) m.reloads[lb] = (m.reloads[lb] ?? 0) + 1;
      }
      for (const n of e.down) if (m.instances[n]?.phase !== 'stopping') instance(m, n, 'draining', atMs);
      break;
    }
    case 'canaryStep':
      if (r) r.canary = { index: e.index, kind: e.kind, weight: e.weight };
      break;
    case 'canaryHeld':
      if (r) r.canary = { index: e.index, kind: 'analysis', weight: e.weight, held: true };
      break;
    case 'canaryDone':
      if (r) r.canary = { ...(r.canary ?? { index: 0, kind: 'setWeight', weight: 100 }), done: true };
      if (r) r.note = `canary steps done${e.promoted ? ' (promoted)' : ''}: replacing the stable set`;
      break;
    case 'canaryAborted':
      if (r) r.note = `canary aborted: ${e.reason}`;
      break;
    case 'awaitingPromote':
      if (r) r.note = `new set (${e.instances}) waiting for fleetroll promote`;
      break;
    case 'promoted':
      if (r) r.note = 'promoted';
      break;
    case 'switch':
      if (r) r.note = `switching ${e.instances} instance(s) in one reload`;
      break;
    case 'switched':
      if (r) r.note = `switched; old set (${e.kept}) kept ${e.seconds} s`;
      break;
    case 'switchingBack':
      if (r) r.note = `switching back (${e.cause})`;
      break;
    case 'switchedBack':
      if (r) r.note = `switched back in ${e.ms} ms`;
      break;
    case 'rollingBack':
      seen(m, e.revision);
      m.versions[e.revision] ??= e.version;
      if (r) {
        r.rollingBack = true;
        r.outcome = undefined;
        r.note = `rolling back to version ${e.version}`;
      }
      break;
    case 'complete':
      m.versions[e.revision] ??= e.version;
      if (r) r.outcome = r.rollingBack ? 'rolled_back' : 'success';
      break;
    case 'failed':
      if (r) r.outcome = failedOutcome(e.reason);
      break;
    default:
      break;
  }
  return m;
}

/** The address's instance's revision; undefined for an address no instance of the model has. */
export function revisionOfAddress(m: FleetModel, address: string): string | undefined {
  for (const i of Object.values(m.instances)) if (i.address === address) return i.revision;
  return undefined;
}

/**
 * Access log records, by the second their response ended: per revision (of
 * the final attempt's address; unattributed under '') and per answering
 * version (X-App-Version; records without one are left out of the versions).
 */
export function addTraffic(m: FleetModel, records: readonly AccessRecord[]): FleetModel {
  // Stopped instances leave the model; the requests they answered just before are still theirs.
  for (const i of Object.values(m.instances)) if (i.address) m.addresses[i.address] = i.revision;
  const bySec = new Map(m.traffic.map((t) => [t.sec, t]));
  for (const r of records) {
    const sec = Math.floor(r.timeMs / 1000);
    let t = bySec.get(sec);
    if (!t) {
      t = { sec, byRevision: {}, byVersion: {} };
      bySec.set(sec, t);
    }
    const last = r.upstreamAddr[r.upstreamAddr.length - 1];
    const rev = (last !== undefined ? m.addresses[last] : undefined) ?? '';
    const failed = r.status >= 500 ? 1 : 0;
    const cell = (t.byRevision[rev] ??= { requests: 0, errors5xx: 0 });
    cell.requests++;
    cell.errors5xx += failed;
    const total = (m.totals[rev] ??= { requests: 0, errors5xx: 0 });
    total.requests++;
    total.errors5xx += failed;
    if (r.appVersion) t.byVersion[r.appVersion] = (t.byVersion[r.appVersion] ?? 0) + 1;
    m.trafficMs = Math.max(m.trafficMs, r.timeMs);
  }
  const newest = Math.floor(m.trafficMs / 1000);
  m.traffic = [...bySec.values()].filter((t) => t.sec > newest - TRAFFIC_SECONDS).sort((a, b) => a.sec - b.sec);
  return m;
}

/** Per revision, requests and 5xx per second over the `seconds` whole seconds before `nowMs`. */
export function trafficRates(m: FleetModel, nowMs: number, seconds = 10): Record<string, { requests: number; errors5xx: number }> {
  const to = Math.floor(nowMs / 1000);
  const out: Record<string, { requests: number; errors5xx: number }> = {};
  for (const t of m.traffic) {
    if (t.sec < to - seconds || t.sec >= to) continue;
    for (const [rev, c] of Object.entries(t.byRevision)) {
      const o = (out[rev] ??= { requests: 0, errors5xx: 0 });
      o.requests += c.requests / seconds;
      o.errors5xx += c.errors5xx / seconds;
    }
  }
  return out;
}

/** The instances gauge's rows: every phase for each (host, revision) there is, zeros included, so a phase left drops to 0. */
export function instanceCounts(m: FleetModel): { host: string; revision: string; phase: Phase; count: number }[] {
  const groups = new Map<string, { host: string; revision: string; counts: Map<Phase, number> }>();
  for (const i of Object.values(m.instances)) {
    const key = `${i.host}\u0000${i.revision}`;
    const g = groups.get(key) ?? { host: i.host, revision: i.revision, counts: new Map() };
    g.counts.set(i.phase, (g.counts.get(i.phase) ?? 0) + 1);
    groups.set(key, g);
  }
  return [...groups.values()].flatMap((g) => PHASES.map((phase) => ({ host: g.host, revision: g.revision, phase, count: g.counts.get(phase) ?? 0 })));
}
