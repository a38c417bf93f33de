/**
 * The asks that cross between processes during a rollout (engine/types.ts
 * SwitchBackAsks and YieldAsks), for a fleet whose
 * state is in etcd (adapters/switchAsks.ts has the Docker containers the
 * volume backend uses): with etcd, nothing of fleetroll's is created on a
 * Docker host, and an ask is heard through an etcd watch on its key.
 *
 * - `switchback/offer`: a blue-green rollout waiting out scaleDownDelaySeconds
 *   offers to switch back, naming the lock key's create revision it holds
 *   (an offer a killed rollout left no longer matches the lock);
 * - `switchback/ask`: undo asks that rollout (by its journal id);
 * - `yield-ask`: a deploy asks a heal of `fleetroll watch` to end, with when
 *   and who, honoured for YIELD_ASK_FRESH_MS.
 */
import type { Etcd3 } from 'etcd3';
import { clientFor, etcdError, keyOf, type EtcdSettings } from './etcdClients.js';
import { YIELD_ASK_FRESH_MS } from './switchAsks.js';

class EtcdKeys {
  constructor(
    protected readonly s: EtcdSettings,
    protected readonly service: string,
  ) {}

  protected key(name: string): string {
    return keyOf(this.s, this.service, name);
  }

  protected async call<T>(what: string, f: (c: Etcd3) => PromiseLike<T>): Promise<T> {
    try {
      return await f(await clientFor(this.s));
    } catch (err) {
      throw etcdError(this.s, what, err);
    }
  }

  /** Calls `listener` on every write of `name`; a watch that fails leaves the caller's poll. */
  protected onPut(name: string, listener: () => void): () => void {
    let stopped = false;
    let cancel: (() => void) | undefined;
    void clientFor(this.s)
      .then((c) => c.watch().key(this.key(name)).create())
      .then((w) => {
        if (stopped) return void w.cancel();
        w.on('put', () => listener());
        w.on('error', () => {});
        cancel = () => void w.cancel().catch(() => {});
      })
      .catch(() => {});
    return () => {
      stopped = true;
      cancel?.();
    };
  }
}

export class EtcdSwitchBackAsks extends EtcdKeys {
  /** The rollout lock's key and, while this process holds it, its create revision (EtcdFleetLock.fence). */
  constructor(
    s: EtcdSettings,
    service: string,
    private readonly fence: () => { key: string; revision: string } | undefined,
  ) {
    super(s, service);
  }

  async offer(rollout: string): Promise<void> {
    const f = this.fence();
    if (!f) return;
    await this.call('offering a switch-back', (c) => c.put(this.key('switchback/offer')).value(JSON.stringify({ rollout, lock: f.revision })));
  }

  async withdraw(): Promise<void> {
    await this.call('withdrawing the switch-back offer', (c) => c.delete().prefix(this.key('switchback/')));
  }

  async offered(): Promise<{ rollout: string; image: string } | undefined> {
    const [offer, lock] = await this.call('reading the switch-back offer', (c) =>
      Promise.all([c.get(this.key('switchback/offer')).string(), c.get(this.key('lock')).exec()]),
    );
    if (offer === null) return undefined;
    let o: { rollout?: string; lock?: string };
    try {
      o = JSON.parse(offer) as typeof o;
    } catch {
      return undefined;
    }
    const held = lock.kvs[0]?.create_revision;
    if (!o.rollout || held === undefined || String(held) !== o.lock) return undefined;
    return { rollout: o.rollout, image: 'etcd' };
  }

  async ask(rollout: string): Promise<void> {
    await this.call('asking for a switch-back', (c) => c.put(this.key('switchback/ask')).value(rollout));
  }

  async asked(rollout: string): Promise<boolean> {
    return (await this.call('reading the switch-back ask', (c) => c.get(this.key('switchback/ask')).string())) === rollout;
  }

  async unask(): Promise<void> {
    await this.call('taking back the switch-back ask', (c) => c.delete().key(this.key('switchback/ask')));
  }

  onAsk(listener: () => void): () => void {
    return this.onPut('switchback/ask', listener);
  }
}

export class EtcdYieldAsks extends EtcdKeys {
  constructor(
    s: EtcdSettings,
    service: string,
    private readonly who: string,
    private readonly now: () => number = Date.now,
  ) {
    super(s, service);
  }

  async ask(): Promise<void> {
    await this.call('asking the watch to yield', (c) => c.put(this.key('yield-ask')).value(`${this.now()} ${this.who}`));
  }

  async asked(): Promise<boolean> {
    const v = await this.call('reading the yield ask', (c) => c.get(this.key('yield-ask')).string());
    const at = Number(v?.split(' ')[0]);
    return v !== null && Number.isFinite(at) && this.now() - at < YIELD_ASK_FRESH_MS;
  }

  async withdraw(): Promise<void> {
    await this.call('withdrawing the yield ask', (c) => c.delete().key(this.key('yield-ask')));
  }

  onAsk(listener: () => void): () => void {
    return this.onPut('yield-ask', listener);
  }
}
