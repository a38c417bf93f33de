/**
 * The deploy's health numbers (core/deployHealth.ts) for people: a few lines
 * at the end of `deploy` (undo, restart, resume), and rows of
 * `history --revision N`. JSON output carries the report as it is.
 */
import { isHealthUnavailable, type DeployHealthReport } from '../core/deployHealth.js';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
/** "2024-04-05T12:34:56.789Z" → "12:34:56.789" (UTC, like the rest of the ISO times fleetroll prints). */
const clock = (iso: string) => iso.slice(11, 23);
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** [label, value] pairs, in the order they are printed. */
export function healthRows(h: DeployHealthReport): [string, string][] {
  if (isHealthUnavailable(h)) return [['health', `unavailable: ${h.unavailable}`], ...(h.hint ? [['how to get it', h.hint] as [string, string]] : [])];
  const extra = [
    h.clientClosed > 0 ? `${h.clientClosed} closed by the client (499)` : '',
    h.unattributed > 0 ? `${h.unattributed} not from a fleet instance` : '',
    h.garbage > 0 ? plural(h.garbage, 'log line') + ' not in the fleetroll_json format, skipped' : '',
  ].filter(Boolean);
  const requests = `${plural(h.requests, 'request')} in the deploy window (${seconds(h.window.durationMs)}): ${h.failed5xx} failed (5xx), ${h.dropped} dropped${extra.length ? `; ${extra.join(', ')}` : ''}`;
  let mixed: string;
  if (h.firstNewResponseAt === null) mixed = 'none: the new revision served no request in the window';
  else if (h.lastOldResponseAt === null) mixed = '0 s: no old revision served a request in the window';
  else if (h.lastNewResponseAt && h.lastNewResponseAt < h.lastOldResponseAt) {
    // Stopped (rolled back, aborted, switched back): the new revision left first; the old one went on alone.
    mixed = `${seconds(h.mixedVersionWindowMs)}, from the first new response (${clock(h.firstNewResponseAt)}) to the last new one (${clock(h.lastNewResponseAt)}): the new revision stopped serving; the old one served on alone (last at ${clock(h.lastOldResponseAt)})`;
  } else if (h.mixedVersionWindowMs === 0)
    mixed = `0 s: the last old response (${clock(h.lastOldResponseAt)}) came before the first new one (${clock(h.firstNewResponseAt)})`;
  else
    mixed = `${seconds(h.mixedVersionWindowMs)}, from the first new response (${clock(h.firstNewResponseAt)}) to the last old one (${clock(h.lastOldResponseAt)})`;
  const f = h.firstNewInstance;
  const first = f
    ? `${f.name} (${f.address}): ${(f.errorRate * 100).toFixed(2)} % errors (${f.errors} of ${plural(f.requests, 'request')})`
    : 'none served a request in the window';
  return [
    ['requests', requests],
    ['mixed-version window', mixed],
    ['first new instance', first],
    ['access logs', h.sources.join('; ')],
    ...(h.incomplete ?? []).map((i): [string, string] => ['incomplete', i]),
  ];
}

/** The lines `deploy` ends with: 3 (or 2 when unavailable), plus one per reason the numbers may be incomplete. */
export function healthLines(h: DeployHealthReport): string[] {
  const rows = healthRows(h);
  if (isHealthUnavailable(h)) return [`health: ${rows[0]![1]}`, ...rows.slice(1).map(([, v]) => `  ${v}`)];
  const [requests, ...rest] = rows.filter(([k]) => k !== 'access logs');
  return [`health: ${requests![1]}`, ...rest.map(([k, v]) => `  ${k}: ${v}`)];
}
