/**
 * Build the images fleetroll's examples and tests need WITHOUT a container registry.
 *
 * On a machine with no registry access there is no `node:20-alpine` or `nginx` to pull.
 * Instead we assemble a tiny root filesystem from binaries already on this host (the
 * running `node`, `/usr/sbin/nginx`) plus every shared library `ldd` lists and the
 * dynamic loader, and `docker import` it (./rootfs.ts). The example app is then built FROM that base
 * with the legacy builder (`DOCKER_BUILDKIT=0`: the docker CLI here has no buildx).
 *
 * Where an official image is already present locally (e.g. `node:20-alpine` on a
 * developer laptop) it is preferred; a registry is never required.
 *
 * All commands run through execa with argument arrays (no shell; ./localCommands.ts). Every function is
 * idempotent: an existing, up-to-date tag is reused.
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdir, readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LABELS } from '../ports.js';
import { binaryVersion, docker, imageExists, type DockerCliOptions } from './localCommands.js';
import { addBinaryWithLibs, importRootfs, withTempDir, writeUsers } from './rootfs.js';

export type { DockerCliOptions };

export interface BaseImageOptions extends DockerCliOptions {
  /** Tag to produce (default `fleetroll/node-base:<node version>` / `fleetroll/nginx-base:<nginx version>`). */
  tag?: string;
  /**
   * Official images to use instead when one of them already exists locally.
   * `true` (default) = the built-in list; `false` or `[]` = always build from the host.
   */
  preferOfficial?: boolean | string[];
  /** Rebuild even when the tag exists. */
  force?: boolean;
  /**
   * When no local image fits, try `docker pull` of the first official image
   * before assembling one from this host (default true). Without a registry
   * the pull fails at once and the host's binaries are used.
   */
  pull?: boolean;
}

export interface NodeBaseImageOptions extends BaseImageOptions {
  /** Node binary to package (default `process.execPath`). */
  nodeBinary?: string;
}

export interface NginxBaseImageOptions extends BaseImageOptions {
  /** nginx binary to package (default `/usr/sbin/nginx`). */
  nginxBinary?: string;
  /**
   * With nginx's Lua module, lua-resty-core and fleetroll's Lua balancer (at
   * /etc/nginx/fleetroll/fleetroll.lua), for the dynamic mode: always
   * assembled from this machine's packages (an official nginx has no Lua),
   * tagged `fleetroll/nginx-lua:<nginx version>-<hash of the Lua file>` so a
   * changed balancer makes a new image.
   */
  lua?: boolean;
}

/** Where Debian's Lua module and its Lua libraries are (libnginx-mod-http-lua, lua-resty-core). */
const LUA_MODULES = ['/usr/lib/nginx/modules/ndk_http_module.so', '/usr/lib/nginx/modules/ngx_http_lua_module.so'];
const LUA_SHARE = '/usr/share/lua/5.1';
export const FLEETROLL_LUA = new URL('../../templates/fleetroll.lua', import.meta.url);

export interface BuildAppImageOptions extends DockerCliOptions {
  /** APP_VERSION baked into the image (what /api/version reports). */
  version: string;
  /** Base image with `node` on PATH (default: the result of `ensureNodeBaseImage()`). */
  base?: string;
  /** Image tag (default `fleetroll-example:<version>`). */
  tag?: string;
  /** Build context holding Dockerfile + server.mjs (default: the repository's `examples/app`). */
  contextDir?: string;
  /** Rebuild even when the tag exists and is up to date. */
  force?: boolean;
}

const DEFAULT_NODE_OFFICIAL = ['node:20-alpine', 'node:20-slim', 'node:20'];
const DEFAULT_NGINX_OFFICIAL = ['nginx:stable-alpine', 'nginx:alpine', 'nginx:stable', 'nginx:latest'];
const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

// ---------------------------------------------------------------------------------------
// public API

/**
 * Ensure a base image with `node` on PATH, a uid-1000 user `node`, /tmp (1777).
 * Returns the tag to build FROM: a local official image when present (see
 * `preferOfficial`), otherwise `fleetroll/node-base:<node version>` assembled from this
 * host's node binary.
 */
export async function ensureNodeBaseImage(opts: NodeBaseImageOptions = {}): Promise<string> {
  const log = opts.log ?? (() => {});
  const official = await findOfficial(opts, DEFAULT_NODE_OFFICIAL);
  if (official) {
    log(`using local official image ${official} as the node base`);
    return official;
  }
  const nodeBinary = opts.nodeBinary ?? process.execPath;
  const version = opts.nodeBinary ? await binaryVersion(nodeBinary, ['--version'], /v?(\d+\.\d+\.\d+)/) : process.versions.node;
  const tag = opts.tag ?? `fleetroll/node-base:${version}`;
  if (!opts.force && (await imageExists(tag, opts))) {
    log(`${tag} already exists`);
    return tag;
  }
  const pulled = await tryPull(opts, DEFAULT_NODE_OFFICIAL[0]);
  if (pulled) return pulled;
  log(`building ${tag} from ${nodeBinary}`);
  await withTempDir(async (dir) => {
    const root = path.join(dir, 'rootfs');
    await mkdir(root);
    await addBinaryWithLibs(root, nodeBinary, '/usr/local/bin/node');
    await writeUsers(root, [
      { name: 'root', uid: 0, gid: 0, home: '/root' },
      { name: 'node', uid: 1000, gid: 1000, home: '/home/node' },
    ]);
    await importRootfs(opts, dir, root, tag, [`ENV ${PATH_ENV}`, `LABEL ${LABELS.image}=node-base`, 'CMD ["node"]']);
  });
  log(`built ${tag}`);
  return tag;
}

