/**
 * `Router` implementations for nginx: the upstream file is written, `nginx -t` checks
 * it, and a failed check puts the previous content back before throwing, so nginx's
 * on-disk config is never left broken. `reload()` is a separate step.
 *
 * - NginxContainerRouter: nginx in a container on a Docker host. The file goes in and
 *   out through Docker's archive API, or as a plain file where it lies in a bind mount
 *   of a container on this machine's engine (nginxPlace.ts containerFiles: 1-2 ms in
 *   place of 150-250 ms), and `nginx -t` / `nginx -s reload` run through `docker exec`.
 *   This works on images without a shell, cat, mv or rm (such as fleetroll/nginx-base),
 *   which is also why a file that did not exist before a failed write cannot be deleted
 *   again: it is left holding only a comment (see RESTORED_EMPTY).
 * - NginxExecRouter (nginxExec.ts): nginx on the machine running fleetroll.
 */
import { FleetrollError, type ErrorCode } from '../errors.js';
import type { ChangeParts, Router } from '../ports.js';
import { type DockerRuntime, execIn } from './docker.js';
import { statusOf } from './dockerRetry.js';
import { containerFiles, isLocalEngine } from './nginxPlace.js';
import { hupMaster, procWorkers } from './nginxProc.js';
import { type WorkerSnapshot, waitForNewWorkers, workerSnapshot } from './nginxWorkers.js';

/**
 * What NginxContainerRouter leaves in an upstream file that did not exist before a
 * write that failed `nginx -t`: the image may have no `rm`, and the archive API cannot
 * delete. A comment-only file is valid wherever it is included.
 */
export const RESTORED_EMPTY = '# fleetroll: this file did not exist before a write that failed `nginx -t`\n';

/** nginx's diagnostic lines, without the "syntax is ok"/"test is successful" noise. */
export function nginxLines(stderr: string, stdout = ''): string {
  const lines = `${stderr}\n${stdout}`
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return lines.length ? lines.join('\n') : '(no output)';
}

export function failure(code: ErrorCode, message: string, cause?: unknown, hint?: string): FleetrollError {
  const opts: { cause?: unknown; hint?: string } = {};
  if (cause !== undefined) opts.cause = cause;
  if (hint !== undefined) opts.hint = hint;
  return new FleetrollError(code, message, opts);
}

export interface NginxContainerRouterOptions {
  runtime: DockerRuntime;
  /** Name (or id) of the nginx container. */
  container: string;
  /** Absolute path of the upstream file inside the container; its directory must exist. */
  upstreamFile: string;
  /** Name of the Docker host, for messages. */
  hostName: string;
}

/** What reload() needs from before the write: the workers then, and whether the master is PID 1. */
interface Before {
  workers: Set<string>;
  masterIsInit: boolean;
}

/** nginx running in a container, driven through the Docker API. */
export class NginxContainerRouter implements Router {
  readonly name: string;
  private readonly runtime: DockerRuntime;
  private readonly container: string;
  private readonly upstreamFile: string;
  private readonly files: ReturnType<typeof containerFiles>;
  /**
   * The file as fleetroll last wrote (or read) it, with its mode: what a
   * failed `nginx -t` puts back. Kept so that a write is one archive PUT, not
   * a GET before it (each Docker call is tens of ms on the critical path of
   * every wave). Forgotten after anything that failed, so the next write
   * reads the file again.
   */
  private known: { content: string | undefined; mode: number } | undefined;
  /**
   * The workers before the coming reload, and whether nginx's master is the
   * container's init process, asked for while the file goes in and `nginx -t`
   * runs rather than after them: they then cost no time of their own. Taken
   * by the next reload().
   */
  private before: Promise<Before | undefined> | undefined;
  private beforeAskedAt = 0;

  constructor(opts: NginxContainerRouterOptions) {
    this.runtime = opts.runtime;
    this.container = opts.container;
    this.upstreamFile = opts.upstreamFile;
    this.files = containerFiles(opts.runtime, opts.container);
    this.name = `nginx ${opts.container} on ${opts.hostName}`;
  }

  private exec(args: string[]) {
    return execIn(this.runtime.docker, this.container, ['nginx', ...args]);
  }

