/**
 * Reading a YAML or JSON document (fleet files, defaults files, experiment
 * specs, compose files).
 */
import { readFile } from 'node:fs/promises';
import { parseDocument } from 'yaml';
import { ExitCode, FleetrollError, ValidationError } from '../errors.js';

/** Reads and parses a YAML or JSON document, reporting syntax errors with line and column. */
export async function readDocument(file: string, what: string): Promise<unknown> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'is a directory' : String((err as Error).message);
    throw new FleetrollError('E_NO_FILE', ExitCode.invalidInput, `cannot read ${what} ${file}: ${why}`, { cause: err });
  }
  const doc = parseDocument(text, { prettyErrors: true, uniqueKeys: true });
  if (doc.errors.length > 0) {
    const issues = doc.errors.map((e) => {
      const pos = e.linePos?.[0];
      return { path: pos ? `line ${pos.line}, column ${pos.col}` : '', message: e.message.split('\n')[0] ?? e.message };
    });
    throw new ValidationError(issues, { source: file });
  }
  const value: unknown = doc.toJS();
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new ValidationError([{ path: '', message: `${what} must be a mapping (YAML object), got ${value === null ? 'an empty document' : Array.isArray(value) ? 'a list' : typeof value}` }], { source: file });
  }
  return value;
}

