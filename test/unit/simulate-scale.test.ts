/**
 * Simulate's cost per replica stays flat as the fleet grows.
 * Ratios measured in one run, never absolute times: the machine is shared.
 *
 * 25%/25% is measured at 1,000 and 20,000 replicas (about 3 s in all). It
 * was quadratic through the rollout's look at the previous fleet (each
 * instance copied its revision's whole list: 2e8 copies at 20,000).
 *
 * 1/0 is measured at 1,000 and 8,000 (about 2 s; 20,000 is as flat but
 * would take the file past 15 s on a loaded machine). It has one
 * wave and one nginx reload per replica, and each reload rebuilt, sorted,
 * compared, rendered and (in the simulated nginx) parsed the whole upstream,
 * then looked at every instance: no result in 150 s at 10,000. A reload now
 * costs what changed (engine/upstreamList.ts, Traffic's diff, the simulated
 * nginx's writeServers).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { resolveStrategy } from '../../src/core/strategy.js';
import { simulateRollout } from '../../src/sim/simulate.js';

const T = { startupMs: 3000, drainMs: 2000, stopMs: 1000, minReadyMs: 0, jitter: 0, seed: 1 };

async function perReplicaMs(replicas: number, maxSurge: string, maxUnavailable: string): Promise<number> {
  const s = resolveStrategy({ replicas, cli: { maxSurge, maxUnavailable } });
  const t0 = performance.now();
  const r = await simulateRollout(s, T);
  const ms = performance.now() - t0;
  // The rollout really ran: every old instance replaced, never below the floor.
  assert.equal(r.deploy.instances.filter((i) => i.version === r.deploy.version).length, replicas);
  assert.equal(r.lowestCapacity, replicas - s.maxUnavailable);
  return ms / replicas;
}

describe('simulate scales linearly in replicas', () => {
  const rows = [
    { name: '25%/25%', maxSurge: '25%', maxUnavailable: '25%', small: 1000, large: 20_000 },
    { name: '1/0 (a wave and a reload per replica)', maxSurge: '1', maxUnavailable: '0', small: 1000, large: 8000 },
  ];
  for (const row of rows) {
    it(`${row.name}: time per replica at ${row.large} is under 3 × that at ${row.small}`, async () => {
      await perReplicaMs(200, row.maxSurge, row.maxUnavailable); // warm-up: JIT and module loading out of the small run
      const small = await perReplicaMs(row.small, row.maxSurge, row.maxUnavailable);
      const large = await perReplicaMs(row.large, row.maxSurge, row.maxUnavailable);
      assert.ok(
        large / small < 3,
        `per replica: ${(small * 1000).toFixed(0)} µs at ${row.small}, ${(large * 1000).toFixed(0)} µs at ${row.large} (ratio ${(large / small).toFixed(2)})`,
      );
    });
  }
});
