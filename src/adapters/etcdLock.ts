/**
 * The rollout lock in etcd (or the watch's, `name` watch-lock): a key on a
 * lease, created only if absent in one transaction, so that of two deploys
 * racing for it exactly one wins; kept alive by the etcd3 client while held.
 *
 * Fenced: while it holds the lock, the holder's own writes (journal,
 * revisions) are transactions conditioned on the lock key being the one it
 * created (fence(), EtcdStateStore), so a holder that lost it writes
 * nothing. And it hears the loss (onLost): when etcd has not renewed the
 * lease for LOCK_TTL_S - 2 s (the cluster unreachable or without a quorum:
 * the lease may run out on the server any moment) or says it is gone. The
 * session then stops the rollout after its step in progress.
 */
import type { Etcd3, Lease } from 'etcd3';
import type { FleetLockPort, LockHolder, LockInfo } from '../ports.js';
import { clientFor, etcdError, keyOf, type EtcdSettings } from './etcdClients.js';
import { LockHeldError, holderIsDeadHere, whoAmI } from './fleetState.js';

/** The lock's lease: a holder that stops renewing it (killed, machine lost, cut off) loses the lock this long after. */
export const LOCK_TTL_S = 10;
/** A lease not renewed for this long is taken as lost by its holder: before the server can have let it run out. */
const LOST_AFTER_MS = (LOCK_TTL_S - 2) * 1000;

export class EtcdFleetLock implements FleetLockPort {
  onTakeover: ((previous: LockInfo) => void) | undefined;
  private lease: Lease | undefined;
  private readonly key: string;
  /** The lock key's create revision while this process holds it: what its writes are conditioned on. */
  private created: string | undefined;
  /** Why the lock was lost while held, once it was. */
  private lostWhy: string | undefined;
  private readonly lostListeners = new Set<(why: string) => void>();
  private watchdog: NodeJS.Timeout | undefined;

  constructor(
    private readonly s: EtcdSettings,
    private readonly service: string,
    name = 'lock',
  ) {
    this.key = keyOf(s, service, name);
  }

  private async call<T>(what: string, f: (c: Etcd3) => PromiseLike<T>): Promise<T> {
    try {
      return await f(await clientFor(this.s));
    } catch (err) {
      throw etcdError(this.s, what, err);
    }
  }

  async info(): Promise<LockInfo | undefined> {
    const [text, note] = await this.call('reading the lock', (c) => Promise.all([c.get(this.key).string(), c.get(`${this.key}/note`).string()]));
    if (text === null) return undefined;
    let holder: LockHolder;
    try {
      holder = JSON.parse(text) as LockHolder;
    } catch {
      holder = { holder: 'unknown', pid: 0, command: '', started: new Date().toISOString() };
    }
    const m = /^(\S+) (.*)$/.exec(note?.trim() ?? '');
    // The key exists only while its lease is kept alive: it is as fresh as now.
    return { ...holder, lease: new Date().toISOString(), stale: holderIsDeadHere(holder), ...(m ? { note: { at: m[1]!, text: m[2]! } } : {}) };
  }

  async acquire(_image: string, command: string, waitMs = 0): Promise<void> {
    const holder: LockHolder = { holder: whoAmI(), pid: process.pid, command, started: new Date().toISOString() };
    const until = Date.now() + waitMs;
    for (;;) {
      const won = await this.call('taking the lock (nothing was changed)', async (c) => {
        const lease = c.lease(LOCK_TTL_S, { autoKeepAlive: true });
        const id = await lease.grant();
        const r = await c
          .if(this.key, 'Create', '==', 0)
          .then(
            c
              .put(this.key)
              .value(JSON.stringify({ ...holder, leaseId: id }))
              .lease(id),
          )
          .commit();
        if (r.succeeded) {
          this.hold(lease, String(r.header.revision));
          return true;
        }
        await lease.revoke().catch(() => {});
        return false;
      });
      if (won) return;
      const info = await this.info();
      if (info?.stale) {
        // Its holder is gone from this very machine: no need to wait out its lease.
        this.onTakeover?.(info);
        await this.call('taking over a stale lock', (c) => c.delete().key(this.key));
        continue;
      }
      if (info && Date.now() >= until) throw new LockHeldError(info, this.service);
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** Follows the lease while held: renewed, or lost (etcd says so, or it has not been renewed for LOST_AFTER_MS). */
  private hold(lease: Lease, created: string): void {
    this.lease = lease;
    this.created = created;
    this.lostWhy = undefined;
    let renewed = Date.now();
    lease.on('keepaliveSucceeded', () => (renewed = Date.now()));
    lease.on('lost', (err) => this.lose(`etcd says its lease is gone (${err.message})`));
    this.watchdog = setInterval(() => {
      const ms = Date.now() - renewed;
      if (ms > LOST_AFTER_MS)
        this.lose(`etcd has not renewed its lease for ${(ms / 1000).toFixed(1)} s (it lives ${LOCK_TTL_S} s): the cluster does not answer, or has no quorum`);
    }, 250);
    this.watchdog.unref();
  }

  private lose(why: string): void {
    if (this.lostWhy !== undefined || this.lease === undefined) return;
    this.lostWhy = why;
    clearInterval(this.watchdog);
    for (const l of this.lostListeners) l(why);
  }

  /** Told once if the lock is lost while held (the session stops the rollout); returns a function that stops telling. */
  onLost(listener: (why: string) => void): () => void {
    this.lostListeners.add(listener);
    return () => this.lostListeners.delete(listener);
  }

  /** While held and not lost: the lock key and its create revision, for the holder's writes to be conditioned on. */
  fence(): { key: string; revision: string; lostWhy?: string | undefined } | undefined {
    if (this.lease === undefined || this.created === undefined) return undefined;
    return { key: this.key, revision: this.created, lostWhy: this.lostWhy };
  }

  async note(text: string): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    await this.call('writing the lock note', () => lease.put(`${this.key}/note`).value(`${new Date().toISOString()} ${text.replace(/\n/g, ' ')}\n`));
  }

  async release(): Promise<void> {
    const lease = this.lease;
    const lost = this.lostWhy !== undefined;
    this.lease = undefined;
    this.created = undefined;
    clearInterval(this.watchdog);
    if (!lease) return;
    // Revoking the lease deletes the lock and its note at once. A lost one goes with its lease, or is taken over.
    const revoked = this.call('releasing the lock', () => lease.revoke());
    if (lost) await revoked.catch(() => {});
    else await revoked;
  }

  /** `lock release`: removes someone else's lock; without force only when its holder is gone. */
  async breakLock(force: boolean): Promise<LockInfo | undefined> {
    const info = await this.info();
    if (!info) return undefined;
    if (!info.stale && !force) throw new LockHeldError(info, this.service);
    await this.call('removing the lock', (c) => c.delete().prefix(this.key));
    return info;
  }
}
