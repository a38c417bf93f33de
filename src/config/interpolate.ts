/** Placeholder until the compose helper's module lands (same API). */
import { ValidationError, type FieldIssue } from '../errors.js';

export function interpolateString(text: string, lookup: (name: string) => string | undefined, path: string): { value: string; variables: string[] } {
  const variables: string[] = [];
  const value = text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)/g, (m, name?: string, op?: string, arg?: string, bare?: string) => {
    if (m === '$$') return '$';
    const n = (name ?? bare)!;
    variables.push(n);
    const v = lookup(n);
    const unset = v === undefined || (op?.startsWith(':') === true && v === '');
    if (op?.endsWith('-')) return unset ? (arg ?? '') : v!;
    if (op?.endsWith('?') && unset) throw new ValidationError([{ path, message: `variable ${n} is required${arg ? `: ${arg}` : ''}` }]);
    return v ?? '';
  });
  return { value, variables };
}

export function interpolateTree(value: unknown, lookup: (name: string) => string | undefined, path = ''): { value: unknown; variables: Map<string, string[]> } {
  const variables = new Map<string, string[]>();
  const issues: FieldIssue[] = [];
  const walk = (v: unknown, p: string): unknown => {
    if (typeof v === 'string') {
      try {
        const r = interpolateString(v, lookup, p);
        if (r.variables.length) variables.set(p, r.variables);
        return r.value;
      } catch (err) {
        if (err instanceof ValidationError) issues.push(...err.issues);
        return v;
      }
    }
    if (Array.isArray(v)) return v.map((x, i) => walk(x, p ? `${p}/${i}` : String(i)));
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, p ? `${p}/${k}` : k)]));
    return v;
  };
  const out = walk(value, path);
  if (issues.length) throw new ValidationError(issues);
  return { value: out, variables };
}

export function parseDotenv(text: string, source: string): Record<string, string> {
  const out: Record<string, string> = {};
  text.split('\n').forEach((line, i) => {
    const l = line.trim();
    if (!l || l.startsWith('#')) return;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$/.exec(l);
    if (!m) throw new ValidationError([{ path: `${source}: line ${i + 1}`, message: 'must be KEY=VALUE' }]);
    let v = m[2]!;
    if (/^'.*'$/.test(v) || /^".*"$/.test(v)) v = v.slice(1, -1);
    out[m[1]!] = v;
  });
  return out;
}
