import { createHash } from 'node:crypto';
import type { Fleet } from '../config/load.js';

/**
 * The revision of a fleet spec: a hash of everything that makes two instances
 * different programs (image, env, port, version). Like Kubernetes'
 * pod-template-hash, instances with the same hash are interchangeable.
 * Env values go into the hash (a rotated secret is a new revision) but the
 * hash reveals nothing about them.
 */
export function revisionOf(f: Pick<Fleet, 'image' | 'env' | 'port' | 'version'> & { restartedAt?: string | undefined; digest?: string | undefined }): string {
  const env = Object.entries(f.env ?? {})
    .map(([k, v]) => [k, String(v)])
    .sort(([a], [b]) => (a! < b! ? -1 : a! > b! ? 1 : 0));
  // restartedAt (set by `fleetroll restart`) only joins the hash when set, so
  // hashes of fleets never restarted stay what they were.
  //
  // The digest (the build the tag resolved to at the start of the deploy,
  // engine/pin.ts) joins the hash next to the image as written: a tag that
  // moved to a new build since the last deploy is a new revision, and the
  // fleet rolls onto it, while a redeploy of an unmoved tag resolves to the
  // same digest and changes nothing. The reference as written stays in too,
  // so retagging is still a change the history shows. Where no host is asked
  // (plan, simulate, validate, status before any deploy) there is no digest
  // and the hash is the one of the image as written, as before pinning.
  // Consequence: the first deploy after upgrading to a fleetroll that pins
  // rolls each fleet once (its running instances carry the digest-less hash).
  const canonical = JSON.stringify({
    image: f.image,
    env,
    port: f.port,
    version: f.version,
    ...(f.restartedAt ? { restartedAt: f.restartedAt } : {}),
    ...(f.digest ? { digest: f.digest } : {}),
  });
  return createHash('sha256').update(canonical).digest('hex').slice(0, 10);
}

/** Env as Docker wants it: every value a string. */
export function envOf(f: Pick<Fleet, 'env'>): Record<string, string> {
  return Object.fromEntries(Object.entries(f.env ?? {}).map(([k, v]) => [k, String(v)]));
}
