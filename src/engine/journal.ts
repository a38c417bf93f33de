/**
 * The rollout journal, written without holding up the rollout.
 *
 * Every step is recorded, but an append is a read-and-rewrite of a file in
 * the fleet's state (through Docker on the first host): awaiting it before
 * each start put those round trips in front of the work, and starts on other
 * hosts queued behind them. Entries are buffered and written in groups, one
 * write in flight at a time; `flush` waits for everything recorded so far.
 * Recovery after a crash does not depend on the last few entries: it is
 * level-triggered (the next run observes the containers and nginx and
 * reloads every nginx once); the journal tells the operator what happened.
 */
import type { JournalEntry, StateStore } from '../ports.js';

export interface JournalWriter {
  (step: string, phase?: 'begin' | 'end', detail?: Record<string, unknown>): void;
  /** Resolves once every entry recorded so far is written (or failed to be). */
  flush(): Promise<void>;
}

export function journalWriter(
  store: Pick<StateStore, 'appendJournal'>,
  rollout: string,
  onError: (e: unknown) => void,
  now: () => Date = () => new Date(),
): JournalWriter {
  let buffer: JournalEntry[] = [];
  let writing: Promise<void> | undefined;
  const pump = (): Promise<void> => {
    if (writing) return writing;
    if (buffer.length === 0) return Promise.resolve();
    const batch = buffer;
    buffer = [];
    writing = store
      .appendJournal(batch)
      .catch(onError)
      .finally(() => {
        writing = undefined;
      })
      .then(() => pump());
    return writing;
  };
  const write = ((step, phase, detail) => {
    buffer.push({ at: now().toISOString(), rollout, step, ...(phase ? { phase } : {}), ...(detail ? { detail } : {}) });
    void pump();
  }) as JournalWriter;
  write.flush = async () => {
    while (writing || buffer.length > 0) await pump();
  };
  return write;
}

/** The steps that end a rollout in the journal: one that has none of them never finished. */
export const ENDED_STEPS: readonly string[] = ['complete', 'failed', 'paused', 'interrupted', 'rolled back'];

/** The last rollout in the journal, if it never reached an end (complete, failed, ...). */
export function unfinishedRollout(journal: JournalEntry[]): { rollout: string; last: JournalEntry } | undefined {
  const last = journal[journal.length - 1];
  if (!last) return undefined;
  const mine = journal.filter((e) => e.rollout === last.rollout);
  const ended = mine.some((e) => ENDED_STEPS.includes(e.step));
  return ended ? undefined : { rollout: last.rollout, last };
}
