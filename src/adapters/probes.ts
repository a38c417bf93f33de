/**
 * The fleet's probes as one Prober: readiness by HTTP GET (adapters/http.ts),
 * a TCP connect, Docker's own healthcheck, or a command run inside the
 * container; the version by HTTP, or none (`version: false`: the engine then
 * verifies image IDs and revision labels instead, engine/verify.ts).
 *
 * Healthcheck and exec probes reach the container through the Runtime of the
 * host it runs on, so they work for a worker with no port and on remote hosts
 * whose container addresses this machine cannot reach.
 */
import net from 'node:net';
import { readinessKind, type ExecReadiness, type HttpReadiness, type ReadinessProbe, type TcpReadiness, type VersionProbe } from '../config/probes.js';
import { FleetrollError } from '../errors.js';
import type { ProbeTarget, Prober, Runtime } from '../ports.js';
import { HttpProber, parseAddress } from './http.js';

export interface ProbesConfig {
  readiness: ReadinessProbe;
  version: VersionProbe;
}

/** True when a TCP connection to host:port opens within timeoutMs. */
export function tcpConnects(host: string, port: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let done = false;
    const finish = (ok: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    socket.once('connect', () => finish(true));
    socket.once('error', () => finish(false));
  });
}

/** "ip:port" with its port replaced ("[v6]:port" keeps its brackets). */
function withPort(address: string, port: number): { host: string; port: number } {
  return { host: parseAddress(address).host, port };
}

export class FleetProber implements Prober {
  private readonly http: HttpProber;

  constructor(
    private readonly probes: ProbesConfig,
    private readonly runtimes: ReadonlyMap<string, Runtime>,
  ) {
    const r = probes.readiness;
    this.http = new HttpProber({
      readinessPath: readinessKind(r) === 'http' ? (r as HttpReadiness).path : '/',
      versionPath: probes.version === false ? '/' : probes.version.path,
      timeoutMs: r.timeoutMs,
    });
  }

  private runtime(target: ProbeTarget): Runtime {
    const rt = this.runtimes.get(target.host);
    if (!rt) throw new FleetrollError('E_INTERNAL', `no runtime for host ${target.host} (probing ${target.id})`);
    return rt;
  }

  async ready(target: ProbeTarget): Promise<boolean> {
    const r = this.probes.readiness;
    switch (readinessKind(r)) {
      case 'http':
        return this.http.ready(target);
      case 'tcp': {
        if (target.address === undefined) return false;
        const tcp = (r as TcpReadiness).tcp;
        const to = tcp === true ? parseAddress(target.address) : withPort(target.address, tcp.port);
        return tcpConnects(to.host, to.port, r.timeoutMs);
      }
      case 'healthcheck':
        return (await this.runtime(target).health(target.id)) === 'healthy';
      case 'exec':
        return (await this.runtime(target).exec(target.id, (r as ExecReadiness).exec, r.timeoutMs)) === 0;
    }
  }

  async version(address: string): Promise<string> {
    if (this.probes.version === false) {
      throw new FleetrollError('E_VERSION_PROBE', `the fleet has no version endpoint (probes.version: false): cannot ask ${address} for its version`);
    }
    return this.http.version(address);
  }
}

/** The Prober for a fleet's probes block, reaching containers through these runtimes. */
export function buildProber(probes: ProbesConfig, runtimes: ReadonlyMap<string, Runtime>): Prober {
  return new FleetProber(probes, runtimes);
}
