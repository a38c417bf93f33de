/**
 * Variable interpolation the way Docker Compose does it (compose-spec
 * "Interpolation", compose-go's template package), for compose files and
 * fleet files alike, plus the `.env` / `env_file` format.
 *
 * Pure: the caller supplies the lookup, so tests and `validate` decide where
 * values come from. No message ever contains a variable's value: values are
 * often passwords, and error text ends up in CI logs.
 */
import { ValidationError, type FieldIssue } from '../errors.js';

export type Lookup = (name: string) => string | undefined;

// compose-go matches names case-insensitively against [_a-z][_a-z0-9]*.
const NAME_START = /[_A-Za-z]/;
const NAME_CHAR = /[_A-Za-z0-9]/;
const OPERATORS = [':-', ':?', ':+', '-', '?', '+'] as const;
type Operator = (typeof OPERATORS)[number];

/**
 * Internal on purpose: the scanner throws it without knowing the field's path,
 * and expand()'s only entry, interpolateString, turns it into a ValidationError
 * (E_INVALID) that names the path. It never leaves this module.
 */
class TemplateError extends Error {}

interface Scan {
  text: string;
  pos: number;
  variables: string[];
  lookup: Lookup;
}

function readName(s: Scan): string {
  const start = s.pos;
  if (s.pos < s.text.length && NAME_START.test(s.text[s.pos]!)) {
    s.pos++;
    while (s.pos < s.text.length && NAME_CHAR.test(s.text[s.pos]!)) s.pos++;
  }
  return s.text.slice(start, s.pos);
}

function use(s: Scan, name: string): string | undefined {
  if (!s.variables.includes(name)) s.variables.push(name);
  return s.lookup(name);
}

/**
 * Expands text up to `stop` (a `}` closing the enclosing `${`) or the end.
 * `evaluate: false` only checks the syntax: an operand compose never looks at
 * (the default of a set variable) must still be well formed, but the variables
 * in it did not decide the value.
 */
function expand(s: Scan, nested: boolean, evaluate: boolean): string {
  let out = '';
  while (s.pos < s.text.length) {
    const c = s.text[s.pos]!;
    if (nested && c === '}') return out;
    if (c !== '$') {
      out += c;
      s.pos++;
      continue;
    }
    const next = s.text[s.pos + 1];
    if (next === '$') {
      out += '$';
      s.pos += 2;
    } else if (next === '{') {
      const opened = s.pos;
      s.pos += 2;
      out += braced(s, opened, evaluate);
    } else if (next !== undefined && NAME_START.test(next)) {
      s.pos++;
      const name = readName(s);
      if (evaluate) out += use(s, name) ?? '';
    } else {
      // Compose keeps a `$` that starts no variable ("$5", "a $ b") as it is.
      out += '$';
      s.pos++;
    }
  }
  if (nested) throw new TemplateError('unclosed ${: a "}" is missing');
  return out;
}

function braced(s: Scan, opened: number, evaluate: boolean): string {
  const nameAt = s.pos;
  const name = readName(s);
  if (s.pos >= s.text.length) throw new TemplateError('unclosed ${: a "}" is missing');
  if (name === '') {
    throw new TemplateError(
      `invalid variable name after \${ at character ${nameAt + 1}: a name starts with a letter or "_" and has only letters, digits and "_"`,
    );
  }
  if (s.text[s.pos] === '}') {
    s.pos++;
    return evaluate ? (use(s, name) ?? '') : '';
  }
  const op = OPERATORS.find((o) => s.text.startsWith(o, s.pos));
  if (op === undefined) {
    if (s.text.indexOf('}', s.pos) < 0) throw new TemplateError('unclosed ${: a "}" is missing');
    throw new TemplateError(
      `invalid interpolation \${${name}${s.text[s.pos]}...} at character ${opened + 1}: a name has only letters, digits and "_", and the forms are \${${name}}, \${${name}:-default}, \${${name}-default}, \${${name}:?message}, \${${name}?message}, \${${name}:+replacement}, \${${name}+replacement}`,
    );
  }
  s.pos += op.length;
  const value = evaluate ? use(s, name) : undefined;
  const set = value !== undefined;
  const nonEmpty = set && value !== '';
  const operandAt = s.pos;
  let result: string;
  switch (op as Operator) {
    case ':-':
    case '-': {
      const takeDefault = evaluate && (op === ':-' ? !nonEmpty : !set);
      const d = expand(s, true, takeDefault);
      result = takeDefault ? d : (value ?? '');
      break;
    }
    case ':+':
    case '+': {
      const takeReplacement = evaluate && (op === ':+' ? nonEmpty : set);
      const r = expand(s, true, takeReplacement);
      result = takeReplacement ? r : (value ?? '');
      break;
    }
    case ':?':
    case '?': {
      // The message is checked but not expanded: compose would expand it, but
      // an expanded message could carry another variable's value into a log.
      expand(s, true, false);
      const missing = evaluate && (op === ':?' ? !nonEmpty : !set);
      if (missing) {
        const message = s.text.slice(operandAt, s.pos);
        s.pos++;
        throw new TemplateError(`variable ${name} is required${message ? `: ${message}` : op === ':?' ? ' (set and not empty)' : ''}`);
      }
      result = value ?? '';
      break;
    }
  }
  s.pos++; // the closing brace expand() stopped at
  return result;
}

/**
 * Expands one string. Throws ValidationError([{ path, message }]) for a
 * required variable that is missing or for bad syntax.
 */
