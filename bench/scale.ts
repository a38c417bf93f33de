/**
 * The scale check, side by side in one run on this engine:
 *
 *   control:   `docker run` of N containers of the fast example app (no
 *              warm-up, no pre-stop), 8 at a time, then wait until every one
 *              answers readiness; then stop and remove them all, 8 at a time.
 *              Their sum is the raw floor of replacing N instances.
 *   fleetroll: a rolling update of an N-instance fleet of the same app,
 *              25%/25%, drainSeconds 0.5, light load through nginx.
 *
 * Target: fleetroll's duration within 1.5 × (raw start-to-ready + raw removal).
 *
 *   npx tsx bench/scale.ts [--replicas 30] [--out bench-out]
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { DockerRuntime } from '../src/adapters/docker.js';
import { HttpProber } from '../src/adapters/http.js';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../src/adapters/localImages.js';
import { buildDeps, readDefaultTemplate } from '../src/wiring.js';
import { mapBounded } from '../src/engine/hostWork.js';
import { demoNames, runUnderLoad, teardown } from '../src/experiment/rehearse.js';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? (process.argv[i + 1] ?? dflt) : dflt;
};
const N = Number(arg('--replicas', '30'));
const OUT = arg('--out', 'bench-out');
const TARGET = 1.5;
const docker = 'unix:///var/run/docker.sock';

const runtime = new DockerRuntime({ name: 'local', docker });
await runtime.ping();
const base = await ensureNodeBaseImage({ log: () => {} });
for (const v of ['1.0.0', '1.1.0']) await buildAppImage({ log: () => {}, version: v, base });
const nginxImage = await ensureNginxBaseImage({ log: () => {} });
const template = await readDefaultTemplate();
const tag = Math.random().toString(36).slice(2, 6);

// fleetroll: the rolling update, timed by the runner (deploy start to end).
const names = demoNames(`bench-scale-${tag}`);
const rolled = await runUnderLoad(
  {
    name: names.service,
    docker,
    replicas: N,
    maxSurge: '25%',
    maxUnavailable: '25%',
    from: '1.0.0',
    to: '1.1.0',
    getPerSecond: 5,
    postConcurrency: 0,
    drainSeconds: 0.5,
    warmupSeconds: 0,
    prestopSeconds: 0,
    minReadySeconds: 0,
    port: 0,
    keep: true,
    events: () => {},
    log: (l) => process.stderr.write(`${l}\n`),
    beforeMs: 500,
    afterMs: 500,
  },
  runtime,
  (f) => buildDeps(f),
  template,
  nginxImage,
);
const fleetrollMs = rolled.deployEndMs - rolled.deployStartMs;
// What a user calls failed: no response, or a 4xx/5xx.
const failed = rolled.records.filter((x) => x.error !== undefined || x.status === undefined || x.status >= 400).length;

// The control, on the same network, image and engine, right after.
const prober = new HttpProber({ readinessPath: '/health/ready', versionPath: '/api/version', timeoutMs: 1000 });
const t0 = performance.now();
const started = await mapBounded(
  Array.from({ length: N }, (_, i) => i),
  8,
  (i) =>
    runtime.run({
      name: `bench-raw-${tag}-${i}`,
      image: 'fleetroll-example:1.1.0',
      env: { WARMUP_SECONDS: '0', PRESTOP_SECONDS: '0' },
      port: 8080,
      network: names.network,
      labels: { 'fleetroll.bench': tag },
      stopTimeoutSeconds: 10,
    }),
);
const pending = new Set(started.map((s) => s.address ?? ''));
while (pending.size > 0) {
  await Promise.all([...pending].map(async (a) => (await prober.ready(a).catch(() => false)) && pending.delete(a)));
  if (pending.size > 0) await new Promise((r) => setTimeout(r, 100));
}
const startToReadyMs = performance.now() - t0;
const t1 = performance.now();
await mapBounded(started, 8, async (s) => {
  await runtime.stop(s.id, 10);
  await runtime.remove(s.id);
});
const removalMs = performance.now() - t1;
await teardown(runtime.docker, names);

const floor = startToReadyMs + removalMs;
const ratio = fleetrollMs / floor;
const line = (k: string, v: string) => console.log(`${k.padEnd(44)} ${v}`);
console.log(`\n${N} instances, 25%/25%, drain 0.5 s, no warm-up, no pre-stop (node ${process.version})`);
line('raw: docker run 8 at a time + all ready', `${(startToReadyMs / 1000).toFixed(1)} s`);
line('raw: docker stop + rm 8 at a time', `${(removalMs / 1000).toFixed(1)} s`);
line(
  'fleetroll rolling update',
  `${(fleetrollMs / 1000).toFixed(1)} s, ${rolled.deploy?.reloads ?? '?'} reloads, ${failed} failed of ${rolled.records.length} requests`,
);
line('ratio fleetroll / (start-to-ready + removal)', `${ratio.toFixed(2)}× (target ≤ ${TARGET}×: ${ratio <= TARGET ? 'met' : 'MISSED'})`);
await mkdir(OUT, { recursive: true });
await writeFile(
  join(OUT, 'scale.json'),
  `${JSON.stringify({ date: new Date().toISOString(), replicas: N, startToReadyMs, removalMs, fleetrollMs, ratio, target: TARGET, failed, requests: rolled.records.length, reloads: rolled.deploy?.reloads }, null, 2)}\n`,
);
process.exitCode = failed > 0 || rolled.deployError ? 1 : 0;
