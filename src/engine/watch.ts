/**
 * `fleetroll watch`: keeps the fleet at the revision its last deploy
 * completed, between deploys, as Kubernetes' controllers keep a Deployment's
 * pods. It looks at the fleet the way `status` does (every container on every
 * host, its readiness and restarts, what each nginx routes to); core/heal.ts
 * says what is wrong; a fault still there after the settle window is healed
 * by the same controller, drains and load-balancer writes as a deploy (a
 * managed rollout in heal mode: under the fleet's lock, journaled, the
 * revision's record untouched), so one heal makes one write per load
 * balancer for everything it found.
 *
 * It steps back while anything else holds the fleet's lock (a deploy, undo,
 * restart) or the latest revision is not complete, and follows the new
 * revision once a deploy completes it. It holds a lock of its own while it
 * runs, so a second watch of the fleet waits, naming the first. A host that
 * cannot be reached is looked at again with a growing backoff.
 */
import type { Fleet } from '../config/load.js';
import { assessFleet, healReasons, isWhole, toReplace, type HealFinding, type HealReason } from '../core/heal.js';
import { FleetrollError } from '../errors.js';
import { LABELS, systemClock, type ContainerEvent, type FleetLockPort, type FleetState, type LockInfo, type RevisionRecord } from '../ports.js';
import { lookCache } from './lookCache.js';
import { fleetForRecord } from './records.js';
import { runManaged } from './session.js';
import { statusReport, type StatusReport } from './status.js';
import type { DeployDeps, FleetHandles } from './types.js';
import { ejector } from './watchEject.js';
import { yielded, yieldOnAsk } from './watchYield.js';

export interface WatchOptions {
  fleet: Fleet;
  deps: DeployDeps;
  h: FleetHandles & { watchLock: FleetLockPort };
  /** Aborted: the watch finishes a heal in progress (the controller stops it cleanly) and returns. */
  signal: AbortSignal;
  /** How often it looks, ms. */
  intervalMs: number;
  /** A fault must still be there this long after it was seen before a heal, ms: a container Docker is restarting gets its chance, and faults that come together are healed together. */
  settleMs: number;
  /** Look once, heal what needs it, return (cron, tests). */
  once?: boolean | undefined;
  /** The watch's own lines (the heal's rollout events go to deps.events). */
  log: (line: string) => void;
  /** After each look: what it saw (the metrics server observes it). */
  onLook?: ((r: StatusReport) => void) | undefined;
  /** After each heal: its reasons and whether it succeeded. */
  onHeal?: ((reasons: readonly HealReason[], ok: boolean) => void) | undefined;
  sleep?: ((ms: number, signal: AbortSignal) => Promise<void>) | undefined;
  /** How it looks and heals (tests give fakes): statusReport, and a managed rollout of the record's spec in heal mode. */
  ports?: WatchPorts | undefined;
}

export interface WatchPorts {
  report(): Promise<StatusReport>;
  /** `replace`: instances found stuck (unready for progressDeadlineSeconds), replaced if still unready under the lock. */
  heal(latest: RevisionRecord, state: FleetState, reason: string, replace?: readonly string[]): Promise<void>;
  /** The fleet state as the look sees it (default: read from the store each time). */
  state?(): Promise<FleetState | undefined>;
  /** The engines answer again after an outage. */
  reconnected?(): void;
  /** Who holds the fleet's rollout lock, as the looks read it (default: read now). */
  lockHolder?(): Promise<LockInfo | undefined>;
  /** Something other than a heal wrote nginx (an instance taken out on its event): read it again at the next look. */
  changed?(): void;
  close?(): void;
}

/** The state, the locks and nginx's servers are read again only when they may have changed (engine/lookCache.ts): at least this often. */
const REFRESH_MS = 30_000;

function defaultPorts(o: WatchOptions): WatchPorts {
  const cache = lookCache(o.h, o.deps.routers, REFRESH_MS);
  return {
    report: () => statusReport(o.fleet, { ...o.deps, routers: cache.routers }, cache.h),
    state: () => cache.h.store.read(),
    heal: async (latest, state, reason, replace) => {
      // The heal writes nginx (and a deploy may have run): the next look reads everything again.
      cache.forget();
      const { signal, asked, stop } = yieldOnAsk(o);
      try {
        if (await o.h.yieldAsks?.asked().catch(() => false)) throw yielded();
        await runManaged(fleetForRecord(o.fleet, latest, { state }), o.deps, o.h, {
          command: 'fleetroll watch',
          heal: reason,
          replace,
          changeCause: latest.changeCause,
          lockWaitMs: 0,
          signal,
        });
      } catch (err) {
        // Stopped for a deploy, not by the user: the watch goes on, and yields while the deploy holds the lock.
        if (asked() && err instanceof FleetrollError && err.code === 'E_INTERRUPTED') throw yielded();
        throw err;
      } finally {
        stop();
        cache.forget();
      }
    },
    reconnected: () => cache.reopen(),
    changed: () => cache.forget(),
    // Read again whenever the state is written, as a deploy does once it holds the lock: no lock read on the event's path.
    lockHolder: () => cache.h.lock.info(),
    close: () => cache.close(),
  };
}

