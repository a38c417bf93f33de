/**
 * Which of a container's events (ports.ts ContainerEvent) mean it no longer
 * serves: the engine and `watch` take it out of every nginx on them, without
 * waiting for a look at the fleet.
 */

/**
 * The events that take an instance out of service at once, wherever it is:
 * it stopped (die, stop, destroy, oom), is being stopped (kill with SIGTERM
 * or SIGKILL), is frozen (pause), failed its healthcheck or left the network
 * its address is on.
 */
export function takesOutOfService(e: { action: string; signal?: string | undefined }): boolean {
  switch (e.action) {
    case 'die':
    case 'stop':
    case 'destroy':
    case 'oom':
    case 'pause':
    case 'disconnect':
    case 'health_status: unhealthy':
      return true;
    case 'kill':
      // `docker kill -s HUP` asks an app to reload: only the signals that end it count.
      return e.signal === undefined || ['9', '15', 'SIGKILL', 'SIGTERM', 'KILL', 'TERM'].includes(e.signal);
    default:
      return false;
  }
}

const SERVER_RE = /^(\s*server\s+\S+?)((?:\s+(?:weight=[0-9]+|down))*)(\s*;\s*#\s*(\S+).*)$/;

/**
 * An upstream file (as fleetroll writes it, in reload or dynamic mode) with
 * every server line of the named instances marked `down`, in every block
 * (a canary's or blue-green's too); nothing else changes. `marked`: the names
 * that were in service and no longer are (none: the text is unchanged).
 */
export function markServersDown(content: string, names: ReadonlySet<string>): { text: string; marked: string[] } {
  const marked = new Set<string>();
  const lines = content.split('\n').map((line) => {
    const m = SERVER_RE.exec(line);
    if (!m || !names.has(m[4] ?? '') || /\bdown\b/.test(m[2] ?? '')) return line;
    marked.add(m[4]!);
    return `${m[1]}${m[2]} down${m[3]}`;
  });
  return { text: lines.join('\n'), marked: [...marked] };
}
