/**
 * A heal of `fleetroll watch` that a deploy asks to stop (engine/types.ts
 * YieldAsks): the heal runs on a signal of its own, aborted by the watch's
 * (Ctrl-C) or by the ask, and ends as at Ctrl-C.
 */
import { FleetrollError } from '../errors.js';
import type { FleetHandles } from './types.js';

/**
 * The heal's signal: the watch's own (Ctrl-C), or a deploy that asks for the
 * fleet (engine/types.ts YieldAsks), which stops the heal as Ctrl-C does.
 */
export function yieldOnAsk(o: { h: Pick<FleetHandles, 'yieldAsks'>; signal: AbortSignal }): { signal: AbortSignal; asked(): boolean; stop(): void } {
  const asks = o.h.yieldAsks;
  if (!asks) return { signal: o.signal, asked: () => false, stop: () => {} };
  const ctl = new AbortController();
  let asked = false;
  const onStop = () => ctl.abort();
  o.signal.addEventListener('abort', onStop, { once: true });
  const unlisten = asks.onAsk(() => {
    void asks.asked().then(
      (yes) => {
        if (!yes || ctl.signal.aborted) return;
        asked = true;
        ctl.abort();
      },
      () => {},
    );
  });
  return {
    signal: ctl.signal,
    asked: () => asked,
    stop: () => {
      unlisten();
      o.signal.removeEventListener('abort', onStop);
    },
  };
}

export function yielded(): FleetrollError {
  return new FleetrollError('E_LOCK_HELD', 'a deploy asked for the fleet: the heal ended with its step (as at Ctrl-C), and the watch yields to the deploy');
}
