/**
 * HTTP probes against an instance address ("ip:port" or "[ipv6]:port").
 *
 * Every probe opens its own connection and closes it (`agent: false`,
 * `Connection: close`): a probe must never hold a keep-alive socket that would keep a
 * draining instance's `server.close()` waiting. The timeout covers the whole exchange
 * (connect, headers and body), not just socket idleness.
 */
import http from 'node:http';
import { FleetrollError } from '../errors.js';
import type { ProbeTarget, Prober } from '../ports.js';

export interface HttpProberOptions {
  /** Path answering 2xx when the instance is ready, e.g. `/health/ready`. */
  readinessPath: string;
  /** Path whose body is the version, e.g. `/api/version`. */
  versionPath: string;
  /** Whole-request timeout per probe. */
  timeoutMs: number;
}

/** Largest body read from a probe (versions are short). */
const MAX_BODY = 64 * 1024;

interface Answer {
  status: number;
  body: string;
}

/** "10.0.0.2:8080" | "[fd00::2]:8080" → host + port. */
export function parseAddress(address: string): { host: string; port: number } {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(address) ?? /^([^:[\]]+):(\d+)$/.exec(address);
  const port = Number(m?.[2]);
  if (!m?.[1] || !Number.isInteger(port) || port < 1 || port > 65535) {
    throw new FleetrollError('E_INVALID', `invalid instance address ${JSON.stringify(address)} (expected ip:port)`);
  }
  return { host: m[1], port };
}

function get(address: string, path: string, timeoutMs: number, readBody: boolean): Promise<Answer> {
  const { host, port } = parseAddress(address);
  return new Promise<Answer>((resolve, reject) => {
    let done = false;
    const finish = (err: Error | undefined, answer?: Answer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(answer!);
    };
    const req = http.request({ host, port, path, method: 'GET', agent: false, headers: { Connection: 'close', Accept: 'text/plain, */*' } }, (res) => {
      const status = res.statusCode ?? 0;
      if (!readBody) {
        res.resume();
        res.on('end', () => finish(undefined, { status, body: '' }));
        res.on('error', (e) => finish(e));
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_BODY) {
          req.destroy(new Error(`response body larger than ${MAX_BODY} bytes`));
          return;
        }
        chunks.push(c);
      });
      res.on('end', () => finish(undefined, { status, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (e) => finish(e));
    });
    const timer = setTimeout(() => {
      const err = new Error(`no complete answer within ${timeoutMs} ms`);
      req.destroy(err);
      finish(err);
    }, timeoutMs);
    req.on('error', (e) => finish(e));
    req.end();
  });
}

function describe(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e?.code && e.message && !e.message.includes(e.code)) return `${e.code}: ${e.message}`;
  return e?.message ?? String(err);
}

export class HttpProber implements Prober {
  private readonly readinessPath: string;
  private readonly versionPath: string;
  private readonly timeoutMs: number;

  constructor(opts: HttpProberOptions) {
    this.readinessPath = opts.readinessPath;
    this.versionPath = opts.versionPath;
    this.timeoutMs = opts.timeoutMs;
  }

  /** A target (the Prober port) or its address (direct callers); no address is not ready. */
  async ready(target: ProbeTarget | string): Promise<boolean> {
    const address = typeof target === 'string' ? target : target.address;
    if (address === undefined) return false;
    try {
      const r = await get(address, this.readinessPath, this.timeoutMs, false);
      return r.status >= 200 && r.status < 300;
    } catch {
      return false;
    }
  }

  async version(address: string): Promise<string> {
    const url = `http://${address}${this.versionPath}`;
    let r: Answer;
    try {
      r = await get(address, this.versionPath, this.timeoutMs, true);
    } catch (err) {
      if (err instanceof FleetrollError) throw err;
      throw new FleetrollError('E_VERSION_PROBE', `version probe GET ${url} failed: ${describe(err)}`, { cause: err });
    }
    if (r.status < 200 || r.status >= 300) {
      const body = r.body.trim().slice(0, 200);
      // The status goes with the error: the final check asks again after a 503, not after a 404 (engine/verify.ts).
      throw Object.assign(new FleetrollError('E_VERSION_PROBE', `version probe GET ${url} answered HTTP ${r.status}${body ? `: ${body}` : ''}`), {
        status: r.status,
      });
    }
    return r.body.trim();
  }
}
