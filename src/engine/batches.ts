/**
 * Instances started together, by batch number, and how many of each batch
 * are still coming up (starting or unready). Lifecycle.holdForBatch asks on
 * every instance that turns ready; a pass over the batch each time was
 * quadratic (batches of 2,500 in a 10,000-replica rollout at 25%: 25 million
 * visits a simulate), so the count moves with each change of phase instead.
 */
import type { Phase } from '../core/decide.js';

const comingUp = (p: Phase) => p === 'starting' || p === 'unready';

export class Batches {
  private readonly comingUp = new Map<number, number>();
  private open: { id: number; at: number } | undefined;

  /** The batch of an instance started at `now`: the open one if it opened within `windowMs`, else a new one. */
  join(phase: Phase, now: number, windowMs: number): number {
    if (!this.open || now - this.open.at > windowMs) {
      this.open = { id: (this.open?.id ?? 0) + 1, at: now };
      this.comingUp.set(this.open.id, 0);
    }
    const id = this.open.id;
    if (comingUp(phase)) this.comingUp.set(id, (this.comingUp.get(id) ?? 0) + 1);
    return id;
  }

  /** A member's phase changed (every change: a member that is back to unready is waited for again). */
  moved(batch: number | undefined, from: Phase, to: Phase): void {
    if (batch === undefined || comingUp(from) === comingUp(to)) return;
    const n = this.comingUp.get(batch);
    if (n !== undefined) this.comingUp.set(batch, n + (comingUp(to) ? 1 : -1));
  }

  /** Whether some member of the batch is still starting or unready (none for an instance of no batch). */
  waiting(batch: number | undefined): boolean {
    return batch !== undefined && (this.comingUp.get(batch) ?? 0) > 0;
  }
}
