/**
 * Traffic compares the controller's upstream list with what nginx has by the
 * addresses changed since it last looked, and gives a router that reads
 * servers (the simulated nginx) the list instead of text. Checked here
 * against the whole-file view: after every step, a real nginx's file is
 * byte for byte renderUpstream of the whole list, the simulated nginx's
 * text is the same, and what it routes is what parsing that text says.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseUpstreamServers, renderUpstream, type UpstreamEntry } from '../../src/core/upstream.js';
import type { Phase } from '../../src/core/decide.js';
import { stoppedServing } from '../../src/engine/controller.js';
import { Traffic } from '../../src/engine/traffic.js';
import { UpstreamList } from '../../src/engine/upstreamList.js';
import type { Router } from '../../src/ports.js';
import { VirtualClock } from '../../src/sim/clock.js';
import { SimRouter, SimWorld } from '../../src/sim/ports.js';

const TEMPLATE = '# {{service}}\nupstream {{upstream}} {\n{{servers}}\n}\n';

/** A router that only takes text, as the nginx adapters do. */
class TextRouter implements Router {
  readonly name = 'text nginx';
  file: string | undefined;
  inForce: string | undefined;
  writes = 0;
  constructor(initial: string) {
    this.file = initial;
    this.inForce = initial;
  }
  async check(): Promise<void> {}
  async read(): Promise<string | undefined> {
    return this.file;
  }
  async writeAndTest(content: string): Promise<void> {
    this.file = content;
    this.writes++;
  }
  async reload(): Promise<void> {
    this.inForce = this.file;
  }
}

type Step = { name: string; set: [string, UpstreamEntry | undefined][] };

const entry = (n: number, down = false): UpstreamEntry => ({ address: `10.0.0.${n}:8080`, down, name: `app-${n}` });

const steps: Step[] = [
  { name: 'a new instance up', set: [['app-4', entry(4)]] },
  { name: 'an old one marked down', set: [['app-1', entry(1, true)]] },
  { name: 'the drained one gone (no reload needed), then the final write', set: [['app-1', undefined]] },
  {
    name: 'two up and one down at once',
    set: [
      ['app-5', entry(5)],
      ['app-6', entry(6)],
      ['app-2', entry(2, true)],
    ],
  },
  {
    name: 'a flap that ends where it began',
    set: [
      ['app-3', entry(3, true)],
      ['app-3', entry(3)],
    ],
  },
  {
    name: 'everything gone (the placeholder)',
    set: [
      ['app-2', undefined],
      ['app-3', undefined],
      ['app-4', undefined],
      ['app-5', undefined],
      ['app-6', undefined],
    ],
  },
];

