/**
 * Knowing when a reload is in force: nginx's worker processes before and
 * after it. Shared by both nginx routers (nginx.ts).
 *
 * `nginx -s reload` (or a SIGHUP) only tells the master; the master then reads
 * the configuration, starts new workers, and *sleeps 100 ms* before telling
 * the old ones to shut down (`ngx_msleep(100)` in ngx_master_process_cycle,
 * "allow new processes to start"). Until then the old workers keep accepting
 * connections with the old upstream, so a drained server can still get new
 * requests. The reload is in force when no worker of the old generation is
 * left accepting; an old worker that is "shutting down" only finishes what it
 * has.
 */
import { FleetrollError } from '../errors.js';

/** What `docker top` / `ps` shows of one nginx. */
export interface WorkerSnapshot {
  /** PIDs of the workers serving the current config ("nginx: worker process", not "... is shutting down"). */
  workers: Set<string>;
  /** PID of the master process, when exactly one is listed. */
  master?: string | undefined;
}

/** The workers (and the master) in a process listing with a PID and a command column. */
export function workerSnapshot(titles: string[], processes: string[][], parent?: (row: string[]) => boolean): WorkerSnapshot {
  const pid = titles.indexOf('PID');
  const args = titles.findIndex((x) => x === 'COMMAND' || x === 'ARGS' || x === 'CMD');
  const workers = new Set(
    processes
      .filter((p) => /nginx: worker process\s*$/.test(p[args] ?? '') && (parent?.(p) ?? true))
      .map((p) => p[pid] ?? ''),
  );
  const masters = processes.filter((p) => (p[args] ?? '').startsWith('nginx: master process'));
  return { workers, master: masters.length === 1 ? masters[0]?.[pid] : undefined };
}

/** How the confirmation went: its whole time and the part of it that was nginx's own hand-over. */
export interface Confirmed {
  /** From the reload's return to no old worker left accepting, in ms. */
  confirm: number;
  /**
   * From the first new worker seen to the last old one gone: nginx's hold
   * (100 ms in its master, plus the poll that saw it). Absent when the first
   * look already found only new workers.
   */
  handover?: number | undefined;
}

/**
 * Waits until every worker is a new one, looking again with a growing,
 * jittered pause (p-retry: 10 ms up to 100 ms, so the wait ends within a
 * poll of the master's switch), for at most RELOAD_TIMEOUT_MS. With no
 * workers to compare (the listing is unavailable) it gives the master a
 * fixed moment instead.
 */
export async function waitForNewWorkers(name: string, before: Set<string> | undefined, now: () => Promise<Set<string> | undefined>): Promise<Confirmed> {
  const t0 = Date.now();
  if (!before || before.size === 0) {
    await sleep(RELOAD_SETTLE_MS);
    return { confirm: Date.now() - t0 };
  }
  let seen: Set<string> | undefined;
  let firstNew: number | undefined;
  const { default: pRetry } = await import('p-retry');
  try {
    await pRetry(
      async () => {
        seen = await now();
        const fresh = [...(seen ?? [])].some((p) => !before.has(p));
        if (fresh) firstNew ??= Date.now();
        if (!seen || seen.size === 0 || [...seen].some((p) => before.has(p))) throw new Error('the old workers still serve');
      },
      { retries: 400, minTimeout: 10, factor: 1.5, maxTimeout: 100, randomize: true, maxRetryTime: RELOAD_TIMEOUT_MS },
    );
  } catch (err) {
    const old = [...(seen ?? [])].filter((p) => before.has(p));
    const last = !seen ? 'the workers could not be listed' : seen.size === 0 ? 'no worker process running' : `worker(s) ${old.join(', ')} still from before the reload`;
    throw new FleetrollError('E_NGINX_RELOAD', `${name}: nginx did not start new worker processes within ${RELOAD_TIMEOUT_MS / 1000} s of a reload (last seen: ${last})`, {
      cause: err,
      hint: "check nginx's error log",
    });
  }
  const end = Date.now();
  return { confirm: end - t0, ...(firstNew !== undefined && firstNew < end ? { handover: end - firstNew } : {}) };
}

const RELOAD_SETTLE_MS = 500;
// A bound for a reload that never takes, not a budget for a normal one (that
// takes 0.1-0.3 s): on a machine at load 20-30 `docker top` alone can take
// seconds, and a CI run once saw an old worker still listed 10 s after a
// reload that then went through.
const RELOAD_TIMEOUT_MS = 30_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
