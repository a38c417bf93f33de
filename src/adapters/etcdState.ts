/**
 * The fleet's state and lock in etcd v3 (`state: { etcd: ... }`), so that no
 * Docker host holds them: any machine that reaches the cluster reads the same
 * history and takes the same lock, whichever hosts are down.
 *
 * Keys, under prefix/service/: `state` (the FleetState JSON), `journal` (the
 * rollout journal, one JSON entry a line), `lock` and `watch-lock` (who holds
 * them, as JSON, on a lease kept alive by the holder; a holder that dies
 * leaves the lock when its lease runs out, LOCK_TTL_S, with no `--force`),
 * and `lock/note` (the watch's last action, on the same lease).
 *
 * The etcd3 client does the gRPC, leases and watches; this file only maps
 * fleetroll's ports onto it and turns etcd's errors into one that names the
 * endpoints and says what to check.
 */
import type { Etcd3, Lease } from 'etcd3';
import { FleetrollError } from '../errors.js';
import type { FleetLockPort, FleetState, JournalEntry, LockHolder, LockInfo, StateStore } from '../ports.js';
import { clientFor, etcdError, type EtcdSettings } from './etcdClients.js';
import { LockHeldError, holderIsDeadHere, whoAmI } from './fleetState.js';

export type { EtcdSettings };

/** The lock's lease: a holder that stops renewing it (killed, machine lost, cut off) loses the lock this long after. */
export const LOCK_TTL_S = 10;
const JOURNAL_KEEP = 2000;

function keyOf(s: EtcdSettings, service: string, name: string): string {
  return `${s.prefix.replace(/\/+$/, '')}/${service}/${name}`;
}

export class EtcdStateStore implements StateStore {
  readonly where: string;

  /**
   * `legacy`: whether the first host holds a state volume for the service.
   * Asked only when etcd has no state for it, so that a fleet moved to etcd
   * without `state migrate` is refused rather than started again at revision 1.
   */
  constructor(
    private readonly s: EtcdSettings,
    private readonly service: string,
    private readonly legacy?: { where: string; exists: () => Promise<boolean> },
    /** The fleet file's hosts as "name=endpoint" (checkIdentity); unset: no check (tests). */
    private readonly hosts?: string[],
  ) {
    this.where = `etcd ${keyOf(s, service, '')}`;
  }

  private async call<T>(what: string, f: (c: Etcd3) => PromiseLike<T>): Promise<T> {
    try {
      return await f(await clientFor(this.s));
    } catch (err) {
      throw etcdError(this.s, what, err);
    }
  }

  /** No container holds this state: any non-empty answer tells the session there is nothing to create. */
  async image(): Promise<string | undefined> {
    return 'etcd';
  }

  async placeholderImage(): Promise<string> {
    return 'etcd';
  }

  async ensure(): Promise<void> {}

  async read(): Promise<FleetState | undefined> {
    const [text, identity] = await this.call('reading the fleet state', (c) =>
      Promise.all([c.get(keyOf(this.s, this.service, 'state')).string(), c.get(keyOf(this.s, this.service, 'identity')).string()]),
    );
    this.checkIdentity(identity);
    if (text === null) {
      // A first host that does not answer holds nothing we can read: the volume's check is for a host that does.
      if (this.legacy && (await this.legacy.exists().catch(() => false)))
        throw new FleetrollError(
          'E_INVALID',
          `${this.where} holds no state for ${this.service}, but ${this.legacy.where} does: with etcd as it is, history would start again at revision 1 and undo would have nothing to go back to; nothing was changed`,
          {
            hint: `move it first: fleetroll state migrate -f <fleet> --to etcd (or remove state.etcd to keep using the volume)`,
          },
        );
      return undefined;
    }
    try {
      return JSON.parse(text) as FleetState;
    } catch (err) {
      throw new FleetrollError('E_STATE', `the fleet state in ${this.where}state is not valid JSON: ${(err as Error).message}`);
    }
  }

  async write(state: FleetState): Promise<void> {
    const hosts = this.hosts;
    const [r] = await this.call('writing the fleet state', (c) =>
      Promise.all([
        c.put(keyOf(this.s, this.service, 'state')).value(`${JSON.stringify(state, null, 2)}\n`),
        // The hosts as the fleet file names them now: a fleet that grows keeps matching through the ones it kept.
        hosts ? c.put(keyOf(this.s, this.service, 'identity')).value(JSON.stringify({ hosts })) : Promise.resolve(undefined),
      ]),
    );
    this.own.add(String(r.header?.revision ?? ''));
  }