/**
 * Ensure an nginx image: default command `nginx -g 'daemon off;' -c /etc/nginx/nginx.conf`,
 * whose default config includes `/etc/nginx/conf.d/*.conf` inside `http {}` (like the
 * official image). Access log goes to stdout, errors to stderr. Returns the tag: a local
 * official nginx image when present (see `preferOfficial`), otherwise
 * `fleetroll/nginx-base:<nginx version>` assembled from this host's nginx binary.
 */
export async function ensureNginxBaseImage(opts: NginxBaseImageOptions = {}): Promise<string> {
  const log = opts.log ?? (() => {});
  const official = opts.lua ? undefined : await findOfficial(opts, DEFAULT_NGINX_OFFICIAL);
  if (official) {
    log(`using local official image ${official} as the nginx base`);
    return official;
  }
  const nginxBinary = opts.nginxBinary ?? '/usr/sbin/nginx';
  if (!existsSync(nginxBinary)) {
    throw new Error(`building the nginx base image: ${nginxBinary} not found (install nginx-light, see scripts/setup-host.sh)`);
  }
  const version = await binaryVersion(nginxBinary, ['-v'], /nginx\/(\d+\.\d+\.\d+)/);
  const lua = opts.lua ? await readFile(FLEETROLL_LUA) : undefined;
  if (lua) {
    const missing = [...LUA_MODULES, LUA_SHARE].filter((f) => !existsSync(f));
    if (missing.length)
      throw new Error(`building the nginx image with Lua: ${missing.join(', ')} not found (apt-get install libnginx-mod-http-lua, see scripts/setup-host.sh)`);
  }
  const tag =
    opts.tag ?? (lua ? `fleetroll/nginx-lua:${version}-${createHash('sha256').update(lua).digest('hex').slice(0, 12)}` : `fleetroll/nginx-base:${version}`);
  if (!opts.force && (await imageExists(tag, opts))) {
    log(`${tag} already exists`);
    return tag;
  }
  const pulled = lua ? undefined : await tryPull(opts, DEFAULT_NGINX_OFFICIAL[0]);
  if (pulled) return pulled;
  log(`building ${tag} from ${nginxBinary}`);
  await withTempDir(async (dir) => {
    const root = path.join(dir, 'rootfs');
    await mkdir(root);
    await addBinaryWithLibs(root, nginxBinary, '/usr/sbin/nginx');
    await writeUsers(
      root,
      [
        { name: 'root', uid: 0, gid: 0, home: '/root' },
        { name: 'www-data', uid: 33, gid: 33, home: '/var/www' },
        { name: 'nginx', uid: 101, gid: 101, home: '/var/cache/nginx' },
        { name: 'nobody', uid: 65534, gid: 65534, home: '/nonexistent' },
      ],
      [{ name: 'nogroup', gid: 65534 }],
    );
    // Directories the Debian build's compiled-in paths need (nginx -V): temp paths under
    // /var/lib/nginx (created by the master, but only the last component), pid in /run,
    // lock in /var/lock, logs in /var/log/nginx.
    for (const d of ['etc/nginx/conf.d', 'var/lib/nginx', 'var/log/nginx', 'run', 'var/lock', 'var/cache/nginx', 'var/www', 'usr/share/nginx/html']) {
      await mkdir(path.join(root, d), { recursive: true });
    }
    for (const f of ['mime.types', 'proxy_params', 'fastcgi_params']) {
      const src = path.join('/etc/nginx', f);
      if (existsSync(src)) await copyFile(src, path.join(root, 'etc/nginx', f));
      else if (f === 'mime.types') await writeFile(path.join(root, 'etc/nginx/mime.types'), MINIMAL_MIME_TYPES);
    }
    await writeFile(path.join(root, 'etc/nginx/nginx.conf'), DEFAULT_NGINX_CONF);
    if (lua) {
      for (const m of LUA_MODULES) await addBinaryWithLibs(root, m, m);
      await cp(LUA_SHARE, path.join(root, LUA_SHARE), { recursive: true, dereference: true });
      await mkdir(path.join(root, 'etc/nginx/fleetroll'), { recursive: true });
      await writeFile(path.join(root, 'etc/nginx/fleetroll/fleetroll.lua'), lua);
    }
    await symlink('/dev/stdout', path.join(root, 'var/log/nginx/access.log'));
    await symlink('/dev/stderr', path.join(root, 'var/log/nginx/error.log'));
    await importRootfs(opts, dir, root, tag, [
      `ENV ${PATH_ENV}`,
      `LABEL ${LABELS.image}=nginx-base`,
      'EXPOSE 80',
      // No STOPSIGNAL: Docker 20.10's import rejects it ("not a valid change command").
      // `docker stop` sends SIGTERM = nginx fast shutdown; use --stop-signal SIGQUIT for graceful.
      'CMD ["nginx", "-g", "daemon off;", "-c", "/etc/nginx/nginx.conf"]',
    ]);
  });
  log(`built ${tag}`);
  return tag;
}

