/**
 * Webhook notifications, the pure half: which webhook wants which event, the
 * JSON body, how a webhook is named in messages, and which answers are worth
 * another try. The sending (engine/notify.ts, adapters/webhook.ts) is I/O.
 *
 * A webhook's URL and header values are secrets (a Slack URL is its own
 * token): nothing here puts them in a message; a webhook is named by its
 * position and host only.
 */
import { isHealthUnavailable, type DeployHealthReport } from './deployHealth.js';

export const NOTIFY_EVENTS = ['start', 'success', 'failure', 'rollback', 'heal'] as const;
export type NotifyEvent = (typeof NOTIFY_EVENTS)[number];

/** One webhook as the fleet file resolved it (config/notify.ts). */
export interface Webhook {
  url: string;
  /** Undefined: every event. */
  events?: readonly NotifyEvent[] | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
  timeoutSeconds: number;
}

/**
 * Sends one POST: resolves with the HTTP status, rejects on a network error,
 * a timeout or an abort (adapters/webhook.ts). The engine's only way out to
 * a webhook, so tests pass a fake.
 */
export type WebhookPost = (
  url: string,
  headers: Readonly<Record<string, string>>,
  body: string,
  o: { timeoutMs: number; signal?: AbortSignal | undefined },
) => Promise<number>;

/** The health figures a receiver acts on (DeployHealthNumbers has more; the history keeps them all). */
export interface NotifyHealth {
  requests: number;
  failed5xx: number;
  dropped: number;
  mixedVersionWindowMs: number;
  firstNewInstanceErrorRate: number | null;
}

/** The body every webhook gets; `fleetroll: 1` is its format's version, so a receiver can tell a later one. */
export interface NotifyPayload {
  fleetroll: 1;
  event: NotifyEvent;
  service: string;
  /** The revision's number in the fleet's history; null when the rollout failed before it was recorded (preflight). */
  revision: number | null;
  /** The revision hash (the instances' label). */
  revisionHash: string | null;
  version: string;
  image: string;
  /** What ran: deploy, undo, restart, resume (heal: watch). */
  kind: string;
  /** started, complete, failed, rolled back, paused, interrupted, rolling back, healed. */
  outcome: string;
  changeCause?: string;
  durationSeconds?: number;
  health?: NotifyHealth;
  error?: { code: string; message: string };
  at: string;
}

export interface PayloadInput {
  event: NotifyEvent;
  service: string;
  revision?: number | undefined;
  revisionHash?: string | undefined;
  version: string;
  image: string;
  kind: string;
  outcome: string;
  changeCause?: string | undefined;
  durationMs?: number | undefined;
  health?: DeployHealthReport | undefined;
  error?: { code: string; message: string } | undefined;
  /** The time of the event, ms since the epoch (the caller's clock: this module has none). */
  atMs: number;
}

/** The longest error message a body carries: a rollout's message can list every instance. */
export const MAX_ERROR_MESSAGE = 2000;

export function buildPayload(i: PayloadInput): NotifyPayload {
  const p: NotifyPayload = {
    fleetroll: 1,
    event: i.event,
    service: i.service,
    revision: i.revision ?? null,
    revisionHash: i.revisionHash ?? null,
    version: i.version,
    image: i.image,
    kind: i.kind,
    outcome: i.outcome,
    at: new Date(i.atMs).toISOString(),
  };
  if (i.changeCause !== undefined) p.changeCause = i.changeCause;
  if (i.durationMs !== undefined) p.durationSeconds = Math.round(i.durationMs / 100) / 10;
  const h = notifyHealth(i.health);
  if (h) p.health = h;
  if (i.error)
    p.error = { code: i.error.code, message: i.error.message.length > MAX_ERROR_MESSAGE ? `${i.error.message.slice(0, MAX_ERROR_MESSAGE)}…` : i.error.message };
  return p;
}

/** The deploy's numbers when the access logs gave them; nothing when they were unavailable. */
export function notifyHealth(h: DeployHealthReport | undefined): NotifyHealth | undefined {
  if (!h || isHealthUnavailable(h)) return undefined;
  return {
    requests: h.requests,
    failed5xx: h.failed5xx,
    dropped: h.dropped,
    mixedVersionWindowMs: h.mixedVersionWindowMs,
    firstNewInstanceErrorRate: h.firstNewInstance?.errorRate ?? null,
  };
}

export function wants(w: Pick<Webhook, 'events'>, event: NotifyEvent): boolean {
  return w.events === undefined || w.events.includes(event);
}

/** The host of a URL, never its path, query or credentials; "?" when it does not parse. */
export function hostOf(url: string): string {
  try {
    return new URL(url).host || '?';
  } catch {
    return '?';
  }
}

/** "webhook 1 (hooks.example)": how every message names a webhook (1-based, as people count). */
export function webhookLabel(index: number, url: string): string {
  return `webhook ${index + 1} (${hostOf(url)})`;
}

/** 5xx and 429 may pass on a later try; any other status is the receiver's answer and final. */
export function retryableStatus(status: number): boolean {
  return status === 429 || status >= 500;
}

/**
 * Every secret of the webhooks (URLs, their paths and queries, header
 * values) cut out of a text: the last guard before a message leaves,
 * for errors whose words this code did not write.
 */
export function redact(text: string, webhooks: readonly Pick<Webhook, 'url' | 'headers'>[]): string {
  const secrets = new Set<string>();
  for (const w of webhooks) {
    secrets.add(w.url);
    try {
      const u = new URL(w.url);
      for (const part of [u.pathname, u.search, u.username, u.password, u.hash]) if (part.length > 1) secrets.add(part);
    } catch {
      // Not a URL: the whole text was added above.
    }
    for (const v of Object.values(w.headers ?? {})) if (v.length > 0) secrets.add(v);
  }
  let out = text;
  // Longest first: a path inside the URL must not leave the rest of the URL behind.
  for (const s of [...secrets].sort((a, b) => b.length - a.length)) out = out.split(s).join('(secret)');
  return out;
}
