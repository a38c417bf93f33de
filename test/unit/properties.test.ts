/**
 * Property tests: for many random (replicas, maxSurge, maxUnavailable) and
 * random starting fleets, drive the controller's decision (core/decide.ts)
 * the way the engine does, with new instances becoming ready in random order,
 * and check the invariants after every action and that every rollout completes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { decide, type InstanceView } from '../../src/core/decide.js';
import { seededRandom } from '../../src/core/random.js';
import { resolveStrategy, type IntOrPercent, type ResolvedStrategy } from '../../src/core/strategy.js';
import { ValidationError } from '../../src/errors.js';

const intOrPercent = (maxInt: number, maxPercent: number) =>
  fc.oneof(
    fc.integer({ min: 0, max: maxInt }),
    fc.integer({ min: 0, max: maxPercent }).map((p) => `${p}%`),
  );

const isZeroValue = (v: IntOrPercent) => v === 0 || v === '0%';

interface RunResult {
  waves: number;
  violations: string[];
  complete: boolean;
}

/**
 * Runs a rollout to the end. `start` is the initial fleet. Unavailable old
 * instances stay unavailable; new instances become ready (and available) a few
 * at a time in random order, as the world decides. An instance decide()
 * terminates is gone before the next decision (its drain and stop take no
 * time here), so what is alive is what the algorithm counts.
 */
function drive(s: ResolvedStrategy, start: InstanceView[], seed: number): RunResult {
  const rand = seededRandom(seed);
  let fleet = [...start];
  let serial = 0;
  const violations: string[] = [];
  const available = () => fleet.filter((i) => i.phase === 'available').length;
  // Bounds hold relative to where the fleet started: a fleet already outside
  // them (extra instances, outages) must not be pushed further out.
  const ceiling = Math.max(s.maxTotal, fleet.length);
  const floor = Math.min(s.minAvailable, available());
  const check = (when: string) => {
    if (fleet.length > ceiling) violations.push(`${when}: ${fleet.length} alive > ${ceiling}`);
    if (available() < floor) violations.push(`${when}: ${available()} available < ${floor}`);
  };
  const startNew = (n: number) => {
    for (let k = 0; k < n; k++) fleet.push({ id: `new-${serial++}`, host: HOST, revision: 'new', phase: 'unready', routed: false, created: 1000 + serial });
  };
  let waves = 0;
  for (let guard = 0; guard < 20 * (s.replicas + 5); guard++) {
    const d = decide(fleet, { revision: 'new', replicas: s.replicas, strategy: s, now: 0, hosts: [{ name: HOST }] });
    if (d.complete) return { waves, violations, complete: true };
    const acted = d.terminate.length + d.start.length > 0;
    if (acted) {
      waves++;
      const gone = new Set(d.terminate);
      fleet = fleet.filter((i) => !gone.has(i.id));
      check(`step ${waves} after terminations`);
      startNew(d.start.length);
      check(`step ${waves} after starts`);
    }
    const waiting = fleet.filter((i) => i.revision === 'new' && i.phase !== 'available');
    if (waiting.length === 0) {
      if (!acted) return { waves, violations: [...violations, 'stalled with nothing to wait for'], complete: false };
      continue;
    }
    // Some of the waiting new instances become ready; at least one.
    const n = 1 + Math.floor(rand() * waiting.length);
    for (const i of waiting.slice(0, n)) i.phase = 'available';
  }
  return { waves, violations: [...violations, 'did not finish'], complete: false };
}

const HOST = 'local';
const oldFleet = (n: number): InstanceView[] =>
  Array.from({ length: n }, (_, k) => ({ id: `old-${k}`, host: HOST, revision: 'old', phase: 'available', routed: true, created: k }));

describe('properties of the rolling algorithm', () => {
  it('from an all-old fleet: bounds hold at every step and every valid rollout completes', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 40 }), intOrPercent(12, 200), intOrPercent(12, 100), fc.integer(), (replicas, surge, unav, seed) => {
        let s: ResolvedStrategy;
        try {
          s = resolveStrategy({ replicas, cli: { maxSurge: surge, maxUnavailable: unav } });
        } catch (err) {
          // The only invalid combination these generators make is both zero.
          assert.ok(err instanceof ValidationError && isZeroValue(surge) && isZeroValue(unav), String(err));
          return;
        }
        const r = drive(s, oldFleet(replicas), seed);
        assert.deepEqual(r.violations, []);
        assert.equal(r.complete, true);
      }),
      { numRuns: 400 },
    );
  });

  it('from any half-done fleet (two old revisions, unhealthy and extra instances): bounds never worsen and it converges', () => {
    const instance = fc.record({
      revision: fc.constantFrom('old-a', 'old-b', 'new'),
      state: fc.constantFrom('available', 'unready', 'exited'),
    });
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 20 }),
        intOrPercent(6, 150),
        intOrPercent(6, 100),
        fc.array(instance, { maxLength: 30 }),
        fc.integer(),
        (replicas, surge, unav, raw, seed) => {
          if (isZeroValue(surge) && isZeroValue(unav)) return;
          const s = resolveStrategy({ replicas, cli: { maxSurge: surge, maxUnavailable: unav } });
          const start: InstanceView[] = raw.map((r, k) => ({
            id: `i-${k}`,
            host: HOST,
            revision: r.revision,
            phase: r.state === 'exited' ? 'failed' : r.state,
            routed: r.state === 'available',
            created: r.revision === 'old-a' ? k : r.revision === 'old-b' ? 100 + k : 200 + k,
          }));
          const r = drive(s, start, seed);
          assert.deepEqual(r.violations, []);
          assert.equal(r.complete, true);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('Recreate never runs old and new at once', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 30 }), (replicas) => {
        const s = resolveStrategy({ replicas, strategy: { type: 'Recreate' } });
        const ctx = { revision: 'new', replicas, strategy: s, now: 0, hosts: [{ name: HOST }] };
        const first = decide(oldFleet(replicas), ctx);
        // Every old instance goes, and nothing starts until none is left.
        const then = decide([], ctx);
        assert.deepEqual([first.terminate.length, first.start.length, then.start.length], [replicas, 0, replicas]);
      }),
    );
  });
});
