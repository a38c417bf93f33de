/**
 * Drains that end when their last request does. In the dynamic nginx mode
 * fleetroll's Lua counts the requests in flight on every server marked down
 * (Router.inFlight); a draining instance whose count is 0 on every load
 * balancer is stopped now instead of at drainSeconds, which shortens every
 * rollout whose requests are short. Only where every load balancer counts (a
 * reload-mode nginx cannot say), and only for a plain drain: a strategy that
 * keeps an instance longer (blue-green's scaleDownDelaySeconds, for undo)
 * keeps it. The event log says which way each drain ended.
 */
import type { RolloutContext } from './context.js';

/** How often the counts are read while a drain waits (one status-file read per load balancer). */
export const IDLE_POLL_MS = 50;

export function watchIdleDrains(ctx: RolloutContext): void {
  if (!ctx.endsDrainsWhenIdle) return;
  const routers = ctx.d.balancers.map((lb) => lb.router);
  const waiting = (now: number) =>
    [...ctx.view.terminating()].filter(
      (i) => i.phase === 'draining' && i.idleDrain === true && i.stopAt !== undefined && i.stopAt > now && i.address !== undefined,
    );
  ctx.every(IDLE_POLL_MS, async () => {
    if (waiting(ctx.now()).length === 0) return;
    // A load balancer that cannot answer now keeps every drain to its time.
    const counts = await Promise.all(routers.map((r) => r.inFlight?.().catch(() => undefined)));
    if (ctx.finished) return;
    const now = ctx.now();
    // Asked after the mark-down was in force (stopAt is set then): a 0 means no request is left and none can come.
    const idle = waiting(now).filter((i) => counts.every((c) => c?.get(i.address!) === 0));
    for (const i of idle) {
      ctx.emit({ type: 'drained', name: i.id, reason: 'idle', ms: now - (i.drainFrom ?? now) });
      i.idleDrain = false;
      i.stopAt = now;
    }
    if (idle.length > 0) ctx.schedule();
  });
}
