/**
 * Where a problem is in a YAML document, said without quoting it: line and
 * column, the key path down to it where that path can be trusted (a key
 * found mid-line may be the inside of a secret value), and the yaml library's
 * error codes in words of our own (its messages quote the source). Also the
 * nesting check that runs before anything recurses.
 */
import { isMap, isScalar, isSeq, type CST, type Document, type ErrorCode, type LineCounter, type Node, type YAMLError } from 'yaml';
import type { FieldIssue } from '../errors.js';
import { MAX_DEPTH, MAX_ISSUES } from './documentLimits.js';

/** A value starting with one of these cannot be written plain; most secrets that break a file do. */
const QUOTE_HINT = 'if a value starts with one of | > [ ] { } * & ! % @ ` or contains ": " or " #", put it in quotes';

/** What each yaml error code means, in words that quote nothing from the file. */
export const CODE_TEXT: Partial<Record<ErrorCode, string>> = {
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

export interface Where {
  lines: LineCounter;
  text: string;
}

export function lineCol(w: Where, offset: number): string {
  const { line, col } = w.lines.linePos(offset);
  return `line ${line}, column ${col}`;
}

/**
 * The deepest collection in the token tree, walked with an explicit stack:
 * the parser builds this tree without recursion, but composing it recurses
 * once per level, so the depth is checked here first.
 */
export function tooDeep(tokens: readonly CST.Token[]): number | undefined {
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
export function trustedKey(w: Where, offset: number): boolean {
  // Scanned backwards and only over spaces and dashes: slicing from the line start
  // would make a one-line document (minified JSON) quadratic.
  let i = offset;
  while (i > 0 && (w.text[i - 1] === ' ' || w.text[i - 1] === '\t' || w.text[i - 1] === '-')) i--;
  if (i > 0 && w.text[i - 1] !== '\n') return false;
  return /^[ \t]*(?:-[ \t]+)*$/.test(w.text.slice(i, offset));
}

export function keyText(key: unknown): string | undefined {
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

export function issueAt(w: Where, path: string, offset: number, message: string): FieldIssue {
  return path ? { path, message: `${message} (${lineCol(w, offset)})` } : { path: lineCol(w, offset), message };
}

/** Lists at most MAX_ISSUES problems, then how many more. */
export function capped(issues: FieldIssue[], total: number): FieldIssue[] {
  return total > issues.length
    ? [...issues, { path: '', message: `and ${total - issues.length} more problem${total - issues.length === 1 ? '' : 's'}` }]
    : issues;
}

export function parseIssues(doc: Document.Parsed, w: Where, errors: readonly YAMLError[]): FieldIssue[] {
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
