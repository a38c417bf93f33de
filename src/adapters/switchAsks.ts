/**
 * The quick way between `fleetroll undo` and a blue-green rollout that waits
 * out scaleDownDelaySeconds (engine/switchBack.ts SwitchBackAsks): two
 * containers that are never started, on the fleet's first host, like the lock.
 *
 * - the offer, `fleetroll-switchback-<service>`: the rollout creates it when
 *   its old set waits, labelled with its journal id and a copy of the lock's
 *   holder (so an offer left by a killed rollout is known as stale);
 * - the ask, `fleetroll-switchback-ask-<service>`: undo creates it, labelled
 *   with the rollout it asks.
 *
 * Why containers and not the state's files: users wait on this path. Each
 * file read or write through Docker's archive API re-executes part of the
 * engine (about 150 ms here, more at load), where a create or an inspect
 * takes 2-15 ms, and Docker's event for a create carries the labels, so the
 * rollout hears the ask itself, not that something was written.
 */
import type Dockerode from 'dockerode';
import { LABELS } from '../ports.js';
import { dockerEvents } from './dockerEvents.js';
import { createNeverStarted } from './dockerInspect.js';
import { statusOf } from './dockerRetry.js';
import { lockContainerName } from './lockName.js';

/** The offer's container; removeFleetState (./fleetState.ts) removes one a killed rollout left. */
export function switchBackOfferName(service: string): string {
  return `fleetroll-switchback-${service}`;
}

/** The ask's container; removeFleetState (./fleetState.ts) removes one a killed undo left. */
export function switchBackAskName(service: string): string {
  return `fleetroll-switchback-ask-${service}`;
}

export class SwitchBackContainers {
  private readonly offerName: string;
  private readonly askName: string;
  private readonly lockName: string;

  constructor(
    private readonly docker: Dockerode,
    private readonly service: string,
  ) {
    this.offerName = switchBackOfferName(service);
    this.askName = switchBackAskName(service);
    this.lockName = lockContainerName(service);
  }

  private async labels(name: string): Promise<{ labels: Record<string, string>; image: string } | undefined> {
    try {
      const i = await this.docker.getContainer(name).inspect();
      return { labels: i.Config?.Labels ?? {}, image: i.Image };
    } catch (err) {
      if (statusOf(err) === 404) return undefined;
      throw err;
    }
  }

  private async create(name: string, image: string, labels: Record<string, string>): Promise<void> {
    try {
      await createNeverStarted(this.docker, { name, image, role: 'switchback', labels });
    } catch (err) {
      // One is there already: an ask made twice is still one ask; an offer left over was withdrawn first.
      if (statusOf(err) !== 409) throw err;
    }
  }

  private async remove(name: string): Promise<void> {
    await this.docker
      .getContainer(name)
      .remove({ force: true })
      .catch((err: unknown) => {
        if (statusOf(err) !== 404) throw err;
      });
  }

  /** Made by the rollout holding the lock: from the lock's own container it takes an image and its holder. */
  async offer(rollout: string): Promise<void> {
    const lock = await this.labels(this.lockName);
    if (!lock) return;
    await this.remove(this.offerName);
    await this.create(this.offerName, lock.image, {
      [LABELS.switchBack]: rollout,
      [LABELS.switchBackHolder]: lock.labels[LABELS.lock] ?? '',
      [`${LABELS.switchBack}.service`]: this.service,
    });
  }

  async withdraw(): Promise<void> {
    await Promise.all([this.remove(this.offerName), this.remove(this.askName)]);
  }

  /** The rollout that offers, when its holder still holds the lock. */
  async offered(): Promise<{ rollout: string; image: string } | undefined> {
    const [offer, lock] = await Promise.all([this.labels(this.offerName), this.labels(this.lockName)]);
    const rollout = offer?.labels[LABELS.switchBack];
    if (!offer || !rollout || !lock || lock.labels[LABELS.lock] !== offer.labels[LABELS.switchBackHolder]) return undefined;
    return { rollout, image: offer.image };
  }

  async ask(rollout: string, image?: string): Promise<void> {
    const from = image ?? (await this.labels(this.lockName))?.image;
    if (!from) throw new Error(`no image to make ${this.askName} from: ${this.lockName} is gone (the rollout ended)`);
    await this.create(this.askName, from, { [LABELS.switchBackAsk]: rollout, [`${LABELS.switchBackAsk}.service`]: this.service });
  }

  async asked(rollout: string): Promise<boolean> {
    return (await this.labels(this.askName))?.labels[LABELS.switchBackAsk] === rollout;
  }

  async unask(): Promise<void> {
    await this.remove(this.askName);
  }

  /** Calls `listener` when an ask is created (Docker's create event, filtered by its label); returns a function that stops. */
  onAsk(listener: () => void): () => void {
    // A stream that fails leaves the rollout's poll, which looks every second anyway.
    return dockerEvents(
      this.docker,
      { type: ['container'], event: ['create'], label: [`${LABELS.switchBackAsk}.service=${this.service}`] },
      { data: () => listener() },
    );
  }
}

/** The container of a deploy's ask that a heal of `fleetroll watch` end; removeFleetState (./fleetState.ts) removes one a killed deploy left. */
export function yieldAskName(service: string): string {
  return `fleetroll-yield-ask-${service}`;
}

/** How long an ask is honoured: the deploy waits 10 s for the heal (engine/session.ts acquireLock); one a killed deploy left expires. */
export const YIELD_ASK_FRESH_MS = 20_000;

/**
 * A deploy's ask that a heal of `fleetroll watch` holding the rollout lock
 * end (engine/types.ts YieldAsks): a container never started, made from the
 * lock's own image (the lock is held while anyone asks), labelled with who
 * asks and when, so that an ask a killed deploy left is honoured no longer.
 */
export class YieldAskContainer {
  private readonly name: string;
  private readonly lockName: string;

  constructor(
    private readonly docker: Dockerode,
    private readonly service: string,
    private readonly who: string,
    private readonly now: () => number = Date.now,
  ) {
    this.name = yieldAskName(service);
    this.lockName = lockContainerName(service);
  }

  async ask(): Promise<void> {
    const image = (await this.docker.getContainer(this.lockName).inspect()).Image;
    await this.withdraw();
    try {
      await createNeverStarted(this.docker, {
        name: this.name,
        image,
        role: 'yield',
        labels: { [LABELS.yieldAsk]: `${this.now()} ${this.who}`, [`${LABELS.yieldAsk}.service`]: this.service },
      });
    } catch (err) {
      // Another deploy asks too: one ask is enough.
      if (statusOf(err) !== 409) throw err;
    }
  }

  async asked(): Promise<boolean> {
    try {
      const label = (await this.docker.getContainer(this.name).inspect()).Config?.Labels?.[LABELS.yieldAsk] ?? '';
      const at = Number(label.split(' ')[0]);
      return Number.isFinite(at) && this.now() - at < YIELD_ASK_FRESH_MS;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw err;
    }
  }

  async withdraw(): Promise<void> {
    await this.docker
      .getContainer(this.name)
      .remove({ force: true })
      .catch((err: unknown) => {
        if (statusOf(err) !== 404) throw err;
      });
  }

  onAsk(listener: () => void): () => void {
    return dockerEvents(
      this.docker,
      { type: ['container'], event: ['create'], label: [`${LABELS.yieldAsk}.service=${this.service}`] },
      { data: () => listener() },
    );
  }
}
