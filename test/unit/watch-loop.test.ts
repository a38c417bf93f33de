/**
 * `fleetroll watch`'s loop (src/engine/watch.ts) on in-memory fakes: a
 * scripted fleet whose faults come and go, an engine that disappears and
 * returns, a deploy holding the lock, a revision a deploy left failed. After
 * every run the invariants hold: no heal while the latest revision is not
 * complete, never two heals at once, one heal per fault that lasted the
 * settle window, none for one that did not, and a backoff that grows while
 * the engine is away.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import type Dockerode from 'dockerode';
import { containerEvents } from '../../src/adapters/dockerEvents.js';
import type { Fleet } from '../../src/config/load.js';
import type { StatusReport } from '../../src/engine/status.js';
import { watchFleet, type WatchOptions } from '../../src/engine/watch.js';
import { FleetrollError } from '../../src/errors.js';
import type { FleetState, LockInfo, RevisionRecord } from '../../src/ports.js';

type Step = 'whole' | 'dead' | 'unreachable';

const record = (outcome: RevisionRecord['outcome']): RevisionRecord =>
  ({
    number: 2,
    hash: 'rev-2',
    image: 'api:2',
    version: '2',
    env: {},
    changeCause: 'deploy',
    who: 't',
    when: '2026-12-03T00:00:00Z',
    outcome,
  }) as RevisionRecord;

function report(step: Step): StatusReport {
  if (step === 'unreachable') throw new FleetrollError('E_DOCKER', 'Docker host local (unix:///var/run/docker.sock) is not reachable: connect ENOENT');
  const inst = (name: string, state = 'running') =>
    ({
      name,
      host: 'local',
      revision: 'rev-2',
      version: '2',
      state,
      ready: state === 'running',
      restarts: 0,
      upstreams: { lb: state === 'running' ? 'up' : 'absent' },
    }) as StatusReport['instances'][number];
  const instances = step === 'whole' ? [inst('a'), inst('b')] : [inst('a'), inst('b', 'exited')];
  return {
    desired: { replicas: 2, revision: 'rev-2' },
    observed: { ready: instances.filter((i) => i.ready).length },
    instances,
    strays: { lb: [] },
  } as unknown as StatusReport;
}

/** Runs the loop over `script` (one step per look; the last repeats) and returns what it did. */
async function run(
  script: Step[],
  o: { outcome?: RevisionRecord['outcome']; healFails?: string[]; settleMs?: number; looks?: number; loseLeadAt?: number } = {},
) {
  const looks: Step[] = [];
  const heals: string[] = [];
  const sleeps: number[] = [];
  const lines: string[] = [];
  let healing = 0;
  let maxHealing = 0;
  const failures = [...(o.healFails ?? [])];
  const state: FleetState = { service: 'api', nextRevision: 3, revisions: [record(o.outcome ?? 'complete')] };
  let step = 0;
  const abort = new AbortController();
  const lost = new Set<(why: string) => void>();
  let acquired = 0;
  const lock = {
    onTakeover: undefined,
    acquire: async () => void acquired++,
    release: async () => {},
    info: async (): Promise<LockInfo | undefined> => undefined,
    note: async () => {},
    onLost: (l: (why: string) => void) => {
      lost.add(l);
      return () => lost.delete(l);
    },
  };
  const opts: WatchOptions = {
    fleet: { service: 'api', image: 'api:2' } as Fleet,
    deps: {} as WatchOptions['deps'],
    h: { store: { read: async () => state, image: async () => 'api:2' } as unknown as WatchOptions['h']['store'], lock, watchLock: lock, who: 't' },
    signal: abort.signal,
    intervalMs: 2000,
    settleMs: o.settleMs ?? 1000,
    log: (l) => lines.push(l),
    sleep: async (ms) => {
      sleeps.push(ms);
      // A loop that stops looking (it has nothing to look at) still ends.
      if (sleeps.length >= 50) abort.abort();
    },
    ports: {
      report: async () => {
        const s = script[Math.min(step++, script.length - 1)]!;
        looks.push(s);
        if (looks.length === o.loseLeadAt) for (const l of lost) l('etcd has not renewed its lease for 8.1 s');
        if (looks.length >= (o.looks ?? 12)) abort.abort();
        // A heal replaces the dead instance: from then on the script's 'dead' is healed.
        return report(s === 'dead' && heals.length > 0 && !failures.length ? 'whole' : s);
      },
      heal: async (latest, _state, reason) => {
        assert.equal(latest.outcome, 'complete', 'never a heal of a revision that is not complete');
        healing++;
        maxHealing = Math.max(maxHealing, healing);
        try {
          const fail = failures.shift();
          if (fail === 'lock') throw new FleetrollError('E_LOCK_HELD', 'fleet api is locked by ci@runner (pid 7, fleetroll deploy)');
          if (fail) throw new FleetrollError('E_ROLLOUT_FAILED', fail);
          heals.push(reason);
        } finally {
          healing--;
        }
      },
    },
  };
  const end = await watchFleet(opts);
  assert.ok(maxHealing <= 1, 'never two heals at once');
  return { end, looks, heals, sleeps, lines, acquired, listening: lost.size };
}

