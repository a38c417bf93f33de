/**
 * What mapping one compose service needs throughout: the context the field
 * mappers write into (fleet fields, refusals, warnings), and the conversions
 * compose's fields share (lists and maps, sizes, Go durations, paths, the
 * names of top-level volumes and networks).
 */
import { homedir } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import type { FieldIssue } from '../errors.js';
import type { Lookup } from './interpolate.js';
import { isObj, type Json } from './composeRead.js';

export interface Ctx {
  doc: Json;
  dir: string;
  project: string;
  lookup: Lookup;
  base: string;
  issues: FieldIssue[];
  warnings: string[];
  fields: Json;
  /** Container ports from ports: and expose: (TCP), in order. */
  ports: number[];
}

export const refuse = (c: Ctx, path: string, why: string) => c.issues.push({ path: `${c.base}/${path}`, message: why });
export const warn = (c: Ctx, path: string, why: string) => c.warnings.push(`${c.base}/${path}: ${why}`);

export function setCreate(c: Ctx, path: string, value: unknown): void {
  const parts = path.split('/');
  let o = (c.fields.dockerCreateOptions ??= {}) as Json;
  for (const p of parts.slice(0, -1)) o = (o[p] ??= {}) as Json;
  o[parts.at(-1)!] = value;
}

export function toList(v: unknown): string[] {
  return typeof v === 'string' ? [v] : Array.isArray(v) ? v.map(String) : [];
}

/** compose list-or-dict (`["k=v"]` or `{k: v}`) as a map of strings; `null` values stay null. */
export function toMap(v: unknown, sep = '='): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  if (Array.isArray(v)) {
    for (const e of v.map(String)) {
      const i = e.indexOf(sep);
      if (i < 0) out[e] = null;
      else out[e.slice(0, i)] = e.slice(i + 1);
    }
  } else if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) out[k] = x === null || x === undefined ? null : String(x);
  }
  return out;
}

const BYTE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  t: 1024 ** 4,
  tb: 1024 ** 4,
};

/** Docker's byte sizes ("256m", "1gb", "512", 1048576), 1024-based as docker's units are. */
export function parseBytes(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isInteger(v) && v >= -1 ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-z]*)\s*$/i.exec(v);
  const unit = m ? BYTE_UNITS[m[2]!.toLowerCase()] : undefined;
  return m && unit !== undefined ? Math.round(Number(m[1]) * unit) : undefined;
}

const DURATION_UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds from a Go duration ("1m30s", "500ms"); undefined when it is not one. */
export function parseGoDurationMs(v: unknown): number | undefined {
  if (typeof v === 'number') return v * 1000;
  if (typeof v !== 'string' || !/^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+$/.test(v)) return undefined;
  let ms = 0;
  for (const m of v.matchAll(/([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * DURATION_UNIT_MS[m[2]!]!;
  return ms;
}

export function bytesOrIssue(c: Ctx, path: string, v: unknown): number | undefined {
  const b = parseBytes(v);
  if (b === undefined) refuse(c, path, `must be a size like 256m, 1g or a number of bytes, got ${JSON.stringify(v)}`);
  return b;
}

export function expandHome(p: string): string {
  return p === '~' ? homedir() : p.startsWith('~/') ? resolvePath(homedir(), p.slice(2)) : p;
}

export function isPathLike(src: string): boolean {
  return src.startsWith('.') || src.startsWith('/') || src.startsWith('~');
}

/** compose's name for a top-level network or volume `key`: `name:`, the key itself when external, else `<project>_<key>`. */
export function resourceName(c: Ctx, kind: 'volumes' | 'networks', key: string, path: string): string | undefined {
  const defs = isObj(c.doc[kind]) ? (c.doc[kind] as Json) : {};
  if (!(key in defs)) {
    if (kind === 'networks' && key === 'default') return `${c.project}_default`;
    refuse(c, path, `refers to ${kind === 'volumes' ? 'volume' : 'network'} ${JSON.stringify(key)}, which the top-level ${kind}: does not define`);
    return undefined;
  }
  const def = isObj(defs[key]) ? (defs[key] as Json) : {};
  const ext = def.external;
  const extName = isObj(ext) && typeof ext.name === 'string' ? ext.name : undefined;
  if (typeof def.name === 'string') return def.name;
  if (extName) return extName;
  if (ext === true || ext === 'true') return key;
  return `${c.project}_${key}`;
}

/** Top-level volume definition options fleetroll cannot create a volume with. */
export function checkVolumeDefinition(c: Ctx, key: string, path: string): void {
  const defs = isObj(c.doc.volumes) ? (c.doc.volumes as Json) : {};
  const def = defs[key];
  if (!isObj(def) || def.external) return;
  if (def.driver !== undefined && def.driver !== 'local')
    c.issues.push({
      path: `volumes/${key}/driver`,
      message: `fleetroll creates named volumes with the local driver, got ${JSON.stringify(def.driver)}: create the volume on every host first and mark it external: true`,
    });
  if (def.driver_opts !== undefined)
    c.issues.push({
      path: `volumes/${key}/driver_opts`,
      message: 'fleetroll creates named volumes without driver options: create the volume on every host first and mark it external: true',
    });
  if (def.labels !== undefined)
    c.warnings.push(
      `volumes/${key}/labels: not set on the volume fleetroll creates (labels do not change what the container sees) (used at ${c.base}/${path})`,
    );
}

export function setOnce(c: Ctx, key: string, value: unknown, path: string, other: string): void {
  if (value === undefined) return;
  const prev = c.fields[key];
  if (prev !== undefined && JSON.stringify(prev) !== JSON.stringify(value)) {
    refuse(c, path, `disagrees with ${other} (${JSON.stringify(prev)} vs ${JSON.stringify(value)}): keep one`);
    return;
  }
  c.fields[key] = value;
}

/** Resource limits (memory, cpus, pids) as written, with where: compose has two spellings of each. */
export type Res = Record<string, { value: unknown; from: string }>;
