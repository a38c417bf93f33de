/**
 * Reading a YAML or JSON document a user hands us (fleet file, defaults file,
 * experiment spec) as hostile input: only a regular file of bounded size is
 * read, the parse is linear in the text, nesting is capped before anything
 * recurses, and the result is plain objects, arrays and scalars or a
 * ValidationError (exit 2) that names a path or a line, never the text.
 *
 * The yaml library's own messages quote the source ("Unexpected scalar token
 * ...: "<your secret>""), so none of them is shown: each problem is described
 * from its error code. Its `uniqueKeys` check compares every key with every
 * earlier one (16k keys took seconds), and `toJS` expands aliases and recurses
 * once per level, so neither is used: the document tree is walked here.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { constants } from 'node:fs';
import { Composer, LineCounter, Parser, YAMLMap, YAMLSeq, isAlias, isMap, isPair, isScalar, isSeq, type CST, type Document, type ErrorCode, type Node, type YAMLError } from 'yaml';
import { FleetrollError, ValidationError, type FieldIssue } from '../errors.js';

/** The largest document read: a real fleet file is a few KiB; this bounds memory and parse time. */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;
/** The deepest nesting of mappings and lists accepted; a fleet file needs about six. */
export const MAX_DEPTH = 64;
/** Problems listed before the rest are only counted: one pass of fixes needs no more. */
export const MAX_ISSUES = 20;
/** Values aliases may expand to, where they are allowed (compose files): far above any real file, far below a billion laughs. */
export const MAX_EXPANDED_NODES = 100_000;

function mib(bytes: number): string {
  const m = bytes / (1024 * 1024);
  if (m >= 1) return `${Number.isInteger(m) ? m : m.toFixed(1)} MiB`;
  const k = bytes / 1024;
  return k >= 1 ? `${Number.isInteger(k) ? k : k.toFixed(1)} KiB` : `${bytes} bytes`;
}

function kindOf(st: { isFIFO(): boolean; isCharacterDevice(): boolean; isBlockDevice(): boolean; isSocket(): boolean }): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a file';
}

/**
 * Reads a regular file of at most `maxBytes` as UTF-8 text. A FIFO, a device
 * or a socket is refused before a byte is read (opened non-blocking, so a FIFO
 * with no writer cannot hold the open), and a file that grows past the limit
 * while being read (or reports no size, as /proc files do) is cut off at it.
 */
export async function readTextFile(file: string, what: string, maxBytes: number = MAX_DOCUMENT_BYTES): Promise<string> {
  const fail = (code: 'E_NO_FILE' | 'E_INVALID', why: string, cause?: unknown): FleetrollError =>
    new FleetrollError(code, `cannot read ${what} ${file}: ${why}`, cause === undefined ? {} : { cause });
  let fh: FileHandle;
  try {
    fh = await open(file, constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (constants.O_NOCTTY ?? 0));
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOENT' || code === 'ENOTDIR' ? 'no such file'
      : code === 'EISDIR' ? 'is a directory'
      : code === 'EACCES' || code === 'EPERM' ? 'permission denied'
      : code === 'ENXIO' ? 'is not a regular file (a socket or a device with nothing behind it)'
      : code === 'ELOOP' ? 'too many levels of symbolic links'
      : String((err as Error).message);
    throw fail('E_NO_FILE', why, err);
  }
  try {
    const st = await fh.stat();
    if (st.isDirectory()) throw fail('E_NO_FILE', 'is a directory');
    if (!st.isFile()) throw fail('E_INVALID', `is not a regular file (${kindOf(st)})`);
    const tooLarge = (size: string): FleetrollError => fail('E_INVALID', `it is ${size}, larger than the ${mib(maxBytes)} a ${what} may be`);
    if (st.size > maxBytes) throw tooLarge(mib(st.size));
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      // One byte past the limit tells "exactly at the limit" from "over it".
      const buf = Buffer.allocUnsafe(Math.min(64 * 1024, maxBytes + 1 - total));
      const { bytesRead } = await fh.read(buf, 0, buf.length, null);
      if (bytesRead === 0) break;
      chunks.push(buf.subarray(0, bytesRead));
      total += bytesRead;
      if (total > maxBytes) throw tooLarge(`more than ${mib(maxBytes)}`);
    }
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks, total));
    } catch (err) {
      throw fail('E_INVALID', 'is not UTF-8 text', err);
    }
  } catch (err) {
    if (err instanceof FleetrollError) throw err;
    throw fail('E_NO_FILE', (err as NodeJS.ErrnoException).code ?? String((err as Error).message), err);
  } finally {
    await fh.close().catch(() => undefined);
  }
}

