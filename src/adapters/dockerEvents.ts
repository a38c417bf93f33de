/**
 * Docker's event stream, for `fleetroll watch`: a container of the fleet
 * that dies, starts, is removed or (dis)connects from a network wakes the
 * watch at once instead of at its next look. Only a wake-up: the watch still
 * looks at the whole fleet, and still looks every interval, so an event
 * missed costs only time; a stream that ends (its engine stopped or
 * restarted) wakes it too, and it subscribes again once it sees the engine.
 */
import type Dockerode from 'dockerode';

/** The actions that can change what nginx should route to. */
const ACTIONS = ['die', 'start', 'destroy', 'oom', 'kill', 'health_status', 'stop', 'connect', 'disconnect'];

/**
 * Calls `onEvent()` for each event of a container carrying every label (and
 * for network (dis)connects, which Docker reports on the network); returns a
 * function that closes the stream. A stream is not reopened here: when one
 * that was open ends or fails (the engine stopped or restarted) it calls
 * `onEvent('ended')` once, and when the engine refuses to open it
 * `onEvent('refused')`; the caller subscribes again once it sees the engine.
 */
export function containerEvents(docker: Dockerode, labels: Record<string, string>, onEvent: (stream?: 'ended' | 'refused') => void): () => void {
  let stream: NodeJS.ReadableStream | undefined;
  let closed = false;
  let over = false;
  const end = (how: 'ended' | 'refused') => {
    if (closed || over) return;
    over = true;
    onEvent(how);
  };
  const label = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  docker
    .getEvents({ filters: JSON.stringify({ type: ['container', 'network'], event: ACTIONS }) as never })
    .then((s) => {
      stream = s;
      if (closed) return close();
      s.on('data', (chunk: Buffer) => {
        for (const line of chunk.toString('utf8').split('\n')) {
          if (!line.trim()) continue;
          try {
            const e = JSON.parse(line) as { Type?: string; Actor?: { Attributes?: Record<string, string> } };
            const attrs = e.Actor?.Attributes ?? {};
            // A network event names the container only by id: any of them may be the fleet's.
            if (e.Type === 'network' || label.every((l) => `${l.split('=')[0]}=${attrs[l.split('=')[0] ?? '']}` === l)) onEvent();
          } catch {
            // Half a line across chunks, or not JSON: the next look sees the change anyway.
          }
        }
      });
      // 'close' comes after 'end' and after an error, and also when the engine's socket just went away.
      s.on('error', () => end('ended'));
      s.on('close', () => end('ended'));
      s.on('end', () => end('ended'));
    })
    .catch(() => end('refused'));
  function close(): void {
    closed = true;
    (stream as unknown as { destroy?: () => void } | undefined)?.destroy?.();
  }
  return close;
}
