/**
 * Docker's event stream, for `fleetroll watch`: a container of the fleet
 * that dies, starts, is removed or (dis)connects from a network wakes the
 * watch at once instead of at its next look. Only a wake-up: the watch still
 * looks at the whole fleet, and still looks every interval, so an event
 * missed (a stream that broke, an engine that restarted) costs only time.
 */
import type Dockerode from 'dockerode';

/** The actions that can change what nginx should route to. */
const ACTIONS = ['die', 'start', 'destroy', 'oom', 'kill', 'health_status', 'stop', 'connect', 'disconnect'];

/**
 * Calls `onEvent` for each event of a container carrying every label (and
 * for network (dis)connects, which Docker reports on the network); returns a
 * function that closes the stream. A stream that fails or ends is not
 * reopened here: the caller subscribes again when it looks next.
 */
export function containerEvents(docker: Dockerode, labels: Record<string, string>, onEvent: () => void): () => void {
  let stream: NodeJS.ReadableStream | undefined;
  let closed = false;
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
      s.on('error', () => {});
    })
    .catch(() => {});
  function close(): void {
    closed = true;
    (stream as unknown as { destroy?: () => void } | undefined)?.destroy?.();
  }
  return close;
}
