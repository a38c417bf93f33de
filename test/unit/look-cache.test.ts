/**
 * The watch's cache of what is expensive to read (src/engine/lookCache.ts):
 * the state, the locks and each nginx's servers are read once per refresh,
 * and again at once after a write to the state, a heal (forget) or an
 * outage (reopen). Counted on fakes with a clock the test moves.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lookCache } from '../../src/engine/lookCache.js';
import type { FleetHandles } from '../../src/engine/types.js';
import type { LoadBalancer } from '../../src/engine/traffic.js';

function world() {
  const reads = { state: 0, lock: 0, watchLock: 0, nginx: 0, checks: 0 };
  let onWrite: (() => void) | undefined;
  let watches = 0;
  const store = {
    read: async () => (reads.state++, { service: 'api', nextRevision: 2, revisions: [] }),
    watch: (l: () => void) => {
      watches++;
      onWrite = l;
      return () => (onWrite = undefined);
    },
  };
  const lock = (key: 'lock' | 'watchLock') => ({ info: async () => (reads[key]++, undefined) });
  const router = { name: 'nginx a', read: async () => (reads.nginx++, 'upstream api { server 10.0.0.2:8080; }'), check: async () => void reads.checks++ };
  let t = 0;
  const cache = lookCache(
    { store, lock: lock('lock'), watchLock: lock('watchLock'), who: 't' } as unknown as FleetHandles & { watchLock: FleetHandles['lock'] },
    [{ router, upstream: 'api' } as unknown as LoadBalancer],
    30_000,
    () => t,
  );
  const look = async () => {
    await cache.h.store.read();
    await cache.h.lock.info();
    await cache.h.watchLock.info();
    for (const lb of cache.routers) await lb.router.read();
  };
  return { reads, cache, look, write: () => onWrite?.(), advance: (ms: number) => (t += ms), watches: () => watches, router: () => cache.routers[0]!.router };
}

describe('lookCache: what the watch reads again, and when', () => {
  const rows: { name: string; between: (w: ReturnType<typeof world>) => void; reads: number }[] = [
    { name: 'a second look within the refresh reads nothing again', between: (w) => w.advance(2000), reads: 1 },
    { name: 'a look after the refresh reads everything again', between: (w) => w.advance(30_000), reads: 2 },
    { name: 'a write to the state (Docker event) makes the next look read everything again', between: (w) => (w.advance(2000), w.write()), reads: 2 },
    { name: 'forget (a heal) makes the next look read everything again', between: (w) => w.cache.forget(), reads: 2 },
    { name: 'reopen (the engine came back) makes the next look read everything again', between: (w) => w.cache.reopen(), reads: 2 },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const w = world();
      await w.look();
      r.between(w);
      await w.look();
      assert.deepEqual(w.reads, { state: r.reads, lock: r.reads, watchLock: r.reads, nginx: r.reads, checks: 0 });
    });
  }

  it('reopen listens again (the old stream ended with the engine); close stops listening', () => {
    const w = world();
    assert.equal(w.watches(), 1);
    w.cache.reopen();
    assert.equal(w.watches(), 2);
    w.cache.close();
  });

  it('a read that failed is not kept: the next look tries again', async () => {
    let fail = true;
    const flaky = lookCache(
      {
        store: {
          read: async () => {
            if (fail) throw new Error('engine gone');
            return undefined;
          },
        },
        lock: { info: async () => undefined },
        watchLock: { info: async () => undefined },
        who: 't',
      } as unknown as FleetHandles & { watchLock: FleetHandles['lock'] },
      [],
      30_000,
      () => 0,
    );
    await assert.rejects(flaky.h.store.read(), /engine gone/);
    fail = false;
    assert.equal(await flaky.h.store.read(), undefined);
  });

  it("the router's other members are its own: a check is not cached", async () => {
    const w = world();
    await w.router().check();
    await w.router().check();
    assert.equal(w.reads.checks, 2);
    assert.equal(w.router().name, 'nginx a');
  });
});
