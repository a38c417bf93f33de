/**
 * nginx's workers read from this machine's /proc, for an nginx in a container
 * on this machine's engine: the master is the container's init process, and
 * from the host's pid namespace its children and their titles are plain
 * files, read in well under a millisecond. `docker top` (the way that works
 * for any engine) makes dockerd run `ps`, 15-30 ms a call here, and a reload
 * is confirmed by looking again and again: the looks then decide how soon
 * after nginx's switch the change is known to be in force.
 *
 * Trusted only when the pid Docker gave still names an nginx master here: a
 * fleetroll running in a container of its own (its own pid namespace) finds
 * no such process or another one, and the caller falls back to `docker top`.
 */
import { readFile } from 'node:fs/promises';
import { type WorkerSnapshot, workerSnapshot } from './nginxWorkers.js';

/** A process's title as `ps` shows it: nginx pads its retitled argv with NULs. */
const title = async (pid: string): Promise<string> => (await readFile(`/proc/${pid}/cmdline`, 'latin1')).replace(/\0+/g, ' ').trim();

/** The workers of the nginx master with this pid (in this machine's pid namespace), or undefined when it is not one. */
export async function procWorkers(masterPid: number): Promise<WorkerSnapshot | undefined> {
  if (!Number.isInteger(masterPid) || masterPid <= 1) return undefined;
  const master = String(masterPid);
  try {
    const own = await title(master);
    if (!own.startsWith('nginx: master process')) return undefined;
    const children = (await readFile(`/proc/${master}/task/${master}/children`, 'latin1')).split(' ').filter((p) => /^\d+$/.test(p));
    // A child gone between the two reads is a worker that has just exited: it serves nothing.
    const rows = await Promise.all(children.map(async (p) => [p, await title(p).catch(() => '')]));
    return workerSnapshot(['PID', 'COMMAND'], [[master, own], ...rows]);
  } catch {
    return undefined;
  }
}
