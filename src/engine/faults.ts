/**
 * Fault injection for the crash tests: FLEETROLL_FAULT=kill-at:<point>[:<n>]
 * SIGKILLs this process the n-th time (default 1st) it reaches <point>.
 * Points: after-mark-down, before-reload, after-stop, waiting-for-readiness.
 * Unset (always, outside those tests), it does nothing.
 */
const counts = new Map<string, number>();
/** Read once: a lookup of process.env goes to the C++ environment, and the points are reached on every failing probe (~100,000 times in a 10,000-replica simulate). */
let spec: string | undefined;

export type FaultPoint = 'after-mark-down' | 'before-reload' | 'after-stop' | 'waiting-for-readiness';

export function faultPoint(point: FaultPoint): void {
  spec ??= process.env.FLEETROLL_FAULT ?? '';
  if (!spec) return;
  const [kind, at, nth] = spec.split(':');
  if (kind !== 'kill-at' || at !== point) return;
  const n = (counts.get(point) ?? 0) + 1;
  counts.set(point, n);
  if (n === Number(nth ?? 1)) process.kill(process.pid, 'SIGKILL');
}
