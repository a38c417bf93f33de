/**
 * Where an nginx runs, as fleetroll reaches it: its binary (argument arrays,
 * never a shell) and its files. In a container: `docker exec` and Docker's
 * archive API, or plain files where they lie in a bind mount of a container
 * on this machine's engine; on this machine (`exec: true`): the binary and
 * the files themselves.
 */
import { chmod, chown, lstat, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { FleetrollError } from '../errors.js';
import { type DockerRuntime, execIn, getFileEntry, putFile } from './docker.js';

/** How fleetroll reaches one nginx: its binary and its files. */
export interface NginxPlace {
  /** Human name for messages, e.g. "nginx lb on local". */
  readonly name: string;
  nginx(args: string[]): Promise<{ ok: boolean; output: string; stdout: string }>;
  read(file: string): Promise<string | undefined>;
  write(file: string, text: string): Promise<void>;
}

/** A file's text and its permission bits. */
export interface FileEntry {
  content: string;
  mode: number;
}

/**
 * Files on this machine: read as they are (a symlink is not followed: the
 * directory may be shared with a container), written aside with O_EXCL and
 * renamed over, so nginx (or the Lua) never reads half a file and nothing
 * is written through a link. A file written over keeps its mode and owner.
 */
export const hostFiles = {
  async entry(file: string): Promise<FileEntry | undefined> {
    try {
      const st = await lstat(file);
      if (st.isSymbolicLink()) throw new FleetrollError('E_NGINX_FILE', `${file} is a symbolic link: fleetroll reads only a file it wrote`);
      return { content: await readFile(file, 'utf8'), mode: st.mode & 0o7777 };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  },
  async write(file: string, text: string, mode = 0o644): Promise<void> {
    const tmp = path.join(path.dirname(file), `.${path.basename(file)}.fleetroll-${process.pid}-${randomBytes(4).toString('hex')}.tmp`);
    try {
      const old = await lstat(file).catch(() => undefined);
      await writeFile(tmp, text, { mode, flag: 'wx' });
      await chmod(tmp, mode);
      // Written as whoever runs fleetroll: the owner of the file it replaces stays, where it may be given.
      if (old && !old.isSymbolicLink()) await chown(tmp, old.uid, old.gid).catch(() => {});
      await rename(tmp, file);
    } catch (err) {
      await unlink(tmp).catch(() => {});
      throw err;
    }
  },
};

const localFiles: Pick<NginxPlace, 'read' | 'write'> = {
  read: async (file) => (await hostFiles.entry(file))?.content,
  write: (file, text) => hostFiles.write(file, text),
};

/** A bind mount of a container, as `docker inspect` lists it. */
export interface BindMount {
  Type?: string;
  Source?: string;
  Destination?: string;
}

/**
 * Where `file` (a path inside the container) is on this machine, when it lies
 * in a bind mount of a container on this machine's engine: the peers file is
 * then written and the status read as plain files (well under a millisecond),
 * not through Docker's archive API (100-300 ms a call on a busy 2-core
 * machine), so a change is in force within the Lua's 10 ms tick.
 */
export function hostPathOf(file: string, mounts: readonly BindMount[]): string | undefined {
  for (const m of mounts) {
    if (m.Type !== 'bind' || !m.Source || !m.Destination) continue;
    const dest = m.Destination.replace(/\/+$/, '');
    if (!file.startsWith(`${dest}/`)) continue;
    const rest = file.slice(dest.length + 1);
    if (rest.split('/').some((p) => p === '..' || p === '')) continue;
    return path.posix.join(m.Source, rest);
  }
  return undefined;
}

/** The engine at this socket runs on this machine: its bind mounts' sources are this machine's paths. */
export function isLocalEngine(endpoint: string): boolean {
  return endpoint.startsWith('unix://');
}

/** How long a container's mounts are taken as known: the changes of one rollout come well within it. */
const MOUNTS_FRESH_MS = 10_000;

/**
 * A container's files as fleetroll reaches them: directly where the file lies
 * in a bind mount of a container on this machine's engine (hostPathOf),
 * otherwise through Docker's archive API. The mounts are asked for once.
 */
export function containerFiles(
  runtime: DockerRuntime,
  container: string,
): {
  entry(file: string): Promise<FileEntry | undefined>;
  write(file: string, text: string, mode?: number): Promise<void>;
} {
  const docker = runtime.docker;
  let mounts: Promise<readonly BindMount[]> | undefined;
  let askedAt = 0;
  const onHost = async (file: string): Promise<string | undefined> => {
    if (!isLocalEngine(runtime.endpoint)) return undefined;
    // Asked again after a quiet spell: a `watch` lives for days, and a container recreated under the same name may mount otherwise.
    if (!mounts || Date.now() - askedAt > MOUNTS_FRESH_MS) {
      askedAt = Date.now();
      mounts = docker
        .getContainer(container)
        .inspect()
        .then(
          (i) => (i.Mounts ?? []) as BindMount[],
          () => [],
        );
    }
    return hostPathOf(file, await mounts);
  };
  return {
    entry: async (file) => {
      const local = await onHost(file);
      if (local !== undefined) return hostFiles.entry(local);
      const e = await getFileEntry(docker, container, file);
      return e && { content: e.content.toString('utf8'), mode: e.mode & 0o7777 };
    },
    write: async (file, text, mode = 0o644) => {
      const local = await onHost(file);
      return local !== undefined ? hostFiles.write(local, text, mode) : putFile(docker, container, file, text, mode);
    },
  };
}

/** nginx in a container: `docker exec nginx ...`, and its files as containerFiles reaches them. */
export function containerPlace(runtime: DockerRuntime, container: string, hostName: string): NginxPlace {
  const files = containerFiles(runtime, container);
  return {
    name: `nginx ${container} on ${hostName}`,
    nginx: async (args) => {
      const r = await execIn(runtime.docker, container, ['nginx', ...args]);
      return { ok: r.exitCode === 0, output: `${r.stderr}\n${r.stdout}`.trim() || '(no output)', stdout: r.stdout };
    },
    read: async (file) => (await files.entry(file))?.content,
    write: (file, text) => files.write(file, text),
  };
}

/** nginx on this machine: its binary with argument arrays, and its files as they are. */
export function execPlace(o: { nginxBin?: string; prefixArgs?: string[]; name?: string }): NginxPlace {
  const bin = o.nginxBin ?? '/usr/sbin/nginx';
  const prefix = o.prefixArgs ?? [];
  return {
    name: o.name ?? 'nginx on this machine',
    nginx: async (args) => {
      const { execa } = await import('execa');
      const r = await execa(bin, [...prefix, ...args], { reject: false, stdin: 'ignore', timeout: 30_000 });
      return {
        ok: !r.failed && r.exitCode === 0,
        output: `${String(r.stderr ?? '')}\n${String(r.stdout ?? '')}`.trim() || `could not run ${bin}`,
        stdout: String(r.stdout ?? ''),
      };
    },
    ...localFiles,
  };
}
