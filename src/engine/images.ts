/**
 * Getting the fleet's image onto a host that lacks it, without a registry:
 * `docker save` on a host (or this machine's engine) that has it, streamed
 * into `docker load` on the one that does not; or, where the host's engine
 * reaches a registry, `docker pull`.
 */
import { PassThrough } from 'node:stream';
import type { Clock, Runtime } from '../ports.js';
import type { EventSink } from './events.js';

export interface ImageSources {
  /** Every fleet host by name (the target is skipped). */
  runtimes: ReadonlyMap<string, Runtime>;
  /** This machine's engine, when it is not one of the fleet's hosts. */
  imageSource?: Runtime | undefined;
  clock: Clock;
  emit: EventSink;
}

/** Copies `image` to host `to` from the first source that has it; false when none has. */
export async function copyImage(image: string, to: string, target: Runtime, s: ImageSources): Promise<boolean> {
  const sources = [...s.runtimes.entries()].filter(([n]) => n !== to);
  if (s.imageSource) sources.push(['this machine', s.imageSource]);
  for (const [from, src] of sources) {
    if (!(await src.imageExists(image).catch(() => false))) continue;
    const t0 = s.clock.now();
    s.emit({ type: 'info', message: `copying image ${image} from ${from} to host ${to}` });
    const tar = await src.saveImage(image);
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
    s.emit({ type: 'info', message: `copied image ${image} to host ${to}: ${(bytes / 1048576).toFixed(1)} MB in ${((s.clock.now() - t0) / 1000).toFixed(1)} s` });
    return true;
  }
  return false;
}

/** Pulls `image` on the host's engine; false (and the engine's reason, as an event) when it cannot. */
export async function pullImage(image: string, name: string, rt: Runtime, emit: EventSink): Promise<boolean> {
  const failed = await rt.pullImage(image);
  emit({ type: 'info', message: failed === undefined ? `pulled image ${image} on host ${name}` : `could not pull image ${image} on host ${name}: ${failed}` });
  return failed === undefined;
}