describe("Traffic with the controller's list", () => {
  it('writes real nginx the whole file, byte for byte, and the simulated nginx the same servers', async () => {
    const clock = new VirtualClock();
    const world = new SimWorld(clock, { startupMs: 0, stopMs: 0, runMs: 0, reloadMs: 0, testMs: 0, jitter: 0 }, () => 0.5);
    const list = new UpstreamList();
    for (const n of [1, 2, 3]) list.set(`app-${n}`, entry(n));
    const render = () => renderUpstream(TEMPLATE, { service: 'svc', upstream: 'app', servers: list.entries() });
    const initial = render();
    const text = new TextRouter(initial);
    const sim = new SimRouter('sim nginx', world, initial);
    const events: string[] = [];
    const traffic = new Traffic({
      service: 'svc',
      balancers: [
        { router: text, template: TEMPLATE, upstream: 'app' },
        { router: sim, template: TEMPLATE, upstream: 'app' },
      ],
      clock,
      emit: (e) => {
        if (e.type === 'upstream') events.push(`${e.action} up=${e.up.join(',')} down=${e.down.join(',')}`);
      },
      journal: () => {},
      coalesceMs: 10,
      desired: () => ({ servers: list }),
      applied: () => {},
      failed: (err) => {
        throw err;
      },
    });
    await clock.run(traffic.load(false));
    for (const step of steps) {
      for (const [name, e] of step.set) list.set(name, e);
      traffic.request();
      await clock.run(clock.sleep(100));
      if (step.name.includes('final')) await clock.run(traffic.settle());
      const want = render();
      assert.equal(text.file, want, `${step.name}: the real nginx's file`);
      assert.equal(sim.file, want, `${step.name}: the simulated nginx's text`);
      const parsed = parseUpstreamServers(sim.inForce ?? '');
      assert.deepEqual(
        [...sim.up].sort(),
        parsed
          .filter((s) => !s.down)
          .map((s) => s.address)
          .sort(),
        `${step.name}: routed up`,
      );
      assert.deepEqual(
        [...sim.downSince.keys()].sort(),
        parsed
          .filter((s) => s.down)
          .map((s) => s.address)
          .sort(),
        `${step.name}: listed down`,
      );
      for (const a of parsed.filter((s) => !s.down).map((s) => s.address)) assert.ok(traffic.routes(a), `${step.name}: routes ${a}`);
    }
    // A gone server's line needs no reload (its write is the final one's), nor does a flap that ends where it began.
    assert.deepEqual(events, ['enable up=app-4 down=', 'drain up= down=app-1', 'drain up=app-5,app-6 down=app-2', 'enable up= down=']);
    assert.equal(sim.reloads, 4);
  });

  it('takes out a server whose container is gone with one write and reload and no nginx -t; a planned drain, and a change with a server coming up, go through nginx -t', async () => {
    const clock = new VirtualClock();
    const list = new UpstreamList();
    for (const n of [1, 2, 3]) list.set(`app-${n}`, entry(n));
    const render = () => renderUpstream(TEMPLATE, { service: 'svc', upstream: 'app', servers: list.entries() });
    const calls: string[] = [];
    class TrustingRouter extends TextRouter {
      override async writeAndTest(content: string): Promise<void> {
        calls.push('write+test');
        await super.writeAndTest(content);
      }
      override async reload(): Promise<void> {
        calls.push('reload');
        await super.reload();
      }
      async writeAndReloadTrusted(content: string): Promise<void> {
        calls.push('write+reload, no test');
        this.file = content;
        this.inForce = content;
      }
    }
    const router = new TrustingRouter(render());
    const gone = new Set<string>();
    const traffic = new Traffic({
      service: 'svc',
      balancers: [{ router, template: TEMPLATE, upstream: 'app' }],
      clock,
      emit: () => {},
      journal: () => {},
      coalesceMs: 10,
      desired: () => ({ servers: list }),
      applied: () => {},
      failed: (err) => {
        throw err;
      },
      gone: (address) => gone.has(address),
    });
    await clock.run(traffic.load(false));
    const rows: { name: string; change: () => void; calls: string[] }[] = [
      {
        name: 'app-2 exited: marked down at once',
        change: () => {
          gone.add(entry(2).address);
          list.set('app-2', entry(2, true));
        },
        calls: ['write+reload, no test'],
      },
      { name: 'app-1 drained (its container runs): nginx -t first', change: () => list.set('app-1', entry(1, true)), calls: ['write+test', 'reload'] },
      {
        name: 'app-3 exited while app-4 comes up: nginx -t first',
        change: () => {
          gone.add(entry(3).address);
          list.set('app-3', entry(3, true));
          list.set('app-4', entry(4));
        },
        calls: ['write+test', 'reload'],
      },
    ];
    for (const r of rows) {
      calls.length = 0;
      r.change();
      traffic.request();
      await clock.run(clock.sleep(100));
      assert.deepEqual(calls, r.calls, r.name);
      assert.equal(router.inForce, render(), `${r.name}: in force`);
    }
    assert.equal(traffic.reloads, 3, 'each counted as a reload');
  });
});

describe('which takedowns skip nginx -t (stoppedServing)', () => {
  const rows: { name: string; phase: Phase; trusted: boolean }[] = [
    { name: 'exited, crashed, froze or moved', phase: 'failed', trusted: true },
    { name: 'was ready, its probe now fails (a crash the probe sees before the event)', phase: 'unready', trusted: true },
    { name: 'ready, in service', phase: 'ready', trusted: false },
    { name: 'available, in service', phase: 'available', trusted: false },
    { name: 'a planned drain', phase: 'draining', trusted: false },
    { name: 'being stopped by the rollout', phase: 'stopping', trusted: false },
  ];
  for (const r of rows) it(r.name, () => assert.equal(stoppedServing({ phase: r.phase }), r.trusted));
});