/** What a watch that ends says: whether the fleet was whole at its last look. */
export interface WatchEnd {
  whole: boolean;
  heals: number;
}

const MAX_BACKOFF_MS = 30_000;

/** A runtime that can say when the fleet's containers change, and when its stream ended (adapters/dockerEvents.ts): the watch then looks at once. */
interface EventSource {
  events(labels: Record<string, string>, onEvent: (stream?: 'ended' | 'refused', e?: ContainerEvent) => void): () => void;
}

/**
 * Wakes from any engine of the fleet that has an event stream. A stream that
 * ended (its engine stopped or restarted) wakes the watch too, so that it
 * looks, backs off while the engine is gone, and subscribes again once a look
 * sees it (`broken`); one the engine refused waits for the next look.
 */
function wakeUps(
  o: WatchOptions,
  onContainer?: (host: string, e: ContainerEvent) => void,
): { subscribe(): void; broken(): boolean; wait(ms: number): Promise<void>; close(): void } {
  let closers: (() => void)[] = [];
  let wake: (() => void) | undefined;
  let broken = false;
  const sleep = o.sleep ?? sleepFor;
  const labels = { [LABELS.service]: o.fleet.service, [LABELS.managed]: 'true' };
  const close = () => {
    for (const c of closers) c();
    closers = [];
  };
  return {
    subscribe() {
      close();
      broken = false;
      for (const rt of o.deps.runtimes?.values() ?? []) {
        const source = rt as Partial<EventSource>;
        const onEvent = (stream?: 'ended' | 'refused', e?: ContainerEvent) => {
          if (stream) broken = true;
          if (e) onContainer?.(rt.host, e);
          if (stream !== 'refused') wake?.();
        };
        if (typeof source.events === 'function') closers.push(source.events.call(rt, labels, onEvent));
      }
    },
    broken: () => broken,
    async wait(ms) {
      await Promise.race([sleep(ms, o.signal), new Promise<void>((r) => (wake = r))]);
      wake = undefined;
    },
    close,
  };
}

