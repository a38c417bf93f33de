/**
 * The WebhookPost port (core/notify.ts) on Node's fetch: one POST of a JSON
 * body, the status back. No redirect is followed: a redirect could carry the
 * Authorization header somewhere the fleet file never named.
 */
import type { WebhookPost } from '../core/notify.js';

export const postWebhook: WebhookPost = async (url, headers, body, o) => {
  const signals = [AbortSignal.timeout(o.timeoutMs), ...(o.signal ? [o.signal] : [])];
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'user-agent': 'fleetroll', ...headers },
    body,
    redirect: 'manual',
    signal: AbortSignal.any(signals),
  });
  // The body is not read: only the status counts, and an unread body would keep the socket.
  await res.body?.cancel().catch(() => {});
  return res.status;
};
