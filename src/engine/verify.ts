/**
 * The end of every rollout: ask each instance for its version. A rollout
 * that reached every step but serves the wrong version (an image tagged with
 * the wrong version, a stale cache) is a failed rollout, not a success.
 */
import type { Fleet } from '../config/load.js';
import { RolloutFailedError } from '../errors.js';
import type { Prober } from '../ports.js';
import type { EventSink } from './events.js';

export interface Verified {
  name: string;
  host: string;
  address: string;
  version: string;
}

export async function verifyVersions(fleet: Fleet, instances: readonly { id: string; host: string; address?: string | undefined }[], prober: Prober, emit: EventSink): Promise<Verified[]> {
  const results = await Promise.all(
    instances.map(async (i) => {
      const address = i.address ?? '';
      try {
        return { name: i.id, host: i.host, address, version: await prober.version(address) };
      } catch (err) {
        return { name: i.id, host: i.host, address, version: '', error: (err as Error).message };
      }
    }),
  );
  const wrong = results.filter((r) => r.version !== fleet.version);
  for (const r of results) if (r.version === fleet.version) emit({ type: 'verified', name: r.name, version: r.version });
  if (wrong.length > 0) {
    const lines = wrong.map((r) => ('error' in r && r.error ? `${r.name} on ${r.host}: ${r.error}` : `${r.name} on ${r.host} reports version ${JSON.stringify(r.version)}, expected ${JSON.stringify(fleet.version)}`));
    throw new RolloutFailedError(
      `rollout of ${fleet.service} finished but ${wrong.length} of ${results.length} instance(s) do not serve version ${fleet.version}:\n  ${lines.join('\n  ')}`,
      'the instances are serving; check that the image was built with the version it is tagged with (or set `version:` in the fleet file), then deploy again',
      { instances: results },
    );
  }
  return results.map(({ name, host, address, version }) => ({ name, host, address, version }));
}
