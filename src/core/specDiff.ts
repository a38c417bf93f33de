/**
 * What changes between the running revision and the one a deploy is about
 * to roll out, field by field, like `nomad job plan`: printed by `plan -f`
 * and at the start of `deploy`. A secret's value is never in either side:
 * its digest says only "changed" or "unchanged".
 *
 * PURE: the two specs in, lines out.
 */
import type { ContainerConfig } from './container.js';

/** One side of the comparison: what a revision record keeps. */
export interface ComparableSpec {
  image: string;
  version: string;
  port?: number | undefined;
  /** Literal env values. */
  env: Record<string, string>;
  /** Secret env entries: where each came from and a keyed digest of its value. */
  envSecrets?: Record<string, { source: string; digest: string }> | undefined;
  container?: ContainerConfig | undefined;
  secretFiles?: Record<string, { path: string; digest: string }> | undefined;
  restartedAt?: string | undefined;
  /** The pinned image digest, when known. */
  digest?: string | undefined;
}

export interface SpecChange {
  /** Dotted field, e.g. "image", "env.DB_PASSWORD", "container.memoryBytes". */
  field: string;
  kind: 'added' | 'removed' | 'changed' | 'secret changed' | 'secret unchanged';
  from?: string | undefined;
  to?: string | undefined;
}

const show = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

function compareValues(field: string, a: unknown, b: unknown, out: SpecChange[]): void {
  const same = JSON.stringify(a) === JSON.stringify(b);
  if (same) return;
  if (a === undefined) out.push({ field, kind: 'added', to: show(b) });
  else if (b === undefined) out.push({ field, kind: 'removed', from: show(a) });
  else out.push({ field, kind: 'changed', from: show(a), to: show(b) });
}

/** The changes from `from` (the running revision) to `to`, in a stable order; empty when they are the same spec. */
export function diffSpecs(from: ComparableSpec, to: ComparableSpec): SpecChange[] {
  const out: SpecChange[] = [];
  compareValues('image', from.image, to.image, out);
  compareValues('image digest', from.digest, to.digest === undefined ? from.digest : to.digest, out);
  compareValues('version', from.version, to.version, out);
  compareValues('port', from.port, to.port, out);
  compareValues('restartedAt', from.restartedAt, to.restartedAt, out);
  const envKeys = [
    ...new Set([...Object.keys(from.env), ...Object.keys(to.env), ...Object.keys(from.envSecrets ?? {}), ...Object.keys(to.envSecrets ?? {})]),
  ].sort();
  for (const k of envKeys) {
    const a = from.envSecrets?.[k];
    const b = to.envSecrets?.[k];
    const field = `env.${k}`;
    if (a || b) {
      // A secret on either side: the value is never shown, only whether it changed.
      if (!a && from.env[k] === undefined) out.push({ field, kind: 'added', to: `(secret: ${b!.source})` });
      else if (!b && to.env[k] === undefined) out.push({ field, kind: 'removed', from: a ? `(secret: ${a.source})` : '(literal)' });
      else if (a && b)
        out.push({
          field,
          kind: a.digest === b.digest ? 'secret unchanged' : 'secret changed',
          ...(a.source !== b.source ? { from: `(secret: ${a.source})`, to: `(secret: ${b.source})` } : {}),
        });
      else out.push({ field, kind: 'secret changed', from: a ? `(secret: ${a.source})` : '(literal)', to: b ? `(secret: ${b.source})` : '(literal)' });
      continue;
    }
    compareValues(field, from.env[k], to.env[k], out);
  }
  const ca = (from.container ?? {}) as Record<string, unknown>;
  const cb = (to.container ?? {}) as Record<string, unknown>;
  for (const k of [...new Set([...Object.keys(ca), ...Object.keys(cb)])].sort()) compareValues(k, ca[k], cb[k], out);
  const sa = from.secretFiles ?? {};
  const sb = to.secretFiles ?? {};
  for (const k of [...new Set([...Object.keys(sa), ...Object.keys(sb)])].sort()) {
    const field = `secretFiles.${k}`;
    if (!sa[k]) out.push({ field, kind: 'added', to: sb[k]!.path });
    else if (!sb[k]) out.push({ field, kind: 'removed', from: sa[k].path });
    else if (sa[k].path !== sb[k].path) out.push({ field, kind: 'changed', from: sa[k].path, to: sb[k].path });
    else out.push({ field, kind: sa[k].digest === sb[k].digest ? 'secret unchanged' : 'secret changed' });
  }
  // "secret unchanged" rows matter only beside a real change: alone they are no change at all.
  return out.some((c) => c.kind !== 'secret unchanged') ? out : [];
}

/** The changes as lines for people: `~ resources: 256m → 512m`, `+ env.DEBUG = 1`. */
export function diffLines(changes: readonly SpecChange[]): string[] {
  return changes.map((c) => {
    switch (c.kind) {
      case 'added':
        return `+ ${c.field} = ${c.to}`;
      case 'removed':
        return `- ${c.field} (was ${c.from})`;
      case 'changed':
        return `~ ${c.field}: ${c.from} → ${c.to}`;
      case 'secret changed':
        return `~ ${c.field}: secret value changed${c.from !== undefined ? ` (${c.from} → ${c.to})` : ''}`;
      case 'secret unchanged':
        return `  ${c.field}: secret value unchanged`;
    }
  });
}
