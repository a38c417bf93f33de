/**
 * Instance containers: what a new instance of a revision is made of. The
 * labels are how the fleet's state is read back from Docker.
 */
import type { Fleet } from '../config/load.js';
import { LABELS, type InstanceSpec } from '../ports.js';
import { envOf } from './revision.js';

/** The container for one new instance of a revision. */
export function instanceSpec(fleet: Fleet, revision: string, suffix: string, network: string | undefined, now: number, changeCause?: string): InstanceSpec {
  return {
    name: `${fleet.service}-${revision.slice(0, 7)}-${suffix}`,
    // The pinned build (engine/pin.ts), so a tag that moves during the rollout cannot put two builds in one revision.
    image: fleet.pinnedImage ?? fleet.image,
    env: envOf(fleet),
    port: fleet.port,
    network,
    labels: {
      // The team's own labels first: fleetroll's cannot be overridden (config/container.ts refuses fleetroll.*).
      ...(fleet.container?.labels ?? {}),
      [LABELS.managed]: 'true',
      [LABELS.service]: fleet.service,
      [LABELS.revision]: revision,
      [LABELS.version]: fleet.version,
      [LABELS.created]: String(now),
      // Names only, never values: lets a later rollback rebuild this spec from the container.
      [LABELS.envKeys]: Object.keys(fleet.env ?? {})
        .sort()
        .join(','),
      ...(changeCause ? { [LABELS.changeCause]: changeCause.slice(0, 256) } : {}),
      // The container's own image is the pinned reference: these rebuild the revision's hash (rollout.ts previousFleet).
      ...(fleet.digest ? { [LABELS.imageRef]: fleet.image, [LABELS.digest]: fleet.digest } : {}),
    },
    stopTimeoutSeconds: fleet.terminationGracePeriodSeconds,
    container: fleet.container,
    ...(fleet.secretSources && Object.keys(fleet.secretSources).length ? { secretSources: fleet.secretSources } : {}),
  };
}

export function randomSuffix(): string {
  return Math.random().toString(36).slice(2, 7).padEnd(5, '0');
}