/**
 * Build the example app (examples/app) with APP_VERSION=`version` as `tag`
 * (default `fleetroll-example:<version>`), FROM `base` (default: ensureNodeBaseImage()).
 * Skips the build when `tag` exists and carries the same context hash (Dockerfile,
 * server.mjs, base image id, version); rebuilds when any of those changed.
 * Returns the tag.
 */
export async function buildAppImage(opts: BuildAppImageOptions): Promise<string> {
  const log = opts.log ?? (() => {});
  const { version } = opts;
  if (!/^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/.test(version)) {
    throw new Error(`building the example app image: invalid version ${JSON.stringify(version)}`);
  }
  const tag = opts.tag ?? `fleetroll-example:${version.replace(/\+/g, '-')}`;
  const base = opts.base ?? (await ensureNodeBaseImage(opts));
  const contextDir = opts.contextDir ?? findExampleAppDir();

  const baseId = (await docker(opts, `inspecting base image ${base}`, ['image', 'inspect', '--format', '{{.Id}}', base])).stdout.trim();
  const hash = createHash('sha256');
  for (const f of ['Dockerfile', 'server.mjs']) {
    hash
      .update(f)
      .update('\0')
      .update(await readFile(path.join(contextDir, f)))
      .update('\0');
  }
  hash.update(baseId).update('\0').update(version);
  const contextHash = hash.digest('hex').slice(0, 16);

  if (!opts.force && (await imageExists(tag, opts))) {
    const r = await docker(opts, `inspecting image ${tag}`, ['image', 'inspect', '--format', `{{index .Config.Labels "${LABELS.contextHash}"}}`, tag]);
    if (r.stdout.trim() === contextHash) {
      log(`${tag} is up to date`);
      return tag;
    }
    log(`${tag} exists but is stale; rebuilding`);
  }
  log(`building ${tag} FROM ${base}`);
  await docker(
    opts,
    `building image ${tag} from ${contextDir}`,
    [
      'build',
      '--quiet',
      '--build-arg',
      `BASE=${base}`,
      '--build-arg',
      `APP_VERSION=${version}`,
      '--label',
      `${LABELS.image}=app`,
      '--label',
      `${LABELS.contextHash}=${contextHash}`,
      '--tag',
      tag,
      contextDir,
    ],
    { DOCKER_BUILDKIT: '0' },
  );
  log(`built ${tag}`);
  return tag;
}

// ---------------------------------------------------------------------------------------
// image choice

/** Pulls an official image where a registry is reachable; undefined (quietly) where not. */
async function tryPull(opts: BaseImageOptions, image: string | undefined): Promise<string | undefined> {
  if (opts.pull === false || opts.preferOfficial === false || image === undefined || opts.force) return undefined;
  const log = opts.log ?? (() => {});
  log(`pulling ${image}`);
  const r = await docker(opts, `pulling ${image}`, ['pull', '--quiet', image], {}, true);
  if (r.exitCode === 0) return image;
  log(`could not pull ${image} (${(r.stderr.trim().split('\n').pop() ?? '').slice(0, 160)}); assembling an image from this machine's binaries instead`);
  return undefined;
}

async function findOfficial(opts: BaseImageOptions, defaults: string[]): Promise<string | undefined> {
  if (opts.preferOfficial === false) return undefined;
  const candidates = Array.isArray(opts.preferOfficial) ? opts.preferOfficial : defaults;
  for (const c of candidates) {
    if (await imageExists(c, opts)) return c;
  }
  return undefined;
}

/** examples/app, found by walking up from this module (works from src/ and from dist/). */
function findExampleAppDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const candidate = path.join(dir, 'examples', 'app');
    if (existsSync(path.join(candidate, 'Dockerfile')) && existsSync(path.join(candidate, 'server.mjs'))) return candidate;
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('building the example app image: examples/app not found above ' + fileURLToPath(import.meta.url));
    dir = parent;
  }
}

const DEFAULT_NGINX_CONF = `# fleetroll/nginx-base default configuration.
# Mount or write your own server/upstream blocks into /etc/nginx/conf.d/*.conf.
user www-data;
worker_processes 2;
pid /run/nginx.pid;
error_log stderr warn;

events {
  worker_connections 1024;
}

http {
  include /etc/nginx/mime.types;
  default_type application/octet-stream;
  access_log /var/log/nginx/access.log;
  sendfile on;
  keepalive_timeout 65;
  include /etc/nginx/conf.d/*.conf;
}
`;

const MINIMAL_MIME_TYPES = `types {
  text/html html htm;
  text/plain txt;
  application/json json;
  application/javascript js mjs;
  text/css css;
}
`;