describe('the watch loop on fakes', () => {
  it('its watch lock lost (an etcd lease not renewed): it says so, stops leading and stands by again, taking the lock once more', async () => {
    const r = await run(['whole'], { looks: 6, loseLeadAt: 2 });
    assert.ok(
      r.lines.some((l) => /lost the lead of api: etcd has not renewed its lease for 8\.1 s; stopping .*then standing by/.test(l)),
      r.lines.join('\n'),
    );
    assert.equal(r.acquired, 2, 'it waited for the lock again');
    assert.equal(r.looks.length, 6, 'and looked on once it held it');
    assert.equal(r.listening, 0, 'no listener left once it ended');
  });

  it('a whole fleet: looks every interval, never heals, says "whole" once', async () => {
    const r = await run(['whole'], { looks: 5 });
    assert.deepEqual(r.heals, []);
    assert.deepEqual(r.sleeps, [2000, 2000, 2000, 2000, 2000]);
    assert.equal(r.lines.filter((l) => /whole at revision 2/.test(l)).length, 1, r.lines.join('\n'));
  });

  it('an instance that died and stays dead past the settle window: one heal for all it found, then whole', async () => {
    const r = await run(['whole', 'dead'], { looks: 6 });
    assert.deepEqual(r.heals, ['exited, missing']);
    assert.ok(r.sleeps.includes(1000), 'it waited the settle window before healing');
    assert.equal(r.end.heals, 1);
    assert.ok(
      r.lines.some((l) => /healed \(exited, missing\)/.test(l)),
      r.lines.join('\n'),
    );
  });

  it('a fault gone within the settle window (Docker restarted it): no heal', async () => {
    const r = await run(['whole', 'dead', 'whole'], { looks: 6 });
    assert.deepEqual(r.heals, []);
    assert.ok(
      r.lines.some((l) => /whole again at revision 2 without a heal/.test(l)),
      r.lines.join('\n'),
    );
  });

  it('an engine that disappears and returns: the backoff grows 1, 2, 4 s, one line says so, and one heal follows when it answers with a fault', async () => {
    const r = await run(['whole', 'unreachable', 'unreachable', 'unreachable', 'dead'], { looks: 9 });
    assert.deepEqual(r.sleeps.slice(1, 4), [1000, 2000, 4000]);
    assert.equal(r.lines.filter((l) => /cannot see the fleet: .*not reachable/.test(l)).length, 1, 'said once, not once a look');
    assert.deepEqual(r.heals, ['exited, missing'], 'one heal after the engine came back, not a burst');
  });

  it('an engine that goes away between a look and its settle look: the watch backs off at once, not after a whole interval', async () => {
    const r = await run(['dead', 'unreachable', 'unreachable', 'unreachable', 'dead'], { looks: 9 });
    assert.deepEqual(r.sleeps.slice(0, 3), [1000, 1000, 2000], 'the settle window, then the backoff (1 s, 2 s), no wait of an interval');
    assert.equal(r.lines.filter((l) => /cannot see the fleet/.test(l)).length, 1, r.lines.join('\n'));
    assert.deepEqual(r.heals, ['exited, missing']);
  });

  it('an event stream that ends (its engine restarted) wakes the watch, which subscribes again once it sees the engine; one the engine refused waits for the next look', async () => {
    const abort = new AbortController();
    const callbacks: ((stream?: 'ended' | 'refused') => void)[] = [];
    let looks = 0;
    const state: FleetState = { service: 'api', nextRevision: 3, revisions: [record('complete')] };
    const lock = {
      onTakeover: undefined,
      acquire: async () => {},
      release: async () => {},
      info: async (): Promise<LockInfo | undefined> => undefined,
      note: async () => {},
    };
    const engine = { events: (_labels: Record<string, string>, onEvent: (stream?: 'ended' | 'refused') => void) => (callbacks.push(onEvent), () => {}) };
    const watching = watchFleet({
      fleet: { service: 'api', image: 'api:2' } as Fleet,
      deps: { runtimes: new Map([['local', engine]]) } as unknown as WatchOptions['deps'],
      h: { store: { read: async () => state, image: async () => 'api:2' } as unknown as WatchOptions['h']['store'], lock, watchLock: lock, who: 't' },
      signal: abort.signal,
      intervalMs: 300_000,
      settleMs: 1000,
      log: () => {},
      // The interval's wait lasts until the test ends it: only a wake-up makes the watch look again.
      sleep: (ms, signal) => (ms === 300_000 ? new Promise((res) => signal.addEventListener('abort', () => res(), { once: true })) : Promise.resolve()),
      ports: { report: async () => (looks++, report('whole')), heal: async () => {} },
    });
    const settle = () => new Promise((r) => setTimeout(r, 20));
    await settle();
    assert.deepEqual([looks, callbacks.length], [1, 1], 'one look, one subscription');
    callbacks[0]!('ended');
    await settle();
    assert.deepEqual([looks, callbacks.length], [2, 2], 'the ended stream woke the watch, and the look that saw the engine subscribed again');
    callbacks[1]!('refused');
    await settle();
    assert.deepEqual([looks, callbacks.length], [2, 2], 'a refused stream wakes nothing');
    callbacks[1]!();
    await settle();
    assert.deepEqual([looks, callbacks.length], [3, 3], 'the next look (an event woke it) subscribes again');
    abort.abort();
    await watching;
  });

  it('a deploy holds the lock: the watch steps back, then heals on a later look', async () => {
    const r = await run(['dead'], { healFails: ['lock'], looks: 8 });
    assert.ok(
      r.lines.some((l) => /stepping back: fleet api is locked by ci@runner/.test(l)),
      r.lines.join('\n'),
    );
    assert.deepEqual(r.heals, ['exited, missing']);
  });

  it('a heal that fails is said with its reason; the watch goes on and heals later', async () => {
    const r = await run(['dead'], { healFails: ['progress deadline exceeded'], looks: 8 });
    assert.ok(
      r.lines.some((l) => /heal \(exited, missing\) failed after .*: progress deadline exceeded/.test(l)),
      r.lines.join('\n'),
    );
    assert.deepEqual(r.heals, ['exited, missing']);
  });

  it('the latest revision failed (a deploy stopped halfway): no heal at all, and it says why', async () => {
    const r = await run(['dead'], { outcome: 'failed', looks: 4 });
    assert.deepEqual(r.heals, []);
    assert.ok(
      r.lines.some((l) => /not healing: revision 2 is failed/.test(l)),
      r.lines.join('\n'),
    );
  });
});

