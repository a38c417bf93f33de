/**
 * Assembling an image's root filesystem from this machine's binaries (the
 * running node, /usr/sbin/nginx): the binary, every shared library `ldd`
 * lists and the loader, /etc/passwd and /etc/group, /tmp (1777), then
 * `docker import`. What ./localImages.ts does where no official image can be
 * had; apart from it because it is file system work, not image choice.
 */
import { existsSync } from 'node:fs';
import { chmod, chown, copyFile, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { docker, run, type DockerCliOptions } from './localCommands.js';

/** Absolute paths of the shared libraries (and loader) `binary` needs, per `ldd`. */
async function sharedLibraries(binary: string): Promise<string[]> {
  const r = await run(`listing the libraries of ${binary}`, 'ldd', [binary], { env: { LC_ALL: 'C' }, allowFailure: true });
  if (r.exitCode !== 0) {
    if (/not a dynamic executable|statically linked/i.test(r.stdout + r.stderr)) return [];
    throw new Error(`listing the libraries of ${binary}: \`ldd ${binary}\` exited with ${r.exitCode}: ${r.stderr.trim()}`);
  }
  const libs: string[] = [];
  for (const line of r.stdout.split('\n')) {
    const t = line.trim();
    if (!t || /statically linked/.test(t)) continue;
    if (/=>\s*not found/.test(t)) throw new Error(`listing the libraries of ${binary}: missing library: ${t}`);
    // "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)"  or  "/lib64/ld-linux-x86-64.so.2 (0x...)"
    const m = /=>\s*(\/\S+)/.exec(t) ?? /^(\/\S+)/.exec(t);
    if (m?.[1]) libs.push(m[1]);
    // else: linux-vdso.so.1 (provided by the kernel)
  }
  return [...new Set(libs)];
}

/** Copy `binary` to `target` inside root, plus every library at the path ldd reports (symlinks resolved). */
export async function addBinaryWithLibs(root: string, binary: string, target: string): Promise<void> {
  const dest = path.join(root, target);
  await mkdir(path.dirname(dest), { recursive: true });
  await copyFile(binary, dest);
  await chmod(dest, 0o755);
  for (const lib of await sharedLibraries(binary)) {
    const libDest = path.join(root, lib);
    if (existsSync(libDest)) continue;
    await mkdir(path.dirname(libDest), { recursive: true });
    await copyFile(lib, libDest); // follows symlinks: the loader at /lib64/... becomes a real file
    await chmod(libDest, 0o755);
  }
}

export interface User {
  name: string;
  uid: number;
  gid: number;
  home: string;
}

export async function writeUsers(root: string, users: User[], extraGroups: { name: string; gid: number }[] = []): Promise<void> {
  await mkdir(path.join(root, 'etc'), { recursive: true });
  const passwd = users.map((u) => `${u.name}:x:${u.uid}:${u.gid}:${u.name}:${u.home}:/sbin/nologin`).join('\n') + '\n';
  const groups = [...users.map((u) => ({ name: u.name, gid: u.gid })), ...extraGroups];
  const group = groups.map((g) => `${g.name}:x:${g.gid}:`).join('\n') + '\n';
  await writeFile(path.join(root, 'etc/passwd'), passwd);
  await writeFile(path.join(root, 'etc/group'), group);
  await writeFile(path.join(root, 'etc/nsswitch.conf'), 'passwd: files\ngroup: files\nhosts: files dns\n');
  const tmp = path.join(root, 'tmp');
  await mkdir(tmp, { recursive: true });
  await chmod(tmp, 0o1777);
  const amRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  for (const u of users) {
    const home = path.join(root, u.home);
    await mkdir(home, { recursive: true });
    if (u.uid === 0) await chmod(home, 0o700);
    else if (amRoot) await chown(home, u.uid, u.gid);
    else await chmod(home, 0o1777); // tar below maps every owner to root
  }
}

/** Tar `root` (owned by root in the image) and `docker import` it as `tag`. */
export async function importRootfs(opts: DockerCliOptions, dir: string, root: string, tag: string, changes: string[]): Promise<void> {
  const tarFile = path.join(dir, 'rootfs.tar');
  const amRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  const ownerArgs = amRoot ? ['--numeric-owner'] : ['--owner=0', '--group=0', '--numeric-owner'];
  await run(`creating the rootfs tar for ${tag}`, 'tar', ['--create', '--file', tarFile, '--directory', root, ...ownerArgs, '.'], { env: { LC_ALL: 'C' } });
  const args = ['import'];
  for (const c of changes) args.push('--change', c);
  args.push('--message', 'fleetroll local base image (host binaries, no registry)', tarFile, tag);
  await docker(opts, `importing ${tag}`, args);
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'fleetroll-image-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