  async check(): Promise<void> {
    const info = await this.runtime.inspect(this.container);
    if (!info) {
      throw failure(
        'E_NGINX_MISSING',
        `${this.name}: container ${this.container} does not exist`,
        undefined,
        `start it, or fix loadBalancers[].nginx.container`,
      );
    }
    if (!info.running) {
      throw failure(
        'E_NGINX_NOT_RUNNING',
        `${this.name}: container ${this.container} is ${info.state}, not running`,
        undefined,
        `docker start ${this.container}`,
      );
    }
    const r = await this.exec(['-t']);
    if (r.exitCode !== 0) {
      throw failure('E_NGINX_TEST', `${this.name}: the current configuration fails \`nginx -t\`:\n${nginxLines(r.stderr, r.stdout)}`);
    }
  }

  async read(): Promise<string | undefined> {
    const entry = await this.files.entry(this.upstreamFile);
    this.known = { content: entry?.content, mode: entry?.mode ?? 0o644 };
    return entry?.content;
  }

  async config(): Promise<string> {
    const r = await this.exec(['-T']);
    if (r.exitCode !== 0) throw failure('E_NGINX_TEST', `${this.name}: \`nginx -T\` failed:\n${nginxLines(r.stderr, r.stdout)}`);
    return r.stdout;
  }

  async writeAndTest(content: string): Promise<void> {
    this.before = this.snapshot();
    this.beforeAskedAt = Date.now();
    let previous: { content: string | undefined; mode: number };
    let r: Awaited<ReturnType<NginxContainerRouter['exec']>>;
    const t0 = Date.now();
    this.parts = undefined;
    try {
      if (this.known) previous = this.known;
      else {
        const entry = await this.files.entry(this.upstreamFile);
        previous = { content: entry?.content, mode: entry?.mode ?? 0o644 };
      }
      this.known = undefined;
      await this.files.write(this.upstreamFile, content, previous.mode);
      const t1 = Date.now();
      r = await this.exec(['-t']);
      this.parts = { file: t1 - t0, 'nginx -t': Date.now() - t1 };
    } catch (err) {
      this.before = undefined;
      throw err;
    }
    if (r.exitCode === 0) {
      this.known = { content, mode: previous.mode };
      return;
    }
    this.before = undefined;

    const restoreWith = previous.content ?? RESTORED_EMPTY;
    let restored = previous.content !== undefined ? 'the previous content was put back' : 'the file did not exist before; it now holds only a comment';
    try {
      await this.files.write(this.upstreamFile, restoreWith, previous.mode);
      this.known = { content: restoreWith, mode: previous.mode };
    } catch (err) {
      restored = `AND restoring the previous content failed: ${err instanceof Error ? err.message : String(err)}`;
    }
    throw failure('E_NGINX_TEST', `${this.name}: \`nginx -t\` rejected the new ${this.upstreamFile} (${restored}):\n${nginxLines(r.stderr, r.stdout)}`);
  }

  /**
   * The watch's eject (engine/watchEject.ts): a change that only marks servers
   * down in a configuration nginx runs now, written and reloaded with no
   * `nginx -t` before it. That test is a `docker exec` (about 120 ms here) of
   * the 250-400 ms users wait on while a dead instance is still listed, and it
   * guards nothing nginx does not guard itself: at a reload the master loads
   * the new configuration or keeps the one it runs, with its workers. So the
   * test runs only if no new worker shows within a second (nginx refused it,
   * or the machine is slow): when it fails, the file is put back and nginx's
   * message thrown, as writeAndTest does.
   */
  async writeAndReloadTrusted(content: string): Promise<void> {
    const t0 = Date.now();
    this.parts = undefined;
    const known = this.known;
    this.known = undefined;
    const [previous, before] = await Promise.all([
      known ?? this.files.entry(this.upstreamFile).then((e) => ({ content: e?.content, mode: e?.mode ?? 0o644 })),
      this.snapshot(),
    ]);
    await this.files.write(this.upstreamFile, content, previous.mode);
    this.parts = { file: Date.now() - t0 };
    this.before = Promise.resolve(before);
    this.beforeAskedAt = Date.now();
    const putBack = async (why: string): Promise<never> => {
      let restored = previous.content !== undefined ? 'the previous content was put back' : 'the file did not exist before; it now holds only a comment';
      try {
        await this.files.write(this.upstreamFile, previous.content ?? RESTORED_EMPTY, previous.mode);
      } catch (err) {
        restored = `AND restoring the previous content failed: ${err instanceof Error ? err.message : String(err)}`;
      }
      throw failure('E_NGINX_TEST', `${this.name}: nginx refused the new ${this.upstreamFile} (${restored}):\n${why}`);
    };
    await this.reload(async () => {
      const r = await this.exec(['-t']);
      if (r.exitCode !== 0) await putBack(nginxLines(r.stderr, r.stdout));
    });
    this.known = { content, mode: previous.mode };
  }