/** Reads and parses a YAML or JSON document whose top level must be a mapping. */
export async function readDocument(file: string, what: string, o: { aliases?: boolean } = {}): Promise<Record<string, unknown>> {
  return parseDocumentText(await readTextFile(file, what), file, what, o);
}

/**
 * A fleet file, or a compose file given as one (`deploy -f docker-compose.yml`).
 * Compose files use anchors, aliases and merge keys (x- blocks shared by
 * services), so a document with a top-level `services:` is read with them
 * allowed, bounded; a fleet file never needs them and keeps refusing them.
 */
export async function readFleetOrComposeDocument(file: string): Promise<Record<string, unknown>> {
  const text = await readTextFile(file, 'fleet file');
  const compose = /^services\s*:/m.test(text);
  return parseDocumentText(text, file, compose ? 'compose file' : 'fleet file', { aliases: compose });
}

/** A value starting with one of these cannot be written plain; most secrets that break a file do. */
const QUOTE_HINT = 'if a value starts with one of | > [ ] { } * & ! % @ ` or contains ": " or " #", put it in quotes';

/** What each yaml error code means, in words that quote nothing from the file. */
const CODE_TEXT: Partial<Record<ErrorCode, string>> = {
  ALIAS_PROPS: 'an alias (*name) cannot carry a tag or an anchor',
  BAD_ALIAS: 'an alias (*name) is malformed',
  BAD_DIRECTIVE: 'a % directive is malformed',
  BAD_DQ_ESCAPE: 'a double-quoted string has an invalid \\ escape (write \\\\ for a backslash, or use single quotes)',
  BAD_INDENT: `the indentation is wrong here (or a [ or { is not closed); ${QUOTE_HINT}`,
  BAD_PROP_ORDER: 'a tag or anchor is in the wrong place',
  BAD_SCALAR_START: `a plain value cannot start with %, @ or \`; ${QUOTE_HINT}`,
  BLOCK_AS_IMPLICIT_KEY: `a mapping cannot start on the same line as its key; ${QUOTE_HINT}`,
  BLOCK_IN_FLOW: 'a block value (indented, or | >) cannot appear inside [ ] or { }',
  DUPLICATE_KEY: 'a key appears twice in the same mapping',
  IMPOSSIBLE: 'the YAML cannot be read here',
  KEY_OVER_1024_CHARS: 'a key is longer than 1024 characters',
  MISSING_CHAR: `a closing quote, ] or } is missing; ${QUOTE_HINT}`,
  MULTILINE_IMPLICIT_KEY: `a key runs over more than one line (often a value with a missing quote); ${QUOTE_HINT}`,
  MULTIPLE_ANCHORS: 'a value has more than one anchor',
  MULTIPLE_DOCS: 'the file holds more than one YAML document (a second ---): keep one',
  MULTIPLE_TAGS: 'a value has more than one tag',
  NON_STRING_KEY: 'a key must be a string',
  RESOURCE_EXHAUSTION: 'too many aliases',
  TAB_AS_INDENT: 'a tab is used for indentation: indent with spaces',
  TAG_RESOLVE_FAILED: `a tag (!name) that is unknown or does not fit its value: only the core YAML tags are allowed; ${QUOTE_HINT}`,
  UNEXPECTED_TOKEN: `unexpected character; ${QUOTE_HINT}`,
  BAD_COLLECTION_TYPE: 'a tag does not fit the kind of value it is on',
};

const CORE_TAGS = new Set(['str', 'int', 'float', 'bool', 'null', 'map', 'seq'].map((t) => `tag:yaml.org,2002:${t}`));
/** yaml 1.1 tags the library resolves even in the core schema: safe to name, since they are not free text. */
const KNOWN_TAGS = new Set(['binary', 'omap', 'pairs', 'set', 'timestamp', 'merge']);
/** Keys that reach Object.prototype when assigned or looked up on a plain object. */
const RESERVED_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

interface Where {
  lines: LineCounter;
  text: string;
}

function lineCol(w: Where, offset: number): string {
  const { line, col } = w.lines.linePos(offset);
  return `line ${line}, column ${col}`;
}

/**
 * The deepest collection in the token tree, walked with an explicit stack:
 * the parser builds this tree without recursion, but composing it recurses
 * once per level, so the depth is checked here first.
 */
