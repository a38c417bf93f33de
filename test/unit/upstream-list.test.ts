/**
 * The pieces that let a reload (and a termination) cost what changed rather
 * than the fleet: the controller's upstream list (engine/upstreamList.ts) and
 * the fleet view's stop order (FleetView.leastUseful), each checked against
 * the whole-list computation it replaces.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { InstanceView, Phase } from '../../src/core/decide.js';
import { compareViewsForStop } from '../../src/core/decide.js';
import { pickForStop } from '../../src/core/fleet.js';
import { seededRandom } from '../../src/core/random.js';
import type { UpstreamEntry } from '../../src/core/upstream.js';
import { FleetView } from '../../src/engine/fleetView.js';
import { UpstreamList } from '../../src/engine/upstreamList.js';

const e = (name: string, address: string, down = false, weight?: number): UpstreamEntry => ({
  address,
  down,
  name,
  ...(weight !== undefined ? { weight } : {}),
});

describe('UpstreamList', () => {
  it('lists its entries sorted by name, as the upstream file orders them', () => {
    const l = new UpstreamList();
    for (const name of ['old-2', 'old-10', 'new-1', 'old-1']) l.set(name, e(name, `10.0.0.${name.length}:80`));
    assert.deepEqual(
      l.entries().map((x) => x.name),
      ['new-1', 'old-1', 'old-10', 'old-2'],
    );
  });

  it('gives the list as it was at an earlier version, whatever came after', () => {
    const l = new UpstreamList();
    l.set('a', e('a', '10.0.0.1:80'));
    l.set('b', e('b', '10.0.0.2:80'));
    const v = l.version;
    const then = l.entries().map((x) => ({ ...x }));
    l.set('a', e('a', '10.0.0.1:80', true));
    l.set('b', undefined);
    l.set('c', e('c', '10.0.0.3:80'));
    assert.deepEqual(l.entriesAt(v), then);
    assert.deepEqual(
      l.entries().map((x) => `${x.name}${x.down ? ' down' : ''}`),
      ['a down', 'c'],
    );
  });

  it('logs no change for an equal entry', () => {
    const l = new UpstreamList();
    l.set('a', e('a', '10.0.0.1:80'));
    const v = l.version;
    l.set('a', e('a', '10.0.0.1:80'));
    l.set('gone', undefined);
    assert.equal(l.version, v);
  });

  const changeRows: { name: string; steps: [string, UpstreamEntry | undefined][]; want: string[] }[] = [
    { name: 'marked down', steps: [['a', e('a', '10.0.0.1:80', true)]], want: ['10.0.0.1:80 down'] },
    { name: 'removed', steps: [['a', undefined]], want: ['10.0.0.1:80 gone'] },
    { name: 'moved to another address', steps: [['a', e('a', '10.0.0.9:80')]], want: ['10.0.0.1:80 gone', '10.0.0.9:80 up'] },
    { name: 'added beside', steps: [['b', e('b', '10.0.0.2:80')]], want: ['10.0.0.2:80 up'] },
  ];
  for (const row of changeRows) {
    it(`reports the changes of an address: ${row.name}`, () => {
      const l = new UpstreamList();
      l.set('a', e('a', '10.0.0.1:80'));
      const v = l.version;
      for (const [name, x] of row.steps) l.set(name, x);
      assert.deepEqual(
        l.changes(v).map((c) => `${c.address} ${c.after === undefined ? 'gone' : c.after.down ? 'down' : 'up'}`),
        row.want,
      );
    });
  }

  it('finds the entries at an address, two names sharing one included', () => {
    const l = new UpstreamList();
    l.set('old', e('old', '10.0.0.1:80', true));
    l.set('new', e('new', '10.0.0.1:80'));
    assert.deepEqual(
      l.at('10.0.0.1:80').map((x) => x.name),
      ['old', 'new'],
    );
    l.set('old', undefined);
    assert.deepEqual(
      l.at('10.0.0.1:80').map((x) => x.name),
      ['new'],
    );
  });

  it('counts weighted entries (a file without weights needs no look at them)', () => {
    const l = new UpstreamList();
    l.set('a', e('a', '10.0.0.1:80', false, 5));
    l.set('b', e('b', '10.0.0.2:80'));
    assert.equal(l.weighted, 1);
    l.set('a', e('a', '10.0.0.1:80'));
    assert.equal(l.weighted, 0);
  });
});

describe('FleetView.leastUseful', () => {
  const phases: Phase[] = ['starting', 'unready', 'ready', 'available', 'failed', 'draining'];
  const rows = [
    { name: 'one host, mixed phases', hosts: 1, n: 5, seed: 1 },
    { name: 'one host, more asked than there are', hosts: 1, n: 500, seed: 2 },
    { name: 'one host, after many phase changes', hosts: 1, n: 7, seed: 3, churn: 400 },
    // The order is sorted when asked for and trimmed of leavers after: asked between changes, it must still match.
    { name: 'one host, asked between phase changes', hosts: 1, n: 7, seed: 4, churn: 400, askEvery: 3 },
    { name: 'one host, asked between phase changes, taking most', hosts: 1, n: 60, seed: 5, churn: 600, askEvery: 1 },
    { name: 'one host, only removals between asks', hosts: 1, n: 3, seed: 6, churn: 300, askEvery: 2, removeOnly: true },
  ];
  for (const row of rows) {
    it(`${row.name}: the same instances, in the same order, as pickForStop over every candidate`, () => {
      const rand = seededRandom(row.seed);
      const v = new FleetView<InstanceView>();
      const all: InstanceView[] = [];
      for (let k = 0; k < 120; k++) {
        const i: InstanceView = {
          id: `i-${Math.floor(rand() * 1e6)}-${k}`,
          host: `h${1 + (k % row.hosts)}`,
          revision: k % 3 === 0 ? 'new' : 'old',
          created: Math.floor(rand() * 5),
          phase: phases[Math.floor(rand() * 4)]!,
          routed: false,
        };
        all.push(i);
        v.add(i);
      }
      const check = () => {
        for (const revision of ['old', 'new']) {
          const candidates = [...v.candidates(revision)];
          const observed = candidates.map((i) => ({
            id: i.id,
            revision: i.revision,
            running: i.phase !== 'failed' && i.phase !== 'starting',
            ready: i.phase === 'ready' || i.phase === 'available',
            available: i.phase === 'available',
            created: i.created,
            host: i.host,
          }));
          const want = pickForStop(observed, row.n).map((o) => o.id);
          assert.deepEqual(
            v.leastUseful(revision, row.n)?.map((i) => i.id),
            want,
          );
        }
      };
      for (let c = 0; c < (row.churn ?? 0); c++) {
        const i = all[Math.floor(rand() * all.length)]!;
        if (row.removeOnly === true) {
          if (rand() < 0.5) v.remove(i.id);
          else v.setPhase(i, 'draining');
        } else if (v.get(i.id) && rand() < 0.1) v.remove(i.id);
        else v.setPhase(i, phases[Math.floor(rand() * phases.length)]!);
        if (row.askEvery !== undefined && c % row.askEvery === 0) check();
      }
      check();
    });
  }

  it('leaves several hosts to pickForStop (it evens out the spread)', () => {
    const v = new FleetView<InstanceView>();
    v.add({ id: 'a', host: 'h1', revision: 'old', created: 0, phase: 'available', routed: false });
    v.add({ id: 'b', host: 'h2', revision: 'old', created: 0, phase: 'available', routed: false });
    assert.equal(v.leastUseful('old', 1), undefined);
  });

  it('orders as compareViewsForStop does', () => {
    const a: InstanceView = { id: 'a', host: 'h', revision: 'r', created: 0, phase: 'unready', routed: false };
    const b: InstanceView = { id: 'b', host: 'h', revision: 'r', created: 0, phase: 'available', routed: false };
    assert.ok(compareViewsForStop(a, b) < 0, 'an unready instance goes before an available one');
  });
});
