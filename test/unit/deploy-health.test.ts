/**
 * The deploy's health numbers: the `accessLog` field of a load balancer, the
 * mapping of upstream addresses to instances and revisions over time (Docker
 * reuses a stopped container's address at once), the report's shape as
 * `deploy --json` and the history carry it, the watch that reads the logs
 * around a rollout (engine/health.ts) on a virtual clock with scripted logs,
 * and the lines `deploy` and `history --revision N` print.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { healthLines, healthRows } from '../../src/cli/health.js';
import { loadFleet, type Fleet } from '../../src/config/load.js';
import type { AccessRecord } from '../../src/core/accessLog.js';
import {
  ACCESS_LOG_HINT,
  healthReport,
  isHealthUnavailable,
  ownerAt,
  type AddressOwner,
  type DeployHealthNumbers,
  type DeployHealthReport,
} from '../../src/core/deployHealth.js';
import { HealthWatch } from '../../src/engine/health.js';
import type { AccessLogOpener } from '../../src/engine/types.js';
import { ValidationError } from '../../src/errors.js';
import { LABELS, type AccessLogSource, type InstanceInfo } from '../../src/ports.js';
import { VirtualClock } from '../../src/sim/clock.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-health-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;

const BASE = 'service: bookstore-api\nimage: bookstore-api:1.0.0\nreplicas: 3\nport: 8080\nhosts:\n  - { name: local }\n';
const lb = (fields: string) => `${BASE}loadBalancers:\n  - nginx: { ${fields}, upstreamFile: /etc/nginx/conf.d/upstream.conf, upstream: bookstore_api }\n`;

async function load(text: string): Promise<Fleet> {
  const p = join(dir, `fleet-${n++}.yaml`);
  writeFileSync(p, text);
  return loadFleet(p);
}

describe('loadBalancers[].nginx.accessLog', () => {
  const accepted: { name: string; fields: string; want: string | undefined }[] = [
    {
      name: 'a file inside the nginx container',
      fields: 'container: web-nginx, accessLog: /var/log/nginx/fleetroll.log',
      want: '/var/log/nginx/fleetroll.log',
    },
    { name: "the container's log stream", fields: 'container: web-nginx, accessLog: stdout', want: 'stdout' },
    { name: 'a file on this machine (exec: true)', fields: 'exec: true, accessLog: /var/log/nginx/fleetroll.log', want: '/var/log/nginx/fleetroll.log' },
    { name: 'none: the numbers are reported unavailable, not an error', fields: 'container: web-nginx', want: undefined },
  ];
  for (const row of accepted) {
    it(`accepts ${row.name}`, async () => {
      const f = await load(lb(row.fields));
      assert.equal(f.loadBalancers[0]?.nginx.accessLog, row.want);
    });
  }

  const rejected: { name: string; fields: string; message: RegExp }[] = [
    {
      name: 'a relative path',
      fields: 'container: web-nginx, accessLog: logs/fleetroll.log',
      message: /must be the absolute path of the access log .*fleetroll_json.* or "stdout"/,
    },
    {
      name: 'nginx syntax in the path',
      fields: 'container: web-nginx, accessLog: "/var/log/a.log; include /etc/passwd"',
      message: /absolute path .*got "\/var\/log\/a.log; include \/etc\/passwd"/,
    },
    { name: 'not a string', fields: 'container: web-nginx, accessLog: true', message: /must be a string \(the absolute path/ },
    {
      name: '"stdout" for nginx on this machine',
      fields: 'exec: true, accessLog: stdout',
      message: /"stdout" is a container's log stream: with exec: true .* absolute path/,
    },
    { name: '/dev/stdout: a stream, not a file', fields: 'container: web-nginx, accessLog: /dev/stdout', message: /regular file .*accessLog: stdout/ },
  ];
  for (const row of rejected) {
    it(`rejects ${row.name}, naming the field (exit 2)`, async () => {
      const err = await load(lb(row.fields)).then(
        () => assert.fail('accepted'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof ValidationError, String(err));
      assert.equal(err.exitCode, 2);
      const issue = err.issues.find((i) => i.path === 'loadBalancers/0/nginx/accessLog');
      assert.ok(issue, JSON.stringify(err.issues));
      assert.match(issue.message, row.message);
    });
  }
});

// ---------------------------------------------------------------------------
// Address → instance over time.

const A = '10.0.0.2:8080';
const B = '10.0.0.3:8080';
const C = '10.0.0.4:8080';
const owner = (address: string, name: string, revision: string, sinceMs: number): AddressOwner => ({
  address,
  name,
  revision,
  sinceMs,
  startedInDeploy: sinceMs !== -Infinity,
});
/** old-1 on A and old-2 on B before the deploy; new-1 took C at 2000, new-2 took A (old-1's, reused) at 4000. */
const OWNERS = [owner(A, 'old-1', 'old', -Infinity), owner(B, 'old-2', 'old', -Infinity), owner(C, 'new-1', 'new', 2000), owner(A, 'new-2', 'new', 4000)];