function tooDeep(tokens: readonly CST.Token[]): number | undefined {
  const stack: [CST.Token, number][] = tokens.map((t) => [t, 0]);
  while (stack.length > 0) {
    const [t, depth] = stack.pop()!;
    switch (t.type) {
      case 'document':
        if (t.value) stack.push([t.value, depth]);
        break;
      case 'block-map':
      case 'block-seq':
      case 'flow-collection':
        if (depth + 1 > MAX_DEPTH) return t.offset;
        for (const item of t.items as CST.CollectionItem[]) {
          if (item.key) stack.push([item.key, depth + 1]);
          if (item.value) stack.push([item.value, depth + 1]);
        }
        break;
      default:
        break;
    }
  }
  return undefined;
}

/**
 * A key can name a path in a message only where it starts its line (after
 * indentation and "- "; tabs count, for tab-indented JSON): a key found
 * mid-line may be the inside of a value, e.g. `TOKEN: {s3cret` makes "s3cret" a key.
 */
function trustedKey(w: Where, offset: number): boolean {
  // Scanned backwards and only over spaces and dashes: slicing from the line start
  // would make a one-line document (minified JSON) quadratic.
  let i = offset;
  while (i > 0 && (w.text[i - 1] === ' ' || w.text[i - 1] === '\t' || w.text[i - 1] === '-')) i--;
  if (i > 0 && w.text[i - 1] !== '\n') return false;
  return /^[ \t]*(?:-[ \t]+)*$/.test(w.text.slice(i, offset));
}

function keyText(key: unknown): string | undefined {
  if (!isScalar(key)) return undefined;
  const v = key.value;
  if (v === null) return '';
  return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? String(v) : undefined;
}

function sameLine(w: Where, a: number, b: number): boolean {
  return w.lines.linePos(a).line === w.lines.linePos(b).line;
}

/** The key path down to `offset` in a (possibly broken) document, as far as it can be trusted. */
function pathAt(doc: Document.Parsed, w: Where, offset: number): string {
  const segs: string[] = [];
  let node: unknown = doc.contents;
  for (let depth = 0; depth <= MAX_DEPTH && node; depth++) {
    let next: unknown;
    if (isMap(node)) {
      let hit: { key: Node; value: unknown } | undefined;
      for (const p of node.items) {
        const k = p.key as Node | null;
        const start = k?.range?.[0];
        if (!k || start === undefined || start > offset) continue;
        const end = (p.value as Node | null)?.range?.[2] ?? k.range?.[2] ?? start;
        if (offset <= end || sameLine(w, start, offset)) hit = { key: k, value: p.value };
      }
      const name = hit && trustedKey(w, hit.key.range![0]) ? keyText(hit.key) : undefined;
      if (!hit || name === undefined) break;
      segs.push(name);
      next = hit.value;
    } else if (isSeq(node)) {
      let index = -1;
      node.items.forEach((item, i) => {
        const r = (item as Node | null)?.range;
        if (r && r[0] <= offset && (offset <= r[2] || sameLine(w, r[0], offset))) index = i;
      });
      if (index < 0) break;
      segs.push(String(index));
      next = node.items[index];
    } else break;
    const r = (next as Node | null)?.range;
    if (!r || offset < r[0] || offset > r[2]) break;
    node = next;
  }
  return segs.join('/');
}

function issueAt(w: Where, path: string, offset: number, message: string): FieldIssue {
  return path ? { path, message: `${message} (${lineCol(w, offset)})` } : { path: lineCol(w, offset), message };
}

/** Lists at most MAX_ISSUES problems, then how many more. */
function capped(issues: FieldIssue[], total: number): FieldIssue[] {
  return total > issues.length ? [...issues, { path: '', message: `and ${total - issues.length} more problem${total - issues.length === 1 ? '' : 's'}` }] : issues;
}

function parseIssues(doc: Document.Parsed, w: Where, errors: readonly YAMLError[]): FieldIssue[] {
  const seen = new Set<string>();
  const issues: FieldIssue[] = [];
  let total = 0;
  for (const e of errors) {
    const offset = e.pos[0];
    // One problem of a kind a line: a stray "]" is reported by the parser once for each token after it.
    const key = `${e.code}\0${w.lines.linePos(offset).line}`;
    if (seen.has(key)) continue;
    seen.add(key);
    total++;
    if (issues.length >= MAX_ISSUES) continue;
    // A syntax error is placed by line and column first; the key it is under, when that can be trusted, helps find it.
    const path = pathAt(doc, w, offset);
    const text = CODE_TEXT[e.code] ?? `invalid YAML (${e.code})`;
    issues.push({ path: lineCol(w, offset), message: path ? `${path}: ${text}` : text });
  }
  return capped(issues, total);
}