  /** The master's pid on this machine and its container's id, once seen to be the container's init on a local engine (nginxProc.ts). */
  private master: { pid: number; id: string } | undefined;

  /** The workers serving the current config, from /proc where it can, else `docker top`; undefined when neither answers. */
  private async workers(): Promise<WorkerSnapshot | undefined> {
    if (this.master !== undefined) {
      const local = await procWorkers(this.master.pid, this.master.id);
      if (local) return local;
      this.master = undefined;
    }
    try {
      const t = (await this.runtime.docker.getContainer(this.container).top({ ps_args: '-o pid,args' })) as { Titles: string[]; Processes: string[][] };
      return workerSnapshot(t.Titles, t.Processes);
    } catch {
      return undefined;
    }
  }

  /** The workers, and whether Docker's kill API reaches the master: its PID is the container's init PID. */
  private async snapshot(): Promise<Before | undefined> {
    const [w, container] = await Promise.all([
      this.workers(),
      this.runtime.docker
        .getContainer(this.container)
        .inspect()
        .then(
          (i) => ({ pid: i.State?.Pid, id: i.Id }),
          () => undefined,
        ),
    ]);
    const pid = container?.pid;
    const masterIsInit = !!w && w.master !== undefined && pid !== undefined && pid > 0 && w.master === String(pid);
    if (masterIsInit && isLocalEngine(this.runtime.endpoint) && container) this.master = { pid, id: container.id };
    return w && { workers: w.workers, masterIsInit };
  }

  /**
   * The master is told to reload with a SIGHUP when it is the container's
   * init process (nginx run in the foreground, as in the official image and
   * fleetroll/nginx-base): straight to its pid on a local engine where /proc
   * shows it is still that container's master (nginxProc.ts hupMaster), else
   * through Docker's kill API, one engine call (25-50 ms here) in place of an
   * exec of a second nginx, which parses the whole configuration again only
   * to find the master's pid (about 70 ms). `nginx -t` has already passed;
   * the signal is the one `nginx -s reload` sends. Otherwise (a shell or an
   * init in front of nginx) it execs `nginx -s reload`.
   */
  /** `refused`: asked once when no new worker shows within a second (writeAndReloadTrusted: was the new file refused?). */
  async reload(refused?: () => Promise<void>): Promise<void> {
    // A snapshot from a write long ago (a restore with no reload after it) is not trusted.
    const pending = Date.now() - this.beforeAskedAt < WORKERS_FRESH_MS ? this.before : undefined;
    this.before = undefined;
    const t0 = Date.now();
    const before = await (pending ?? this.snapshot());
    const t1 = Date.now();
    const how = before?.masterIsInit ? 'SIGHUP' : 'nginx -s reload';
    try {
      if (how === 'SIGHUP') {
        const sent = this.master !== undefined && (await hupMaster(this.master.pid, this.master.id));
        if (!sent) await this.runtime.docker.getContainer(this.container).kill({ signal: 'HUP' });
      } else {
        const r = await this.exec(['-s', 'reload']);
        if (r.exitCode !== 0)
          throw failure('E_NGINX_RELOAD', `${this.name}: \`nginx -s reload\` exited with ${r.exitCode}:\n${nginxLines(r.stderr, r.stdout)}`);
      }
    } catch (err) {
      this.known = undefined;
      if (err instanceof FleetrollError) throw err;
      const status = statusOf(err);
      const what =
        status === 404 ? 'does not exist' : status === 409 ? 'is not running' : `could not be signalled (${err instanceof Error ? err.message : String(err)})`;
      throw failure(
        'E_NGINX_RELOAD',
        `${this.name}: reloading nginx: container ${this.container} ${what}`,
        err,
        `docker start ${this.container}, then deploy again`,
      );
    }
    const t2 = Date.now();
    const done = await waitForNewWorkers(this.name, before?.workers, async () => (await this.workers())?.workers, refused);
    this.parts = { ...this.parts, workers: t1 - t0, [how]: t2 - t1, ...done };
  }

  /** The parts of the last change (ports.ts Router.lastChange). */
  private parts: ChangeParts | undefined;

  lastChange(): ChangeParts | undefined {
    return this.parts;
  }
}

const WORKERS_FRESH_MS = 5_000;
