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
