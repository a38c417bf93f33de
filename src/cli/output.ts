/**
 * The CLI's only way to print. Commands write through an `Out` so tests can
 * capture output and so machine-readable output (--json) stays on stdout
 * while warnings go to stderr.
 */
import { errorJson, ExitCode, FleetrollError } from '../errors.js';

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

const printedAsJson = new WeakSet<object>();

/**
 * The one JSON line a failed `--json` command prints on stdout, so a CI script
 * branches on `code` / `exitCode` (docs/errors.md) instead of parsing stderr.
 * A command that knows more (deploy: health, stoppedBy) prints it with `extra`;
 * program.ts then prints nothing more for the same error. An error that is not
 * a FleetrollError is a bug: it is printed as E_INTERNAL, exit 1.
 */
export function printFailureJson(out: Out, err: unknown, extra: Record<string, unknown> = {}): void {
  if (typeof err === 'object' && err !== null) {
    if (printedAsJson.has(err)) return;
    printedAsJson.add(err);
  }
  const base =
    err instanceof FleetrollError
      ? errorJson(err)
      : { code: 'E_INTERNAL', exitCode: ExitCode.rolloutFailed, message: err instanceof Error ? err.message : String(err), hint: undefined };
  out.json({ outcome: base.code === 'E_PAUSED' ? 'paused' : 'failed', ...base, ...extra });
}
