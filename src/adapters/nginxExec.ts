/**
 * NginxExecRouter: nginx on the machine running fleetroll, driven with its own
 * binary. The upstream file is written to a temp file in the same directory
 * and renamed over the old one (atomic); the binary runs with argument
 * arrays, never through a shell. Its sibling for nginx in a container is
 * NginxContainerRouter (./nginx.ts).
 */
import { readFile, stat, unlink } from 'node:fs/promises';
import path from 'node:path';
import { FleetrollError } from '../errors.js';
import type { ChangeParts, Router } from '../ports.js';
import { failure, nginxLines } from './nginx.js';
import { hostFiles } from './nginxPlace.js';
import { waitForNewWorkers, workerSnapshot } from './nginxWorkers.js';

export interface NginxExecRouterOptions {
  /** Absolute path of the upstream file on this machine. */
  upstreamFile: string;
  /** nginx binary (default /usr/sbin/nginx). */
  nginxBin?: string;
  /** Arguments before `-t` / `-s reload`, e.g. `['-c', '/tmp/x/nginx.conf', '-p', '/tmp/x/']`. */
  prefixArgs?: string[];
  /** Name for messages (default "nginx on this machine (<upstreamFile>)"). */
  name?: string;
}

/** nginx on the machine running fleetroll, driven with its own binary. */
export class NginxExecRouter implements Router {
  readonly name: string;
  private readonly upstreamFile: string;
  private readonly nginxBin: string;
  private readonly prefixArgs: string[];

  constructor(opts: NginxExecRouterOptions) {
    if (!path.isAbsolute(opts.upstreamFile)) {
      throw new FleetrollError('E_INVALID', `upstreamFile must be an absolute path, got ${JSON.stringify(opts.upstreamFile)}`);
    }
    this.upstreamFile = opts.upstreamFile;
    this.nginxBin = opts.nginxBin ?? '/usr/sbin/nginx';
    this.prefixArgs = opts.prefixArgs ?? [];
    this.name = opts.name ?? `nginx on this machine (${opts.upstreamFile})`;
  }

  private async nginx(args: string[]): Promise<{ ok: boolean; exitCode: number | undefined; output: string; stdout: string; command: string }> {
    const all = [...this.prefixArgs, ...args];
    const command = [this.nginxBin, ...all].join(' ');
    const { execa } = await import('execa');
    const r = await execa(this.nginxBin, all, { reject: false, stdin: 'ignore', timeout: 30_000 });
    const output =
      r.exitCode === undefined && !r.stderr && !r.stdout
        ? `could not run: ${(r.cause as NodeJS.ErrnoException | undefined)?.code ?? r.shortMessage}`
        : nginxLines(String(r.stderr ?? ''), String(r.stdout ?? ''));
    return { ok: !r.failed && r.exitCode === 0, exitCode: r.exitCode, output, stdout: String(r.stdout ?? ''), command };
  }

  async check(): Promise<void> {
    const r = await this.nginx(['-t']);
    if (!r.ok) throw failure('E_NGINX_TEST', `${this.name}: \`${r.command}\` failed:\n${r.output}`);
  }

  async config(): Promise<string> {
    const r = await this.nginx(['-T']);
    if (!r.ok) throw failure('E_NGINX_TEST', `${this.name}: \`${r.command}\` failed:\n${r.output}`);
    return r.stdout;
  }

  async read(): Promise<string | undefined> {
    try {
      return await readFile(this.upstreamFile, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw failure('E_NGINX_FILE', `${this.name}: reading ${this.upstreamFile}: ${(err as Error).message}`, err);
    }
  }

  /** Write via a temp file in the same directory + rename. The temp name ends in `.tmp` so `*.conf` includes never see it. */
  private async atomicWrite(content: string, mode: number): Promise<void> {
    try {
      await hostFiles.write(this.upstreamFile, content, mode);
    } catch (err) {
      throw failure('E_NGINX_FILE', `${this.name}: writing ${this.upstreamFile}: ${(err as Error).message}`, err);
    }
  }

  async writeAndTest(content: string): Promise<void> {
    const t0 = Date.now();
    this.parts = undefined;
    const previous = await this.read();
    let mode = 0o644;
    if (previous !== undefined) mode = (await stat(this.upstreamFile).catch(() => undefined))?.mode ?? mode;
    await this.atomicWrite(content, mode & 0o7777);
    const t1 = Date.now();
    const r = await this.nginx(['-t']);
    this.parts = { file: t1 - t0, 'nginx -t': Date.now() - t1 };
    if (r.ok) return;

    let restored = previous === undefined ? 'the new file was removed again' : 'the previous content was put back';
    try {
      if (previous === undefined) await unlink(this.upstreamFile);
      else await this.atomicWrite(previous, mode & 0o7777);
    } catch (err) {
      restored = `AND restoring the previous state failed: ${err instanceof Error ? err.message : String(err)}`;
    }
    throw failure('E_NGINX_TEST', `${this.name}: \`${r.command}\` rejected the new ${this.upstreamFile} (${restored}):\n${r.output}`);
  }

  /**
   * Workers of this nginx, from `ps`: children of the one master whose
   * command line carries our prefix arguments (-c/-p), undefined when that
   * master cannot be told apart from others on the machine.
   */
  private async workers(): Promise<Set<string> | undefined> {
    const { execa } = await import('execa');
    const r = await execa('ps', ['-eo', 'pid,ppid,args'], { reject: false, stdin: 'ignore' });
    if (r.exitCode !== 0) return undefined;
    const rows = String(r.stdout)
      .split('\n')
      .slice(1)
      .map((l) => /^\s*(\d+)\s+(\d+)\s+(.*)$/.exec(l))
      .filter((m): m is RegExpExecArray => m !== null)
      .map((m) => [m[1] ?? '', m[2] ?? '', m[3] ?? '']);
    const masters = rows.filter((p) => (p[2] ?? '').startsWith('nginx: master process') && this.prefixArgs.every((a) => (p[2] ?? '').includes(a)));
    if (masters.length !== 1) return undefined;
    const master = masters[0]?.[0];
    return workerSnapshot(['PID', 'PPID', 'ARGS'], rows, (p) => p[1] === master).workers;
  }

  async reload(): Promise<void> {
    const t0 = Date.now();
    const before = await this.workers();
    const t1 = Date.now();
    const r = await this.nginx(['-s', 'reload']);
    if (!r.ok) {
      throw failure('E_NGINX_RELOAD', `${this.name}: \`${r.command}\` failed:\n${r.output}`, undefined, 'is the nginx master running (its pid file present)?');
    }
    const t2 = Date.now();
    const done = await waitForNewWorkers(this.name, before, () => this.workers());
    this.parts = { ...this.parts, workers: t1 - t0, 'nginx -s reload': t2 - t1, ...done };
  }

  /** The parts of the last change (ports.ts Router.lastChange). */
  private parts: ChangeParts | undefined;

  lastChange(): ChangeParts | undefined {
    return this.parts;
  }
}
