import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  buildPayload,
  hostOf,
  redact,
  retryableStatus,
  wants,
  webhookLabel,
  type NotifyEvent,
  type PayloadInput,
  type Webhook,
  type WebhookPost,
} from '../../src/core/notify.js';
import { Notifier, notifyHeal, type NotifyFailure } from '../../src/engine/notify.js';
import { runOnFailure } from '../../src/engine/hooks.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { describeEvent } from '../../src/cli/events.js';
import { loadFleet } from '../../src/config/load.js';
import { notifyLines, publicNotify } from '../../src/config/notify.js';
import { publicFleet } from '../../src/cli/commands/validate.js';
import { PausedError, RolloutFailedError, ValidationError } from '../../src/errors.js';

const SECRET_URL = 'https://hooks.example/services/T0/B0/s3cr3t-path?token=q53cr3t';
const TOKEN = 'Bearer tok-9f8e7d';
const hook = (o: Partial<Webhook> = {}): Webhook => ({ url: SECRET_URL, timeoutSeconds: 5, headers: { Authorization: TOKEN }, ...o });

const INPUT: PayloadInput = {
  event: 'success',
  service: 'api',
  revision: 4,
  revisionHash: 'abc1234567',
  version: '1.1.0',
  image: 'api:1.1.0',
  kind: 'deploy',
  outcome: 'complete',
  atMs: Date.UTC(2026, 0, 2, 3, 4, 5),
};

describe('buildPayload', () => {
  const rows: { name: string; input: Partial<PayloadInput>; expect: Record<string, unknown> }[] = [
    {
      name: 'the fields every event has',
      input: {},
      expect: {
        fleetroll: 1,
        event: 'success',
        service: 'api',
        revision: 4,
        revisionHash: 'abc1234567',
        version: '1.1.0',
        image: 'api:1.1.0',
        kind: 'deploy',
        outcome: 'complete',
        at: '2026-01-02T03:04:05.000Z',
      },
    },
    {
      name: 'no revision yet (a preflight failure): null, not absent',
      input: { revision: undefined, revisionHash: undefined },
      expect: { revision: null, revisionHash: null },
    },
    { name: 'duration in seconds, one decimal', input: { durationMs: 12_345 }, expect: { durationSeconds: 12.3 } },
    { name: 'a change cause when there is one', input: { changeCause: 'ci #42' }, expect: { changeCause: 'ci #42' } },
    {
      name: 'the error with its stable code',
      input: { event: 'failure', outcome: 'failed', error: { code: 'E_ROLLOUT_FAILED', message: 'progress deadline' } },
      expect: { error: { code: 'E_ROLLOUT_FAILED', message: 'progress deadline' } },
    },
    {
      name: 'the health numbers a receiver acts on',
      input: {
        health: {
          sources: ['a'],
          window: { start: '', end: '', durationMs: 1 },
          requests: 100,
          failed5xx: 2,
          dropped: 1,
          clientClosed: 0,
          mixedVersionWindowMs: 1500,
          firstNewResponseAt: null,
          lastOldResponseAt: null,
          firstNewInstance: { name: 'x', address: 'y', requests: 10, errors: 1, errorRate: 0.1 },
          unattributed: 0,
          garbage: 0,
        },
      },
      expect: { health: { requests: 100, failed5xx: 2, dropped: 1, mixedVersionWindowMs: 1500, firstNewInstanceErrorRate: 0.1 } },
    },
    { name: 'no health when the access logs gave none', input: { health: { unavailable: 'no access log' } }, expect: { health: undefined } },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const p = buildPayload({ ...INPUT, ...r.input }) as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(r.expect)) assert.deepEqual(p[k], v, k);
    });
  }
  it('optional fields are absent, not null, when unknown', () => {
    const p = buildPayload(INPUT);
    for (const k of ['changeCause', 'durationSeconds', 'health', 'error']) assert.equal(k in p, false, k);
  });
  it('cuts a long error message', () => {
    const p = buildPayload({ ...INPUT, error: { code: 'E_X', message: 'x'.repeat(5000) } });
    assert.ok(p.error!.message.length <= 2001);
  });
});

