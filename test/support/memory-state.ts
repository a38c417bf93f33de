/**
 * A fleet's state and locks in memory (the StateStore and FleetLockPort of
 * src/ports.ts), for the managed commands on simulated hosts: runManaged and
 * `fleetroll watch` without the state container. Reads return copies, as the
 * real store's (adapters/fleetState.ts) parse its file each time, so a caller
 * that changes what it read changes nothing until it writes.
 */
import { FleetrollError } from '../../src/errors.js';
import type { YieldAsks } from '../../src/engine/types.js';
import type { FleetLockPort, FleetState, JournalEntry, LockInfo, StateStore } from '../../src/ports.js';

export class MemoryStateStore implements StateStore {
  readonly entries: JournalEntry[] = [];
  writes = 0;
  private state: FleetState | undefined;
  private readonly watchers = new Set<() => void>();

  constructor(state?: FleetState) {
    this.state = state === undefined ? undefined : structuredClone(state);
  }

  async image(): Promise<string | undefined> {
    return this.state ? 'fleetroll-state:memory' : undefined;
  }

  async placeholderImage(): Promise<string> {
    return 'fleetroll-state:memory';
  }

  async ensure(): Promise<void> {}

  async read(): Promise<FleetState | undefined> {
    return this.state === undefined ? undefined : structuredClone(this.state);
  }

  async write(state: FleetState): Promise<void> {
    this.writes++;
    this.state = structuredClone(state);
    for (const w of this.watchers) w();
  }

  /** Called after every write, as the real store's container events are (a look then reads the state and locks again). */
  watch(onChange: () => void): () => void {
    this.watchers.add(onChange);
    return () => this.watchers.delete(onChange);
  }

  async journal(): Promise<JournalEntry[]> {
    return [...this.entries];
  }

  async appendJournal(entries: JournalEntry[]): Promise<void> {
    this.entries.push(...entries);
  }
}

/** One holder at a time; a second acquire fails at once (exit 3), naming the holder. */
export class MemoryLock implements FleetLockPort {
  onTakeover: FleetLockPort['onTakeover'];
  readonly notes: string[] = [];
  /** Every command that took the lock, in order. */
  readonly taken: string[] = [];
  private held: LockInfo | undefined;

  constructor(readonly name: string) {}

  async acquire(_image: string, command: string): Promise<void> {
    if (this.held) throw new FleetrollError('E_LOCK_HELD', `${this.name} is locked by ${this.held.holder} (pid ${this.held.pid}, ${this.held.command})`);
    const now = new Date().toISOString();
    this.held = { holder: 'test@memory', pid: process.pid, command, started: now, lease: now, stale: false };
    this.taken.push(command);
  }

  async release(): Promise<void> {
    this.held = undefined;
  }

  async info(): Promise<LockInfo | undefined> {
    return this.held;
  }

  async note(text: string): Promise<void> {
    this.notes.push(text);
  }

  get isHeld(): boolean {
    return this.held !== undefined;
  }
}

/** A deploy's ask that the watch's heal end (engine/types.ts YieldAsks), in memory: honoured until withdrawn. */
export class MemoryYieldAsks implements YieldAsks {
  private on = false;
  private readonly listeners = new Set<() => void>();

  async ask(): Promise<void> {
    this.on = true;
    for (const l of this.listeners) l();
  }

  async asked(): Promise<boolean> {
    return this.on;
  }

  async withdraw(): Promise<void> {
    this.on = false;
  }

  onAsk(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
