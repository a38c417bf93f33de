/**
 * A parsed YAML document as plain JSON-like values, refusing what a fleet
 * file never needs and the object schemas would silently drop or misread
 * (aliases and anchors unless allowed, unknown tags, merge keys, keys that
 * reach Object.prototype, duplicate keys), each refusal at its path.
 */
import { YAMLMap, YAMLSeq, isAlias, isMap, isPair, isScalar, isSeq, type Document, type Node } from 'yaml';
import type { FieldIssue } from '../errors.js';
import { MAX_DEPTH, MAX_EXPANDED_NODES, MAX_ISSUES } from './documentLimits.js';
import { capped, issueAt, keyText, lineCol, trustedKey, type Where } from './yamlPlaces.js';

const CORE_TAGS = new Set(['str', 'int', 'float', 'bool', 'null', 'map', 'seq'].map((t) => `tag:yaml.org,2002:${t}`));
/** yaml 1.1 tags the library resolves even in the core schema: safe to name, since they are not free text. */
const KNOWN_TAGS = new Set(['binary', 'omap', 'pairs', 'set', 'timestamp', 'merge']);
/** Keys that reach Object.prototype when assigned or looked up on a plain object. */
const RESERVED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * The document as plain JSON-like values, refusing what a fleet file never
 * needs and the object schemas would silently drop or misread: aliases and
 * anchors, tags beyond the core ones, merge keys, keys that reach
 * Object.prototype, and duplicate keys (found with one Set per mapping).
 * Recursion is bounded: the token tree was checked against MAX_DEPTH first.
 */
export function toPlain(doc: Document.Parsed, w: Where, aliases = false): { value: unknown; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  let total = 0;
  // With aliases allowed (compose files), what they expand to is bounded: a billion laughs stops here.
  let nodes = 0;
  const refuse = (path: string, offset: number, message: string): void => {
    total++;
    if (issues.length < MAX_ISSUES) issues.push(issueAt(w, path, offset, message));
  };
  const join = (path: string, seg: string): string => (path ? `${path}/${seg}` : seg);

  // `open`: the path may still grow. It stops at the first key that does not
  // start its line (see trustedKey): `TOKEN: {s3cret: !x}` is refused as TOKEN.
  // `keyAt`: where the value's key starts; a node's range leaves out its tag and anchor, so a
  // refusal of those points at the key rather than past them.
  const walk = (node: unknown, path: string, depth: number, open: boolean, keyAt?: number): unknown => {
    if (node === null || node === undefined) return null;
    const n = node as Node;
    const at = n.range?.[0] ?? 0;
    const propsAt = keyAt ?? at;
    if (depth > MAX_DEPTH) {
      refuse('', at, `nested deeper than ${MAX_DEPTH} levels`);
      return null;
    }
    if (aliases && ++nodes > MAX_EXPANDED_NODES) {
      if (nodes === MAX_EXPANDED_NODES + 1) refuse('', at, `aliases expand to more than ${MAX_EXPANDED_NODES} values`);
      return null;
    }
    if (isAlias(n)) {
      const target = aliases ? n.resolve(doc) : undefined;
      if (target === undefined) {
        refuse(
          path,
          at,
          aliases
            ? 'an alias (*name) names no anchor before it'
            : 'aliases (*name) are not allowed: write the value out (a value starting with "*" must be quoted)',
        );
        return null;
      }
      return walk(target, path, depth + 1, open, keyAt);
    }
    if (n.anchor !== undefined && !aliases)
      refuse(path, propsAt, 'anchors (&name) are not allowed: write each value out (a value starting with "&" must be quoted)');
    if (n.tag !== undefined && !CORE_TAGS.has(n.tag)) {
      const name = n.tag.startsWith('tag:yaml.org,2002:') ? n.tag.slice('tag:yaml.org,2002:'.length) : undefined;
      refuse(
        path,
        propsAt,
        name !== undefined && KNOWN_TAGS.has(name)
          ? `!!${name} is not allowed: only plain mappings, lists, strings, numbers, booleans and null`
          : `custom tags (!name) are not allowed, only !!str !!int !!float !!bool !!null !!map !!seq; a value starting with "!" must be quoted`,
      );
      return null;
    }
    if (isScalar(n)) {
      const v = n.value;
      if (v === null || typeof v === 'string' || typeof v === 'boolean' || typeof v === 'number') return v;
      refuse(path, at, 'only strings, numbers, booleans and null are allowed as values');
      return null;
    }
    if (isMap(n) && Object.getPrototypeOf(n) === YAMLMap.prototype) return mapping(n.items, path, depth, open);
    if (isSeq(n) && Object.getPrototypeOf(n) === YAMLSeq.prototype) {
      const out: unknown[] = [];
      n.items.forEach((item, i) => {
        const here = open ? join(path, String(i)) : path;
        // `[a: b]` is a one-entry mapping inside a list.
        out.push(isPair(item) ? mapping([item], here, depth + 1, open) : walk(item, here, depth + 1, open));
      });
      return out;
    }
    refuse(path, at, 'only plain mappings, lists, strings, numbers, booleans and null are allowed');
    return null;
  };

  const mapping = (pairs: readonly unknown[], path: string, depth: number, open: boolean): Record<string, unknown> => {
    const out: Record<string, unknown> = {};
    const firstAt = new Map<string, number>();
    for (const p of pairs) {
      if (!isPair(p)) continue;
      const k = p.key as Node | null;
      const at = k?.range?.[0] ?? (p.value as Node | null)?.range?.[0] ?? 0;
      if (isAlias(k)) {
        refuse(path, at, 'aliases (*name) are not allowed, as keys neither');
        continue;
      }
      const name = k === null ? '' : keyText(k);
      if (name === undefined || (k !== null && k.tag !== undefined && !CORE_TAGS.has(k.tag))) {
        refuse(path, at, 'a key must be a plain string (no list, mapping or tag as a key)');
        continue;
      }
      const trusted = open && k !== null && trustedKey(w, at);
      const here = trusted ? join(path, name) : path;
      if (k?.anchor !== undefined && !aliases) refuse(here, at, 'anchors (&name) are not allowed');
      if (name === '<<') {
        if (!aliases) {
          refuse(here, at, 'merge keys (<<) are not allowed: write the entries out');
          continue;
        }
        // A merge key (compose files use them with x- anchors): entries the mapping does not set itself.
        const merged = walk(p.value, here, depth + 1, false);
        for (const m of Array.isArray(merged) ? merged : [merged]) {
          if (m === null || typeof m !== 'object' || Array.isArray(m)) {
            refuse(here, at, 'a merge key (<<) takes a mapping or a list of mappings');
            continue;
          }
          for (const [mk, mv] of Object.entries(m)) if (!firstAt.has(mk) && !(mk in out)) out[mk] = mv;
        }
        continue;
      }
      if (RESERVED_KEYS.has(name)) {
        refuse(here, at, `"${name}" is reserved and cannot be a key`);
        continue;
      }
      const first = firstAt.get(name);
      // A key given after a merge overrides what the merge brought.
      if (aliases && first === undefined && name in out) delete out[name];
      if (first !== undefined) {
        refuse(here, at, `duplicate key: first given at ${lineCol(w, first)}`);
        continue;
      }
      firstAt.set(name, at);
      out[name] = walk(p.value, here, depth + 1, trusted, k === null ? undefined : at);
    }
    return out;
  };

  const value = walk(doc.contents, '', 1, true);
  return { value, issues: capped(issues, total) };
}