export function interpolateString(text: string, lookup: Lookup, path: string): { value: string; variables: string[] } {
  if (!text.includes('$')) return { value: text, variables: [] };
  const s: Scan = { text, pos: 0, variables: [], lookup };
  try {
    return { value: expand(s, false, true), variables: s.variables };
  } catch (err) {
    if (err instanceof TemplateError) throw new ValidationError([{ path, message: err.message }]);
    throw err;
  }
}

function join(path: string, key: string | number): string {
  return path === '' ? String(key) : `${path}/${key}`;
}

/**
 * Expands every string in a parsed document (values only: compose never
 * interpolates keys). Reports every problem in one ValidationError.
 * `keep(path)`: a subtree left exactly as written.
 */
export function interpolateTree(
  value: unknown,
  lookup: Lookup,
  path = '',
  keep?: (path: string) => boolean,
): { value: unknown; variables: Map<string, string[]> } {
  const variables = new Map<string, string[]>();
  const issues: FieldIssue[] = [];
  const walk = (v: unknown, p: string): unknown => {
    if (keep?.(p)) return v;
    if (typeof v === 'string') {
      try {
        const r = interpolateString(v, lookup, p);
        if (r.variables.length > 0) variables.set(p, r.variables);
        return r.value;
      } catch (err) {
        if (!(err instanceof ValidationError)) throw err;
        issues.push(...err.issues);
        return v;
      }
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, join(p, i)));
    if (v !== null && typeof v === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = walk(x, join(p, k));
      return out;
    }
    return v;
  };
  const result = walk(value, path);
  if (issues.length > 0) throw new ValidationError(issues);
  return { value: result, variables };
}

const DOTENV_KEY = /^[A-Za-z0-9_.\-[\]]+$/;
const DOUBLE_QUOTE_ESCAPES: Record<string, string> = { a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '"': '"', '\\': '\\' };

/**
 * Parses the compose env-file format (`.env`, `env_file:`): `KEY=VAL`,
 * `export KEY=VAL`, `#` comments, blank lines, `'literal'`, `"escaped\n"`
 * (may span lines), ` #` comments after unquoted values. A bare `KEY` leaves
 * the variable unset, as compose-spec says. With `lookup`, unquoted and
 * double-quoted values are interpolated as compose does, keys defined earlier
 * in the file first; without it they are returned as written.
 */
export function parseDotenv(text: string, source: string, lookup?: Lookup): Record<string, string> {
  const out: Record<string, string> = {};
  const src = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const lines = src.split(/\r?\n/);
  const bad = (n: number, why: string): never => {
    throw new ValidationError([{ path: `${source}: line ${n}`, message: why }]);
  };
  const expandValue = (v: string, n: number): string =>
    lookup ? interpolateString(v, (k) => (Object.hasOwn(out, k) ? out[k] : lookup(k)), `${source}: line ${n}`).value : v;
  // `\$` in double quotes is a literal dollar: `$$` when the value is interpolated next.
  const dollar = lookup ? '$$' : '$';
  for (let i = 0; i < lines.length; i++) {
    const n = i + 1;
    let line = lines[i]!.replace(/^\s+/, '');
    if (line === '' || line.startsWith('#')) continue;
    if (/^export\s+/.test(line)) line = line.replace(/^export\s+/, '');
    const eq = line.search(/[=:]/);
    if (eq < 0) {
      const key = line.trimEnd();
      if (!DOTENV_KEY.test(key)) bad(n, 'expected KEY=VALUE: a key has only letters, digits, "_", ".", "-", "[" and "]"');
      continue; // `KEY` alone: unset (compose-spec "Env_file format")
    }
    const key = line.slice(0, eq).trimEnd();
    if (key === '' || !DOTENV_KEY.test(key)) {
      bad(n, key === '' ? 'expected KEY=VALUE: the key is missing' : 'expected KEY=VALUE: a key has only letters, digits, "_", ".", "-", "[" and "]"');
    }
    const rest = line.slice(eq + 1).replace(/^[ \t]+/, '');
    const quote = rest[0];
    if (quote !== '"' && quote !== "'") {
      const value = rest.split(' #')[0]!.trimEnd();
      out[key] = expandValue(value, n);
      continue;
    }
    // A quoted value may continue on the next lines until its closing quote.
    let body = rest.slice(1);
    let raw = '';
    let closed = false;
    let trailing = '';
    const startLine = n;
    for (;;) {
      let j = 0;
      let escaped = false;
      for (; j < body.length; j++) {
        const c = body[j]!;
        if (escaped) {
          escaped = false;
          if (quote === "'") raw += c === "'" ? "'" : `\\${c}`;
          else raw += c === '$' ? dollar : (DOUBLE_QUOTE_ESCAPES[c] ?? `\\${c}`);
          continue;
        }
        if (c === '\\') {
          escaped = true;
          continue;
        }
        if (c === quote) {
          closed = true;
          break;
        }
        raw += c;
      }
      if (closed) {
        trailing = body.slice(j + 1);
        break;
      }
      if (escaped) raw += '\\';
      i++;
      if (i >= lines.length) bad(startLine, `the ${quote === '"' ? 'double' : 'single'}-quoted value of ${key} is not closed`);
      raw += '\n';
      body = lines[i]!;
    }
    const after = trailing.trim();
    if (after !== '' && !after.startsWith('#')) bad(i + 1, `unexpected text after the closing quote of ${key}'s value (a comment starts with "#")`);
    out[key] = quote === "'" ? raw : expandValue(raw, startLine);
  }
  return out;
}
