/**
 * The CLI's only way to print. Commands write through an `Out` so tests can
 * capture output and so machine-readable output (--json) stays on stdout
 * while warnings go to stderr.
 */
export interface Out {
  line(text: string): void;
  json(value: unknown): void;
  warn(text: string): void;
}

export function processOut(): Out {
  return {
    line: (t) => process.stdout.write(`${t}\n`),
    json: (v) => process.stdout.write(`${JSON.stringify(v)}\n`),
    warn: (t) => process.stderr.write(`warning: ${t}\n`),
  };
}

/** A plain left-aligned text table; no colours, so it reads the same in a log. */
export function table(header: string[], rows: string[][], indent = ''): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (r: string[]) => indent + r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0))).join('  ');
  return [fmt(header), ...rows.map(fmt)].join('\n');
}