function sleepFor(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

type Look = { kind: 'nothing'; why: string } | { kind: 'look'; report: StatusReport; findings: HealFinding[]; revisionNumber: number };

/**
 * Any number of watches of a fleet may run, on any machines: the one that
 * holds the watch lock leads, the others wait for it (stand by). A leader
 * whose lock is lost (a lock on an etcd lease not renewed in time) stops,
 * its heal in progress ending first, and stands by again: two never act at once.
 */
export async function watchFleet(o: WatchOptions): Promise<WatchEnd> {
  for (;;) {
    const lead = new AbortController();
    let lost: string | undefined;
    const end = await leadFleet({ ...o, signal: AbortSignal.any([o.signal, lead.signal]) }, (why) => {
      lost = why;
      o.log(`lost the lead of ${o.fleet.service}: ${why}; stopping (a heal in progress ends first), then standing by`);
      lead.abort();
    });
    if (lost === undefined || o.signal.aborted || o.once) return end;
  }
}

async function leadFleet(o: WatchOptions, onLost: (why: string) => void): Promise<WatchEnd> {
  const { fleet, deps, h, signal, log } = o;
  const sleep = o.sleep ?? sleepFor;
  const image = (await h.store.image()) ?? fleet.image;
  const held = await h.watchLock.info().catch(() => undefined);
  if (held && !held.stale)
    log(`waiting: another watch of ${fleet.service} runs (${held.holder}, pid ${held.pid}, since ${held.started}); this one takes over when it stops`);
  h.watchLock.onTakeover = (prev) => log(`took over from a watch that is gone (${prev.holder}, pid ${prev.pid})`);
  await h.watchLock.acquire(image, 'fleetroll watch', o.once ? 0 : Number.MAX_SAFE_INTEGER);
  const unfollow = h.watchLock.onLost?.(onLost);
  let heals = 0;
  let whole = false;
  const ports = o.ports ?? defaultPorts(o);
  let healing = false;
  // Out of nginx on the event itself, before any look or heal (engine/watchEject.ts).
  const eject = ejector({
    service: fleet.service,
    routers: deps.routers,
    runtimes: deps.runtimes,
    lockHolder: () => (ports.lockHolder ? ports.lockHolder() : h.lock.info()),
    healing: () => healing,
    log,
    changed: () => ports.changed?.(),
    now: () => (deps.clock ?? systemClock).now(),
  });
  const events = wakeUps(o, (host, e) => eject.event(host, e));
  events.subscribe();
  try {
    log(`watching ${fleet.service}: a look every ${o.intervalMs / 1000} s, a fault healed once it lasts ${o.settleMs / 1000} s`);
    let backoff = 1000;
    let said = '';
    const seen: Seen = { restartsBefore: new Map(), unreadySince: new Map() };
    const say = (text: string, key = text) => {
      // The same finding each look is said once, until it changes.
      if (key !== said) log(text);
      said = key;
    };
    while (!signal.aborted) {
      let look: Look;
      try {
        // After a look that failed, nothing read before it is trusted, and the state's event stream may have ended with the engine.
        if (backoff > 1000) ports.reconnected?.();
        look = await lookAt(o, ports, seen);
        // Back from an outage: the engines' event streams ended with it.
        if (backoff > 1000 || events.broken()) events.subscribe();
        backoff = 1000;
      } catch (err) {
        say(
          `cannot see the fleet: ${firstLine(err)}; looking again in ${backoff / 1000} s, then less and less often (every ${MAX_BACKOFF_MS / 1000} s at most) until it answers`,
          `unreachable: ${firstLine(err)}`,
        );
        if (o.once) throw err;
        await sleep(backoff, signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        continue;
      }
      if (look.kind === 'nothing') {
        say(`not healing: ${look.why}`);
        whole = false;
        if (o.once) break;
        await events.wait(o.intervalMs);
        continue;
      }
      o.onLook?.(look.report);
      seen.restartsBefore = new Map(look.report.instances.map((i) => [i.name, i.restarts]));
      let act = look.findings.filter((f) => f.act);
      whole = isWhole(look.findings);
      // What is only reported (a crash loop, someone else's instance) is said beside what is healed: a crash loop shows while its restarts grow, often in the very look that finds it unready.
      const told = look.findings.filter((f) => !f.act).map((f) => f.detail);
      say(act.length === 0 ? wholeLine(look) : `found: ${act.map((f) => f.detail).join('; ')}${told.length ? `; also: ${told.join('; ')}` : ''}`);
      if (act.length > 0 && o.settleMs > 0) {
        await sleep(o.settleMs, signal);
        if (signal.aborted) break;
        const again = await lookAt(o, ports, seen).catch(() => undefined);
        // The fleet went out of sight meanwhile (its engine stopping): the next look says so and backs off.
        if (again === undefined) continue;
        act = again.kind === 'look' ? again.findings.filter((f) => f.act) : [];
        if (again.kind === 'look' && act.length === 0) say(`whole again at revision ${again.revisionNumber} without a heal`);
      }
      if (act.length > 0) {
        const reasons = healReasons(act);
        // What the ejector started goes first: the heal reads nginx after it.
        await eject.idle();
        healing = true;
        const ok = await heal(o, ports, reasons, act).finally(() => (healing = false));
        if (ok) heals++;
        said = '';
        if (o.once) {
          const after = await lookAt(o, ports, seen).catch(() => undefined);
          whole = after?.kind === 'look' && isWhole(after.findings);
          break;
        }
        continue;
      }
      if (o.once) break;
      await events.wait(o.intervalMs);
    }
  } finally {
    unfollow?.();
    events.close();
    await eject.idle();
    ports.close?.();
    await h.watchLock.release().catch(() => {});
  }
  return { whole, heals };
}

/** What the watch remembers from look to look. */
interface Seen {
  /** Restarts per instance at the previous look: a count that grows is a crash loop. */
  restartsBefore: ReadonlyMap<string, number>;
  /** Since when each running instance of the current revision has been seen unready (the watch's clock), until it answers or is gone. */
  unreadySince: Map<string, number>;
}

/** What the watch says of a look with nothing to act on: whole, or whole but for instances unready out of traffic (and what it reports besides). */
function wholeLine(look: Extract<Look, { kind: 'look' }>): string {
  const unready = look.findings.filter((f) => f.reason === 'unready').map((f) => f.detail);
  const others = look.findings.filter((f) => f.reason !== 'unready').map((f) => f.detail);
  const head = unready.length ? `whole at revision ${look.revisionNumber} except ${unready.join('; ')}` : `whole at revision ${look.revisionNumber}`;
  return others.length
    ? `${head}; ${others.join('; ')}`
    : unready.length
      ? head
      : `${head}: ${look.report.observed.ready} of ${look.report.desired.replicas} ready`;
}

async function lookAt(o: WatchOptions, ports: WatchPorts, seen: Seen): Promise<Look> {
  const state = await (ports.state ? ports.state() : o.h.store.read());
  const latest = state?.revisions[state.revisions.length - 1];
  if (!state || !latest) return { kind: 'nothing', why: `no revision of ${o.fleet.service} deployed yet (fleetroll deploy -f first)` };
  if (state.paused) return { kind: 'nothing', why: `${o.fleet.service} is paused (fleetroll resume continues it)` };
  if (latest.outcome !== 'complete')
    return { kind: 'nothing', why: `revision ${latest.number} is ${latest.outcome}: a deploy, undo or resume completes it, then the watch keeps it` };
  const report = await ports.report();
  const now = (o.deps.clock ?? systemClock).now();
  // When it was first seen unready, look after look: the bound a stuck instance is replaced after counts from there.
  const unready = new Set(report.instances.filter((i) => i.revision === report.desired.revision && i.state === 'running' && !i.ready).map((i) => i.name));
  for (const name of seen.unreadySince.keys()) if (!unready.has(name)) seen.unreadySince.delete(name);
  for (const name of unready) if (!seen.unreadySince.has(name)) seen.unreadySince.set(name, now);
  const findings = assessFleet({
    replicas: report.desired.replicas,
    revision: report.desired.revision,
    known: state.revisions.map((r) => r.hash),
    instances: report.instances,
    strays: report.strays,
    restartsBefore: seen.restartsBefore,
    unreadySince: seen.unreadySince,
    now,
    // The same bound as a deploy gives an instance to become ready.
    stuckAfterMs: o.fleet.progressDeadlineSeconds * 1000,
  });
  return { kind: 'look', report, findings, revisionNumber: latest.number };
}

/** One heal: a managed rollout of the current revision in heal mode. True when the fleet was healed. */
async function heal(o: WatchOptions, ports: WatchPorts, reasons: readonly HealReason[], found: readonly HealFinding[]): Promise<boolean> {
  const { fleet, h, log } = o;
  const what = reasons.join(', ');
  log(`healing (${what}): ${found.map((f) => f.name ?? f.reason).join(', ')}`);
  const t0 = Date.now();
  try {
    const state = await h.store.read();
    const latest = state?.revisions[state.revisions.length - 1];
    if (!state || !latest) return false;
    await ports.heal(latest, state, what, toReplace(found));
    const ms = Date.now() - t0;
    // A heal does not wait for an instance it takes out unready: the watch does (and says so at its next look).
    const out = found.filter((f) => f.reason === 'unready').map((f) => f.name);
    log(
      `healed (${what}) in ${(ms / 1000).toFixed(1)} s: revision ${latest.number} ${out.length ? `whole again but for ${out.join(', ')}, out of traffic until it answers` : 'whole again'}`,
    );
    await record(o, `healed ${what} in ${(ms / 1000).toFixed(1)} s`);
    o.onHeal?.(reasons, true);
    return true;
  } catch (err) {
    const code = err instanceof FleetrollError ? err.code : undefined;
    if (code === 'E_LOCK_HELD') log(`stepping back: ${firstLine(err)}; the watch looks again once it is free`);
    else if (code === 'E_HEAL_STALE' || code === 'E_PAUSED') log(firstLine(err));
    else {
      log(`heal (${what}) failed after ${((Date.now() - t0) / 1000).toFixed(1)} s: ${firstLine(err)}`);
      await record(o, `heal of ${what} failed: ${firstLine(err)}`);
      o.onHeal?.(reasons, false);
    }
    return false;
  }
}

/** What `status` says of the watch: its last action, left on its lock. */
async function record(o: WatchOptions, lastAction: string): Promise<void> {
  await o.h.watchLock.note?.(lastAction).catch((err: unknown) => o.log(`cannot leave the last action on the watch's lock: ${firstLine(err)}`));
}

function firstLine(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.split('\n')[0] ?? m;
}