describe('event filtering, labels, retryable answers', () => {
  const rows: { name: string; events: NotifyEvent[] | undefined; event: NotifyEvent; want: boolean }[] = [
    { name: 'no events listed: every event', events: undefined, event: 'heal', want: true },
    { name: 'listed', events: ['failure', 'rollback'], event: 'rollback', want: true },
    { name: 'not listed', events: ['failure'], event: 'start', want: false },
  ];
  for (const r of rows) it(r.name, () => assert.equal(wants({ events: r.events }, r.event), r.want));
  it('a webhook is named by position and host only', () => {
    assert.equal(webhookLabel(0, SECRET_URL), 'webhook 1 (hooks.example)');
    assert.equal(hostOf('https://user:pw@h.example:8443/x?y'), 'h.example:8443');
    assert.equal(hostOf('not a url'), '?');
  });
  for (const [status, retry] of [
    [500, true],
    [503, true],
    [429, true],
    [404, false],
    [400, false],
    [301, false],
  ] as const) {
    it(`HTTP ${status} is ${retry ? '' : 'not '}tried again`, () => assert.equal(retryableStatus(status), retry));
  }
  it('redact cuts URLs, their paths and queries, and header values', () => {
    const w = [hook()];
    const text = `failed ${SECRET_URL} and /services/T0/B0/s3cr3t-path alone, ?token=q53cr3t, ${TOKEN}`;
    const out = redact(text, w);
    for (const s of ['s3cr3t', 'q53cr3t', 'tok-9f8e7d']) assert.ok(!out.includes(s), out);
  });
});

interface Call {
  url: string;
  headers: Readonly<Record<string, string>>;
  body: Record<string, unknown>;
}

/** A fake receiver: answers in turn from `answers` (a status, or an error to throw), the last one forever. */
function fakePost(answers: (number | Error)[]): { post: WebhookPost; calls: Call[] } {
  const calls: Call[] = [];
  let i = 0;
  const post: WebhookPost = async (url, headers, body) => {
    calls.push({ url, headers, body: JSON.parse(body) });
    const a = answers[Math.min(i++, answers.length - 1)]!;
    if (a instanceof Error) throw a;
    return a;
  };
  return { post, calls };
}

const econnrefused = () =>
  Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1 https://hooks.example/services/T0/B0/s3cr3t-path'), { code: 'ECONNREFUSED' });
const send = (n: Notifier, event: NotifyEvent, extra: Partial<PayloadInput> = {}) => n.send({ ...INPUT, event, ...extra });

