/**
 * What `fleetroll watch` reads again only when it may have changed: the fleet
 * state, the two locks and what each nginx lists. Each of those reads is a
 * file in a container, read through Docker's archive API, and every such
 * call costs the engine a process of its own (about 0.2 s of CPU on a busy
 * machine): a look every 2 s that read them all kept a quarter of a core busy
 * in dockerd for a fleet at rest. The containers themselves (list, inspect)
 * and their readiness are looked at every time; they are cheap, and they are
 * where faults show.
 *
 * They are read again when Docker says the state container was written (a
 * deploy, undo, pause, resume or another watch writes the state when it
 * starts and ends), after a heal (it wrote nginx), and at least every
 * `refreshMs` (someone editing nginx by hand, a stream that dropped).
 */
import type { LoadBalancer } from './traffic.js';
import type { FleetHandles } from './types.js';
import type { StatusHandles } from './status.js';

export interface LookCache {
  /** The handles and load balancers to look with: their reads come from the cache while it is fresh. */
  h: Required<StatusHandles>;
  routers: readonly LoadBalancer[];
  /** Everything is read again at the next look (after a heal, or a look that failed). */
  forget(): void;
  /** The engine came back: its event stream ended with it, so listen again (and read everything again). */
  reopen(): void;
  close(): void;
}

export function lookCache(
  h: FleetHandles & { watchLock: FleetHandles['lock'] },
  routers: readonly LoadBalancer[],
  refreshMs: number,
  now: () => number = Date.now,
): LookCache {
  let readAt = -Infinity;
  const cached = new Map<string, Promise<unknown>>();
  const fresh = () => {
    if (now() - readAt >= refreshMs) {
      cached.clear();
      readAt = now();
    }
  };
  /** One read per key until the cache is forgotten; a read that fails is not kept. */
  const once = <T>(key: string, read: () => Promise<T>): Promise<T> => {
    fresh();
    let p = cached.get(key) as Promise<T> | undefined;
    if (!p) {
      p = read();
      cached.set(key, p);
      p.catch(() => cached.delete(key));
    }
    return p;
  };
  const forget = () => {
    readAt = -Infinity;
  };
  let unwatch = h.store.watch?.(forget);
  return {
    h: {
      store: { read: () => once('state', () => h.store.read()) },
      lock: { info: () => once('lock', () => h.lock.info()) },
      watchLock: { info: () => once('watchLock', () => h.watchLock.info()) },
    },
    routers: routers.map((lb) => ({ ...lb, router: withCachedRead(lb.router, () => once(`router ${lb.router.name}`, () => lb.router.read())) })),
    forget,
    reopen: () => {
      unwatch?.();
      unwatch = h.store.watch?.(forget);
      forget();
    },
    close: () => unwatch?.(),
  };
}

/** The router with `read` answered from the cache; every other member is the router's own. */
function withCachedRead<R extends { read(): Promise<string | undefined> }>(router: R, read: () => Promise<string | undefined>): R {
  return new Proxy(router, {
    get(target, key, receiver) {
      if (key === 'read') return read;
      const v = Reflect.get(target, key, receiver) as unknown;
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
    },
  });
}
