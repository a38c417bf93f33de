/**
 * The upstream file of every load balancer, written all-or-nothing: every
 * changed file is written and checked before any nginx reloads; if one check
 * fails, the files already written are put back (and the caller reloads
 * nothing). A router that reads servers gets them as a list, with what
 * changed since its last file; a real nginx gets the rendered text.
 */
import { listsOnlyServers, renderUpstream, type StickyKey, type UpstreamEntry, type UpstreamInput } from '../core/upstream.js';
import { RolloutFailedError } from '../errors.js';
import type { Router, UpstreamFile } from '../ports.js';
import { sameEntry, type UpstreamList } from './upstreamList.js';

/** A load balancer: how to reach it, and what to write into its upstream file. */
export interface LoadBalancer {
  router: Router;
  /** Upstream file template (templates/upstream.conf.tmpl or the fleet's own). */
  template: string;
  upstream: string;
}

/** What a file has besides its servers. */
export type FileParts = Pick<UpstreamInput, 'preview' | 'hash' | 'force'>;

/** A version of the controller's list. */
export interface ListVersion {
  list: UpstreamList;
  version: number;
}

/** A file written (or read at the start): its text on demand, and for a router that reads servers, what it lists. */
interface WrittenFile extends Partial<UpstreamFile> {
  text(): string;
  hash?: StickyKey | undefined;
  /** The controller's list the servers are a version of. */
  list?: UpstreamList | undefined;
  version?: number | undefined;
}

function put(r: Router, f: WrittenFile): Promise<void> {
  return r.writeServers && f.servers ? r.writeServers(f as UpstreamFile) : r.writeAndTest(f.text());
}

/** A takedown (`trusted`) goes in through writeAndReloadTrusted where the router has it: true when it is then in force already. */
async function putTrusted(r: Router, f: WrittenFile): Promise<boolean> {
  if (r.writeServers && f.servers) await r.writeServers(f as UpstreamFile);
  else if (r.writeAndReloadTrusted) {
    await r.writeAndReloadTrusted(f.text());
    return true;
  } else await r.writeAndTest(f.text());
  return false;
}

/**
 * Whether two files have the same text. Two lists of servers under the same
 * template and hash line render alike exactly when their entries are equal
 * (every field reaches the file), so those are compared without rendering;
 * two versions of the controller's list, by version, unless a server's state
 * is known to have changed (`changed`: then they differ).
 */
function sameFile(a: WrittenFile, b: WrittenFile | undefined, changed: boolean): boolean {
  if (b === undefined) return false;
  if (a.list !== undefined && a.list === b.list && a.hash === b.hash) {
    if (a.version === b.version) return true;
    if (changed) return false;
  }
  if (a.servers && b.servers && a.hash === b.hash) {
    const [x, y] = [a.servers(), b.servers()];
    if (x.length !== y.length) return false;
    for (let i = 0; i < x.length; i++) if (!sameEntry(x[i]!, y[i]!)) return false;
    return true;
  }
  return a.text() === b.text();
}

export class UpstreamFiles {
  /** What each file holds, as far as the engine knows: what it read at the start, then what it wrote. */
  private readonly last: (WrittenFile | undefined)[] = [];

  constructor(private readonly o: { service: string; balancers: readonly LoadBalancer[]; restored: () => void }) {}

  /** Reads every load balancer's file: its text, undefined where there is none yet. */
  async read(): Promise<(string | undefined)[]> {
    const contents: (string | undefined)[] = [];
    for (const lb of this.o.balancers) {
      const content = await lb.router.read();
      contents.push(content);
      this.last.push(content === undefined ? undefined : { text: () => content });
    }
    return contents;
  }

