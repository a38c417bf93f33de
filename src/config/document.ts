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
 *
 * The parts: textFile.ts (reading), yamlPlaces.ts (saying where), yamlPlain.ts
 * (the walk to plain values), documentLimits.ts (the bounds).
 */
import { Composer, LineCounter, Parser } from 'yaml';
import { ValidationError } from '../errors.js';
import { MAX_DEPTH } from './documentLimits.js';
import { readTextFile } from './textFile.js';
import { toPlain } from './yamlPlain.js';
import { CODE_TEXT, issueAt, lineCol, parseIssues, tooDeep, type Where } from './yamlPlaces.js';

// Reading a user's file and its bounds, for the modules (and tests) that read one through this module.
export { MAX_DEPTH, MAX_DOCUMENT_BYTES, MAX_ISSUES } from './documentLimits.js';
export { readTextFile } from './textFile.js';

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
    throw new ValidationError(
      [
        {
          path: '',
          message: `${what} must be a mapping (YAML object), got ${value === null ? 'an empty document' : Array.isArray(value) ? 'a list' : typeof value}`,
        },
      ],
      { source },
    );
  }
  return value as Record<string, unknown>;
}
