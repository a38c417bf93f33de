import { createHash, createHmac } from 'node:crypto';
import type { Fleet } from '../config/load.js';
import type { ContainerConfig } from '../core/container.js';

/** What makes two instances different programs: everything the revision hash covers. */
export type RevisionInput = Pick<Fleet, 'image' | 'env' | 'port' | 'version'> & {
  restartedAt?: string | undefined;
  container?: ContainerConfig | undefined;
  /** Digests of the secret files' contents, by secret name (a rotated secret file is a new revision). */
  secretDigests?: Record<string, string> | undefined;
  /** The fleet's random key (kept in its state): the hash of anything secret is keyed with it. */
  revisionKey?: string | undefined;
  /** The build the tag resolved to at the start of the deploy (engine/pin.ts). */
  digest?: string | undefined;
};

const sorted = (o: Record<string, unknown>) => Object.entries(o).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/**
 * The revision of a fleet spec. Like Kubernetes' pod-template-hash, instances
 * with the same hash are interchangeable: it covers the image, the version,
 * the port, every container field and the env and secret values, so changing
 * a limit, a mount or a secret rolls the fleet.
 *
 * The label is readable by anyone who can list containers, and image, port
 * and version are visible beside it, so an unkeyed hash over a low-entropy
 * secret (a 6-digit PIN) can be guessed offline. When the spec holds
 * anything secret (env, secret files) the hash is therefore an HMAC with the
 * fleet's own random key, kept in its state and never in a label; without
 * the key a guess cannot be checked. A spec with nothing secret keeps the
 * plain hash it always had, so fleets without env do not roll on upgrade.
 * Fields only join the canonical form when set, for the same reason.
 *
 * The digest (the build the tag resolved to at the start of the deploy,
 * engine/pin.ts) joins the hash beside the image as written: a tag moved to
 * a new build since the last deploy is a new revision and the fleet rolls
 * onto it, while a redeploy of an unmoved tag resolves to the same digest
 * and changes nothing. Where no host is asked (plan, simulate, validate)
 * there is no digest. The first deploy after upgrading to a fleetroll that
 * pins therefore rolls each fleet once.
 */
export function revisionOf(f: RevisionInput): string {
  const env = sorted(f.env ?? {}).map(([k, v]) => [k, String(v)]);
  const container = f.container && Object.keys(f.container).length ? f.container : undefined;
  const secrets = f.secretDigests && Object.keys(f.secretDigests).length ? sorted(f.secretDigests) : undefined;
  const canonical = JSON.stringify({
    image: f.image,
    env,
    port: f.port,
    version: f.version,
    ...(f.restartedAt ? { restartedAt: f.restartedAt } : {}),
    ...(container ? { container: canonicalize(container) } : {}),
    ...(secrets ? { secrets } : {}),
    ...(f.digest ? { digest: f.digest } : {}),
  });
  const secret = env.length > 0 || secrets !== undefined;
  const h = secret ? createHmac('sha256', `fleetroll-revision:${f.revisionKey ?? ''}`) : createHash('sha256');
  return h.update(canonical).digest('hex').slice(0, 10);
}

/** Object keys in a fixed order at every depth, so the hash does not depend on how the file was written. */
function canonicalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonicalize);
  if (v !== null && typeof v === 'object')
    return Object.fromEntries(
      sorted(v as Record<string, unknown>)
        .filter(([, x]) => x !== undefined)
        .map(([k, x]) => [k, canonicalize(x)]),
    );
  return v;
}

/**
 * A keyed digest of one secret value, for change detection in the state
 * (`plan` says "changed" or "unchanged" without ever holding the value).
 */
export function secretDigest(value: string, key: string | undefined): string {
  return `hmac-sha256:${createHmac('sha256', `fleetroll-secret:${key ?? ''}`)
    .update(value)
    .digest('hex')
    .slice(0, 16)}`;
}

/** Env as Docker wants it: every value a string. */
export function envOf(f: Pick<Fleet, 'env'>): Record<string, string> {
  return Object.fromEntries(Object.entries(f.env ?? {}).map(([k, v]) => [k, String(v)]));
}