  /**
   * Writes and checks every changed file, every load balancer at once (each
   * is its own nginx: one's Docker calls need not wait for another's); on a
   * failed check restores the ones written and throws. Returns the indexes
   * written, and those already reloaded: with `trusted` (a change that only
   * takes out servers whose containers are gone), a router that can writes
   * and reloads at once, with `nginx -t` only if nginx refuses it
   * (Router.writeAndReloadTrusted): every ms of it, users' requests go to a
   * dead address.
   */
  async writeAll(
    servers: () => readonly UpstreamEntry[],
    parts: FileParts,
    of: ListVersion | undefined,
    changed: boolean,
    trusted = false,
  ): Promise<{ written: number[]; reloaded: ReadonlySet<number> }> {
    const lbs = this.o.balancers;
    const files = lbs.map((lb) => this.file(lb, servers, parts, of));
    const todo = lbs.map((_, i) => i).filter((i) => !sameFile(files[i]!, this.last[i], changed));
    const reloaded = new Set<number>();
    const results = await Promise.allSettled(
      todo.map(async (i) => {
        if (!trusted) return put(lbs[i]!.router, files[i]!);
        if (await putTrusted(lbs[i]!.router, files[i]!)) reloaded.add(i);
      }),
    );
    const written = todo.filter((_, k) => results[k]!.status === 'fulfilled');
    const k = results.findIndex((r) => r.status === 'rejected');
    if (k >= 0) {
      const err = (results[k] as PromiseRejectedResult).reason as unknown;
      await Promise.all(
        written.map(async (j) => {
          const prev = this.last[j];
          const lb = lbs[j];
          if (prev === undefined || !lb) return;
          await put(lb.router, prev).catch(() => {});
          // Already in force there: the previous file goes back in force too, so that every nginx serves the same servers.
          if (reloaded.has(j)) await lb.router.reload().catch(() => {});
        }),
      );
      this.o.restored();
      throw new RolloutFailedError(
        `${lbs[todo[k]!]!.router.name}: the new upstream failed nginx -t; every upstream file was restored and nothing was reloaded:\n${err instanceof Error ? err.message : String(err)}`,
        'nginx keeps serving its previous config. Fix the nginx config or the upstream template, then deploy again: the rollout continues from where it stopped.',
        { nginxTestFailed: true },
      );
    }
    for (const i of written) this.last[i] = files[i];
    return { written, reloaded };
  }

  /** What each file held before a write: for restoring the ones a failed change had already put in force. */
  snapshot(): readonly (WrittenFile | undefined)[] {
    return [...this.last];
  }

  /**
   * Puts `previous` back in force on these load balancers (write and
   * reload): the dynamic mode's all-or-nothing when another one could not
   * confirm the change. Returns the names it could not restore.
   */
  async restore(indexes: readonly number[], previous: readonly (WrittenFile | undefined)[]): Promise<string[]> {
    const failed: string[] = [];
    await Promise.all(
      indexes.map(async (i) => {
        const lb = this.o.balancers[i];
        const prev = previous[i];
        if (!lb || !prev) return;
        try {
          await put(lb.router, prev);
          await lb.router.reload();
          this.last[i] = prev;
        } catch {
          failed.push(lb.router.name);
        }
      }),
    );
    return failed;
  }

  /** A load balancer's file for these parts: rendered now for a real nginx, on demand for one that reads servers. */
  private file(lb: LoadBalancer, servers: () => readonly UpstreamEntry[], parts: FileParts, of: ListVersion | undefined): WrittenFile {
    const render = () => renderUpstream(lb.template, { service: this.o.service, upstream: lb.upstream, servers: servers(), ...parts });
    if (!lb.router.writeServers || !listsOnlyServers(lb.template, parts)) {
      const text = render();
      return { text: () => text };
    }
    let text: string | undefined;
    return {
      text: () => (text ??= render()),
      servers,
      hash: parts.hash,
      list: of?.list,
      version: of?.version,
      changesSince: (earlier) => {
        const e = earlier as WrittenFile;
        if (of === undefined || e.list !== of.list || e.version === undefined || e.version > of.version) return undefined;
        return of.list.changes(e.version, of.version);
      },
    };
  }
}
