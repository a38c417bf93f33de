/**
 * Registry credentials from `docker login`'s file, $DOCKER_CONFIG/config.json
 * (default ~/.docker/config.json), for fleets without a `registry:` block:
 * - `auths`: base64 "user:password" in `auth`, or `username`/`password`, or an
 *   `identitytoken`;
 * - `credHelpers` (per registry) and `credsStore` (all registries): the
 *   docker-credential-<name> program is run as Docker runs it, `get` with the
 *   server on stdin, JSON {Username, Secret} on stdout (argument array, no shell).
 * Secrets never reach a message: errors name the file, the registry and the helper.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { normalizeRegistry } from '../core/imageRef.js';
import { FleetrollError } from '../errors.js';
import type { RegistryAuth, RegistryCredentials } from '../ports.js';

interface DockerConfigFile {
  auths?: Record<string, { auth?: string; username?: string; password?: string; identitytoken?: string }>;
  credHelpers?: Record<string, string>;
  credsStore?: string;
}

/** What Docker Hub is called in config.json (docker login writes this key). */
const HUB_KEY = 'https://index.docker.io/v1/';

function credentialError(message: string, cause?: unknown): FleetrollError {
  return new FleetrollError('E_REGISTRY_CREDENTIALS', message, cause === undefined ? {} : { cause });
}

/** Runs `docker-credential-<helper> get` with `server` on stdin; the parsed credentials, or undefined when it has none. */
export async function runCredentialHelper(helper: string, server: string, timeoutMs = 10_000): Promise<RegistryAuth | undefined> {
  if (!/^[A-Za-z0-9_.-]+$/.test(helper)) throw credentialError(`credential helper ${JSON.stringify(helper)} is not a helper name (docker-credential-<name>)`);
  const program = `docker-credential-${helper}`;
  const out = await new Promise<{ code: number | null; stdout: string; spawnError?: NodeJS.ErrnoException }>((resolve) => {
    const child = spawn(program, ['get'], { stdio: ['pipe', 'pipe', 'ignore'], timeout: timeoutMs });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.on('error', (e: NodeJS.ErrnoException) => resolve({ code: null, stdout: '', spawnError: e }));
    child.on('close', (code) => resolve({ code, stdout }));
    child.stdin.on('error', () => {});
    child.stdin.end(server);
  });
  if (out.spawnError) {
    throw credentialError(
      `cannot run the credential helper ${program} for registry ${server}: ${out.spawnError.code === 'ENOENT' ? 'not installed (not on PATH)' : (out.spawnError.code ?? 'failed')}`,
      out.spawnError,
    );
  }
  // Docker's helpers say "credentials not found in native keychain" on stdout with exit 1: none, not an error.
  if (out.code !== 0) {
    if (/credentials not found/i.test(out.stdout)) return undefined;
    throw credentialError(`the credential helper ${program} failed for registry ${server} (exit ${out.code ?? 'timeout'})`);
  }
  let parsed: { Username?: unknown; Secret?: unknown };
  try {
    parsed = JSON.parse(out.stdout) as typeof parsed;
  } catch {
    throw credentialError(`the credential helper ${program} gave no JSON for registry ${server}`);
  }
  const secret = typeof parsed.Secret === 'string' ? parsed.Secret : undefined;
  if (!secret) return undefined;
  // "<token>" as the user name marks an identity token (what docker does with it).
  return parsed.Username === '<token>'
    ? { serveraddress: server, identitytoken: secret }
    : { serveraddress: server, username: typeof parsed.Username === 'string' ? parsed.Username : undefined, password: secret };
}

/** The key of `auths`/`credHelpers` that stands for `server` (keys may carry a scheme or a path). */
function keyFor(keys: readonly string[], server: string): string | undefined {
  const want = normalizeRegistry(server);
  return keys.find((k) => k === server) ?? keys.find((k) => normalizeRegistry(k) === want);
}

/** The credentials in one config.json for one registry; undefined when it has none. */
export async function credentialsFromConfig(config: DockerConfigFile, server: string, file: string): Promise<RegistryAuth | undefined> {
  const registry = normalizeRegistry(server);
  const asked = registry === 'docker.io' ? HUB_KEY : registry;
  const helperKey = keyFor(Object.keys(config.credHelpers ?? {}), registry);
  const helper = helperKey !== undefined ? config.credHelpers?.[helperKey] : undefined;
  if (helper) return runCredentialHelper(helper, asked);
  const authKey = keyFor(Object.keys(config.auths ?? {}), registry);
  const entry = authKey !== undefined ? config.auths?.[authKey] : undefined;
  if (entry?.identitytoken) return { serveraddress: registry, identitytoken: entry.identitytoken };
  if (entry?.auth) {
    const plain = Buffer.from(entry.auth, 'base64').toString('utf8');
    const i = plain.indexOf(':');
    if (i <= 0) throw credentialError(`${file}: auths/${authKey}/auth is not base64 of "user:password"`);
    return { serveraddress: registry, username: plain.slice(0, i), password: plain.slice(i + 1) };
  }
  if (entry?.username && entry.password) return { serveraddress: registry, username: entry.username, password: entry.password };
  // An empty auths entry next to credsStore is how docker login records a stored login.
  if (config.credsStore) return runCredentialHelper(config.credsStore, asked);
  return undefined;
}

/** Credentials from `docker login`'s config.json ($DOCKER_CONFIG or ~/.docker); a missing file means none. */
export function dockerConfigCredentials(opts: { configDir?: string | undefined } = {}): RegistryCredentials {
  const dir = opts.configDir ?? process.env.DOCKER_CONFIG ?? join(homedir(), '.docker');
  const file = join(dir, 'config.json');
  let loaded: Promise<DockerConfigFile | undefined> | undefined;
  const load = async (): Promise<DockerConfigFile | undefined> => {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw credentialError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`, err);
    }
    try {
      const v = JSON.parse(text) as unknown;
      return v !== null && typeof v === 'object' ? (v as DockerConfigFile) : {};
    } catch {
      throw credentialError(`${file} is not valid JSON`);
    }
  };
  return async (server) => {
    loaded ??= load();
    const config = await loaded;
    return config ? credentialsFromConfig(config, server, file) : undefined;
  };
}
