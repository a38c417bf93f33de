/**
 * Docker's answers in fleetroll's terms: a container as listed or inspected
 * becomes an InstanceInfo (its address from its network or published port,
 * its exit code from the status text), and a 404 becomes "not there". Apart
 * from the runtime (./docker.ts) because it only reads what the engine said;
 * so are the containers that are never started (createNeverStarted), which
 * are only ever inspected, their labels and name being all they hold.
 */
import type Dockerode from 'dockerode';
import { LABELS, type InstanceInfo } from '../ports.js';
import { engineMessage, runtimeError, statusOf } from './dockerRetry.js';

/** "addr:hostPort" of a container whose app port is published on its host's address. */
function publishedAddress(labels: Record<string, string>, hostPort: string | number | undefined): string | undefined {
  const addr = labels[LABELS.publishAddress];
  return addr && hostPort ? `${addr}:${hostPort}` : undefined;
}

/** Docker's container name, without the leading slash. */
function cleanName(name: string | undefined): string {
  return (name ?? '').replace(/^\//, '');
}

interface NetworkLike {
  IPAddress?: string;
}

/** "ip:port" from the first network with an IP, or undefined. */
function addressFrom(networks: Record<string, NetworkLike> | undefined, labels: Record<string, string>, preferred?: string): string | undefined {
  const port = labels[LABELS.port];
  if (!port || !networks) return undefined;
  const pick = (preferred && networks[preferred]?.IPAddress) || Object.values(networks).find((n) => n?.IPAddress)?.IPAddress;
  return pick ? `${pick}:${port}` : undefined;
}

/** Exit code from a listContainers Status such as "Exited (137) 3 seconds ago". */
function exitCodeFromStatus(status: string | undefined): number | undefined {
  const m = /\((-?\d+)\)/.exec(status ?? '');
  return m?.[1] === undefined ? undefined : Number(m[1]);
}

/** A listed container (listContainers) on `host`. */
export function instanceFromList(c: Dockerode.ContainerInfo, host: string): InstanceInfo {
  const labels = c.Labels ?? {};
  const running = c.State === 'running';
  return {
    id: c.Id,
    name: cleanName(c.Names?.[0]),
    host,
    labels,
    state: c.State,
    running,
    exitCode: running ? undefined : exitCodeFromStatus(c.Status),
    address: running
      ? labels[LABELS.publishAddress]
        ? publishedAddress(labels, c.Ports?.find((p) => String(p.PrivatePort) === labels[LABELS.port] && p.PublicPort)?.PublicPort)
        : addressFrom(c.NetworkSettings?.Networks as Record<string, NetworkLike>, labels)
      : undefined,
  };
}

/** An inspected container on `host`; `port` supplies the app port of a container fleetroll did not create (adopted). */
export function instanceFromInspect(info: Dockerode.ContainerInspectInfo, host: string, port?: number): InstanceInfo {
  const labels: Record<string, string> = {
    ...(info.Config?.Labels ?? {}),
    ...(port !== undefined && !info.Config?.Labels?.[LABELS.port] ? { [LABELS.port]: String(port) } : {}),
  };
  // A paused container is Running to Docker, but answers nothing: not running for fleetroll, as in a listing ("paused").
  const running = info.State?.Running === true && info.State?.Paused !== true;
  return {
    restartCount: info.RestartCount ?? 0,
    id: info.Id,
    name: cleanName(info.Name),
    host,
    labels,
    state: info.State?.Status ?? 'unknown',
    running,
    exitCode: running ? undefined : info.State?.ExitCode,
    address: running
      ? labels[LABELS.publishAddress]
        ? publishedAddress(
            labels,
            (info.NetworkSettings?.Ports as Record<string, { HostPort?: string }[] | null> | undefined)?.[`${labels[LABELS.port]}/tcp`]?.[0]?.HostPort,
          )
        : addressFrom(info.NetworkSettings?.Networks as Record<string, NetworkLike>, labels, info.HostConfig?.NetworkMode)
      : undefined,
  };
}

/** True when an inspect succeeds, false on 404; anything else is an error naming what was asked on `where`. */
export async function present(where: string, what: string, inspect: () => Promise<unknown>): Promise<boolean> {
  try {
    await inspect();
    return true;
  } catch (err) {
    if (statusOf(err) === 404) return false;
    throw runtimeError('E_DOCKER', `inspecting ${what} on ${where}: ${engineMessage(err)}`, err);
  }
}

/**
 * A container that is never started, holding a name and labels on the engine
 * (the fleet's state, its lock, the switch-back offer and ask). Its entrypoint
 * does not exist, so a start by mistake fails instead of running the image.
 * Docker's 409 (the name is taken) is left to the caller: for the lock it
 * means held, for the others that one is there already.
 */
export async function createNeverStarted(
  docker: Dockerode,
  c: { name: string; image: string; role: 'state' | 'lock' | 'switchback' | 'yield'; labels: Record<string, string>; binds?: string[] },
): Promise<void> {
  await docker.createContainer({
    name: c.name,
    Image: c.image,
    // Named for its role: `docker ps -a` and an error from a start say what it is.
    Entrypoint: [`/fleetroll-${c.role}-is-never-started`],
    Labels: c.labels,
    HostConfig: { ...(c.binds ? { Binds: c.binds } : {}), NetworkMode: 'none' },
  });
}
