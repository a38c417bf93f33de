/**
 * nginx's workers read from this machine's /proc, for an nginx in a container
 * on this machine's engine: the master is the container's init process, and
 * from the host's pid namespace its children and their titles are plain
 * files, read in well under a millisecond. `docker top` (the way that works
 * for any engine) makes dockerd run `ps`, 15-30 ms a call here, and a reload
 * is confirmed by looking again and again: the looks then decide how soon
 * after nginx's switch the change is known to be in force.
 *
 * Trusted only when the pid Docker gave still names that container's nginx
 * master here (its title, and its cgroup naming the container's id): a
 * fleetroll running in a container of its own (its own pid namespace) finds
 * no such process or another one, and the caller falls back to Docker's API.
 *
 * The same check lets the reload's SIGHUP go straight to the master (what
 * Docker's kill API does for a container's init, 25-50 ms a call here).
 * Nothing else goes through /proc: a file written through /proc/<pid>/root
 * would follow the container's own symlinks on this machine's file system,
 * and a `nginx -t` entered with nsenter would run the container's binary as
 * this machine's unconfined root. Files and `nginx -t` stay with Docker (or
 * a bind mount's host path, nginxPlace.ts).
 */
import { readFile } from 'node:fs/promises';
import { type WorkerSnapshot, workerSnapshot } from './nginxWorkers.js';

/** A process's title as `ps` shows it: nginx pads its retitled argv with NULs. */
const title = async (pid: string): Promise<string> => (await readFile(`/proc/${pid}/cmdline`, 'latin1')).replace(/\0+/g, ' ').trim();

/** Whether `pid` is in container `id`'s cgroup: a pid reused by another process after the container stopped is not. */
async function inContainer(pid: string, id: string | undefined): Promise<boolean> {
  if (id === undefined) return true;
  return /^[0-9a-f]{64}$/.test(id) && (await readFile(`/proc/${pid}/cgroup`, 'latin1')).includes(id);
}

/** The workers of the nginx master with this pid (in this machine's pid namespace, of container `id` when given), or undefined when it is not one. */
export async function procWorkers(masterPid: number, id?: string): Promise<WorkerSnapshot | undefined> {
  if (!Number.isInteger(masterPid) || masterPid <= 1) return undefined;
  const master = String(masterPid);
  try {
    const own = await title(master);
    if (!own.startsWith('nginx: master process') || !(await inContainer(master, id))) return undefined;
    const children = (await readFile(`/proc/${master}/task/${master}/children`, 'latin1')).split(' ').filter((p) => /^\d+$/.test(p));
    // A child gone between the two reads is a worker that has just exited: it serves nothing.
    const rows = await Promise.all(children.map(async (p) => [p, await title(p).catch(() => '')]));
    return workerSnapshot(['PID', 'COMMAND'], [[master, own], ...rows]);
  } catch {
    return undefined;
  }
}

/** SIGHUP to container `id`'s nginx master at `pid` on this machine; false (nothing sent) when that pid is not it any more. */
export async function hupMaster(pid: number, id: string): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  try {
    if (!(await title(String(pid))).startsWith('nginx: master process') || !(await inContainer(String(pid), id))) return false;
    process.kill(pid, 'SIGHUP');
    return true;
  } catch {
    return false;
  }
}