describe('ownerAt: who had an address when a response ended', () => {
  const rows: { name: string; address: string; timeMs: number; want: string | undefined }[] = [
    { name: 'an instance running before the deploy, before anyone else took its address', address: A, timeMs: 3999, want: 'old-1' },
    { name: 'a reused address belongs to its new owner from the moment that one started', address: A, timeMs: 4000, want: 'new-2' },
    { name: 'and stays with it', address: A, timeMs: 9000, want: 'new-2' },
    { name: 'a new instance before it started: nobody (no response can come from it)', address: C, timeMs: 1999, want: undefined },
    { name: 'a new instance once started', address: C, timeMs: 2000, want: 'new-1' },
    { name: 'an address the fleet never had', address: '10.9.9.9:8080', timeMs: 5000, want: undefined },
    { name: 'an upstream group name ("no live upstreams")', address: 'bookstore_api', timeMs: 5000, want: undefined },
  ];
  for (const row of rows) {
    it(row.name, () => assert.equal(ownerAt(OWNERS, row.address, row.timeMs)?.name, row.want));
  }
});

/** A record as the parser returns it; `attempts` are "address status", "!" after the status = no header from that server. */
function rec(timeMs: number, status: number, attempts: string[]): AccessRecord {
  const parts = attempts.map((a) => {
    const [address, s] = a.split(' ') as [string, string];
    return { address, status: s === '-' ? null : Number(s.replace('!', '')), header: s.endsWith('!') || s === '-' ? null : 1 };
  });
  return {
    timeMs,
    status,
    method: 'GET',
    uri: '/api/books',
    requestTimeMs: 3,
    upstreamAddr: parts.map((p) => p.address),
    upstreamStatus: parts.map((p) => p.status),
    upstreamTimeMs: parts.map(() => 1),
    upstreamHeaderTimeMs: parts.map((p) => p.header),
  };
}
const ok = (t: number, address: string) => rec(t, 200, [`${address} 200`]);
const iso = (ms: number) => new Date(ms).toISOString();

