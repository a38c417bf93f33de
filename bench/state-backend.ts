/**
 * A deploy with its state in etcd against the same deploy with the Docker
 * volume (target: at most 1.05 × the volume's time), side by side on one
 * machine: two test fleets of 3 (the integration tests' stage: nginx in a
 * container, conf.d bind-mounted), one per backend, each rolled between
 * 1.0.0 and 1.1.0 in turns (maxSurge 1, maxUnavailable 0), the order of the
 * two swapped every round, so that the machine's noise falls on both. The
 * time is the CLI's, from its start (node's included) to its exit; the
 * ratio is taken pair by pair and its median reported.
 *
 *   npm run build && npx tsx bench/state-backend.ts [--rounds 6]
 *
 * Needs the 3-member etcd of scripts/etcd-cluster.sh (started here). Exit 1
 * when the median ratio misses the target.
 */
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { root, runCli, startTestFleet, type TestFleet } from '../test/integration/fixture.js';

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ROUNDS = Number(arg('--rounds') ?? 6);
const TARGET = 1.05;
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const endpoints = String((await execa('bash', [join(root, 'scripts/etcd-cluster.sh'), 'start'])).stdout)
  .trim()
  .split(',');
const prefix = `/fleetroll-bench-${randomBytes(3).toString('hex')}`;
const fleets: { name: 'volume' | 'etcd'; f: TestFleet; state?: Record<string, unknown> }[] = [
  { name: 'volume', f: await startTestFleet('bench-vol') },
  { name: 'etcd', f: await startTestFleet('bench-etcd'), state: { etcd: { endpoints, prefix } } },
];
const times: Record<'volume' | 'etcd', number[]> = { volume: [], etcd: [] };
async function deploy(b: (typeof fleets)[number], image: string): Promise<number> {
  const file = b.f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, image, ...(b.state ? { state: b.state } : {}) });
  const t0 = performance.now();
  const r = await runCli(['deploy', '-f', file]);
  const ms = performance.now() - t0;
  if (r.code !== 0) throw new Error(`${b.name}: deploy exited ${r.code}:\n${r.stdout}\n${r.stderr}`);
  return ms;
}
try {
  // The first deploy of each creates its state (and the volume's container): not measured.
  for (const b of fleets) await deploy(b, 'fleetroll-example:1.0.0');
  for (let i = 0; i < ROUNDS; i++) {
    const image = i % 2 === 0 ? 'fleetroll-example:1.1.0' : 'fleetroll-example:1.0.0';
    const order = i % 2 === 0 ? fleets : [...fleets].reverse();
    for (const b of order) times[b.name].push(await deploy(b, image));
    console.log(`round ${i + 1}: volume ${Math.round(times.volume.at(-1)!)} ms, etcd ${Math.round(times.etcd.at(-1)!)} ms`);
  }
} finally {
  for (const b of fleets) await b.f.cleanup().catch(() => {});
  await execa('etcdctl', ['--endpoints', endpoints.join(','), 'del', '--prefix', prefix], { env: { ETCDCTL_API: '3' }, reject: false });
}
const ratios = times.etcd.map((t, i) => t / times.volume[i]!);
const m = median(ratios);
console.log(
  `deploy of 3 (maxSurge 1): volume median ${Math.round(median(times.volume))} ms, etcd median ${Math.round(median(times.etcd))} ms; etcd/volume pair by pair ${ratios.map((r) => r.toFixed(3)).join(', ')}, median ${m.toFixed(3)} (target ≤ ${TARGET})`,
);
if (m > TARGET) process.exitCode = 1;