describe("Docker's event stream for the watch (adapters/dockerEvents.ts)", () => {
  const tick = () => new Promise((r) => setTimeout(r, 10));
  const engine = (stream: Promise<PassThrough>) => ({ getEvents: () => stream }) as unknown as Dockerode;
  const labels = { 'fleetroll.service': 'api' };

  it("an event of the fleet's containers wakes; the stream's end (its engine stopped) says 'ended' once; closed by the watch, it says nothing", async () => {
    const calls: (string | undefined)[] = [];
    const s = new PassThrough();
    containerEvents(engine(Promise.resolve(s)), labels, (x) => calls.push(x));
    await tick();
    s.write(`${JSON.stringify({ Type: 'container', Actor: { Attributes: { 'fleetroll.service': 'api' } } })}\n`);
    s.write(`${JSON.stringify({ Type: 'container', Actor: { Attributes: { 'fleetroll.service': 'other' } } })}\n`);
    s.end();
    s.resume();
    await tick();
    assert.deepEqual(calls, [undefined, 'ended']);

    const quiet: (string | undefined)[] = [];
    const open = new PassThrough();
    const close = containerEvents(engine(Promise.resolve(open)), labels, (x) => quiet.push(x));
    await tick();
    close();
    await tick();
    assert.deepEqual(quiet, []);
  });

  it("an engine that does not answer the subscription: 'refused'", async () => {
    const calls: (string | undefined)[] = [];
    containerEvents(engine(Promise.reject(new Error('connect ENOENT'))), labels, (x) => calls.push(x));
    await tick();
    assert.deepEqual(calls, ['refused']);
  });
});
