/**
 * Getting the fleet's image onto a host that lacks it, without a registry:
 * `docker save` on a host (or this machine's engine) that has it, streamed
 * into `docker load` on the one that does not; or, where the host's engine
 * reaches a registry, `docker pull`.
 */
import { PassThrough } from 'node:stream';
import type { RegistryConfig } from '../config/images.js';
import { isImageId, isRepoDigest, normalizeRegistry, parseImageRef } from '../core/imageRef.js';
import type { Clock, RegistryAuth, RegistryCredentials, Runtime } from '../ports.js';
import type { EventSink } from './events.js';

export interface ImageSources {
  /** Every fleet host by name (the target is skipped). */
  runtimes: ReadonlyMap<string, Runtime>;
  /** This machine's engine, when it is not one of the fleet's hosts. */
  imageSource?: Runtime | undefined;
  clock: Clock;
  emit: EventSink;
  /** Credentials for the image's registry: the fleet's `registry:`, else these (~/.docker/config.json). */
  credentials?: RegistryCredentials | undefined;
}

/** How a pull logs in: the credentials (if any) and, for messages, which registry and user (never the password). */
export interface PullAuth {
  auth?: RegistryAuth | undefined;
  /** "registry.example:5000 as user ci", "docker.io (no credentials)". */
  who: string;
  /** The secrets to keep out of every message (the engine's included). */
  secrets: string[];
}

/**
 * The credentials a pull of `image` sends. The fleet's `registry:` applies
 * only to an image on that very server: the engine would hand them to
 * whatever registry the reference names, so a mismatch is refused rather
 * than leaking the password to another registry.
 */
export async function pullAuthFor(image: string, registry: RegistryConfig | undefined, credentials: RegistryCredentials | undefined): Promise<PullAuth> {
  const host = parseImageRef(image).registry;
  if (registry) {
    const server = normalizeRegistry(registry.server);
    if (server !== host) {
      throw new Error(
        `image ${image} is on registry ${host}, but registry/server is ${registry.server}: fleetroll sends the credentials only to their own registry (use an image reference that names ${registry.server}, or remove registry:)`,
      );
    }
    return {
      auth: { serveraddress: registry.server, username: registry.username, password: registry.password },
      who: `registry ${registry.server} as user ${registry.username}`,
      secrets: [registry.password],
    };
  }
  const found = credentials ? await credentials(host) : undefined;
  if (!found) return { who: `registry ${host} (no credentials)`, secrets: [] };
  const user = found.username ?? (found.identitytoken ? 'an identity token' : '?');
  return {
    auth: found,
    who: `registry ${host} as user ${user} (from docker login's config.json)`,
    secrets: [found.password, found.identitytoken].filter((x): x is string => typeof x === 'string' && x !== ''),
  };
}

/** `text` with every secret (and its base64, as in an auth header) replaced by "***". */
export function redact(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const s of secrets) {
    if (s.length < 1) continue;
    for (const form of [s, Buffer.from(s).toString('base64')]) out = out.split(form).join('***');
  }
  return out;
}

/** Copies `image` to host `to` from the first source that has it; false when none has. */
export async function copyImage(image: string, to: string, target: Runtime, s: ImageSources): Promise<boolean> {
  const sources = [...s.runtimes.entries()].filter(([n]) => n !== to);
  if (s.imageSource) sources.push(['this machine', s.imageSource]);
  for (const [from, src] of sources) {
    if (!(await src.imageExists(image).catch(() => false))) continue;
    const t0 = s.clock.now();
    s.emit({ type: 'info', message: `copying image ${image} from ${from} to host ${to}` });
    // A registry digest names no tag to save by, and a loaded image has no registry digests anyway: save its build by ID.
    const saved = isRepoDigest(image) && src.imageInfo ? ((await src.imageInfo(image))?.id ?? image) : image;
    const tar = await src.saveImage(saved);
    let bytes = 0;
    let reported = 0;
    const counted = new PassThrough();
    counted.on('data', (c: Buffer) => {
      bytes += c.length;
      if (bytes - reported >= 25 * 1024 * 1024) {
        reported = bytes;
        s.emit({ type: 'info', message: `  ${(bytes / 1048576).toFixed(0)} MB copied to ${to}` });
      }
    });
    tar.pipe(counted);
    await target.loadImage(counted);
    s.emit({
      type: 'info',
      message: `copied image ${image} to host ${to}: ${(bytes / 1048576).toFixed(1)} MB in ${((s.clock.now() - t0) / 1000).toFixed(1)} s`,
    });
    return true;
  }
  return false;
}

/**
 * Pulls `image` on the host's engine: undefined when it is there afterwards,
 * else why not, naming the host, the registry and the user (never the
 * password). An image ID cannot be pulled (it names a local build).
 */
export async function pullImage(
  image: string,
  name: string,
  rt: Runtime,
  emit: EventSink,
  login: PullAuth = { who: `registry ${parseImageRef(image).registry}`, secrets: [] },
): Promise<string | undefined> {
  if (isImageId(image)) return `cannot pull ${image} on host ${name}: an image ID names a local build, not a registry's`;
  const failed = await rt.pullImage(image, login.auth).catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
  const why = failed === undefined ? undefined : `could not pull image ${image} on host ${name}: ${redact(failed, login.secrets)} (${login.who})`;
  emit({ type: 'info', message: why ?? `pulled image ${image} on host ${name}` });
  return why;
}
