/**
 * The three numbers every deploy ends with, whatever the strategy, read from
 * the load balancers' own access logs (DESIGN §3; the seed's "how do you know
 * it was zero-downtime"):
 *
 *   1. failed requests in the deploy window: 5xx the clients got, and of
 *      those the "dropped" ones no instance answered (nginx's own 502/504);
 *   2. the mixed-version window as users saw it: from the first response
 *      served by the new revision to the last one served by an old revision
 *      (or by the new one, when it stopped serving first: a rollback);
 *   3. the first new instance's error rate (the rollout's free canary).
 *
 * This module maps the log's upstream addresses to instances and revisions
 * and shapes the figures of core/logStats.ts `deployHealth` into what
 * `deploy --json`, the revision history and `history --revision N` carry
 * (DeployHealthReport below).
 *
 * Addresses are reused. Docker hands a removed container's IP to the next
 * container on the same network at once (checked on engine 20.10: three
 * containers run and removed in a row all got 192.168.0.2), so during a rolling update an old
 * instance's address often becomes a new instance's a second later. An
 * address therefore maps to an owner *at a time*: each owner holds it from
 * `sinceMs` (when its container started; -Infinity for the instances found
 * running when the deploy began) until the next owner's `sinceMs`. A log
 * line is attributed by when its response ended. This is sound because
 * fleetroll marks an instance down, drains and stops it before its container
 * is removed, and only then can Docker give the address away: every response
 * the old owner served ended before the new owner's container started.
 *
 * PURE: no I/O, no clock.
 */
import { attemptsOf, type AccessRecord } from './accessLog.js';
import { deployHealth, revisionStats, type WindowStats } from './logStats.js';

/** One instance that held an address during the deploy. */
export interface AddressOwner {
  /** "ip:port", as nginx's $upstream_addr shows it. */
  address: string;
  /** The container name, for messages ("bookstore-api-33176fd-7q7zj"). */
  name: string;
  /** Its revision (spec hash). */
  revision: string;
  /** From when it holds the address (ms since the epoch); -Infinity for an instance that was running before the deploy. */
  sinceMs: number;
  /** Started by this deploy (not found running when it began): only these can be "the first new instance". */
  startedInDeploy: boolean;
}

/** The owner of `address` when a response ended at `timeMs`, or undefined for an address the fleet never had. */
export function ownerAt(owners: readonly AddressOwner[], address: string, timeMs: number): AddressOwner | undefined {
  let best: AddressOwner | undefined;
  for (const o of owners) {
    if (o.address !== address || o.sinceMs > timeMs) continue;
    if (best === undefined || o.sinceMs >= best.sinceMs) best = o;
  }
  return best;
}

/** The first new instance as the health report names it. */
export interface FirstNewInstanceHealth {
  name: string;
  address: string;
  /** Final answers it gave in the deploy window. */
  requests: number;
  /** Its 5xx answers plus the connection failures nginx then retried elsewhere. */
  errors: number;
  /** errors / (requests + retried connection failures); 0 when it got none. */
  errorRate: number;
}

/**
 * The deploy's health numbers, as `deploy --json`, the revision history and
 * `history --revision N --json` carry them. Times are ISO strings on the
 * deploy machine's clock; a request belongs to the window by when its
 * response ended (nginx's $msec).
 */
export interface DeployHealthNumbers {
  /** The access logs read, one per load balancer that names one. */
  sources: string[];
  /** The deploy window: from the start of the rollout to its end (a rollback included). */
  window: { start: string; end: string; durationMs: number };
  /** Every request whose response ended in the window, through any of the load balancers. */
  requests: number;
  /** Requests whose client got a 5xx, whoever produced it; `dropped` included. */
  failed5xx: number;
  /** Requests no instance answered: nginx's own 502/504 (connection refused, reset, timed out, no live upstream). */
  dropped: number;
  /** 499s: the client closed first. Neither failed nor dropped; shown because a jump in them is worth a look. */
  clientClosed: number;
  /**
   * From the first response served by the new revision to the last served by
   * an old one, or to the new revision's last when it stopped serving first
   * (rolled back, aborted, switched back); 0 when they never overlapped.
   */
  mixedVersionWindowMs: number;
  firstNewResponseAt: string | null;
  lastOldResponseAt: string | null;
  /** The new revision's last response in the window (absent in records written before it was kept). */
  lastNewResponseAt?: string | null | undefined;
  /** The new instance that served the new revision's first response, and its error rate over the window; null when none served. */
  firstNewInstance: FirstNewInstanceHealth | null;
  /** Requests no instance can be named for (nginx answered itself, an address the fleet never had). */
  unattributed: number;
  /** Lines that were not fleetroll_json (another format, a cut line): skipped, counted. */
  garbage: number;
  /** Why the numbers may miss requests: a load balancer without an access log, a log that failed mid-way, lines lost to a rotation. */
  incomplete?: string[];
}

/** No numbers: why (and, when the fix is configuration, how to get them). */
export interface DeployHealthUnavailable {
  unavailable: string;
  hint?: string;
}

export type DeployHealthReport = DeployHealthNumbers | DeployHealthUnavailable;

export const isHealthUnavailable = (h: DeployHealthReport): h is DeployHealthUnavailable => 'unavailable' in h;