describe('Notifier: delivery and retries (fake sender)', () => {
  const fast = { minBackoffMs: 1 };
  const rows: { name: string; answers: (number | Error)[]; calls: number; failed?: RegExp }[] = [
    { name: '200 at once: one call', answers: [200], calls: 1 },
    { name: '500 once, then 200: tried again and delivered', answers: [500, 200], calls: 2 },
    { name: '429 then 204: tried again', answers: [429, 204], calls: 2 },
    { name: 'a network error, then 200: tried again', answers: [econnrefused(), 200], calls: 2 },
    { name: '500 forever: three tries, then a warning', answers: [500], calls: 3, failed: /HTTP 500/ },
    { name: 'refused forever: three tries, the code as the reason', answers: [econnrefused()], calls: 3, failed: /^ECONNREFUSED$/ },
    { name: '404 is final: one try, a warning', answers: [404], calls: 1, failed: /HTTP 404/ },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const { post, calls } = fakePost(r.answers);
      const failures: NotifyFailure[] = [];
      const n = new Notifier([hook()], post, (f) => failures.push(f), fast);
      send(n, 'start');
      await n.flush(5000);
      assert.equal(calls.length, r.calls);
      if (r.failed) {
        assert.equal(failures.length, 1);
        assert.equal(failures[0]!.webhook, 'webhook 1 (hooks.example)');
        assert.equal(failures[0]!.tries, r.calls);
        assert.match(failures[0]!.reason, r.failed);
      } else assert.deepEqual(failures, []);
    });
  }

  it('sends the URL and headers as configured, the events in order, only those wanted', async () => {
    const a = fakePost([200]);
    const b = fakePost([200]);
    const n = new Notifier(
      [hook(), hook({ url: 'http://other.example/x', events: ['failure'], headers: undefined })],
      async (url, ...rest) => (url === SECRET_URL ? a.post(url, ...rest) : b.post(url, ...rest)),
      () => {},
      fast,
    );
    send(n, 'start');
    send(n, 'success');
    send(n, 'failure');
    await n.flush(5000);
    assert.deepEqual(
      a.calls.map((c) => c.body.event),
      ['start', 'success', 'failure'],
    );
    assert.equal(a.calls[0]!.headers.Authorization, TOKEN);
    assert.deepEqual(
      b.calls.map((c) => c.body.event),
      ['failure'],
    );
  });

  it('a later event waits for the earlier one to be retried: start always comes before success', async () => {
    const { post, calls } = fakePost([500, 200]);
    const n = new Notifier([hook()], post, () => {}, { minBackoffMs: 30 });
    send(n, 'start');
    send(n, 'success');
    await n.flush(5000);
    assert.deepEqual(
      calls.map((c) => c.body.event),
      ['start', 'start', 'success'],
    );
  });

  it('a receiver that never answers costs flush its bound, then a warning', async () => {
    const hang: WebhookPost = (_u, _h, _b, o) =>
      new Promise((_, reject) => o.signal?.addEventListener('abort', () => reject(Object.assign(new Error('aborted'), { name: 'AbortError' }))));
    const failures: NotifyFailure[] = [];
    const n = new Notifier([hook()], hang, (f) => failures.push(f));
    send(n, 'success');
    const t0 = Date.now();
    await n.flush(300);
    const ms = Date.now() - t0;
    assert.ok(ms >= 290 && ms < 1500, `flush took ${ms} ms`);
    assert.equal(failures.length, 1);
    assert.match(failures[0]!.reason, /abandoned/);
  });

  it('the delivery budget ends the tries of a slow receiver', async () => {
    const slow: WebhookPost = (_u, _h, _b, o) =>
      new Promise((_, reject) => setTimeout(() => reject(Object.assign(new Error('t'), { name: 'TimeoutError' })), o.timeoutMs));
    const failures: NotifyFailure[] = [];
    const n = new Notifier([hook({ timeoutSeconds: 1 })], slow, (f) => failures.push(f), { minBackoffMs: 1, deliveryBudgetMs: 150 });
    send(n, 'start');
    const t0 = Date.now();
    await n.flush(5000);
    assert.ok(Date.now() - t0 < 1000, `took ${Date.now() - t0} ms`);
    assert.match(failures[0]!.reason, /timed out/);
  });

  it('no secret reaches a warning or another receiver: error messages and causes are redacted', async () => {
    const { post, calls } = fakePost([econnrefused()]);
    const failures: NotifyFailure[] = [];
    const other = fakePost([200]);
    const n = new Notifier(
      [hook(), hook({ url: 'http://other.example/', headers: undefined })],
      async (url, ...rest) => (url === SECRET_URL ? post(url, ...rest) : other.post(url, ...rest)),
      (f) => failures.push(f),
      fast,
    );
    send(n, 'failure', { error: { code: 'E_ROLLOUT_FAILED', message: `hook said ${SECRET_URL} with ${TOKEN}` }, changeCause: `curl ${SECRET_URL}` });
    await n.flush(5000);
    assert.ok(calls.length > 0);
    const seen =
      JSON.stringify([failures, other.calls.map((c) => c.body)]) +
      failures.map((f) => describeEvent({ type: 'notifyFailed', ...f } as RolloutEvent)).join('\n');
    for (const s of ['s3cr3t', 'q53cr3t', 'tok-9f8e7d']) assert.ok(!seen.includes(s), `${s} in ${seen}`);
    assert.match(
      describeEvent({ type: 'notifyFailed', ...failures[0]! }),
      /^warning: webhook 1 \(hooks\.example\): failure not delivered after 3 tries \(ECONNREFUSED\)/,
    );
  });
});

