/**
 * The final check of a rollout (engine/verify.ts) on a virtual clock: an
 * instance that does not answer is asked again with backoff within the budget
 * (what remains of the progress deadline), a wrong version fails at once, and
 * the failure tells a slow answer from a wrong build. The HTTP prober's own
 * answers, from a real server on 127.0.0.1, are in test/local/verify.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeEvent } from '../../src/cli/events.js';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { verify, type ToVerify, type Verified } from '../../src/engine/verify.js';
import { InterruptedError, RolloutFailedError } from '../../src/errors.js';
import { LABELS, type ProbeTarget, type Prober, type Runtime } from '../../src/ports.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { SimWorld } from '../../src/sim/ports.js';
import { SimRuntime } from '../../src/sim/runtime.js';

const PROBE_TIMEOUT_MS = 1000;
const BUDGET_MS = 30_000;

/**
 * One answer of the fake prober: `timeout` takes the probe's timeout on the
 * clock and fails as the HTTP prober does, `refused` fails at once, a number
 * is an HTTP status other than 2xx, a string is the version answered.
 */
type Step = 'timeout' | 'refused' | number | string;

/** A Prober that answers each address (or, for readiness, each container id) from a script; its last step repeats. */
class ScriptedProber implements Prober {
  readonly asked: { key: string; at: number }[] = [];
  private readonly n = new Map<string, number>();

  constructor(
    private readonly clock: VirtualClock,
    private readonly scripts: Record<string, Step[]>,
  ) {}

  private async step(key: string): Promise<string> {
    this.asked.push({ key, at: this.clock.now() });
    const script = this.scripts[key] ?? [];
    const k = this.n.get(key) ?? 0;
    this.n.set(key, k + 1);
    const s = script[Math.min(k, script.length - 1)];
    if (s === 'timeout') {
      await this.clock.sleep(PROBE_TIMEOUT_MS);
      throw new Error(`version probe GET http://${key}/api/version failed: no complete answer within ${PROBE_TIMEOUT_MS} ms`);
    }
    if (s === 'refused') throw new Error(`version probe GET http://${key}/api/version failed: ECONNREFUSED`);
    if (typeof s === 'number') throw Object.assign(new Error(`version probe GET http://${key}/api/version answered HTTP ${s}`), { status: s });
    if (s === undefined) throw new Error(`no script for ${key}`);
    return s;
  }

  version(address: string): Promise<string> {
    return this.step(address);
  }

  async ready(target: ProbeTarget): Promise<boolean> {
    const s = await this.step(target.id);
    return s === 'ready';
  }
}

async function apiFleet(over: Record<string, unknown> = {}): Promise<Fleet> {
  return fleetFromObject(
    { service: 'api', image: 'api:1.1.0', replicas: 3, port: 8080, hosts: [{ name: 'h1' }], progressDeadlineSeconds: BUDGET_MS / 1000, ...over },
    'api.yaml',
  );
}

interface Outcome {
  result?: Verified[];
  err?: unknown;
  events: RolloutEvent[];
  elapsedMs: number;
  prober: ScriptedProber;
}

/** Verifies api-1.. with the given scripts (address `10.0.0.N:8080`) on a virtual clock. */
async function checkVersions(scripts: Step[][], o: { budgetMs?: number; random?: () => number; abortAt?: number } = {}): Promise<Outcome> {
  const fleet = await apiFleet();
  const clock = new VirtualClock();
  const instances: ToVerify[] = scripts.map((_, n) => ({ id: `api-${n + 1}`, host: 'h1', address: `10.0.0.${n + 1}:8080` }));
  const prober = new ScriptedProber(clock, Object.fromEntries(instances.map((i, n) => [i.address!, scripts[n]!])));
  const events: RolloutEvent[] = [];
  const abort = new AbortController();
  if (o.abortAt !== undefined) clock.timer(o.abortAt, () => abort.abort());
  const run = verify(fleet, 'rev1', instances, { prober, runtimes: new Map() }, (e) => events.push(e), {
    clock,
    budgetMs: o.budgetMs ?? BUDGET_MS,
    random: o.random ?? (() => 0),
    signal: abort.signal,
  });
  const out = await clock.run(run).then(
    (result) => ({ result }),
    (err: unknown) => ({ err }),
  );
  return { ...out, events, elapsedMs: clock.now(), prober };
}