describe('healthReport: the numbers over the deploy window', () => {
  const input = {
    startMs: 1000,
    endMs: 9000,
    owners: OWNERS,
    newRevision: 'new',
    sources: ['access log /var/log/nginx/fleetroll.log in container web-nginx'],
    garbage: 0,
  };
  type Want = Partial<DeployHealthNumbers>;
  const rows: { name: string; records: AccessRecord[]; owners?: AddressOwner[]; want: Want }[] = [
    {
      name: 'a reused address: old-1 answers on A until 3500, new-2 on A from 4500; the mixed window ends with old-1, not with new-2',
      records: [ok(1500, A), ok(2500, C), ok(3000, B), ok(3500, A), ok(4500, A), ok(5000, C)],
      want: {
        requests: 6,
        failed5xx: 0,
        dropped: 0,
        mixedVersionWindowMs: 1000,
        firstNewResponseAt: iso(2500),
        lastOldResponseAt: iso(3500),
        firstNewInstance: { name: 'new-1', address: C, requests: 2, errors: 0, errorRate: 0 },
      },
    },
    {
      name: 'the same records read without time would call A at 4500 old: the window is really 1000 ms, not 2000',
      records: [ok(2500, C), ok(3500, A), ok(4500, A)],
      want: { mixedVersionWindowMs: 1000, lastOldResponseAt: iso(3500) },
    },
    {
      name: 'the first new instance is the first to answer, not the first started',
      records: [ok(4100, A), ok(4200, C), rec(4300, 500, [`${C} 500`])],
      want: { firstNewInstance: { name: 'new-2', address: A, requests: 1, errors: 0, errorRate: 0 }, failed5xx: 1, dropped: 0 },
    },
    {
      name: 'its error rate counts its 5xx and the connection failures nginx retried elsewhere, rounded to 4 decimals',
      records: [ok(2100, C), rec(2200, 200, [`${C} 502!`, `${B} 200`]), rec(2300, 500, [`${C} 500`])],
      want: { firstNewInstance: { name: 'new-1', address: C, requests: 2, errors: 2, errorRate: 0.6667 }, failed5xx: 1, requests: 3 },
    },
    {
      name: 'dropped: nginx answered 502/504 itself; unattributed: no fleet address',
      records: [rec(2000, 502, [`${B} 502!`]), rec(2100, 502, ['bookstore_api 502!']), rec(2200, 504, ['10.9.9.9:8080 504!']), rec(2300, 499, [`${B} -`])],
      want: {
        requests: 4,
        failed5xx: 3,
        dropped: 3,
        clientClosed: 1,
        unattributed: 2,
        firstNewInstance: null,
        firstNewResponseAt: null,
        mixedVersionWindowMs: 0,
      },
    },
    {
      name: 'only the window counts: before the start and after the end are left out',
      records: [ok(999, A), ok(1000, A), ok(9000, C), ok(9001, A)],
      want: { requests: 2, firstNewResponseAt: iso(9000), lastOldResponseAt: iso(1000), mixedVersionWindowMs: 0 },
    },
    {
      name: 'a deploy that changed nothing: the instances of the target revision were there before, none is "the first new instance"',
      records: [ok(2000, A), ok(3000, B)],
      owners: [owner(A, 'cur-1', 'new', -Infinity), owner(B, 'cur-2', 'new', -Infinity)],
      want: { requests: 2, mixedVersionWindowMs: 0, firstNewResponseAt: iso(2000), lastOldResponseAt: null, firstNewInstance: null },
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const h = healthReport({ ...input, records: row.records, owners: row.owners ?? OWNERS });
      const picked = Object.fromEntries(Object.keys(row.want).map((k) => [k, h[k as keyof DeployHealthNumbers]]));
      assert.deepEqual(picked, row.want);
    });
  }

  it('the shape: every field, JSON-safe (what deploy --json and the history store), incomplete only when something is', () => {
    const h = healthReport({ ...input, records: [ok(2500, C), ok(3500, A), ok(4000, C)], garbage: 2 });
    assert.deepEqual(h, {
      sources: ['access log /var/log/nginx/fleetroll.log in container web-nginx'],
      window: { start: iso(1000), end: iso(9000), durationMs: 8000 },
      requests: 3,
      failed5xx: 0,
      dropped: 0,
      clientClosed: 0,
      mixedVersionWindowMs: 1000,
      firstNewResponseAt: iso(2500),
      lastOldResponseAt: iso(3500),
      lastNewResponseAt: iso(4000),
      firstNewInstance: { name: 'new-1', address: C, requests: 2, errors: 0, errorRate: 0 },
      unattributed: 0,
      garbage: 2,
    });
    assert.deepEqual(JSON.parse(JSON.stringify(h)), h);
    assert.deepEqual(healthReport({ ...input, records: [], incomplete: ['x'] }).incomplete, ['x']);
    assert.equal(isHealthUnavailable(h), false);
    assert.equal(isHealthUnavailable({ unavailable: 'why' }), true);
  });
});

