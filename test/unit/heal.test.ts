/**
 * What `fleetroll watch` finds wrong with a fleet and whether it acts
 * (src/core/heal.ts): one named row per situation a fleet can be in.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { assessFleet, healReasons, isWhole, toReplace, type HealInput, type SeenInstance } from '../../src/core/heal.js';

const REV = 'rev-2';
const up = (over: Partial<SeenInstance> & { name: string }): SeenInstance => ({
  revision: REV,
  state: 'running',
  ready: true,
  restarts: 0,
  upstreams: { lb1: 'up', lb2: 'up' },
  ...over,
});
const fleet = (instances: SeenInstance[], more: Partial<HealInput> = {}): HealInput => ({
  replicas: 3,
  revision: REV,
  known: ['rev-1', REV],
  instances,
  strays: { lb1: [], lb2: [] },
  ...more,
});
const whole = [up({ name: 'a' }), up({ name: 'b' }), up({ name: 'c' })];
/** `a` seen unready since t=0; replaced after 600 s (progressDeadlineSeconds' default). */
const stuckAfter: Partial<HealInput> = { unreadySince: new Map([['a', 0]]), stuckAfterMs: 600_000 };

describe('assessFleet: what the watch finds and whether it acts', () => {
  const rows: { name: string; input: HealInput; want: [string, string | undefined, boolean][] }[] = [
    { name: 'a whole fleet: nothing', input: fleet(whole), want: [] },
    {
      name: 'an instance killed: exited, one missing, acted on',
      input: fleet([up({ name: 'a', state: 'exited' }), whole[1]!, whole[2]!]),
      want: [
        ['exited', 'a', true],
        ['missing', undefined, true],
      ],
    },
    { name: 'an instance removed: one missing', input: fleet(whole.slice(1)), want: [['missing', undefined, true]] },
    {
      name: 'removed, and nginx still sends users to its address: a stray on that load balancer',
      input: fleet(whole.slice(1), { strays: { lb1: ['a (10.0.0.1:8080)'], lb2: [] } }),
      want: [
        ['missing', undefined, true],
        ['stray', 'a (10.0.0.1:8080)', true],
      ],
    },
    {
      name: 'stopped answering while routed: unready, taken out',
      input: fleet([up({ name: 'a', ready: false }), whole[1]!, whole[2]!]),
      want: [['unready', 'a', true]],
    },
    {
      name: 'unready and already out of every nginx: reported (not whole), waited for',
      input: fleet([up({ name: 'a', ready: false, upstreams: { lb1: 'down', lb2: 'absent' } }), whole[1]!, whole[2]!]),
      want: [['unready', 'a', false]],
    },
    {
      name: 'unready out of traffic for less than the bound: reported, waited for',
      input: fleet([up({ name: 'a', ready: false, upstreams: { lb1: 'absent', lb2: 'absent' } }), whole[1]!, whole[2]!], { ...stuckAfter, now: 599_999 }),
      want: [['unready', 'a', false]],
    },
    {
      name: 'unready for the bound (progressDeadlineSeconds): stuck, replaced',
      input: fleet([up({ name: 'a', ready: false, upstreams: { lb1: 'absent', lb2: 'absent' } }), whole[1]!, whole[2]!], { ...stuckAfter, now: 600_000 }),
      want: [['stuck', 'a', true]],
    },
    {
      name: 'unready for the bound and still routed: stuck (its replacement takes it out too), not also unready',
      input: fleet([up({ name: 'a', ready: false }), whole[1]!, whole[2]!], { ...stuckAfter, now: 700_000 }),
      want: [['stuck', 'a', true]],
    },
    {
      name: 'ready again after a long time unready: nothing (the watch forgets when it was unready)',
      input: fleet(whole, { ...stuckAfter, now: 700_000 }),
      want: [],
    },
    {
      name: 'restarting by Docker for longer than the bound: not stuck (a crash loop is reported as such)',
      input: fleet([up({ name: 'a', state: 'restarting', ready: false, upstreams: { lb1: 'absent', lb2: 'absent' } }), whole[1]!, whole[2]!], {
        ...stuckAfter,
        now: 700_000,
      }),
      want: [],
    },
    {
      name: 'ready again but out of one nginx: put back',
      input: fleet([up({ name: 'a', upstreams: { lb1: 'up', lb2: 'down' } }), whole[1]!, whole[2]!]),
      want: [['out of traffic', 'a', true]],
    },
    {
      name: 'back at a new address: moved',
      input: fleet([up({ name: 'a', upstreams: { lb1: 'moved', lb2: 'up' } }), whole[1]!, whole[2]!]),
      want: [['moved', 'a', true]],
    },
    {
      name: 'restarting (a restart policy at work) counts as alive',
      input: fleet([up({ name: 'a', state: 'restarting', ready: false, upstreams: { lb1: 'absent', lb2: 'absent' } }), whole[1]!, whole[2]!]),
      want: [],
    },
    {
      name: 'a crash loop whose count grows: reported, not acted on',
      input: fleet([up({ name: 'a', state: 'restarting', ready: false, restarts: 4, upstreams: { lb1: 'absent', lb2: 'absent' } }), whole[1]!, whole[2]!], {
        restartsBefore: new Map([['a', 3]]),
      }),
      want: [['crash loop', 'a', false]],
    },
    {
      name: 'restarts that stopped growing: no longer a crash loop',
      input: fleet([up({ name: 'a', restarts: 4 }), whole[1]!, whole[2]!], { restartsBefore: new Map([['a', 4]]) }),
      want: [],
    },
    {
      name: 'an instance of an earlier revision: removed as a deploy would',
      input: fleet([...whole, up({ name: 'old', revision: 'rev-1' })]),
      want: [['old revision', 'old', true]],
    },
    {
      name: "someone else's container with the fleet's labels: reported, left alone",
      input: fleet([...whole, up({ name: 'x', revision: 'rev-9' })]),
      want: [['unknown revision', 'x', false]],
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      assert.deepEqual(
        assessFleet(r.input).map((f) => [f.reason, f.name, f.act]),
        r.want,
      );
    });
  }

  it('every finding says what is wrong in words', () => {
    for (const f of assessFleet(
      fleet([up({ name: 'a', state: 'exited' }), up({ name: 'b', ready: false })], { strays: { lb1: ['z (10.0.0.9:8080)'], lb2: [] } }),
    ))
      assert.ok(f.detail.length > 10, f.detail);
  });

  it('the reasons of a heal, once each and in a stable order, only what is acted on', () => {
    const findings = assessFleet(
      fleet([up({ name: 'a', state: 'exited' }), up({ name: 'x', revision: 'rev-9' })], { strays: { lb1: ['a (10.0.0.1:8080)'], lb2: [] } }),
    );
    assert.deepEqual(healReasons(findings), ['exited', 'missing', 'stray']);
  });

  it('a stuck instance: its reason after exited and missing, before unready; named for the heal to replace; the fleet not whole until then', () => {
    const out = fleet(
      [up({ name: 'a', ready: false, upstreams: { lb1: 'absent', lb2: 'absent' } }), up({ name: 'b', ready: false }), up({ name: 'c', state: 'exited' })],
      {
        unreadySince: new Map([
          ['a', 0],
          ['b', 0],
        ]),
        stuckAfterMs: 600_000,
        now: 10_000,
      },
    );
    assert.equal(isWhole(assessFleet(out)), false, 'an instance unready out of traffic: not whole');
    assert.deepEqual(toReplace(assessFleet(out)), []);
    const later = {
      ...out,
      now: 600_000,
      unreadySince: new Map([
        ['a', 0],
        ['b', 500_000],
      ]),
    };
    assert.deepEqual(healReasons(assessFleet(later)), ['exited', 'missing', 'stuck', 'unready']);
    assert.deepEqual(toReplace(assessFleet(later)), ['a']);
    assert.match(
      assessFleet(later).find((f) => f.reason === 'stuck')!.detail,
      /a has not answered its readiness probe since 1970-01-01T00:00:00Z \(600 s, progressDeadlineSeconds\): replaced/,
    );
    assert.equal(isWhole(assessFleet(fleet(whole))), true);
  });

  it('an instance unready out of traffic is said with when it was first seen so and when it is replaced (the same words every look)', () => {
    const f = assessFleet(
      fleet([up({ name: 'a', ready: false, upstreams: { lb1: 'absent', lb2: 'absent' } }), whole[1]!, whole[2]!], { ...stuckAfter, now: 5000 }),
    );
    assert.deepEqual(
      f.map((x) => x.detail),
      ['a: unready, out of traffic since 1970-01-01T00:00:00Z; replaced if still unready at 1970-01-01T00:10:00Z'],
    );
  });
});
