/**
 * Images on one engine through the Docker API: pull (with registry
 * credentials), save and load (how an image reaches a host without a
 * registry), inspect. The runtime (./docker.ts) delegates its image methods
 * here; apart from it because none of this touches a container.
 */
import type Dockerode from 'dockerode';
import type { ImageInfo, RegistryAuth } from '../ports.js';
import { present } from './dockerInspect.js';
import { engineMessage, runtimeError, statusOf } from './dockerRetry.js';

/**
 * `docker pull` on the engine `where` names, with `auth` as the engine's
 * X-Registry-Auth header for a private registry; undefined when the engine
 * has the image afterwards, else its reason. The reason is the engine's
 * message, which names the registry and never the credentials.
 */
export async function pull(docker: Dockerode, where: string, image: string, auth?: RegistryAuth): Promise<string | undefined> {
  try {
    const stream = (await docker.pull(image, auth ? { authconfig: { ...auth } } : {})) as NodeJS.ReadableStream;
    await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream, (err: unknown) => (err ? reject(err) : resolve())));
  } catch (err) {
    return engineMessage(err);
  }
  return (await exists(docker, where, image)) ? undefined : 'the engine reported success but does not have the image';
}

/** `docker save` as a stream (the image's layers as a tar). */
export async function save(docker: Dockerode, where: string, image: string): Promise<NodeJS.ReadableStream> {
  try {
    return await docker.getImage(image).get();
  } catch (err) {
    throw runtimeError('E_DOCKER', `exporting image ${image} from ${where}: ${engineMessage(err)}`, err);
  }
}

/** `docker load` from a stream; resolves when the engine has the image. */
export async function load(docker: Dockerode, where: string, tar: NodeJS.ReadableStream): Promise<void> {
  let res: NodeJS.ReadableStream;
  try {
    res = await docker.loadImage(tar);
  } catch (err) {
    throw runtimeError('E_DOCKER', `loading an image into ${where}: ${engineMessage(err)}`, err);
  }
  // The answer is a stream of JSON progress messages; an error arrives as one of them.
  let text = '';
  for await (const chunk of res) text += chunk.toString();
  const failed = text
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      try {
        return JSON.parse(l) as { error?: string };
      } catch {
        return {};
      }
    })
    .find((m) => m.error);
  if (failed?.error) throw runtimeError('E_DOCKER', `loading an image into ${where}: ${failed.error}`, failed);
}

/** The image's ID, registry digests and whether it has a HEALTHCHECK; undefined when the engine does not have it. */
export async function info(docker: Dockerode, where: string, ref: string): Promise<ImageInfo | undefined> {
  try {
    const inspected = await docker.getImage(ref).inspect();
    const test = (inspected.Config as { Healthcheck?: { Test?: string[] } } | undefined)?.Healthcheck?.Test;
    return { id: inspected.Id, repoDigests: inspected.RepoDigests ?? [], healthcheck: Array.isArray(test) && test.length > 0 && test[0] !== 'NONE' };
  } catch (err) {
    if (statusOf(err) === 404) return undefined;
    throw runtimeError('E_DOCKER', `inspecting image ${ref} on ${where}: ${engineMessage(err)}`, err);
  }
}

export function exists(docker: Dockerode, where: string, image: string): Promise<boolean> {
  return present(where, `image ${image}`, () => docker.getImage(image).inspect());
}
