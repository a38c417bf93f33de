/**
 * Docker's event stream, for `fleetroll watch`: a container of the fleet
 * that dies, starts, is removed or (dis)connects from a network wakes the
 * watch at once instead of at its next look. Only a wake-up: the watch still
 * looks at the whole fleet, and still looks every interval, so an event
 * missed costs only time; a stream that ends (its engine stopped or
 * restarted) wakes it too, and it subscribes again once it sees the engine.
 *
 * `dockerEvents` is the one subscription to that stream: the fleet state's
 * watch (./fleetState.ts) and the switch-back ask (./switchAsks.ts) listen
 * through it too, each a wake-up in front of a poll.
 */
import type Dockerode from 'dockerode';
import type { ContainerEvent } from '../ports.js';

/** The actions that can change what nginx should route to. */
const ACTIONS = ['die', 'start', 'destroy', 'oom', 'kill', 'health_status', 'stop', 'connect', 'disconnect', 'pause', 'unpause'];

interface RawEvent {
  Type?: string;
  Action?: string;
  status?: string;
  id?: string;
  Actor?: { ID?: string; Attributes?: Record<string, string> };
}

/** A raw event as ports.ts ContainerEvent; undefined when it names no container. */
export function parseContainerEvent(e: RawEvent): ContainerEvent | undefined {
  const attrs = e.Actor?.Attributes ?? {};
  const action = e.Action ?? e.status ?? '';
  // A network event's actor is the network; the container is an attribute.
  const id = e.Type === 'network' ? attrs.container : (e.Actor?.ID ?? e.id);
  if (!id || !action) return undefined;
  const exitCode = attrs.exitCode !== undefined && /^[0-9]{1,3}$/.test(attrs.exitCode) ? Number(attrs.exitCode) : undefined;
  return { action, id, name: e.Type === 'network' ? undefined : attrs.name, exitCode, signal: attrs.signal };
}

/**
 * Calls `onEvent()` for each event of a container carrying every label (and
 * for network (dis)connects, which Docker reports on the network); returns a
 * function that closes the stream. A stream is not reopened here: when one
 * that was open ends or fails (the engine stopped or restarted) it calls
 * `onEvent('ended')` once, and when the engine refuses to open it
 * `onEvent('refused')`; the caller subscribes again once it sees the engine.
 */
export function containerEvents(
  docker: Dockerode,
  labels: Record<string, string>,
  onEvent: (stream?: 'ended' | 'refused', e?: ContainerEvent) => void,
): () => void {
  const label = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  return dockerEvents(docker, JSON.stringify({ type: ['container', 'network'], event: ACTIONS }), {
    data: (chunk) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line.trim()) continue;
        try {
          const e = JSON.parse(line) as RawEvent;
          const attrs = e.Actor?.Attributes ?? {};
          // A network event names the container only by id: any of them may be the fleet's (the listener knows its ids).
          if (e.Type === 'network' || label.every((l) => `${l.split('=')[0]}=${attrs[l.split('=')[0] ?? '']}` === l))
            onEvent(undefined, parseContainerEvent(e));
        } catch {
          // Half a line across chunks, or not JSON: the next look sees the change anyway.
        }
      }
    },
    ended: (how) => onEvent(how),
  });
}

/**
 * Docker's event stream for `filters`; returns a function that closes it.
 * `data` gets each chunk (one or more lines of JSON); `opened` is told when
 * the engine answered, and `ended` once, when a stream that was open ends or
 * fails ('ended') or the engine refused to open it ('refused'), never after
 * the stream was closed here. Nothing else of a failure reaches the caller:
 * every caller polls or looks anyway, and a stream is only a wake-up.
 */
export function dockerEvents(
  docker: Dockerode,
  filters: NonNullable<Dockerode.GetEventsOptions['filters']>,
  on: { data: (chunk: Buffer) => void; opened?: () => void; ended?: (how: 'ended' | 'refused') => void },
): () => void {
  let stream: NodeJS.ReadableStream | undefined;
  let closed = false;
  let over = false;
  const end = (how: 'ended' | 'refused') => {
    if (closed || over) return;
    over = true;
    on.ended?.(how);
  };
  docker
    .getEvents({ filters })
    .then((s) => {
      stream = s;
      if (closed) return close();
      on.opened?.();
      s.on('data', on.data);
      // 'close' comes after 'end' and after an error, and also when the engine's socket just went away.
      s.on('error', () => end('ended'));
      s.on('close', () => end('ended'));
      s.on('end', () => end('ended'));
    })
    .catch(() => end('refused'));
  function close(): void {
    closed = true;
    // dockerode's stream is an http.IncomingMessage: destroying it ends the request.
    (stream as unknown as { destroy?: () => void } | undefined)?.destroy?.();
  }
  return close;
}
