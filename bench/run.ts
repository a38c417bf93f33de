/**
 * `npm run bench`: speed and memory targets live here, never in timed tests.
 *
 * Targets: simulate 10,000 replicas in well under a second; plan
 * 10,000 replicas likewise. Each case runs a few times and reports the best
 * and median wall time plus heap growth; the process exits 1 if a target is
 * missed so CI-minded users can run it as a gate.
 */
import { planRollout } from '../src/core/plan.js';
import { simulateRollout } from '../src/sim/simulate.js';
import { resolveStrategy } from '../src/core/strategy.js';

interface Case {
  name: string;
  targetMs: number;
  run: () => unknown | Promise<unknown>;
}

const timings = { startupMs: 3000, drainMs: 2000, stopMs: 1000, minReadyMs: 0, jitter: 0, seed: 1 };
const cases: Case[] = [
  // simulate runs the real engine on a virtual clock: the target is one second.
  { name: 'simulate 10,000 replicas, 25%/25%', targetMs: 1000, run: () => simulateRollout(resolveStrategy({ replicas: 10_000 }), timings) },
  {
    name: 'simulate 1,000 replicas, 25%/0, jitter 0.3',
    targetMs: 1000,
    run: () => simulateRollout(resolveStrategy({ replicas: 1_000, cli: { maxUnavailable: 0 } }), { ...timings, jitter: 0.3, minReadyMs: 2000 }),
  },
  {
    name: 'simulate 1,000 replicas, 1/0 (1,000 steps)',
    targetMs: 1000,
    run: () => simulateRollout(resolveStrategy({ replicas: 1_000, cli: { maxSurge: 1, maxUnavailable: 0 } }), timings),
  },
  { name: 'plan 10,000 replicas, 1/0', targetMs: 500, run: () => planRollout(resolveStrategy({ replicas: 10_000, cli: { maxSurge: 1, maxUnavailable: 0 } })) },
];

const RUNS = 5;
let failed = 0;
console.log(`node ${process.version}, ${RUNS} runs each\n`);
for (const c of cases) {
  await c.run(); // warm-up: JIT
  const times: number[] = [];
  const heapBefore = process.memoryUsage().heapUsed;
  let heapPeak = heapBefore;
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    await c.run();
    times.push(performance.now() - t0);
    heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed);
  }
  times.sort((a, b) => a - b);
  const best = times[0] ?? 0;
  const median = times[Math.floor(times.length / 2)] ?? 0;
  const ok = median <= c.targetMs;
  if (!ok) failed++;
  console.log(
    `${ok ? 'ok  ' : 'SLOW'} ${c.name.padEnd(48)} best ${best.toFixed(1).padStart(7)} ms  median ${median.toFixed(1).padStart(7)} ms  (target ${c.targetMs} ms)  heap +${((heapPeak - heapBefore) / 1048576).toFixed(1)} MiB`,
  );
}
process.exitCode = failed > 0 ? 1 : 0;
