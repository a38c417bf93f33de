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
    assert.equal(describeEvent({ type: 'upstream', action: 'restore', down: [], up: [], reloads: 0 }), 'upstream: nginx -t failed; files restored, nothing reloaded');
  });
});
