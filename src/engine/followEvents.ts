/**
 * Docker's events for a fleet's containers, on every host whose runtime can
 * stream them (ports.ts Runtime.events), for a rollout and for `watch`. A
 * stream that ends (its engine restarted) is opened again after a pause that
 * grows while the engine refuses, so events resume once it is back; a host
 * whose stream cannot be opened is named once (`unfollowed`) and left to the
 * looks that back the events up.
 */
import type { ContainerEvent, Runtime } from '../ports.js';

export interface FollowOptions {
  runtimes: ReadonlyMap<string, Runtime>;
  labels: Record<string, string>;
  /** Each event, with the host it came from. */
  onEvent: (e: ContainerEvent, host: string) => void;
  /** A stream ended or was refused: whoever follows may want to look at once (something may have been missed). */
  onGap?: ((host: string, how: 'ended' | 'refused') => void) | undefined;
  /** Said once per host, the first time its stream cannot be opened. */
  unfollowed?: ((host: string) => void) | undefined;
  /** Timers (a virtual clock in tests); default the real ones. */
  setTimer?: ((ms: number, fn: () => void) => { cancel(): void }) | undefined;
}

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 10_000;

/** Follows every host's events until the returned function is called. */
export function followContainerEvents(o: FollowOptions): () => void {
  const closers: (() => void)[] = [];
  const timers = new Set<{ cancel(): void }>();
  let closed = false;
  const setTimer =
    o.setTimer ??
    ((ms: number, fn: () => void) => {
      const t = setTimeout(fn, ms);
      t.unref?.();
      return { cancel: () => clearTimeout(t) };
    });
  for (const [host, rt] of o.runtimes) {
    if (typeof rt.events !== 'function') continue;
    let said = false;
    let retryMs = FIRST_RETRY_MS;
    let close: (() => void) | undefined;
    const open = () => {
      if (closed) return;
      close = rt.events!(o.labels, (stream, e) => {
        if (closed) return;
        if (e) {
          retryMs = FIRST_RETRY_MS;
          o.onEvent(e, host);
          return;
        }
        if (!stream) return;
        if (stream === 'refused' && !said) {
          said = true;
          o.unfollowed?.(host);
        }
        o.onGap?.(host, stream);
        const t = setTimer(retryMs, () => {
          timers.delete(t);
          open();
        });
        timers.add(t);
        retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
      });
    };
    open();
    closers.push(() => close?.());
  }
  return () => {
    closed = true;
    for (const t of timers) t.cancel();
    for (const c of closers) c();
  };
}
