/**
 * `fleetroll watch` takes an instance out of every nginx on Docker's event
 * itself (it exited, was killed or stopped, froze, left its network, failed
 * its healthcheck: core/faultEvents.ts takesOutOfService), before any look
 * or heal decision: a look every 2 s and a fault that must last 1 s before a
 * heal left a killed instance in nginx for seconds, each of them failed
 * requests. The edit is the smallest there is: the instance's server lines
 * marked `down` in what each nginx has now, one write and one reload, with
 * `nginx -t` only if nginx refuses it (Router.writeAndReloadTrusted; dynamic
 * mode: the peers, no reload). Putting it back, or
 * replacing it, stays the heal's, which looks at the whole fleet.
 *
 * It changes nothing while another process holds the fleet's rollout lock (a
 * deploy, undo, restart or resume follows the events itself) or while this
 * watch's own heal runs (its controller does), and says so once.
 */
import { markServersDown, takesOutOfService } from '../core/faultEvents.js';
import { LABELS, type ContainerEvent, type LockInfo, type Runtime } from '../ports.js';
import type { LoadBalancer } from './upstreamFiles.js';

export interface EjectOptions {
  service: string;
  routers: readonly LoadBalancer[];
  runtimes: ReadonlyMap<string, Runtime>;
  /** Who holds the fleet's rollout lock now, if anyone. */
  lockHolder(): Promise<LockInfo | undefined>;
  /** True while this watch's own heal runs. */
  healing(): boolean;
  log(line: string): void;
  /** nginx was changed here: what the watch read of it before is out of date. */
  changed?(): void;
  now?: () => number;
}

export interface Ejector {
  /** One of Docker's events on `host`'s engine (already filtered to the fleet's labels, but for network events). */
  event(host: string, e: ContainerEvent): void;
  /** Resolves once every ejection asked so far is done (tests, the watch's end). */
  idle(): Promise<void>;
}

export function ejector(o: EjectOptions): Ejector {
  const now = o.now ?? Date.now;
  /** Instance name → when its event arrived and what it was. */
  const pending = new Map<string, { at: number; why: string }>();
  let running: Promise<void> = Promise.resolve();
  let busy = false;
  let yieldSaid = '';

  const run = async (): Promise<void> => {
    busy = true;
    try {
      while (pending.size > 0) {
        const batch = new Map(pending);
        pending.clear();
        await ejectNow(batch);
      }
    } finally {
      busy = false;
    }
  };

  const ejectNow = async (batch: ReadonlyMap<string, { at: number; why: string }>): Promise<void> => {
    if (o.healing()) return;
    const [holder, ...texts] = await Promise.all([
      o.lockHolder().catch(() => undefined),
      ...o.routers.map((lb) => lb.router.read().catch((err: unknown) => err as Error)),
    ]);
    if (holder && !holder.stale) {
      const key = `${holder.holder} ${holder.pid}`;
      if (key !== yieldSaid)
        o.log(`yielding: ${holder.command} (${holder.holder}, pid ${holder.pid}) holds the rollout lock and follows the fleet's events itself`);
      yieldSaid = key;
      return;
    }
    yieldSaid = '';
    const names = new Set(batch.keys());
    const out = new Set<string>();
    /** What the change cost on the slowest load balancer, by part (file, nginx -t, reload, confirm). */
    let slowest: { ms: number; parts: string } | undefined;
    await Promise.all(
      o.routers.map(async (lb, k) => {
        const text = texts[k];
        if (text === undefined || text instanceof Error) {
          if (text instanceof Error) o.log(`cannot take ${[...names].join(', ')} out of ${lb.router.name} now: ${firstLine(text)}; the heal will`);
          return;
        }
        const { text: next, marked } = markServersDown(text, names);
        if (marked.length === 0) return;
        try {
          if (lb.router.writeAndReloadTrusted) await lb.router.writeAndReloadTrusted(next);
          else {
            await lb.router.writeAndTest(next);
            await lb.router.reload();
          }
          for (const n of marked) out.add(n);
          const parts = Object.entries(lb.router.lastChange?.() ?? {}).filter((e): e is [string, number] => e[1] !== undefined);
          const ms = parts.reduce((a, [k, v]) => (k === 'handover' ? a : a + v), 0);
          if (parts.length > 0 && (!slowest || ms > slowest.ms)) slowest = { ms, parts: parts.map(([k, v]) => `${k} ${v} ms`).join(', ') };
        } catch (err) {
          o.log(`cannot take ${marked.join(', ')} out of ${lb.router.name} now: ${firstLine(err)}; the heal will`);
        }
      }),
    );
    if (out.size > 0) o.changed?.();
    for (const name of out) {
      const b = batch.get(name)!;
      o.log(`out of nginx: ${name} (${b.why}) ${now() - b.at} ms after the event${slowest ? ` [${slowest.parts}]` : ''}`);
    }
  };

  /** The instance an event is about, by name; a network event names only the container's id, so ask its engine. */
  const nameOf = async (host: string, e: ContainerEvent): Promise<string | undefined> => {
    if (e.name !== undefined) return e.name;
    const info = await o.runtimes
      .get(host)
      ?.inspect(e.id)
      .catch(() => undefined);
    // A container fleetroll does not manage, or another fleet's: not ours to touch.
    if (!info || info.labels[LABELS.service] !== o.service || info.labels[LABELS.managed] !== 'true') return undefined;
    return info.name;
  };

  return {
    event(host, e) {
      if (!takesOutOfService(e)) return;
      const at = now();
      void nameOf(host, e).then((name) => {
        if (name === undefined) return;
        if (!pending.has(name)) pending.set(name, { at, why: describe(e) });
        if (!busy) running = run().catch((err: unknown) => o.log(`taking ${name} out of nginx failed: ${firstLine(err)}; the heal will`));
      });
    },
    idle: () => running,
  };
}

function describe(e: ContainerEvent): string {
  if (e.action === 'die') return `exited${e.exitCode !== undefined ? `, code ${e.exitCode}` : ''}`;
  if (e.action === 'kill') return `killed${e.signal ? ` by signal ${e.signal}` : ''}`;
  if (e.action === 'disconnect') return 'left its network';
  if (e.action === 'pause') return 'paused';
  if (e.action === 'destroy') return 'removed';
  if (e.action === 'health_status: unhealthy') return 'unhealthy';
  return e.action;
}

function firstLine(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.split('\n')[0] ?? m;
}
