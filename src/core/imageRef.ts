/**
 * Docker image references, the way the engine reads them: the registry is
 * the first path component when it looks like a host (has a "." or a ":", or
 * is "localhost"), else Docker Hub; Hub's official images live under
 * "library/". Pure: used to send credentials only to their own registry and
 * to pick the registry digest of the fleet's repository.
 */

const HUB = 'docker.io';
const HUB_ALIASES = new Set(['docker.io', 'index.docker.io', 'registry-1.docker.io', 'registry.hub.docker.com']);

export interface ImageRef {
  /** The registry host[:port]; "docker.io" for Docker Hub. */
  registry: string;
  /** The repository path without the registry, "library/" added for Hub's official images. */
  path: string;
  tag?: string | undefined;
  /** "sha256:..." when the reference names a digest. */
  digest?: string | undefined;
}

/** The registry host as a key: Docker Hub's several names are one. */
export function normalizeRegistry(server: string): string {
  const host = server
    .replace(/^https?:\/\//, '')
    .replace(/\/.*$/, '')
    .toLowerCase();
  return HUB_ALIASES.has(host) ? HUB : host;
}

export function parseImageRef(ref: string): ImageRef {
  let rest = ref;
  let digest: string | undefined;
  const at = rest.indexOf('@');
  if (at >= 0) {
    digest = rest.slice(at + 1);
    rest = rest.slice(0, at);
  }
  let tag: string | undefined;
  const colon = rest.lastIndexOf(':');
  if (colon > rest.lastIndexOf('/')) {
    tag = rest.slice(colon + 1);
    rest = rest.slice(0, colon);
  }
  const slash = rest.indexOf('/');
  const first = slash < 0 ? '' : rest.slice(0, slash);
  const hasHost = first !== '' && (first.includes('.') || first.includes(':') || first === 'localhost');
  const registry = hasHost ? normalizeRegistry(first) : HUB;
  let path = hasHost ? rest.slice(slash + 1) : rest;
  if (registry === HUB && !path.includes('/')) path = `library/${path}`;
  return { registry, path, tag, digest };
}

/** True for "sha256:<64 hex>", an image ID (or a bare digest). */
export function isImageId(ref: string): boolean {
  return /^sha256:[0-9a-f]{64}$/.test(ref);
}

/** True for "repo@sha256:...", a registry digest reference. */
export function isRepoDigest(ref: string): boolean {
  return /@sha256:[0-9a-f]{64}$/.test(ref);
}

/** Same registry and repository (tags and digests aside). */
export function sameRepository(a: string, b: string): boolean {
  const x = parseImageRef(a);
  const y = parseImageRef(b);
  return x.registry === y.registry && x.path === y.path;
}

/** The engine's registry digest ("repo@sha256:...") of `image`'s repository, among an image's RepoDigests. */
export function repoDigestFor(image: string, repoDigests: readonly string[]): string | undefined {
  return repoDigests.find((d) => isRepoDigest(d) && sameRepository(d, image));
}

/** "sha256:0123456789ab" for messages and tables; other references unchanged. */
export function shortDigest(ref: string): string {
  return ref.replace(/sha256:([0-9a-f]{12})[0-9a-f]{52}$/, 'sha256:$1');
}
