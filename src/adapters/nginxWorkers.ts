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
  const workers = new Set(processes.filter((p) => /nginx: worker process\s*$/.test(p[args] ?? '') && (parent?.(p) ?? true)).map((p) => p[pid] ?? ''));
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
 * The pause before the next look at the workers. Until a new worker shows,
 * a short one (the master forks them as soon as it has read the
 * configuration), growing slowly so that a reload that hangs on a busy engine
 * does not become a stream of `docker top` calls. Once one shows, the old
 * workers cannot retire before nginx's 100 ms hold is over, so looking in
 * the meantime only costs the engine work: the next look comes near the end
 * of the hold, and then every 10 ms, so the wait ends within 10 ms of the
 * switch (a growing back-off there overshot it by 30-70 ms).
 */
export function nextLook(sinceStart: number, sinceFirstNew: number | undefined): number {
  if (sinceFirstNew !== undefined) return Math.max(LOOK_MS, HOLD_MS - HOLD_SLACK_MS - sinceFirstNew);
  return Math.min(100, LOOK_MS + Math.floor(sinceStart / 20));
}

const LOOK_MS = 10;
/** nginx's `ngx_msleep(100)` between starting the new workers and retiring the old. */
const HOLD_MS = 100;
/** How early to look before the hold can be over: the first new worker may have shown late in a look. */
const HOLD_SLACK_MS = 20;

/**
 * Waits until every worker is a new one (nextLook paces the looks), for at
 * most RELOAD_TIMEOUT_MS. With no workers to compare (the listing is
 * unavailable) it gives the master a fixed moment instead.
 */
export async function waitForNewWorkers(
  name: string,
  before: Set<string> | undefined,
  now: () => Promise<Set<string> | undefined>,
  refused?: () => Promise<void>,
): Promise<Confirmed> {
  const t0 = Date.now();
  if (!before || before.size === 0) {
    await sleep(RELOAD_SETTLE_MS);
    await refused?.();
    return { confirm: Date.now() - t0 };
  }
  let seen: Set<string> | undefined;
  let firstNew: number | undefined;
  let asked = false;
  for (;;) {
    let failed: unknown;
    try {
      seen = await now();
    } catch (err) {
      failed = err;
      seen = undefined;
    }
    const at = Date.now();
    if (seen && [...seen].some((p) => !before.has(p))) firstNew ??= at;
    if (seen && seen.size > 0 && ![...seen].some((p) => before.has(p))) break;
    // No new worker yet: nginx may have refused the configuration (it then keeps the old workers for good).
    if (refused && !asked && firstNew === undefined && at - t0 >= REFUSED_AFTER_MS) {
      asked = true;
      await refused();
    }
    if (at - t0 >= RELOAD_TIMEOUT_MS) {
      const old = [...(seen ?? [])].filter((p) => before.has(p));
      const last = !seen
        ? 'the workers could not be listed'
        : seen.size === 0
          ? 'no worker process running'
          : `worker(s) ${old.join(', ')} still from before the reload`;
      throw new FleetrollError(
        'E_NGINX_RELOAD',
        `${name}: nginx did not start new worker processes within ${RELOAD_TIMEOUT_MS / 1000} s of a reload (last seen: ${last})`,
        {
          ...(failed !== undefined ? { cause: failed } : {}),
          hint: "check nginx's error log",
        },
      );
    }
    await sleep(nextLook(at - t0, firstNew === undefined ? undefined : at - firstNew));
  }
  const end = Date.now();
  return { confirm: end - t0, ...(firstNew !== undefined && firstNew < end ? { handover: end - firstNew } : {}) };
}

const RELOAD_SETTLE_MS = 500;
/** A reload whose first new worker has not shown by then is asked whether nginx refused it (a normal one shows in 10-50 ms). */
const REFUSED_AFTER_MS = 1_000;
// A bound for a reload that never takes, not a budget for a normal one (that
// takes 0.1-0.3 s): on a machine at load 20-30 `docker top` alone can take
// seconds, and a CI run once saw an old worker still listed 10 s after a
// reload that then went through.
const RELOAD_TIMEOUT_MS = 30_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
