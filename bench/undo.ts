/**
 * Blue-green `undo` inside scaleDownDelaySeconds, from the command's start
 * (node's start included) to the last request the new set answered, measured
 * through nginx (target: within 1 s). Each round rolls the stage's fleet
 * from 1.0.0 to 1.1.0 (BlueGreen, a 60 s delay), waits for the switch, runs
 * `fleetroll undo` and reads the load's records: when the new set's last
 * request was sent and answered, and how many requests failed for a strict
 * client (keep-alive, no resend: as an API client sees them).
 *
 *   npx tsx bench/undo.ts [--rounds 5] [--conf bind|archive]
 *
 * The stage is the integration tests' (test/integration/fixture.ts): nginx
 * in a container on this machine's engine, conf.d bind-mounted from this
 * machine, or with `--conf archive` inside the container (each file through
 * Docker's archive API). It runs dist/ (what users run): `npm run build` first. Exit 1
 * when the median round misses 1 s. A failed request is listed, not a miss:
 * the undo is one nginx reload, and a reload closes idle keep-alive
 * connections, so a strict client may see one reset (docs/fleet-file.md,
 * mode reload); mode dynamic has none.
 */
import { moreRequests, runCli, startCliUntil, startLoad, startTestFleet } from '../test/integration/fixture.js';

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ROUNDS = Number(arg('--rounds') ?? 5);
const TARGET_MS = 1000;
const CONF = arg('--conf') ?? 'bind';
if (CONF !== 'bind' && CONF !== 'archive') throw new Error(`--conf: bind or archive, got ${CONF}`);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

const f = await startTestFleet('bench-undo', { confInContainer: CONF === 'archive' });
const rows: { sent: number; answered: number; failed: number; requests: number }[] = [];
try {
  const first = await runCli(['deploy', '-f', f.fleetFile({ replicas: 3, type: 'BlueGreen' })]);
  if (first.code !== 0) throw new Error(first.stderr);
  for (let i = 0; i < ROUNDS; i++) {
    const to = '1.1.0';
    const load = startLoad(f.url, { getPerSecond: 40, postConcurrency: 1, keepAlive: true, resend: false });
    const loadStart = Date.now() - load.elapsed();
    const file = f.fleetFile({ replicas: 3, type: 'BlueGreen', scaleDownDelaySeconds: 60, image: `fleetroll-example:${to}` });
    const running = await startCliUntil(['deploy', '-f', file], /switched: the old set/);
    await moreRequests(load, 10, 'requests on the new set');
    const t0 = Date.now();
    const undo = await runCli(['undo', '-f', file]);
    await running.exited;
    await moreRequests(load, 10, 'requests after the undo');
    const records = await load.stop();
    if (undo.code !== 0) throw new Error(`undo exited ${undo.code}: ${undo.stderr}`);
    const toNew = records.filter((r) => r.version === to && loadStart + r.t >= t0 - 5000);
    const sent = Math.max(...toNew.map((r) => loadStart + r.t)) - t0;
    const answered = Math.max(...toNew.map((r) => loadStart + r.t + r.latencyMs)) - t0;
    const failed = records.filter((r) => r.error !== undefined || r.status === undefined || r.status < 200 || r.status >= 400).length;
    rows.push({ sent, answered, failed, requests: records.length });
    for (const r of records.filter((x) => x.error !== undefined || x.status === undefined || x.status < 200 || x.status >= 400)) {
      console.log(`  failed: ${r.method ?? 'GET'} sent ${(loadStart + r.t - t0).toFixed(0)} ms after the command started: ${r.error ?? `status ${r.status}`}`);
    }
    console.log(
      `round ${i + 1}: the new set's last request sent ${sent.toFixed(0)} ms, answered ${answered.toFixed(0)} ms after the command started; ${failed} of ${records.length} requests failed (strict client)`,
    );
  }
} finally {
  await f.cleanup();
}
const answered = rows.map((r) => r.answered);
const failed = rows.reduce((n, r) => n + r.failed, 0);
console.log(
  `undo inside the delay, conf.d ${CONF === 'bind' ? 'bind-mounted' : 'inside the container'}, ${rows.length} rounds: last new answer median ${median(answered).toFixed(0)} ms (min ${Math.min(...answered).toFixed(0)}, max ${Math.max(...answered).toFixed(0)}) after the command started, target ${TARGET_MS} ms; ${failed} of ${rows.reduce((n, r) => n + r.requests, 0)} requests failed`,
);
process.exitCode = median(answered) <= TARGET_MS ? 0 : 1;