describe('notifyHeal (for fleetroll watch)', () => {
  it('sends heal to the webhooks that want it, and waits for them', async () => {
    const a = fakePost([200]);
    await notifyHeal(
      [hook(), hook({ url: 'http://b.example/', events: ['failure'] })],
      a.post,
      { service: 'api', revision: 3, revisionHash: 'h', version: '1', image: 'api:1', reason: 'api-x on local exited (code 137)' },
      () => {},
      { minBackoffMs: 1 },
    );
    assert.equal(a.calls.length, 1);
    assert.equal(a.calls[0]!.url, SECRET_URL);
    assert.deepEqual(
      { ...a.calls[0]!.body, at: undefined },
      {
        fleetroll: 1,
        event: 'heal',
        service: 'api',
        revision: 3,
        revisionHash: 'h',
        version: '1',
        image: 'api:1',
        kind: 'watch',
        outcome: 'healed',
        changeCause: 'api-x on local exited (code 137)',
        at: undefined,
      },
    );
  });
  it('calls nobody when no webhook wants heal', async () => {
    const a = fakePost([200]);
    await notifyHeal([hook({ events: ['failure'] })], a.post, { service: 'api', revisionHash: 'h', version: '1', image: 'api:1', reason: 'x' }, () => {});
    assert.equal(a.calls.length, 0);
  });
});

describe('hooks.onFailure', () => {
  const events: RolloutEvent[] = [];
  const emit = (e: RolloutEvent) => events.push(e);
  it('is not run for a pause (exit 4): only a failed rollout', async () => {
    events.length = 0;
    await runOnFailure({ onFailure: ['/nonexistent/hook'], timeoutSeconds: 5 }, {}, new PausedError('paused'), emit);
    assert.deepEqual(events, []);
  });
  it('a hook that cannot run is a warning, and runOnFailure does not throw', async () => {
    events.length = 0;
    await runOnFailure({ onFailure: ['/nonexistent/hook'], timeoutSeconds: 5 }, {}, new RolloutFailedError('deadline', 'hint'), emit);
    const last = events[events.length - 1];
    assert.equal(last?.type, 'info');
    assert.match((last as { message: string }).message, /^warning: hooks\.onFailure could not start.*outcome \(failed, exit 1\) stands/);
  });
});

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-notify-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
const BASE = 'service: api\nimage: api:1.0.0\nreplicas: 1\nport: 8080\n';
async function load(text: string, env: Record<string, string> = {}) {
  const p = join(dir, `fleet-${n++}.yaml`);
  writeFileSync(p, BASE + text);
  return loadFleet(p, {}, (k) => env[k]);
}
async function issues(text: string, env: Record<string, string> = {}): Promise<string[]> {
  try {
    await load(text, env);
  } catch (err) {
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.exitCode, 2);
    return err.issues.map((i) => `${i.path}: ${i.message}`);
  }
  assert.fail('expected the fleet file to be rejected');
}

