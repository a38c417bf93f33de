/**
 * Pinning: a tag is resolved once, right after preflight, to the build it
 * names, and every container of the deploy is created from that build, so a
 * tag that moves during a rollout cannot put two builds in one revision
 * (Docker Swarm pins a service's image to a digest the same way).
 *
 * The build is found on the first host (in the fleet file's order) that has
 * the image. Its digest is the registry digest (`repo@sha256:...`) of the
 * fleet's repository when the engine has one (it pulled or pushed it), else
 * its image ID (`sha256:...`: a local build; `docker save`/`load` keeps the
 * ID, so copied hosts match). Every other host must have the same image ID;
 * where the tag names another build there (it moved), the pinned build is
 * pulled by digest or copied from the first host, or, with `pull: never` or
 * when neither works, preflight fails naming the host.
 *
 * Containers are created from the digest when every host resolves it, else
 * from the image ID (a copied host has no registry digest for the build).
 */
import type { Fleet } from '../config/load.js';
import { isRepoDigest, repoDigestFor, shortDigest } from '../core/imageRef.js';
import { RolloutFailedError } from '../errors.js';
import type { ImageInfo, Runtime } from '../ports.js';
import type { HostWork } from './hostWork.js';
import { copyImage, pullAuthFor, pullImage, redact, type ImageSources } from './images.js';

export interface PinOptions extends ImageSources {
  copyImages: boolean;
}

/**
 * The fleet with `digest` and `pinnedImage` set (unchanged when a runtime
 * cannot say which build it has: simulated and test hosts). Throws a
 * preflight failure when a host cannot be given the pinned build.
 */
export async function pinImage(fleet: Fleet, work: HostWork, s: PinOptions): Promise<Fleet> {
  const hosts = fleet.hosts.map((h) => [h.name, s.runtimes.get(h.name)] as const).filter((e): e is readonly [string, Runtime] => e[1] !== undefined);
  if (hosts.length === 0 || hosts.some(([, rt]) => !rt.imageInfo)) return fleet;
  const t0 = s.clock.now();
  const wanted = fleet.digest ?? fleet.image;
  const secrets = fleet.registry ? [fleet.registry.password] : [];
  let first: { host: string; rt: Runtime; info: ImageInfo } | undefined;
  for (const [host, rt] of hosts) {
    const info = await rt.imageInfo!(wanted);
    if (info) {
      first = { host, rt, info };
      break;
    }
  }
  // Preflight put it on every host; none having it now means it was removed in between.
  if (!first) throw failure([`image ${wanted} is on no host any more (removed after preflight?)`]);
  const pinnedId = first.info.id;
  const digest = fleet.digest ?? repoDigestFor(fleet.image, first.info.repoDigests) ?? pinnedId;
  const byDigest = isRepoDigest(digest);
  const results = await Promise.all(
    hosts.map(([host, rt]) =>
      work.run(host, async (): Promise<{ problem?: string; hasDigest: boolean }> => {
        const mine = host === first.host ? first.info : await rt.imageInfo!(wanted);
        if (mine?.id === pinnedId) return { hasDigest: !byDigest || mine.repoDigests.includes(digest) };
        // The tag names another build here (it moved), or the digest does not resolve (a copy by digest keeps only the ID).
        const byId = await rt.imageInfo!(pinnedId);
        if (byId) return { hasDigest: !byDigest || byId.repoDigests.includes(digest) };
        const here = mine ? `build ${shortDigest(mine.id)}` : 'not present';
        const moved = `image ${fleet.image} is ${here} on host ${host}, but the deploy pinned it to ${shortDigest(digest)} (found on host ${first.host}): the tag moved`;
        if ((fleet.pull ?? 'missing') === 'never')
          return { problem: `${moved}, and pull: never neither pulls nor copies the pinned build there`, hasDigest: false };
        const tried: string[] = [];
        if (byDigest) {
          try {
            const failed = await pullImage(digest, host, rt, s.emit, await pullAuthFor(digest, fleet.registry, s.credentials));
            if (failed === undefined) {
              const got = await rt.imageInfo!(digest);
              if (got?.id === pinnedId) return { hasDigest: true };
              tried.push(`pulling ${shortDigest(digest)} gave build ${got ? shortDigest(got.id) : 'nothing'}`);
            } else tried.push(failed);
          } catch (err) {
            tried.push(redact((err as Error).message, secrets));
          }
        }
        if (s.copyImages) {
          s.emit({ type: 'info', message: `host ${host}: ${moved}; copying the pinned build from host ${first.host}` });
          try {
            await copyImage(pinnedId, host, rt, {
              ...s,
              runtimes: new Map([
                [first.host, first.rt],
                [host, rt],
              ]),
              imageSource: undefined,
            });
            const got = await rt.imageInfo!(pinnedId);
            if (got) return { hasDigest: !byDigest || got.repoDigests.includes(digest) };
            tried.push(`the copy from host ${first.host} did not arrive`);
          } catch (err) {
            tried.push(`copying from host ${first.host}: ${redact((err as Error).message, secrets)}`);
          }
        }
        return {
          problem: `${moved}; could not give host ${host} the pinned build${tried.length ? `: ${tried.join('; ')}` : ' (image copies are off)'}`,
          hasDigest: false,
        };
      }),
    ),
  );
  const problems = results.map((r) => r.problem).filter((p): p is string => p !== undefined);
  if (problems.length > 0) throw failure(problems);
  const pinnedImage = byDigest && results.every((r) => r.hasDigest) ? digest : pinnedId;
  const ms = s.clock.now() - t0;
  s.emit({
    type: 'info',
    message: `pinned image ${fleet.image} to ${digest}${pinnedImage === digest ? '' : ` (containers use its image ID ${shortDigest(pinnedId)}: not every host has the registry digest)`}, found on host ${first.host}; resolved on ${hosts.length} host(s) in ${ms} ms`,
  });
  return { ...fleet, digest, pinnedImage };
}

function failure(problems: string[]): RolloutFailedError {
  return new RolloutFailedError(
    `preflight failed, nothing was changed:\n  ${problems.join('\n  ')}`,
    'fix the problems above and run the deploy again',
    {},
    'preflight',
  );
}
