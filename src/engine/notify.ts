/**
 * Webhook notifications, the sending half: each webhook gets its events in
 * order, each POST tried a few times (p-retry) on a network error, a
 * timeout, a 5xx or a 429, and a delivery that still fails is a warning,
 * never a failed rollout. The payloads are core/notify.ts; the HTTP is
 * the WebhookPost the caller passes (adapters/webhook.ts).
 *
 * A deploy waits for its notifications only at its very end, and at most
 * FLUSH_BOUND_MS: a dead receiver costs a deploy that long and no more.
 */
import {
  buildPayload,
  redact,
  retryableStatus,
  wants,
  webhookLabel,
  type NotifyPayload,
  type PayloadInput,
  type Webhook,
  type WebhookPost,
} from '../core/notify.js';

/** Tries per delivery: one, then two more after 200 ms and 400 ms. */
export const TRIES = 3;
export const MIN_BACKOFF_MS = 200;
/** One delivery's tries and pauses together, whatever timeoutSeconds says. */
export const DELIVERY_BUDGET_MS = 10_000;
/** The longest the end of a rollout waits for deliveries still under way. */
export const FLUSH_BOUND_MS = 10_000;

export interface NotifierOptions {
  tries?: number;
  minBackoffMs?: number;
  deliveryBudgetMs?: number;
  now?: () => number;
}

/** A delivery that failed for good, as the warning names it: never the URL or a header. */
export interface NotifyFailure {
  webhook: string;
  event: string;
  tries: number;
  reason: string;
}

/** A failed try, with the reason a person reads (HTTP 500, ECONNREFUSED, timed out after 5 s). */
class TryFailed extends Error {
  constructor(
    readonly reason: string,
    readonly retryable: boolean,
  ) {
    super(reason);
  }
}

export class Notifier {
  /** Each webhook's deliveries, chained so a receiver sees start before success. */
  private readonly chains: Promise<void>[];
  private readonly abort = new AbortController();
  private readonly o: Required<NotifierOptions>;

  constructor(
    readonly webhooks: readonly Webhook[],
    private readonly post: WebhookPost,
    private readonly failed: (f: NotifyFailure) => void,
    o: NotifierOptions = {},
  ) {
    this.chains = webhooks.map(() => Promise.resolve());
    this.o = {
      tries: o.tries ?? TRIES,
      minBackoffMs: o.minBackoffMs ?? MIN_BACKOFF_MS,
      deliveryBudgetMs: o.deliveryBudgetMs ?? DELIVERY_BUDGET_MS,
      now: o.now ?? Date.now,
    };
  }

  /** Queues the event for every webhook that wants it; returns at once. */
  send(input: Omit<PayloadInput, 'atMs'>): void {
    const payload = buildPayload({ ...input, atMs: this.o.now() });
    // Errors and causes are other code's words: a webhook's secret must not reach another receiver through them.
    if (payload.error) payload.error.message = redact(payload.error.message, this.webhooks);
    if (payload.changeCause !== undefined) payload.changeCause = redact(payload.changeCause, this.webhooks);
    const body = JSON.stringify(payload);
    this.webhooks.forEach((w, i) => {
      if (!wants(w, payload.event)) return;
      this.chains[i] = this.chains[i]!.then(() => this.deliver(w, i, payload, body));
    });
  }

  /**
   * Waits for what is under way, at most `boundMs`; what is still trying then
   * is abandoned and warned about. Never throws.
   */
  async flush(boundMs = FLUSH_BOUND_MS): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        this.abort.abort();
        resolve();
      }, boundMs);
    });
    await Promise.race([Promise.all(this.chains), bound]);
    clearTimeout(timer);
    // The aborted tries settle at once; their warnings come out before the command's last line.
    if (this.abort.signal.aborted) await Promise.race([Promise.all(this.chains), new Promise((r) => setTimeout(r, 100).unref())]);
  }

  private async deliver(w: Webhook, index: number, payload: NotifyPayload, body: string): Promise<void> {
    const label = webhookLabel(index, w.url);
    const started = this.o.now();
    let tries = 0;
    try {
      const { default: pRetry, AbortError } = await import('p-retry');
      await pRetry(
        async () => {
          if (this.abort.signal.aborted) throw new AbortError(new TryFailed('abandoned: the rollout ended', false));
          tries++;
          const left = this.o.deliveryBudgetMs - (this.o.now() - started);
          const timeoutMs = Math.max(1, Math.min(w.timeoutSeconds * 1000, left));
          let status: number;
          try {
            status = await this.post(w.url, w.headers ?? {}, body, { timeoutMs, signal: this.abort.signal });
          } catch (err) {
            const reason = this.abort.signal.aborted ? 'abandoned: the rollout ended' : reasonOf(err, timeoutMs);
            throw new TryFailed(reason, !this.abort.signal.aborted);
          }
          if (status >= 200 && status < 300) return;
          throw new TryFailed(`HTTP ${status}`, retryableStatus(status));
        },
        {
          retries: this.o.tries - 1,
          minTimeout: this.o.minBackoffMs,
          factor: 2,
          randomize: false,
          maxRetryTime: this.o.deliveryBudgetMs,
          signal: this.abort.signal,
          shouldRetry: ({ error }) => !(error instanceof TryFailed) || error.retryable,
        },
      );
    } catch (err) {
      const reason = err instanceof TryFailed ? err.reason : this.abort.signal.aborted ? 'abandoned: the rollout ended' : reasonOf(err, 0);
      this.failed({ webhook: label, event: payload.event, tries, reason: redact(reason, this.webhooks) });
    }
  }
}

/** An error's code (ECONNREFUSED) or kind, never its message: a fetch message can quote the URL. */
function reasonOf(err: unknown, timeoutMs: number): string {
  const e = err as { name?: unknown; code?: unknown; cause?: { code?: unknown; name?: unknown } } | null;
  if (e?.name === 'TimeoutError' || e?.cause?.name === 'TimeoutError') return `timed out after ${(timeoutMs / 1000).toFixed(1)} s`;
  const code = typeof e?.code === 'string' ? e.code : typeof e?.cause?.code === 'string' ? e.cause.code : undefined;
  return code ?? (typeof e?.name === 'string' ? e.name : 'network error');
}

/**
 * A self-healing replacement (fleetroll watch, to come): the `heal` event to
 * every webhook that wants it, waited for at most `boundMs`. Never throws.
 */
export async function notifyHeal(
  webhooks: readonly Webhook[],
  post: WebhookPost,
  heal: { service: string; revision?: number; revisionHash: string; version: string; image: string; reason: string },
  failed: (f: NotifyFailure) => void,
  o: NotifierOptions & { boundMs?: number } = {},
): Promise<void> {
  if (!webhooks.some((w) => wants(w, 'heal'))) return;
  const n = new Notifier(webhooks, post, failed, o);
  n.send({
    event: 'heal',
    service: heal.service,
    revision: heal.revision,
    revisionHash: heal.revisionHash,
    version: heal.version,
    image: heal.image,
    kind: 'watch',
    outcome: 'healed',
    changeCause: heal.reason,
  });
  await n.flush(o.boundMs);
}
