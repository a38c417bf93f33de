import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { describeEvent, FleetStatus } from '../../src/cli/events.js';
import type { RolloutEvent } from '../../src/engine/events.js';

describe('live view status line', () => {
  it('follows a rolling wave from events alone', () => {
    const s = new FleetStatus();
    const events: RolloutEvent[] = [
      { type: 'observed', instances: 3, byRevision: { aaaaaaaaaa: 3 }, revision: 'bbbbbbbbbb' },
      { type: 'wave', index: 1, start: 1, stop: ['svc-aaaaaaa-1'] },
      { type: 'upstream', action: 'drain', down: ['svc-aaaaaaa-1'], up: [], reloads: 1 },
      { type: 'started', name: 'svc-bbbbbbb-x', host: 'local' },
      { type: 'draining', names: ['svc-aaaaaaa-1'], seconds: 2 },
    ];
    for (const e of events) s.apply(e);
    assert.equal(s.render(), 'wave 1 | old 3 (1 draining) | new 1 (0 ready) | 1 reloads');
    s.apply({ type: 'stopped', name: 'svc-aaaaaaa-1', host: 'local' });
    s.apply({ type: 'ready', name: 'svc-bbbbbbb-x' });
    assert.equal(s.render(), 'wave 1 | old 2 | new 1 (1 ready) | 1 reloads');
  });

  it('describes events in plain words', () => {
    assert.equal(describeEvent({ type: 'wave', index: 2, start: 1, stop: ['a'] }), 'wave 2: start 1, drain and stop 1 (a)');
    assert.equal(
      describeEvent({ type: 'upstream', action: 'restore', down: [], up: [], reloads: 0 }),
      'upstream: nginx -t failed; files restored, nothing reloaded',
    );
  });

  const change = (o: Partial<Extract<RolloutEvent, { type: 'upstream' }>>): RolloutEvent => ({
    type: 'upstream',
    action: 'drain',
    down: ['o1'],
    up: ['n1'],
    reloads: 2,
    ...o,
  });
  const rows: { name: string; e: RolloutEvent; want: string }[] = [
    { name: 'a log from before changes were timed', e: change({}), want: 'upstream: nginx -t ok, reloaded (in: n1; down: o1) [2 reloads]' },
    {
      name: 'a simulated nginx: the time, no parts',
      e: change({ ms: 300, balancers: { 'nginx 1': 300 } }),
      want: 'upstream: nginx -t ok, reloaded (in: n1; down: o1) [2 reloads] in 0.30 s',
    },
    {
      name: 'a real nginx: the raw operations and the waits, named',
      e: change({ ms: 420, balancers: { lb: 420 }, parts: { lb: { file: 40, 'nginx -t': 120, workers: 0, 'nginx -s reload': 90, confirm: 170 } } }),
      want: "upstream: nginx -t ok, reloaded (in: n1; down: o1) [2 reloads] in 0.42 s (file 40 ms, nginx -t 120 ms, waiting for the old workers' list 0 ms, nginx -s reload 90 ms, confirming new workers 170 ms)",
    },
    {
      name: "nginx as PID 1 of its container: the SIGHUP, and nginx's hand-over inside the confirmation",
      e: change({ ms: 290, balancers: { lb: 290 }, parts: { lb: { file: 60, 'nginx -t': 70, workers: 0, SIGHUP: 8, confirm: 150, handover: 104 } } }),
      want: "upstream: nginx -t ok, reloaded (in: n1; down: o1) [2 reloads] in 0.29 s (file 60 ms, nginx -t 70 ms, waiting for the old workers' list 0 ms, SIGHUP 8 ms, confirming new workers 150 ms (nginx's hand-over from old workers to new 104 ms))",
    },
    {
      name: "several load balancers: the slowest one's parts, and its name",
      e: change({ ms: 900, balancers: { a: 300, b: 900 }, parts: { a: { file: 10 }, b: { file: 700, confirm: 150 } } }),
      want: 'upstream: nginx -t ok, reloaded (in: n1; down: o1) [2 reloads] in 0.90 s (file 700 ms, confirming new workers 150 ms; slowest b)',
    },
    {
      name: 'several simulated ones: the slowest named',
      e: change({ ms: 900, balancers: { a: 300, b: 900 } }),
      want: 'upstream: nginx -t ok, reloaded (in: n1; down: o1) [2 reloads] in 0.90 s (slowest b)',
    },
  ];
  for (const r of rows) it(`a change's time: ${r.name}`, () => assert.equal(describeEvent(r.e), r.want));
});