/** How to get the numbers when no load balancer names its access log. */
export const ACCESS_LOG_HINT =
  "set accessLog on each nginx load balancer (accessLog: /var/log/nginx/fleetroll.log, or stdout for the container's log stream) and log with the fleetroll_json format (templates/nginx.conf.example)";

export interface HealthInput {
  /** The records read from every access log (any order; outside the window is ignored). */
  records: readonly AccessRecord[];
  startMs: number;
  endMs: number;
  owners: readonly AddressOwner[];
  /** The revision the deploy rolled to. */
  newRevision: string;
  sources: string[];
  garbage: number;
  incomplete?: string[] | undefined;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());
/** Rates with 4 decimals (0.0123 = 1.23 %): what a person compares, and JSON stays short. */
const rate = (x: number) => Math.round(x * 10_000) / 10_000;

/**
 * The report over the closed window [startMs, endMs].
 *
 * Each upstream address in the records is replaced by its owner's key (one
 * key per owner, so a reused address counts for the right instance), then
 * core/logStats `deployHealth` computes the figures. The first new instance
 * is the instance started by this deploy, of the new revision, that served
 * the earliest response of the new revision in the window.
 */
export function healthReport(input: HealthInput): DeployHealthNumbers {
  const { startMs, endMs, owners, newRevision } = input;
  const keyOf = new Map<AddressOwner, string>(owners.map((o, i) => [o, `${o.address}#${i}`]));
  const byKey = new Map<string, AddressOwner>(owners.map((o) => [keyOf.get(o)!, o]));
  const byAddress = new Map<string, AddressOwner[]>();
  for (const o of owners) byAddress.set(o.address, [...(byAddress.get(o.address) ?? []), o]);
  const keyed: AccessRecord[] = [];
  let first: { timeMs: number; key: string } | undefined;
  for (const r of input.records) {
    if (r.timeMs < startMs || r.timeMs > endMs) continue;
    // An address no owner had at that time keeps its text: deployHealth counts it unattributed.
    const upstreamAddr = r.upstreamAddr.map((a) => {
      const o = ownerAt(byAddress.get(a) ?? [], a, r.timeMs);
      return o ? keyOf.get(o)! : a;
    });
    const k = { ...r, upstreamAddr };
    keyed.push(k);
    const last = attemptsOf(k).at(-1);
    const owner = last ? byKey.get(last.address) : undefined;
    if (last?.outcome === 'answered' && owner?.revision === newRevision && owner.startedInDeploy && (first === undefined || r.timeMs < first.timeMs)) {
      first = { timeMs: r.timeMs, key: last.address };
    }
  }
  const h = deployHealth(keyed, { startMs, endMs, revisionOf: (key) => byKey.get(key)?.revision, newRevision, firstNewAddress: first?.key });
  const firstOwner = first ? byKey.get(first.key) : undefined;
  const report: DeployHealthNumbers = {
    sources: input.sources,
    window: { start: new Date(startMs).toISOString(), end: new Date(endMs).toISOString(), durationMs: endMs - startMs },
    requests: h.requests,
    failed5xx: h.errors5xx,
    dropped: h.dropped,
    clientClosed: h.clientClosed,
    mixedVersionWindowMs: h.mixedVersion.windowMs,
    firstNewResponseAt: iso(h.mixedVersion.firstNewMs),
    lastOldResponseAt: iso(h.mixedVersion.lastOldMs),
    lastNewResponseAt: iso(h.mixedVersion.lastNewMs),
    firstNewInstance:
      firstOwner && h.firstNewInstance
        ? {
            name: firstOwner.name,
            address: firstOwner.address,
            requests: h.firstNewInstance.requests,
            errors: h.firstNewInstance.errors,
            errorRate: rate(h.firstNewInstance.errorRate),
          }
        : null,
    unattributed: h.unattributed,
    garbage: input.garbage,
  };
  if (input.incomplete && input.incomplete.length > 0) report.incomplete = input.incomplete;
  return report;
}

/**
 * Per-revision figures for [startMs, endMs), each response counted for the
 * instance that held its address at that moment (Docker reuses addresses):
 * what the analysis gate compares, canary against stable.
 */
export function revisionWindow(records: Iterable<AccessRecord>, owners: readonly AddressOwner[], startMs: number, endMs: number): WindowStats {
  const byAddress = new Map<string, AddressOwner[]>();
  for (const o of owners) byAddress.set(o.address, [...(byAddress.get(o.address) ?? []), o]);
  const keyOf = new Map<AddressOwner, string>(owners.map((o, i) => [o, `${o.address}#${i}`]));
  const revisionOfKey = new Map<string, string>(owners.map((o) => [keyOf.get(o)!, o.revision]));
  const keyed: AccessRecord[] = [];
  for (const r of records) {
    if (r.timeMs < startMs || r.timeMs >= endMs) continue;
    keyed.push({
      ...r,
      upstreamAddr: r.upstreamAddr.map((a) => {
        const o = ownerAt(byAddress.get(a) ?? [], a, r.timeMs);
        return o ? keyOf.get(o)! : a;
      }),
    });
  }
  return revisionStats(keyed, (key) => revisionOfKey.get(key), startMs, endMs);
}
