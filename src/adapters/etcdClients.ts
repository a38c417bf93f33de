/**
 * The etcd3 clients of this process, one per cluster settings, and etcd's
 * errors as fleetroll's. Kept apart from the state store so that the CLI can
 * close them at its end without loading Docker's client (etcdState.ts does).
 */
import type { Etcd3, IOptions } from 'etcd3';
import { readFileSync } from 'node:fs';
import { FleetrollError } from '../errors.js';

/** Each call to etcd gives up after this long: a cluster that does not answer fails preflight, it does not hang it. */
const CALL_DEADLINE_MS = 5000;
export interface EtcdSettings {
  endpoints: string[];
  prefix: string;
  tls?: { ca: string; cert?: string | undefined; key?: string | undefined } | undefined;
}

/** One client per settings in a process: the store, both locks and the watch share its connections. */
const clients = new Map<string, Promise<Etcd3>>();

export async function clientFor(s: EtcdSettings): Promise<Etcd3> {
  const key = JSON.stringify(s);
  let c = clients.get(key);
  if (!c) {
    // Loaded only by fleets that keep their state in etcd: validate and the volume backend never pay for gRPC.
    c = import('etcd3').then(({ Etcd3 }) => {
      const user = process.env.FLEETROLL_ETCD_USERNAME;
      const options: IOptions = {
        hosts: s.endpoints,
        dialTimeout: CALL_DEADLINE_MS,
        defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + CALL_DEADLINE_MS }),
        ...(user ? { auth: { username: user, password: process.env.FLEETROLL_ETCD_PASSWORD ?? '' } } : {}),
        ...(s.tls
          ? {
              credentials: {
                rootCertificate: readFileSync(s.tls.ca),
                ...(s.tls.key ? { privateKey: readFileSync(s.tls.key) } : {}),
                ...(s.tls.cert ? { certChain: readFileSync(s.tls.cert) } : {}),
              },
            }
          : {}),
      };
      return new Etcd3(options);
    });
    clients.set(key, c);
  }
  return c;
}

/** Closes every client this process opened (the CLI's exit; tests). */
export async function closeEtcdClients(): Promise<void> {
  const all = [...clients.values()];
  clients.clear();
  await Promise.all(all.map(async (c) => (await c.catch(() => undefined))?.close()));
}

/** etcd's error as fleetroll's: the endpoints tried, and what to check. */
export function etcdError(s: EtcdSettings, what: string, err: unknown): FleetrollError {
  if (err instanceof FleetrollError) return err;
  // grpc-js ends an unreachable cluster's message with an empty "Resolution note:".
  const message = (err instanceof Error ? err.message : String(err)).replace(/\s*Resolution note:\s*$/, '');
  const name = err instanceof Error ? err.constructor.name : '';
  const auth = /Authentication|PermissionDenied|auth/i.test(`${name} ${message}`);
  return new FleetrollError('E_ETCD', `${what}: etcd at ${s.endpoints.join(', ')}: ${message}`, {
    hint: auth
      ? 'check FLEETROLL_ETCD_USERNAME / FLEETROLL_ETCD_PASSWORD and that the user may read and write the prefix'
      : 'check that the etcd cluster runs and has a quorum, and that this machine reaches its endpoints (state.etcd.endpoints)',
    details: { endpoints: s.endpoints, prefix: s.prefix },
    cause: err,
  });
}

/** A key of the fleet's: prefix/service/name. */
export function keyOf(s: EtcdSettings, service: string, name: string): string {
  return `${s.prefix.replace(/\/+$/, '')}/${service}/${name}`;
}
