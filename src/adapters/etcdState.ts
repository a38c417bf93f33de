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
import type { Etcd3 } from 'etcd3';
import { FleetrollError } from '../errors.js';
import type { FleetState, JournalEntry, StateStore } from '../ports.js';
import { clientFor, etcdError, keyOf, type EtcdSettings } from './etcdClients.js';

export type { EtcdSettings };
export { EtcdFleetLock, LOCK_TTL_S } from './etcdLock.js';

const JOURNAL_KEEP = 2000;

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
    /** The rollout lock's fence while this process holds it (EtcdFleetLock.fence): its writes are conditioned on it. */
    private readonly fence?: () => { key: string; revision: string; lostWhy?: string | undefined } | undefined,
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
    const writes: [string, string][] = [[keyOf(this.s, this.service, 'state'), `${JSON.stringify(state, null, 2)}\n`]];
    // The hosts as the fleet file names them now: a fleet that grows keeps matching through the ones it kept.
    if (this.hosts) writes.push([keyOf(this.s, this.service, 'identity'), JSON.stringify({ hosts: this.hosts })]);
    this.own.add(await this.put('writing the fleet state', writes));
  }

  /**
   * Writes in one go; returns the revision. While this process holds the
   * fleet's lock (`fence`), in a transaction conditioned on the lock key still
   * being the one it created: a holder that lost its lock writes nothing.
   */
  private async put(what: string, writes: [string, string][]): Promise<string> {
    const fence = this.fence?.();
    const refused = (why: string) =>
      new FleetrollError('E_ETCD', `${what}: refused: this process no longer holds the fleet's lock in etcd (${why}); nothing was written`, {
        hint: 'fleetroll status -f <fleet> shows where the fleet stands; fleetroll resume -f <fleet> continues the rollout once etcd answers',
      });
    if (fence?.lostWhy !== undefined) throw refused(fence.lostWhy);
    return this.call(what, async (c) => {
      const ops = writes.map(([k, v]) => c.put(k).value(v));
      if (!fence) return String((await Promise.all(ops))[0]?.header?.revision ?? '');
      const r = await c
        .if(fence.key, 'Create', '==', fence.revision)
        .then(...ops)
        .commit();
      if (!r.succeeded) throw refused("its lock key is gone or another holder's");
      return String(r.header.revision);
    });
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
    await this.put('writing the journal', [[keyOf(this.s, this.service, 'journal'), `${all.map((e) => JSON.stringify(e)).join('\n')}\n`]]);
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
