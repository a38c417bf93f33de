/**
 * State that lives with the fleet, not with the machine that deployed it:
 * revision history, the pause flag, the restart marker and the rollout
 * journal, kept in a Docker volume on the fleet's first host. Any machine
 * pointed at the same hosts reads the same history.
 *
 * Docker has no API to read or write a volume directly, so a never-started
 * "state container" mounts it and files go in and out through the archive
 * API (docker cp), which works on stopped containers. The lock is a
 * container with a fixed name: Docker creates names atomically, so of two
 * deploys racing for it exactly one wins.
 */
import os from 'node:os';
import { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { FleetrollError } from '../errors.js';
import { LABELS } from '../ports.js';
import { getFile, putFile } from './docker.js';
import { dockerEvents } from './dockerEvents.js';
import { createNeverStarted } from './dockerInspect.js';
import { lockContainerName } from './lockName.js';
import { switchBackAskName, switchBackOfferName, yieldAskName } from './switchAsks.js';
import { createTar } from './tar.js';
import type { FleetState, JournalEntry, LockHolder, LockInfo, StateStore, FleetLockPort } from '../ports.js';

const JOURNAL_KEEP = 2000;

function emptyState(service: string): FleetState {
  return { service, nextRevision: 1, revisions: [] };
}

export function whoAmI(): string {
  let user = 'unknown';
  try {
    user = os.userInfo().username;
  } catch {
    // no passwd entry (containers): keep "unknown"
  }
  return `${user}@${os.hostname()}`;
}

function dockerStatus(err: unknown): number | undefined {
  const code = (err as { statusCode?: unknown } | null)?.statusCode;
  return typeof code === 'number' ? code : undefined;
}

/** An image with one empty file and nothing else, for containers that are never started. */
const PLACEHOLDER_IMAGE = 'fleetroll/placeholder:1';

/**
 * Makes PLACEHOLDER_IMAGE on an engine that lacks it (`docker import` of a
 * one-file tar: a few hundred bytes, no registry). The state and lock
 * containers use it on a first host that does not have the fleet's image yet,
 * so that preflight can copy or pull that image there under the lock.
 */
async function ensurePlaceholderImage(docker: Dockerode): Promise<string> {
  try {
    await docker.getImage(PLACEHOLDER_IMAGE).inspect();
    return PLACEHOLDER_IMAGE;
  } catch (err) {
    if (dockerStatus(err) !== 404) throw err;
  }
  const [repo, tag] = PLACEHOLDER_IMAGE.split(':') as [string, string];
  const tar = await createTar({ name: '.fleetroll-placeholder', content: '' });
  const res = (await docker.importImage(Readable.from([tar]) as unknown as NodeJS.ReadableStream, { repo, tag } as never)) as unknown as NodeJS.ReadableStream;
  let text = '';
  for await (const chunk of res) text += chunk.toString();
  const failed = text
    .split('\n')
    .map((l) => {
      try {
        return JSON.parse(l) as { error?: string };
      } catch {
        return {};
      }
    })
    .find((m) => m.error);
  if (failed?.error) throw new Error(`creating ${PLACEHOLDER_IMAGE}: ${failed.error}`);
  return PLACEHOLDER_IMAGE;
}

export class FleetStateStore implements StateStore {
  readonly container: string;
  readonly volume: string;

  constructor(
    private readonly docker: Dockerode,
    private readonly service: string,
    private readonly hostName: string,
  ) {
    this.container = `fleetroll-state-${service}`;
    this.volume = `fleetroll-state-${service}`;
  }

  /** True when the state container exists (a fleet that was never deployed has none). */
  async exists(): Promise<boolean> {
    try {
      await this.docker.getContainer(this.container).inspect();
      return true;
    } catch (err) {
      if (dockerStatus(err) === 404) return false;
      throw err;
    }
  }

  /** The image the state container was created from (any image will do; it never runs). */
  async image(): Promise<string | undefined> {
    try {
      // The image id, not its tag: the tag may be removed or moved, the id
      // stays as long as this container uses it.
      return (await this.docker.getContainer(this.container).inspect()).Image;
    } catch (err) {
      if (dockerStatus(err) === 404) return undefined;
      throw err;
    }
  }

  /** PLACEHOLDER_IMAGE on this store's host, made if missing. */
  placeholderImage(): Promise<string> {
    return ensurePlaceholderImage(this.docker);
  }

  /** Creates the volume and the state container; `image` is any image present on the host. */
  async ensure(image: string): Promise<void> {
    if (await this.exists()) return;
    await this.docker.createVolume({ Name: this.volume, Labels: { [LABELS.state]: this.service } });
    try {
      await createNeverStarted(this.docker, {
        name: this.container,
        image,
        role: 'state',
        labels: { [LABELS.state]: this.service },
        binds: [`${this.volume}:/state`],
      });
    } catch (err) {
      // Another machine created it first: fine, it is the same state.
      if (dockerStatus(err) !== 409) throw err;
    }
  }

  /**
   * A file of the state, or undefined when the fleet has no state container:
   * one archive GET, no inspect before it (a read is on the path of every
   * poll for undo, promote and pause).
   */
  private async file(name: string): Promise<{ text: string | undefined } | undefined> {
    try {
      return { text: await getFile(this.docker, this.container, `/state/${name}`) };
    } catch (err) {
      if (err instanceof FleetrollError && err.code === 'E_CONTAINER_MISSING') return undefined;
      throw err;
    }
  }

  async read(): Promise<FleetState | undefined> {
    const f = await this.file('state.json');
    if (!f) return undefined;
    if (!f.text) return emptyState(this.service);
    try {
      return JSON.parse(f.text) as FleetState;
    } catch (err) {
      throw new FleetrollError('E_STATE', `the fleet state in ${this.container} on ${this.hostName} is not valid JSON: ${(err as Error).message}`);
    }
  }

  /**
   * Tells `onWrite` soon after anything writes into the state container, from
   * this process or another on any machine: Docker's `extract-to-dir` event
   * for it, on the fleet's first host. A running rollout's polls for undo,
   * promote, abort and pause look at once instead of at their next turn; they
   * stay the safety net (the stream may drop), so an error here only ends the
   * watch.
   */
  watch(onWrite: () => void): () => void {
    this.listeners.add(onWrite);
    // One event stream for every listener of this store (a rollout has up to four polls).
    if (!this.events) {
      const events = { open: false, close: () => {} };
      this.events = events;
      // A stream that ends (the engine restarted) leaves the polls; the next watch opens another.
      const gone = () => {
        if (this.events === events) this.events = undefined;
      };
      events.close = dockerEvents(
        this.docker,
        { type: ['container'], container: [this.container], event: ['extract-to-dir'] },
        {
          opened: () => {
            events.open = true;
            this.ownWrites = 0;
          },
          data: () => {
            // This process's own writes wake nobody: its polls ask about what others wrote (pause, promote, undo, abort).
            if (this.ownWrites > 0) {
              this.ownWrites--;
              return;
            }
            for (const l of this.listeners) l();
          },
          ended: gone,
        },
      );
    }
    return () => {
      this.listeners.delete(onWrite);
      if (this.listeners.size > 0 || !this.events) return;
      this.events.close();
      this.events = undefined;
    };
  }

  private readonly listeners = new Set<() => void>();
  private events: { open: boolean; close: () => void } | undefined;
  /** This process's writes whose event has not come yet (while a stream is open): each used to wake its own polls into a read, and every archive call costs the engine a process. */
  private ownWrites = 0;
  /** The journal as this process last read or wrote it: a rollout appends under the fleet's lock, so nobody else writes it meanwhile. */
  private journalSeen: JournalEntry[] | undefined;

  /** One write into the state container, counted as this process's own while events are heard. */
  private async put(name: string, text: string): Promise<void> {
    const counted = this.events?.open === true;
    if (counted) this.ownWrites++;
    try {
      await putFile(this.docker, this.container, `/state/${name}`, text, 0o600);
    } catch (err) {
      if (counted) this.ownWrites = Math.max(0, this.ownWrites - 1);
      throw err;
    }
  }

  async write(state: FleetState): Promise<void> {
    await this.put('state.json', `${JSON.stringify(state, null, 2)}\n`);
  }

  /** Read, change, write. Callers hold the fleet lock, so there is no lost update. */
  async update(image: string, change: (s: FleetState) => void): Promise<FleetState> {
    await this.ensure(image);
    const s = (await this.read()) ?? emptyState(this.service);
    change(s);
    await this.write(s);
    return s;
  }

  async journal(): Promise<JournalEntry[]> {
    const text = (await this.file('journal.ndjson'))?.text ?? '';
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

  /** Appends to the journal as last read or written here (a rollout reads it under the lock before its first entry): one archive PUT, no GET. */
  async appendJournal(entries: JournalEntry[]): Promise<void> {
    const all = [...(this.journalSeen ?? (await this.journal())), ...entries].slice(-JOURNAL_KEEP);
    await this.put('journal.ndjson', `${all.map((e) => JSON.stringify(e)).join('\n')}\n`);
    this.journalSeen = all;
  }

  /** Removes the state (volume and container): used by tests and `rehearse --down`. */
  async destroy(): Promise<void> {
    await this.docker
      .getContainer(this.container)
      .remove({ force: true })
      .catch(() => {});
    await this.docker
      .getVolume(this.volume)
      .remove()
      .catch(() => {});
  }
}

/** How long a lock lives without renewal. Renewed every LEASE_MS / 4. */
const LEASE_MS = 30_000;

/** A holder on this very machine whose process is gone does not need its lease to run out. */
export function holderIsDeadHere(h: LockHolder): boolean {
  if (!h.holder.endsWith(`@${os.hostname()}`) || !h.pid) return false;
  try {
    process.kill(h.pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Exit code 3; its details name the holder, so a CI job can say who holds the fleet without parsing the message. */
export class LockHeldError extends FleetrollError {
  constructor(
    readonly info: LockInfo,
    service: string,
  ) {
    super(
      'E_LOCK_HELD',
      `fleet ${service} is locked by ${info.holder} (pid ${info.pid}, since ${info.started}): ${info.command}${info.stale ? ` — its lease expired at ${new Date(Date.parse(info.lease) + LEASE_MS).toISOString()}` : ''}`,
      {
        hint: 'wait for it (deploy --lock-wait 5m), check `fleetroll status`, or if you are sure it is gone: `fleetroll lock release --force -f <fleet>`',
        details: { holder: info.holder, pid: info.pid, command: info.command, started: info.started, lease: info.lease, stale: info.stale },
      },
    );
  }
}

export class FleetLock implements FleetLockPort {
  readonly container: string;
  private timer: NodeJS.Timeout | undefined;
  /** Told when a stale lock is taken over. */
  onTakeover: ((previous: LockInfo) => void) | undefined;

  constructor(
    private readonly docker: Dockerode,
    private readonly service: string,
    private readonly now: () => number = Date.now,
  ) {
    this.container = lockContainerName(service);
  }

  async info(): Promise<LockInfo | undefined> {
    let inspect: Dockerode.ContainerInspectInfo;
    try {
      inspect = await this.docker.getContainer(this.container).inspect();
    } catch (err) {
      if (dockerStatus(err) === 404) return undefined;
      throw err;
    }
    const labels = inspect.Config?.Labels ?? {};
    let holder: LockHolder;
    try {
      holder = JSON.parse(labels[LABELS.lock] ?? '{}') as LockHolder;
    } catch {
      holder = { holder: 'unknown', pid: 0, command: '', started: inspect.Created };
    }
    const lease = (await getFile(this.docker, this.container, '/lease').catch(() => undefined))?.trim() || holder.started || inspect.Created;
    const expired = this.now() - Date.parse(lease) > LEASE_MS;
    const note = parseNote(await getFile(this.docker, this.container, '/note').catch(() => undefined));
    return { ...holder, lease, stale: expired || holderIsDeadHere(holder), ...(note ? { note } : {}) };
  }

  /** Takes the lock or throws LockHeldError; waits up to `waitMs` for it to come free. */
  async acquire(image: string, command: string, waitMs = 0): Promise<void> {
    const holder: LockHolder = { holder: whoAmI(), pid: process.pid, command, started: new Date(this.now()).toISOString() };
    const until = this.now() + waitMs;
    for (;;) {
      try {
        await createNeverStarted(this.docker, {
          name: this.container,
          image,
          role: 'lock',
          labels: { [LABELS.lock]: JSON.stringify(holder), [`${LABELS.lock}.service`]: this.service },
        });
        await this.renew();
        this.timer = setInterval(() => void this.renew().catch(() => {}), LEASE_MS / 4);
        this.timer.unref();
        return;
      } catch (err) {
        if (dockerStatus(err) !== 409) throw err;
      }
      const info = await this.info();
      if (info?.stale) {
        // Its holder is gone (killed, machine lost): take the lock over, and say so.
        this.onTakeover?.(info);
        await this.docker
          .getContainer(this.container)
          .remove({ force: true })
          .catch(() => {});
        continue;
      }
      if (info && this.now() >= until) throw new LockHeldError(info, this.service);
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  /** A line for `status` (fleetroll watch's last action), kept in the lock's container while it is held. */
  async note(text: string): Promise<void> {
    await putFile(this.docker, this.container, '/note', `${new Date(this.now()).toISOString()} ${text.replace(/\n/g, ' ')}\n`);
  }

  private async renew(): Promise<void> {
    await putFile(this.docker, this.container, '/lease', `${new Date(this.now()).toISOString()}\n`);
  }

  async release(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    await this.docker
      .getContainer(this.container)
      .remove({ force: true })
      .catch((err: unknown) => {
        if (dockerStatus(err) !== 404) throw err;
      });
  }

  /** `lock release`: removes someone else's lock; without force only when its lease expired. */
  async breakLock(force: boolean): Promise<LockInfo | undefined> {
    const info = await this.info();
    if (!info) return undefined;
    if (!info.stale && !force) throw new LockHeldError(info, this.service);
    await this.release();
    return info;
  }
}

function parseNote(text: string | undefined): { at: string; text: string } | undefined {
  const m = /^(\S+) (.*)$/.exec(text?.trim() ?? '');
  return m ? { at: m[1]!, text: m[2]! } : undefined;
}

/** Removes a fleet's state volume, state container, lock and a blue-green offer left by a killed rollout (tests, `rehearse --down`). */
export async function removeFleetState(docker: Dockerode, service: string): Promise<void> {
  await Promise.all(
    [switchBackOfferName(service), switchBackAskName(service), yieldAskName(service)].map((c) =>
      docker
        .getContainer(c)
        .remove({ force: true })
        .catch(() => {}),
    ),
  );
  await new FleetLock(docker, service).release();
  await new FleetLock(docker, `${service}-watch`).release();
  await new FleetStateStore(docker, service, 'local').destroy();
}