function failure(o: Outcome): RolloutFailedError {
  assert.ok(o.err instanceof RolloutFailedError, `expected a failed rollout, got ${o.err === undefined ? 'success' : String(o.err)}`);
  return o.err;
}

const verifiedTries = (o: Outcome) => Object.fromEntries(o.events.flatMap((e) => (e.type === 'verified' ? [[e.name, e.tries]] : [])));
const detailTries = (err: RolloutFailedError) => Object.fromEntries((err.details.instances as { name: string; tries: number }[]).map((i) => [i.name, i.tries]));

describe('verify with a version endpoint: retries within the budget', () => {
  const recovering: { name: string; script: Step[]; tries: number; elapsedMs: number }[] = [
    { name: 'two timeouts, then the version', script: ['timeout', 'timeout', '1.1.0'], tries: 3, elapsedMs: 1000 + 125 + 1000 + 250 },
    { name: 'two refused connections, then the version', script: ['refused', 'refused', '1.1.0'], tries: 3, elapsedMs: 125 + 250 },
    { name: 'a busy 503 and a 429, then the version', script: [503, 429, '1.1.0'], tries: 3, elapsedMs: 125 + 250 },
    { name: 'the version at once', script: ['1.1.0'], tries: 1, elapsedMs: 0 },
  ];
  for (const row of recovering) {
    it(`verified after retries: ${row.name}`, async () => {
      const o = await checkVersions([row.script]);
      assert.equal(o.err, undefined, String(o.err));
      assert.deepEqual(o.result, [{ name: 'api-1', host: 'h1', address: '10.0.0.1:8080', version: '1.1.0' }]);
      assert.deepEqual(
        o.events.filter((e) => e.type === 'verified'),
        [{ type: 'verified', name: 'api-1', version: '1.1.0', tries: row.tries, elapsedMs: row.elapsedMs }],
      );
    });
  }

  const failing: { name: string; scripts: Step[][]; message: RegExp[]; tries: Record<string, number>; hint: { has: RegExp[]; lacks: RegExp[] } }[] = [
    {
      name: 'always timing out: no answer in N tries over the budget, a hint about a slow instance, not the build',
      scripts: [['timeout']],
      message: [
        /1 of 1 instance\(s\) could not be verified to serve version 1\.1\.0/,
        /api-1 on h1: no answer in \d+ tries over 3[01]\.\d s \(last: version probe GET http:\/\/10\.0\.0\.1:8080\/api\/version failed: no complete answer within 1000 ms\)/,
      ],
      tries: {},
      hint: { has: [/slow or overloaded/, /machine busy/, /probes\.version\.path \(\/api\/version\)/], lacks: [/image was built/, /for a wrong version/] },
    },
    {
      name: 'a wrong version: fails at once, with the hint about the image build',
      scripts: [['1.0.0']],
      message: [/1 of 1 instance\(s\) do not serve version 1\.1\.0/, /api-1 on h1 reports version "1\.0\.0", expected "1\.1\.0"/],
      tries: { 'api-1': 1 },
      hint: { has: [/^the instances are serving; check that the image was built with the version it is tagged with/], lacks: [/slow or overloaded/] },
    },
    {
      name: 'a 404 from the version path: fails at once, with the hint about the endpoint',
      scripts: [[404]],
      message: [/api-1 on h1: version probe GET http:\/\/10\.0\.0\.1:8080\/api\/version answered HTTP 404/],
      tries: { 'api-1': 1 },
      hint: {
        has: [/check that probes\.version\.path \(\/api\/version\) is where the app reports its version/],
        lacks: [/image was built/, /slow or overloaded/],
      },
    },
    {
      name: 'a mix: one verified after retries, one wrong version, one never answering; the hint covers both',
      scripts: [['timeout', '1.1.0'], ['1.0.0'], ['timeout']],
      message: [
        /2 of 3 instance\(s\) could not be verified to serve version 1\.1\.0/,
        /api-2 on h1 reports version "1\.0\.0"/,
        /api-3 on h1: no answer in \d+ tries over/,
      ],
      tries: { 'api-1': 2, 'api-2': 1 },
      hint: { has: [/for a wrong version: the instances are serving; check that the image was built/, /; for no answer: .*slow or overloaded/], lacks: [] },
    },
  ];
  for (const row of failing) {
    it(row.name, async () => {
      const o = await checkVersions(row.scripts);
      const err = failure(o);
      for (const m of row.message) assert.match(err.message, m);
      for (const h of row.hint.has) assert.match(err.hint ?? '', h);
      for (const h of row.hint.lacks) assert.doesNotMatch(err.hint ?? '', h);
      const tries = detailTries(err);
      for (const [name, n] of Object.entries(row.tries)) assert.equal(tries[name], n, `${name}: tries in the details`);
      assert.deepEqual(
        Object.keys(tries).sort(),
        row.scripts.map((_, n) => `api-${n + 1}`),
        'details name every instance',
      );
    });
  }

  it('a mix: the one that recovered is still reported verified, with its tries', async () => {
    const o = await checkVersions([['timeout', '1.1.0'], ['1.0.0'], ['timeout']]);
    failure(o);
    assert.deepEqual(verifiedTries(o), { 'api-1': 2 });
  });

  it('an instance whose container is gone (removed or exited during the check) fails at once, not at the deadline, saying so', async () => {
    const fleet = await apiFleet();
    const clock = new VirtualClock();
    const prober = new ScriptedProber(clock, { '10.0.0.1:8080': ['refused'], '10.0.0.2:8080': ['1.1.0'] });
    const states: Record<string, { running: boolean; state: string; exitCode?: number } | undefined> = {
      'api-1': undefined,
      'api-2': { running: true, state: 'running' },
    };
    const runtime = { inspect: (id: string) => Promise.resolve(states[id] && { id, name: id, host: 'h1', labels: {}, ...states[id] }) } as unknown as Runtime;
    const instances: ToVerify[] = [1, 2].map((n) => ({ id: `api-${n}`, host: 'h1', address: `10.0.0.${n}:8080` }));
    const err = await clock
      .run(verify(fleet, 'rev1', instances, { prober, runtimes: new Map([['h1', runtime]]) }, () => {}, { clock, budgetMs: BUDGET_MS, random: () => 0 }))
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    assert.ok(err instanceof RolloutFailedError, String(err));
    assert.match(err.message, /1 of 2 instance\(s\) could not be verified[\s\S]*api-1 on h1: its container is gone \(last: /);
    assert.equal(clock.now(), 0, 'no backoff waited for a container that is not there');
  });

  it('an instance that moved to a new address mid-check (a network reconnect) is asked there, not waited on until the deadline', async () => {
    const fleet = await apiFleet();
    const clock = new VirtualClock();
    // Its old address no longer answers (the connect times out); at its new one it answers at once.
    const prober = new ScriptedProber(clock, { '10.0.0.1:8080': ['timeout'], '10.0.0.9:8080': ['1.1.0'] });
    const runtime = {
      inspect: (id: string) => Promise.resolve({ id, name: id, host: 'h1', labels: {}, running: true, state: 'running', address: '10.0.0.9:8080' }),
    } as unknown as Runtime;
    const events: RolloutEvent[] = [];
    const result = await clock.run(
      verify(fleet, 'rev1', [{ id: 'api-1', host: 'h1', address: '10.0.0.1:8080' }], { prober, runtimes: new Map([['h1', runtime]]) }, (e) => events.push(e), {
        clock,
        budgetMs: BUDGET_MS,
        random: () => 0,
      }),
    );
    assert.deepEqual(
      result.map((r) => [r.name, r.address, r.version]),
      [['api-1', '10.0.0.9:8080', '1.1.0']],
    );
    assert.ok(
      events.some((e) => e.type === 'info' && /api-1 on h1 moved from 10.0.0.1:8080 to 10.0.0.9:8080: asking it there/.test(e.message)),
      JSON.stringify(events),
    );
    assert.ok(clock.now() < 5000, `verified ${clock.now()} ms in, not at the ${BUDGET_MS} ms deadline`);
  });

  it('a wrong version does not wait: no virtual time passes and it is asked once', async () => {
    const o = await checkVersions([['1.0.0']]);
    failure(o);
    assert.equal(o.elapsedMs, 0);
    assert.equal(o.prober.asked.length, 1);
  });

  const budgets: { name: string; budgetMs: number; script: Step[]; minTries: number }[] = [
    { name: 'no budget left: one try', budgetMs: 0, script: ['timeout'], minTries: 1 },
    { name: '5 s of timeouts', budgetMs: 5000, script: ['timeout'], minTries: 3 },
    { name: '30 s of timeouts', budgetMs: 30_000, script: ['timeout'], minTries: 10 },
    { name: '30 s of refused connections', budgetMs: 30_000, script: ['refused'], minTries: 15 },
  ];
  for (const row of budgets) {
    it(`the budget is respected: ${row.name}`, async () => {
      const o = await checkVersions([row.script, row.script], { budgetMs: row.budgetMs });
      failure(o);
      assert.ok(o.elapsedMs <= row.budgetMs + PROBE_TIMEOUT_MS, `${o.elapsedMs} ms > budget ${row.budgetMs} + one probe timeout`);
      assert.ok(o.elapsedMs >= row.budgetMs, `gave up after ${o.elapsedMs} ms, before the budget of ${row.budgetMs} ms`);
      const last = Math.max(...o.prober.asked.map((a) => a.at));
      assert.ok(last <= row.budgetMs, `a try started at ${last} ms, after the budget`);
      const tries = o.prober.asked.filter((a) => a.key === '10.0.0.1:8080').length;
      assert.ok(tries >= row.minTries, `${tries} tries < ${row.minTries}`);
      assert.match(failure(o).message, new RegExp(`no answer in ${tries === 1 ? '1 try' : `${tries} tries`} over`));
    });
  }

  const backoff: { name: string; random: () => number; at: number[] }[] = [
    { name: 'least jitter: half of each delay', random: () => 0, at: [0, 125, 375, 875, 1875, 2875, 3875] },
    { name: 'most jitter: the whole delay, doubling from 250 ms to the 2 s cap', random: () => 1, at: [0, 250, 750, 1750, 3750, 5750, 7750] },
  ];
  for (const row of backoff) {
    it(`backoff between tries: ${row.name}`, async () => {
      const o = await checkVersions([['refused']], { budgetMs: row.at[row.at.length - 1]!, random: row.random });
      assert.deepEqual(
        o.prober.asked.map((a) => a.at),
        row.at,
      );
    });
  }

  it('an abort ends the retries at once as an interruption, not a failure', async () => {
    const o = await checkVersions([['1.1.0'], ['timeout']], { abortAt: 4000 });
    assert.ok(o.err instanceof InterruptedError, String(o.err));
    assert.match(o.err.message, /interrupted while verifying: 1 of 2 instance\(s\) of api verified/);
    assert.ok(o.elapsedMs <= 4000 + PROBE_TIMEOUT_MS, `went on until ${o.elapsedMs} ms`);
  });
});

/** Workers on a simulated host: each ToVerify runs the revision's image with its label; readiness comes from the scripts, by container id. */
async function checkRevision(ready: Step[][], o: { staleLabel?: number } = {}): Promise<Outcome> {
  const fleet = await fleetFromObject(
    {
      service: 'worker',
      image: 'worker:1.1.0',
      replicas: ready.length,
      hosts: [{ name: 'h1' }],
      probes: { readiness: { exec: ['true'] }, version: false },
      progressDeadlineSeconds: BUDGET_MS / 1000,
    },
    'worker.yaml',
  );
  const clock = new VirtualClock();
  const world = new SimWorld(clock, { startupMs: 0, stopMs: 0, runMs: 0, reloadMs: 0, jitter: 0 }, () => 0.5);
  const runtimes = new Map<string, Runtime>([['h1', new SimRuntime('h1', world)]]);
  const instances = ready.map((_, n) => {
    const revision = n === o.staleLabel ? 'rev0' : 'rev1';
    const c = world.seed(
      'h1',
      `worker-${n + 1}`,
      { [LABELS.managed]: 'true', [LABELS.service]: 'worker', [LABELS.revision]: revision },
      undefined,
      fleet.image,
    );
    return { id: c.name, host: 'h1', dockerId: c.id };
  });
  const prober = new ScriptedProber(clock, Object.fromEntries(instances.map((i, n) => [i.dockerId, ready[n]!])));
  const events: RolloutEvent[] = [];
  const run = verify(fleet, 'rev1', instances, { prober, runtimes }, (e) => events.push(e), { clock, budgetMs: BUDGET_MS, random: () => 0 });
  const out = await clock.run(run).then(
    (result) => ({ result }),
    (err: unknown) => ({ err }),
  );
  return { ...out, events, elapsedMs: clock.now(), prober };
}

describe('verify with version: false: readiness asked again within the budget', () => {
  it('readiness failing twice, then passing: verified after 3 tries', async () => {
    const o = await checkRevision([['not ready', 'not ready', 'ready'], ['ready']]);
    assert.equal(o.err, undefined, String(o.err));
    assert.equal(o.result?.length, 2);
    assert.deepEqual(verifiedTries(o), { 'worker-1': 3, 'worker-2': 1 });
  });

  const failing: { name: string; ready: Step[][]; staleLabel?: number; message: RegExp; hint: { has: RegExp; lacks: RegExp } }[] = [
    {
      name: 'readiness that never passes: its tries named, a hint about a slow instance, not a changed image',
      ready: [['not ready'], ['ready']],
      message: /worker-1 on h1: its readiness probe no longer passes \(\d{2} tries over 30\.\d s\)/,
      hint: { has: /slow or overloaded/, lacks: /image may have changed/ },
    },
    {
      name: 'a readiness probe that times out: the last error named',
      ready: [['timeout']],
      message: /worker-1 on h1: its readiness probe no longer passes \(\d+ tries over 3[01]\.\d s, last: .*no complete answer within 1000 ms\)/,
      hint: { has: /slow or overloaded/, lacks: /image may have changed/ },
    },
    {
      name: 'a wrong revision label: fails without asking readiness, with the image hint',
      ready: [['ready'], ['ready']],
      staleLabel: 1,
      message: /worker-2 on h1: carries revision "rev0", expected rev1/,
      hint: { has: /image may have changed under its tag/, lacks: /slow or overloaded/ },
    },
  ];
  for (const row of failing) {
    it(row.name, async () => {
      const o = await checkRevision(row.ready, row.staleLabel === undefined ? {} : { staleLabel: row.staleLabel });
      const err = failure(o);
      assert.match(err.message, row.message);
      assert.match(err.hint ?? '', row.hint.has);
      assert.doesNotMatch(err.hint ?? '', row.hint.lacks);
      assert.ok(o.elapsedMs <= BUDGET_MS + PROBE_TIMEOUT_MS, `${o.elapsedMs} ms`);
      const tries = detailTries(err);
      if (row.staleLabel !== undefined) assert.equal(tries[`worker-${row.staleLabel + 1}`], 0, 'a wrong label is not retried');
    });
  }
});

describe('the verified line', () => {
  const rows: { name: string; e: RolloutEvent; line: string }[] = [
    { name: 'first try: as before', e: { type: 'verified', name: 'api-3', version: '1.1.0', tries: 1, elapsedMs: 3 }, line: 'verified api-3 serves 1.1.0' },
    {
      name: 'after retries: how many and how long',
      e: { type: 'verified', name: 'api-3', version: '1.1.0', tries: 3, elapsedMs: 2400 },
      line: 'verified api-3 serves 1.1.0 (after 3 tries, 2.4 s)',
    },
    { name: 'a recorded event from before the retries', e: { type: 'verified', name: 'api-3', version: '1.1.0' }, line: 'verified api-3 serves 1.1.0' },
  ];
  for (const row of rows) it(row.name, () => assert.equal(describeEvent(row.e), row.line));
});