// ---------------------------------------------------------------------------
// The watch around a rollout, on a virtual clock.

/** A fleetroll_json line. */
function line(timeMs: number, address: string, status = 200): string {
  return JSON.stringify({
    fleetroll: 1,
    time: (timeMs / 1000).toFixed(3),
    status: String(status),
    method: 'GET',
    uri: '/api/books',
    request_time: '0.003',
    upstream_addr: address,
    upstream_status: String(status),
    upstream_response_time: '0.002',
    upstream_header_time: '0.002',
    app_version: '',
    key: '127.0.0.1',
  });
}

/** A log whose lines appear at their time: each read returns what was "written" since the last one. */
class ScriptedLog implements AccessLogSource {
  readonly counters = { rotations: 0, truncations: 0, lostRotations: 0, skippedLines: 0 };
  reads = 0;
  closed = false;
  private next = 0;
  constructor(
    readonly name: string,
    private readonly clock: VirtualClock,
    private readonly lines: [number, string][],
    private readonly failAtMs = Infinity,
  ) {}
  async read(): Promise<string[]> {
    this.reads++;
    if (this.clock.now() >= this.failAtMs) throw new Error('the container is gone');
    const out: string[] = [];
    while (this.next < this.lines.length && this.lines[this.next]![0] <= this.clock.now()) out.push(this.lines[this.next++]![1]);
    return out;
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

const info = (name: string, address: string, revision: string): InstanceInfo => ({
  id: name,
  name,
  host: 'local',
  labels: { [LABELS.revision]: revision },
  state: 'running',
  running: true,
  address,
});
const fleetWith = (accessLogs: (string | undefined)[]) =>
  ({ loadBalancers: accessLogs.map((accessLog) => ({ nginx: { container: 'web', upstreamFile: '/u', upstream: 'u', accessLog } })) }) as unknown as Fleet;
const opener = (source: AccessLogSource): AccessLogOpener => ({ name: source.name, open: async () => source });

/**
 * A rolling deploy from 1000 to 12000 ms: new-1 starts at 2000 on C, new-2 at
 * 4000 on A (old-1's address). `lines` are written at their times.
 */
async function watchDeploy(
  clock: VirtualClock,
  fleet: Fleet,
  openers: AccessLogOpener[],
  observe = async () => [info('old-1', A, 'old'), info('old-2', B, 'old')],
): Promise<DeployHealthReport> {
  const run = (async () => {
    const w = await HealthWatch.start(fleet, 'new', clock, openers, observe);
    const seen: string[] = [];
    const emit = w.events((e) => seen.push(e.type));
    emit({ type: 'observed', instances: 2, byRevision: { old: 2 }, revision: 'new' });
    await clock.sleep(1000);
    emit({ type: 'started', name: 'new-1', host: 'local', address: C });
    await clock.sleep(2000);
    emit({ type: 'started', name: 'new-2', host: 'local', address: A });
    await clock.sleep(8000);
    assert.deepEqual(seen, ['observed', 'started', 'started'], "the events still reach the deploy's own sink");
    return w.finish();
  })();
  return clock.run(run);
}

const LINES: [number, string][] = [
  [500, line(500, A)], // before the deploy: not counted
  [1500, line(1500, A)],
  [1600, 'GET / HTTP/1.1 combined format, not ours'],
  [2500, line(2500, C)],
  [3500, line(3500, A)],
  [4500, line(4500, A)],
  [6000, line(6000, B, 502)], // nginx answered with a 502 after a header: the app's, not dropped
  [11000, line(11000, C)],
];

describe('HealthWatch: the logs read around a rollout', () => {
  it('reads from the start, every few seconds and at the end; maps addresses through the events; closes the logs', async () => {
    const clock = new VirtualClock(1000);
    const log = new ScriptedLog(
      'access log /var/log/nginx/fleetroll.log in container web',
      clock,
      LINES.filter(([t]) => t >= 1000),
    );
    const h = await watchDeploy(clock, fleetWith(['/var/log/nginx/fleetroll.log']), [opener(log)]);
    assert.ok(!isHealthUnavailable(h), JSON.stringify(h));
    assert.deepEqual(
      {
        requests: h.requests,
        failed5xx: h.failed5xx,
        dropped: h.dropped,
        mixed: h.mixedVersionWindowMs,
        first: h.firstNewInstance?.name,
        garbage: h.garbage,
        window: h.window,
        sources: h.sources,
        incomplete: h.incomplete,
      },
      {
        requests: 6,
        failed5xx: 1,
        dropped: 0,
        mixed: 1000 + 2500 /* old-2 answered (a 502 with a header) at 6000 */,
        first: 'new-1',
        garbage: 1,
        window: { start: iso(1000), end: iso(12000), durationMs: 11000 },
        sources: [log.name],
        incomplete: undefined,
      },
    );
    assert.ok(log.reads >= 4, `first read, polls at 6000 and 11000, last read (${log.reads})`);
    assert.ok(log.closed);
  });

  it('a rollback: instances started after the rollback\'s "observed" count as old', async () => {
    const clock = new VirtualClock(1000);
    const log = new ScriptedLog('log', clock, [
      [2500, line(2500, C)],
      [3500, line(3500, C)],
      [5000, line(5000, '10.0.0.9:8080')],
    ]);
    const run = (async () => {
      const w = await HealthWatch.start(fleetWith(['stdout']), 'new', clock, [opener(log)], async () => []);
      const emit = w.events(undefined);
      emit({ type: 'observed', instances: 0, byRevision: {}, revision: 'new' });
      emit({ type: 'started', name: 'new-1', host: 'local', address: C });
      await clock.sleep(3000);
      emit({ type: 'observed', instances: 1, byRevision: { new: 1 }, revision: 'old' });
      emit({ type: 'started', name: 'back-1', host: 'local', address: '10.0.0.9:8080' });
      await clock.sleep(2000);
      return w.finish();
    })();
    const h = await clock.run(run);
    assert.ok(!isHealthUnavailable(h));
    // back-1 (started by the rollback) is old: the old revision served last, and the window ends with the new one's last answer.
    assert.deepEqual([h.firstNewResponseAt, h.lastNewResponseAt, h.lastOldResponseAt, h.mixedVersionWindowMs], [iso(2500), iso(3500), iso(5000), 1000]);
  });

  const unavailable: {
    name: string;
    fleet: (string | undefined)[];
    openers: (clock: VirtualClock) => AccessLogOpener[];
    want: { unavailable: RegExp; hint?: string };
  }[] = [
    {
      name: 'no load balancer names its access log: unavailable, with how to enable it',
      fleet: [undefined],
      openers: () => [],
      want: { unavailable: /^no load balancer names its access log$/, hint: ACCESS_LOG_HINT },
    },
    {
      name: 'the only log cannot be opened: unavailable with the reason, the deploy goes on',
      fleet: ['stdout'],
      openers: () => [
        {
          name: 'log stream of container web on local',
          open: async () => Promise.reject(new Error('following the log stream of container web: it does not exist')),
        },
      ],
      want: { unavailable: /^log stream of container web on local: following the log stream of container web: it does not exist$/ },
    },
    {
      name: 'the only log fails mid-way: unavailable rather than numbers that silently miss requests',
      fleet: ['/var/log/nginx/fleetroll.log'],
      openers: (clock) => [opener(new ScriptedLog('access log x', clock, LINES, 7000))],
      want: { unavailable: /^access log x: the container is gone$/ },
    },
  ];
  for (const row of unavailable) {
    it(row.name, async () => {
      const clock = new VirtualClock(1000);
      const h = await watchDeploy(clock, fleetWith(row.fleet), row.openers(clock));
      assert.ok(isHealthUnavailable(h), JSON.stringify(h));
      assert.match(h.unavailable, row.want.unavailable);
      assert.equal(h.hint, row.want.hint);
    });
  }

  it("the fleet cannot be listed at the start: the old instances' requests are unattributed, and the numbers say so", async () => {
    const clock = new VirtualClock(1000);
    const h = await watchDeploy(clock, fleetWith(['stdout']), [opener(new ScriptedLog('log', clock, LINES))], async () =>
      Promise.reject(new Error('Docker host local does not answer')),
    );
    assert.ok(!isHealthUnavailable(h));
    assert.deepEqual([h.requests, h.unattributed, h.firstNewInstance?.name], [6, 3, 'new-1']);
    assert.deepEqual(h.incomplete, [
      "the fleet could not be listed when the deploy started (Docker host local does not answer): the old instances' requests count as unattributed",
    ]);
  });

  it('two load balancers, one log good, one failing, one with none: the numbers of the good one, and why they are incomplete', async () => {
    const clock = new VirtualClock(1000);
    const good = new ScriptedLog('good log', clock, LINES);
    const bad = new ScriptedLog('bad log', clock, LINES, 3000);
    const h = await watchDeploy(clock, fleetWith(['/a.log', '/b.log', undefined]), [opener(good), opener(bad)]);
    assert.ok(!isHealthUnavailable(h));
    assert.equal(h.requests, 6);
    assert.deepEqual(h.sources, ['good log']);
    assert.deepEqual(h.incomplete, [
      'bad log: the container is gone (its requests are not counted)',
      'loadBalancers/2/nginx has no accessLog: its requests are not counted',
    ]);
  });
});

// ---------------------------------------------------------------------------
// What people read.

describe('the lines deploy prints and the rows history shows', () => {
  const numbers: DeployHealthNumbers = {
    sources: ['access log /var/log/nginx/fleetroll.log in container web-nginx'],
    window: { start: '2024-04-05T12:00:00.000Z', end: '2024-04-05T12:00:14.200Z', durationMs: 14_200 },
    requests: 1423,
    failed5xx: 0,
    dropped: 0,
    clientClosed: 0,
    mixedVersionWindowMs: 9_310,
    firstNewResponseAt: '2024-04-05T12:00:02.120Z',
    lastOldResponseAt: '2024-04-05T12:00:11.430Z',
    lastNewResponseAt: '2024-04-05T12:00:14.100Z',
    firstNewInstance: { name: 'bookstore-api-33176fd-7q7zj', address: '172.21.0.6:8080', requests: 402, errors: 0, errorRate: 0 },
    unattributed: 0,
    garbage: 0,
  };
  const rows: { name: string; health: DeployHealthReport; lines: string[] }[] = [
    {
      name: 'a clean deploy: three lines',
      health: numbers,
      lines: [
        'health: 1423 requests in the deploy window (14.2 s): 0 failed (5xx), 0 dropped',
        '  mixed-version window: 9.3 s, from the first new response (12:00:02.120) to the last old one (12:00:11.430)',
        '  first new instance: bookstore-api-33176fd-7q7zj (172.21.0.6:8080): 0.00 % errors (0 of 402 requests)',
      ],
    },
    {
      name: 'failures, 499s, strangers and garbage are named; incomplete numbers say why',
      health: {
        ...numbers,
        failed5xx: 3,
        dropped: 2,
        clientClosed: 1,
        unattributed: 2,
        garbage: 1,
        firstNewInstance: { ...numbers.firstNewInstance!, errors: 1, requests: 1, errorRate: 0.5 },
        incomplete: ['loadBalancers/1/nginx has no accessLog: its requests are not counted'],
      },
      lines: [
        'health: 1423 requests in the deploy window (14.2 s): 3 failed (5xx), 2 dropped; 1 closed by the client (499), 2 not from a fleet instance, 1 log line not in the fleetroll_json format, skipped',
        '  mixed-version window: 9.3 s, from the first new response (12:00:02.120) to the last old one (12:00:11.430)',
        '  first new instance: bookstore-api-33176fd-7q7zj (172.21.0.6:8080): 50.00 % errors (1 of 1 request)',
        '  incomplete: loadBalancers/1/nginx has no accessLog: its requests are not counted',
      ],
    },
    {
      name: 'a rollout whose new revision never served',
      health: { ...numbers, mixedVersionWindowMs: 0, firstNewResponseAt: null, firstNewInstance: null },
      lines: [
        'health: 1423 requests in the deploy window (14.2 s): 0 failed (5xx), 0 dropped',
        '  mixed-version window: none: the new revision served no request in the window',
        '  first new instance: none served a request in the window',
      ],
    },
    {
      name: 'recreate: old and new never overlapped',
      health: { ...numbers, mixedVersionWindowMs: 0, lastOldResponseAt: '2024-04-05T12:00:01.000Z' },
      lines: [
        'health: 1423 requests in the deploy window (14.2 s): 0 failed (5xx), 0 dropped',
        '  mixed-version window: 0 s: the last old response (12:00:01.000) came before the first new one (12:00:02.120)',
        '  first new instance: bookstore-api-33176fd-7q7zj (172.21.0.6:8080): 0.00 % errors (0 of 402 requests)',
      ],
    },
    {
      name: "stopped (rolled back): the window ends with the new revision's last answer, and says the old one served on",
      health: { ...numbers, mixedVersionWindowMs: 4_000, lastNewResponseAt: '2024-04-05T12:00:06.120Z' },
      lines: [
        'health: 1423 requests in the deploy window (14.2 s): 0 failed (5xx), 0 dropped',
        '  mixed-version window: 4.0 s, from the first new response (12:00:02.120) to the last new one (12:00:06.120): the new revision stopped serving; the old one served on alone (last at 12:00:11.430)',
        '  first new instance: bookstore-api-33176fd-7q7zj (172.21.0.6:8080): 0.00 % errors (0 of 402 requests)',
      ],
    },
    {
      name: 'a record from before lastNewResponseAt was kept reads as before',
      health: { ...numbers, lastNewResponseAt: undefined },
      lines: [
        'health: 1423 requests in the deploy window (14.2 s): 0 failed (5xx), 0 dropped',
        '  mixed-version window: 9.3 s, from the first new response (12:00:02.120) to the last old one (12:00:11.430)',
        '  first new instance: bookstore-api-33176fd-7q7zj (172.21.0.6:8080): 0.00 % errors (0 of 402 requests)',
      ],
    },
    {
      name: 'unavailable, with the hint',
      health: { unavailable: 'no load balancer names its access log', hint: ACCESS_LOG_HINT },
      lines: ['health: unavailable: no load balancer names its access log', `  ${ACCESS_LOG_HINT}`],
    },
  ];
  for (const row of rows) {
    it(row.name, () => assert.deepEqual(healthLines(row.health), row.lines));
  }

  it('history --revision N: the same figures as rows, the access logs read included', () => {
    assert.deepEqual(
      healthRows(numbers).map(([k]) => k),
      ['requests', 'mixed-version window', 'first new instance', 'access logs'],
    );
    assert.deepEqual(healthRows(numbers).at(-1), ['access logs', 'access log /var/log/nginx/fleetroll.log in container web-nginx']);
    assert.deepEqual(healthRows({ unavailable: 'x' }), [['health', 'unavailable: x']]);
  });
});
