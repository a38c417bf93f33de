// The label contract lives apart from src/ports.ts (which re-exports it): it is data that
// containers, volumes and images carry across versions, not an interface between layers.
/**
 * Every Docker label fleetroll sets or reads, one constant each: on instance
 * containers (the fleet's state is read back from them), on the state and lock
 * containers, on what a rehearsal creates, and on the images it builds. Running
 * containers carry them, so a value that changes orphans what earlier versions
 * started (test/unit/labels.test.ts pins them).
 */
export const LABELS = {
  managed: 'fleetroll.managed',
  service: 'fleetroll.service',
  revision: 'fleetroll.revision',
  version: 'fleetroll.version',
  /** Creation time in ms since the epoch, as a decimal string; orders revisions. */
  created: 'fleetroll.created',
  /** Comma-separated names (not values) of the fleet's env, to rebuild a revision's spec. */
  envKeys: 'fleetroll.env-keys',
  /** `--change-cause` of the rollout that created the instance. */
  changeCause: 'fleetroll.change-cause',
  /** The app's port inside the container (the runtime adds it; `address` is built from it). */
  port: 'fleetroll.port',
  /** The host address the app port is published on, when nginx runs on another machine. */
  publishAddress: 'fleetroll.publish-address',
  /** On the fleet's state volume and container (value: the service). */
  state: 'fleetroll.state',
  /** On the lock container (value: the holder as JSON); `${lock}.service` names the fleet. */
  lock: 'fleetroll.lock',
  /** On a blue-green rollout's switch-back offer (value: its journal id); `${switchBack}.service` names the fleet. */
  switchBack: 'fleetroll.switchback',
  /** On the offer: the lock's `lock` label as it was when offered, so an offer a killed rollout left is known as stale. */
  switchBackHolder: 'fleetroll.switchback.holder',
  /** On undo's switch-back ask (value: the rollout asked); `${switchBackAsk}.service` names the fleet. */
  switchBackAsk: 'fleetroll.switchback.ask',
  /** On a deploy's ask that a heal of `fleetroll watch` end (value: who asks, and when in ms since the epoch); `${yieldAsk}.service` names the fleet. */
  yieldAsk: 'fleetroll.yield.ask',
  /** On everything a rehearsal creates besides the instances (nginx, network; value: the service), so `rehearse --down` finds it. */
  demo: 'fleetroll.demo',
  /** On every image built by adapters/localImages.ts; value: node-base | nginx-base | app. */
  image: 'fleetroll.image',
  /** On app images: hash of (context files, base image id, version); a mismatch triggers a rebuild. */
  contextHash: 'fleetroll.context-hash',
  /** On named volumes fleetroll created for a fleet (value: the service); it never removes them. */
  volume: 'fleetroll.volume',
  /** On instances: the image as the fleet file wrote it (the container itself runs the pinned build). */
  imageRef: 'fleetroll.image-ref',
  /** On instances: the digest the image was pinned to (Fleet.digest), to rebuild the revision for a rollback. */
  digest: 'fleetroll.digest',
} as const;
