/**
 * `fleetroll state migrate`: copies a fleet's state and journal from one
 * store to another (the Docker volume and etcd, either way), reads the copy
 * back and compares it, and says what moved. All or nothing: a target that
 * already holds something else, or a copy that does not read back the same,
 * leaves the target as it was (exit 2). The caller holds the source's lock,
 * so that no rollout writes the state meanwhile; the source is left as it
 * was, so that going back is one more migrate.
 */
import { isDeepStrictEqual } from 'node:util';
import { FleetrollError } from '../errors.js';
import type { FleetState, JournalEntry, StateStore } from '../ports.js';

export interface MigrateEnds {
  store: StateStore;
  /** For messages: "the Docker volume fleetroll-state-api on host a", "etcd /fleetroll/api/". */
  name: string;
}

export interface MigrateResult {
  /** The revision numbers copied, oldest first. */
  revisions: number[];
  journalEntries: number;
  paused: boolean;
  /** The target held exactly this already: nothing was written. */
  alreadyThere: boolean;
}

function invalid(message: string, hint: string): FleetrollError {
  return new FleetrollError('E_INVALID', message, { hint });
}

/**
 * Copies `from` to `to`. `discard` removes what a failed copy wrote to the
 * target (it held nothing before). `image` is what a volume target's state
 * container is created from.
 */
export async function migrateState(o: {
  service: string;
  from: MigrateEnds;
  to: MigrateEnds;
  image: string;
  discard: () => Promise<void>;
}): Promise<MigrateResult> {
  const { from, to } = o;
  const state = await from.store.read();
  if (!state)
    throw invalid(`nothing to migrate: ${from.name} holds no state for ${o.service}`, 'check the fleet file (service, hosts, state) and the direction (--to)');
  const journal = await from.store.journal();
  const result = (alreadyThere: boolean): MigrateResult => ({
    revisions: state.revisions.map((r) => r.number),
    journalEntries: journal.length,
    paused: state.paused === true,
    alreadyThere,
  });
  const [there, thereJournal] = await Promise.all([to.store.read(), to.store.journal()]);
  if (there !== undefined || thereJournal.length > 0) {
    if (sameCopy(there, thereJournal, state, journal)) return result(true);
    throw invalid(
      `${to.name} already holds a different state for ${o.service} (${there ? `revisions ${there.revisions.map((r) => r.number).join(', ') || 'none'}` : `${thereJournal.length} journal entries`}): nothing was changed`,
      `if that copy is stale, remove it first; else migrate the other way (--to)`,
    );
  }
  try {
    await to.store.ensure(o.image);
    await to.store.write(state);
    if (journal.length > 0) await to.store.appendJournal(journal);
    const [back, backJournal] = await Promise.all([to.store.read(), to.store.journal()]);
    if (!sameCopy(back, backJournal, state, journal))
      throw invalid(
        `the copy in ${to.name} does not read back as ${from.name} holds it: nothing was changed (the copy was removed)`,
        'run the migrate again; if it fails again, report it',
      );
  } catch (err) {
    await o.discard().catch(() => {});
    if (err instanceof FleetrollError && err.code === 'E_INVALID') throw err;
    throw new FleetrollError('E_INVALID', `copying the state to ${to.name} failed: nothing was changed (the copy was removed): ${(err as Error).message}`, {
      hint: 'fix the problem above and run the migrate again',
      cause: err,
    });
  }
  return result(false);
}

/** The same state and journal, compared as their JSON (what each store writes). */
function sameCopy(a: FleetState | undefined, aj: JournalEntry[], b: FleetState, bj: JournalEntry[]): boolean {
  return (
    isDeepStrictEqual(JSON.parse(JSON.stringify(a ?? null)), JSON.parse(JSON.stringify(b))) &&
    isDeepStrictEqual(JSON.parse(JSON.stringify(aj)), JSON.parse(JSON.stringify(bj)))
  );
}