describe('notify: in the fleet file', () => {
  it('interpolates url and header values, fills the defaults', async () => {
    const f = await load('notify:\n  webhooks:\n    - url: https://hooks.example/${HOOK_PATH}\n      headers: { Authorization: "Bearer ${HOOK_TOKEN}" }\n', {
      HOOK_PATH: 'p/s3cr3t',
      HOOK_TOKEN: 'tok-9f8e7d',
    });
    assert.deepEqual(f.notify?.webhooks, [{ url: 'https://hooks.example/p/s3cr3t', headers: { Authorization: 'Bearer tok-9f8e7d' }, timeoutSeconds: 5 }]);
    // What validate prints, text and JSON: hosts and header names, no secret.
    const shown = JSON.stringify(publicFleet(f)) + notifyLines(f.notify!.webhooks).join('\n');
    for (const s of ['s3cr3t', 'tok-9f8e7d']) assert.ok(!shown.includes(s), shown);
    assert.deepEqual(publicNotify(f.notify!.webhooks), {
      webhooks: [{ host: 'hooks.example', events: ['start', 'success', 'failure', 'rollback', 'heal'], headers: ['Authorization'], timeoutSeconds: 5 }],
    });
    assert.deepEqual(notifyLines(f.notify!.webhooks), ['notify: webhook 1 (hooks.example): every event; timeout 5 s; headers Authorization (values secret)']);
  });

  it('takes hooks.onFailure as an argument array', async () => {
    const f = await load('hooks:\n  onFailure: ["./page.sh", "--team", "books"]\n');
    assert.deepEqual(f.hooks?.onFailure, ['./page.sh', '--team', 'books']);
  });

  const rows: { name: string; text: string; env?: Record<string, string>; expect: string; hidden?: string }[] = [
    {
      name: 'an ftp URL',
      text: 'notify:\n  webhooks:\n    - url: ftp://x\n',
      expect: 'notify/webhooks/0/url: must be an http:// or https:// URL, got "ftp://x"',
    },
    {
      name: 'a URL shown by scheme and host only',
      text: 'notify:\n  webhooks:\n    - url: file://h.example/etc/s3cr3t\n',
      expect: 'notify/webhooks/0/url: must be an http:// or https:// URL, got "file://h.example"',
      hidden: 's3cr3t',
    },
    {
      name: 'not a URL: not shown at all',
      text: 'notify:\n  webhooks:\n    - url: "${HOOK}"\n',
      env: { HOOK: 's3cr3t' },
      expect: 'notify/webhooks/0/url: must be an http:// or https:// URL, got a value that is not a URL (not shown: it may hold a secret)',
      hidden: 's3cr3t',
    },
    { name: 'a missing url', text: 'notify:\n  webhooks:\n    - events: [start]\n', expect: 'notify/webhooks/0/url: is required' },
    {
      name: 'an unknown event',
      text: 'notify:\n  webhooks:\n    - url: https://h.example/\n      events: [start, deployed]\n',
      expect: 'notify/webhooks/0/events/1: must be one of start, success, failure, rollback, heal, got "deployed"',
    },
    {
      name: 'an empty events list',
      text: 'notify:\n  webhooks:\n    - url: https://h.example/\n      events: []\n',
      expect: 'notify/webhooks/0/events: must name at least one event (leave events out for all of them)',
    },
    {
      name: 'a header value on two lines, not shown',
      text: 'notify:\n  webhooks:\n    - url: https://h.example/\n      headers: { X-Token: "a\\ns3cr3t" }\n',
      expect: 'notify/webhooks/0/headers/X-Token: header values must be one line (no CR, LF or NUL; the value is not shown: it may be a secret)',
      hidden: 's3cr3t',
    },
    {
      name: 'a bad header name',
      text: 'notify:\n  webhooks:\n    - url: https://h.example/\n      headers: { "Bad Name": x }\n',
      expect: 'notify/webhooks/0/headers/Bad Name: header names are letters, digits and !#$%&\'*+.^_`|~-, got "Bad Name"',
    },
    {
      name: 'a timeout out of range',
      text: 'notify:\n  webhooks:\n    - url: https://h.example/\n      timeoutSeconds: 0\n',
      expect: 'notify/webhooks/0/timeoutSeconds: must be a number of seconds from 1 to 60, got 0',
    },
    {
      name: 'an unknown field',
      text: 'notify:\n  webhooks:\n    - url: https://h.example/\n      retries: 9\n',
      expect: 'notify/webhooks/0: unknown field "retries"',
    },
    {
      name: 'a required variable missing',
      text: 'notify:\n  webhooks:\n    - url: "https://h.example/${HOOK_PATH:?set HOOK_PATH}"\n',
      expect: 'notify/webhooks/0/url: variable HOOK_PATH is required: set HOOK_PATH',
    },
    {
      name: 'an onFailure argument with a NUL byte',
      text: 'hooks:\n  onFailure: ["./page.sh", "a\\u0000b"]\n',
      expect: "hooks/onFailure/1: has a NUL byte (U+0000) at character 2: a program's arguments cannot hold one",
    },
    {
      name: 'onFailure as a shell string',
      text: 'hooks:\n  onFailure: "./page.sh --all"\n',
      expect: 'hooks/onFailure: must be an argument array like ["./check.sh", "--max-errors", "0"] (no shell string)',
    },
  ];
  for (const r of rows) {
    it(`rejects ${r.name}, naming the field`, async () => {
      const got = await issues(r.text, r.env);
      assert.ok(got.includes(r.expect), got.join('\n'));
      if (r.hidden) assert.ok(!got.join('\n').includes(r.hidden), got.join('\n'));
    });
  }
});