  /**
   * The fleet's identity: the hosts ("name=endpoint") its state was last
   * written with. A fleet file that shares none of them is another fleet with
   * the same service name (staging and production on one cluster): refused.
   */
  private checkIdentity(text: string | null): void {
    if (text === null || !this.hosts) return;
    let stored: string[] = [];
    try {
      stored = (JSON.parse(text) as { hosts?: string[] }).hosts ?? [];
    } catch {
      return;
    }
    if (stored.length === 0 || stored.some((h) => this.hosts!.includes(h))) return;
    throw new FleetrollError(
      'E_INVALID',
      `${this.where} holds the state of a fleet ${this.service} on other hosts (${stored.join(', ')}), and this fleet file names ${this.hosts.join(', ')}: two fleets with the same service name on one etcd need two prefixes; nothing was changed`,
      {
        hint: "give this environment its own state.etcd.prefix (e.g. /fleetroll/staging), or fix the fleet file's hosts",
        details: { stored, hosts: this.hosts },
      },
    );
  }

  /** Read, change, write. Callers hold the fleet lock (or write control fields only), as with the volume. */
  async update(_image: string, change: (s: FleetState) => void): Promise<FleetState> {
    const s = (await this.read()) ?? { service: this.service, nextRevision: 1, revisions: [] };
    change(s);
    await this.write(s);
    return s;
  }

  async journal(): Promise<JournalEntry[]> {
    const text = (await this.call('reading the journal', (c) => c.get(keyOf(this.s, this.service, 'journal')).string())) ?? '';
    const entries = text
      .split('\n')
      .filter((l) => l.trim() !== '')
      .flatMap((l) => {
        try {
          return [JSON.parse(l) as JournalEntry];
        } catch {
          return [];
        }
      });
    this.journalSeen = entries;
    return [...entries];
  }

  private journalSeen: JournalEntry[] | undefined;

  async appendJournal(entries: JournalEntry[]): Promise<void> {
    const all = [...(this.journalSeen ?? (await this.journal())), ...entries].slice(-JOURNAL_KEEP);
    await this.call('writing the journal', (c) => c.put(keyOf(this.s, this.service, 'journal')).value(`${all.map((e) => JSON.stringify(e)).join('\n')}\n`));
    this.journalSeen = all;
  }

  /** Revisions of this process's own state writes: they wake nobody (the polls ask about what others wrote). */
  private readonly own = new Set<string>();

  /** Calls `onWrite` when another process writes the state (an etcd watch on its key); polls stay the safety net. */
  watch(onWrite: () => void): () => void {
    let stopped = false;
    let cancel: (() => void) | undefined;
    void clientFor(this.s)
      .then((c) =>
        c
          .watch()
          .key(keyOf(this.s, this.service, 'state'))
          .create(),
      )
      .then((w) => {
        if (stopped) return void w.cancel();
        w.on('put', (kv) => {
          if (this.own.delete(String(kv.mod_revision))) return;
          onWrite();
        });
        w.on('error', () => {});
        cancel = () => void w.cancel().catch(() => {});
      })
      .catch(() => {});
    return () => {
      stopped = true;
      cancel?.();
    };
  }

  /** Removes the state and the journal, not the locks (a failed `state migrate` takes its copy back). */
  async discardState(): Promise<void> {
    await this.call('removing the copied state', (c) => c.delete().key(keyOf(this.s, this.service, 'state')));
    await this.call('removing the copied journal', (c) => c.delete().key(keyOf(this.s, this.service, 'journal')));
    await this.call('removing the copied identity', (c) => c.delete().key(keyOf(this.s, this.service, 'identity')));
    this.journalSeen = undefined;
  }

  /** Removes the fleet's keys (tests). */
  async destroy(): Promise<void> {
    await this.call('removing the fleet state', (c) => c.delete().prefix(keyOf(this.s, this.service, '')));
  }
}

/**
 * The rollout lock (or the watch's, `name` watch-lock) as a key on a lease:
 * created only if absent, in one transaction, so of two deploys racing for it
 * exactly one wins; kept alive by the etcd3 client while held.
 */
export class EtcdFleetLock implements FleetLockPort {
  onTakeover: ((previous: LockInfo) => void) | undefined;
  private lease: Lease | undefined;
  private readonly key: string;

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
          this.lease = lease;
          lease.on('lost', () => {
            if (this.lease === lease) this.lease = undefined;
          });
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

  async note(text: string): Promise<void> {
    const lease = this.lease;
    if (!lease) return;
    await this.call('writing the lock note', () => lease.put(`${this.key}/note`).value(`${new Date().toISOString()} ${text.replace(/\n/g, ' ')}\n`));
  }

  async release(): Promise<void> {
    const lease = this.lease;
    this.lease = undefined;
    // Revoking the lease deletes the lock and its note at once.
    if (lease) await this.call('releasing the lock', () => lease.revoke());
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