/**
 * The document as plain JSON-like values, refusing what a fleet file never
 * needs and the object schemas would silently drop or misread: aliases and
 * anchors, tags beyond the core ones, merge keys, keys that reach
 * Object.prototype, and duplicate keys (found with one Set per mapping).
 * Recursion is bounded: the token tree was checked against MAX_DEPTH first.
 */
function toPlain(doc: Document.Parsed, w: Where, aliases = false): { value: unknown; issues: FieldIssue[] } {
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
        refuse(path, at, aliases ? 'an alias (*name) names no anchor before it' : 'aliases (*name) are not allowed: write the value out (a value starting with "*" must be quoted)');
        return null;
      }
      return walk(target, path, depth + 1, open, keyAt);
    }
    if (n.anchor !== undefined && !aliases) refuse(path, propsAt, 'anchors (&name) are not allowed: write each value out (a value starting with "&" must be quoted)');
    if (n.tag !== undefined && !CORE_TAGS.has(n.tag)) {
      const name = n.tag.startsWith('tag:yaml.org,2002:') ? n.tag.slice('tag:yaml.org,2002:'.length) : undefined;
      refuse(path, propsAt, name !== undefined && KNOWN_TAGS.has(name)
        ? `!!${name} is not allowed: only plain mappings, lists, strings, numbers, booleans and null`
        : `custom tags (!name) are not allowed, only !!str !!int !!float !!bool !!null !!map !!seq; a value starting with "!" must be quoted`);
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
      if (name === undefined || (k !== null && (k.tag !== undefined && !CORE_TAGS.has(k.tag)))) {
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

/**
 * Parses a YAML (or JSON) document whose top level must be a mapping. Throws
 * ValidationError (exit 2) listing the problems with their paths (`env/API_TOKEN`)
 * or, where no path can be trusted, their place (`line 3, column 5`); no
 * message quotes the text. `source` names the file in the error.
 */
export function parseDocumentText(text: string, source: string, what: string, o: { aliases?: boolean } = {}): Record<string, unknown> {
  const w: Where = { lines: new LineCounter(), text };
  let value: unknown;
  try {
    const tokens = Array.from(new Parser(w.lines.addNewLine).parse(text));
    const deep = tooDeep(tokens);
    if (deep !== undefined) {
      throw new ValidationError([{ path: lineCol(w, deep), message: `nested deeper than ${MAX_DEPTH} levels of mappings and lists` }], { source });
    }
    const composer = new Composer({ uniqueKeys: false, version: '1.2', schema: 'core', merge: false, strict: true });
    const docs = Array.from(composer.compose(tokens, true, text.length));
    // With forceDoc the composer always yields a document, if only an empty one.
    const doc = docs[0]!;
    if (docs.length > 1) {
      throw new ValidationError([issueAt(w, '', docs[1]!.range[0], CODE_TEXT.MULTIPLE_DOCS!)], { source });
    }
    if (doc.errors.length > 0) throw new ValidationError(parseIssues(doc, w, doc.errors), { source });
    // A warning is refused as well (the library would carry on: an unknown tag becomes ""); an unknown
    // tag stays on its node, so toPlain refuses it by path and its warning need not be repeated.
    const plain = toPlain(doc, w, o.aliases === true);
    const others = doc.warnings.filter((e) => e.code !== 'TAG_RESOLVE_FAILED');
    const issues = [...plain.issues, ...(others.length > 0 ? parseIssues(doc, w, others) : [])];
    if (issues.length === 0 && doc.warnings.length > 0) issues.push(...parseIssues(doc, w, doc.warnings));
    if (issues.length > 0) throw new ValidationError(issues, { source });
    value = plain.value;
  } catch (err) {
    if (err instanceof ValidationError) throw err;
    // Whatever the parser threw may quote the text: say only where it happened.
    throw new ValidationError([{ path: '', message: `${what} could not be parsed as YAML or JSON (${(err as Error)?.name ?? 'error'})` }], { source });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError([{ path: '', message: `${what} must be a mapping (YAML object), got ${value === null ? 'an empty document' : Array.isArray(value) ? 'a list' : typeof value}` }], { source });
  }
  return value as Record<string, unknown>;
}
