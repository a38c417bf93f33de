/**
 * `notify:` in the fleet file: webhooks told when a rollout starts, succeeds,
 * fails or rolls back (core/notify.ts builds the body, engine/notify.ts
 * sends it). URLs and header values are interpolated like every field but
 * hooks (config/prepare.ts), so a token stays in the environment:
 * `url: https://hooks.example/${HOOK_PATH}`.
 *
 * They are secrets: no message here quotes more of a URL than its scheme
 * and host, or any of a header value.
 */
import * as z from './zod.js';
import { seconds } from './fields.js';
import { hostOf, NOTIFY_EVENTS, type Webhook } from '../core/notify.js';

/** An HTTP header name: RFC 9110's token. */
const HEADER_NAME_RE = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;

/** What a bad URL's message may show: scheme and host, never the path, query or credentials. */
function shown(url: string): string | undefined {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return undefined;
  }
}

const url = z.string({ error: (i) => (i.input === undefined ? 'is required' : 'must be a string: an http:// or https:// URL') }).superRefine((v, ctx) => {
  let ok = false;
  try {
    const u = new URL(v);
    ok = (u.protocol === 'http:' || u.protocol === 'https:') && u.hostname !== '';
  } catch {
    ok = false;
  }
  if (ok) return;
  const s = shown(v);
  ctx.addIssue({
    code: 'custom',
    message: `must be an http:// or https:// URL, got ${s === undefined ? 'a value that is not a URL (not shown: it may hold a secret)' : JSON.stringify(s)}`,
  });
});

const webhookSchema = z
  .object(
    {
      url,
      events: z
        .array(z.enum(NOTIFY_EVENTS, { error: (i) => `must be one of ${NOTIFY_EVENTS.join(', ')}, got ${JSON.stringify(i.input)}` }), {
          error: `must be a list of events: ${NOTIFY_EVENTS.join(', ')}`,
        })
        .min(1, { error: 'must name at least one event (leave events out for all of them)' })
        .optional(),
      headers: z
        .record(
          z.string().regex(HEADER_NAME_RE, { error: (i) => `header names are letters, digits and !#$%&'*+.^_\`|~-, got ${JSON.stringify(i.input)}` }),
          z
            .string({ error: 'header values must be strings' })
            .regex(/^[^\r\n\0]*$/, { error: 'header values must be one line (no CR, LF or NUL; the value is not shown: it may be a secret)' }),
          { error: 'must be a mapping of header names to values, e.g. { Authorization: "Bearer ${HOOK_TOKEN}" }' },
        )
        .optional(),
      timeoutSeconds: seconds(1, 60).default(5),
    },
    { error: 'must be a mapping: { url: https://..., events: [...], headers: {...}, timeoutSeconds: 5 }' },
  )
  .strict();

export const notifySchema = z
  .object(
    { webhooks: z.array(webhookSchema, { error: 'must be a list of webhooks, each { url: https://... }' }).default([]) },
    { error: 'must be a mapping: { webhooks: [ { url: https://... } ] }' },
  )
  .strict();

/** The webhooks of a fleet, for the engine (core/notify.ts Webhook). */
export function webhooksOf(fleet: { notify?: { webhooks: readonly Webhook[] } | undefined }): readonly Webhook[] {
  return fleet.notify?.webhooks ?? [];
}

/** notify as `validate --json` prints it: each webhook's host, events and header names; no URL, no header value. */
export function publicNotify(webhooks: readonly Webhook[]): { webhooks: { host: string; events: string[]; headers: string[]; timeoutSeconds: number }[] } {
  return {
    webhooks: webhooks.map((w) => ({
      host: hostOf(w.url),
      events: [...(w.events ?? NOTIFY_EVENTS)],
      headers: Object.keys(w.headers ?? {}),
      timeoutSeconds: w.timeoutSeconds,
    })),
  };
}

/** notify as `validate` prints it: one line per webhook, named as the warnings name it. */
export function notifyLines(webhooks: readonly Webhook[]): string[] {
  return webhooks.map((w, i) => {
    const headers = Object.keys(w.headers ?? {});
    return `notify: webhook ${i + 1} (${hostOf(w.url)}): ${w.events ? w.events.join(', ') : 'every event'}; timeout ${w.timeoutSeconds} s${headers.length ? `; headers ${headers.join(', ')} (values secret)` : ''}`;
  });
}
