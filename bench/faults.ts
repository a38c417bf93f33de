/**
 * Faults fleetroll does not make, under `fleetroll watch`, measured with a
 * strict client: each GET on its own connection, a 1 s timeout, never
 * resent (a client that resends hides exactly the failures users see).
 *
 * A fleet of 4 (a rehearsal's, left running, `restart: unless-stopped`),
 * the watch looking every 2 s with a 1 s settle window, GETs at 40/s through
 * nginx. One fault at a time on one instance: SIGKILL, `docker stop` by
 * someone else, `docker pause` for 6 s, a network disconnect for 6 s, and a
 * deploy of a version that crashes 2 s after it is ready. For
 * each: how long until nginx no longer sends it users (the watch's own
 * figure, from Docker's event to the change in force; in reload mode also the
 * upstream file as polled here), how many GETs failed, and how long until the
 * fleet was whole again. Three nginx setups: reload mode with
 * templates/nginx.conf.example's retry (proxy_next_upstream error timeout,
 * proxy_connect_timeout 250ms), reload mode with a minimal nginx.conf
 * (proxy_pass only), and the dynamic mode (its example config). Last, the
 * fleet's engine restarted (a VM reboot), on a fleet of its own on a second
 * engine behind an nginx on this machine (bench/faultsEngine.ts), in reload
 * mode (the minimal setup) and dynamic mode.
 *
 *   npm run bench:faults                          # every setup
 *   FAULTS_SETUPS=minimal npx tsx bench/faults.ts # one
 *   FAULTS=crash,pause npm run bench:faults       # some faults
 *   FAULTS=engine FAULTS_SETUPS=minimal,dynamic npx tsx bench/faults.ts
 *
 * Writes bench-out/faults.json; the table goes to docs/benchmarks.md by hand.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { execa } from 'execa';
import { parseUpstreamServers } from '../src/core/upstream.js';
import { engineRestart, type EngineRow } from './faultsEngine.js';

const cli = process.env.FLEETROLL_CLI ?? fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const docker = new Dockerode();
const RATE = 40;
const REPLICAS = 4;

type Setup = 'template' | 'minimal' | 'dynamic';
type Fault = 'SIGKILL' | 'docker stop' | 'pause 6 s' | 'disconnect 6 s' | 'crash after ready (deploy)' | 'engine restart';
const SETUPS: Setup[] = (process.env.FAULTS_SETUPS?.split(',') as Setup[] | undefined) ?? ['template', 'minimal', 'dynamic'];
// The crash after ready last: the deploy it fails leaves a failed revision, which the watch does not heal to.
// The engine restart on a fleet of its own (bench/faultsEngine.ts): minimal stands for reload mode there.
const ALL_FAULTS: Fault[] = ['SIGKILL', 'docker stop', 'pause 6 s', 'disconnect 6 s', 'crash after ready (deploy)', 'engine restart'];
/** FAULTS=crash,pause: the faults whose names start with one of these words. */
const FAULTS = process.env.FAULTS ? ALL_FAULTS.filter((f) => process.env.FAULTS!.split(',').some((w) => f.startsWith(w))) : ALL_FAULTS;

interface Row {
  setup: Setup;
  fault: Fault;
  /** From Docker's event to the change in force, as the watch reports it. */
  outWatchMs?: number | undefined;
  /** From the fault's API call returning to the upstream file listing it down (reload mode, polled every 10 ms). */
  outFileMs?: number | undefined;
  gets: number;
  failed: number;
  /** When each failed GET was sent, ms from the fault's call. */
  failedAt: number[];
  /** From the fault to the watch's next "healed"/"whole again" line after the fault was undone. */
  wholeMs?: number | undefined;
  /** The crash after ready: the deploy's exit code, and how long it took. */
  deployExit?: number | undefined;
  deploySeconds?: number | undefined;
}

/** A strict GET: its own connection, 1 s in all, never resent. Resolves with whether it succeeded and when it was sent. */
function strictGet(url: string): Promise<{ ok: boolean; at: number; why: string }> {
  const at = Date.now();
  return new Promise<string>((resolve) => {
    const req = http.get(url, { agent: false, timeout: 1000 }, (res) => {
      res.resume();
      const code = res.statusCode ?? 0;
      res.on('end', () => resolve(code >= 200 && code < 300 ? '' : `HTTP ${code}`));
      res.on('error', (e) => resolve(e.message));
    });
    const t = setTimeout(() => req.destroy(new Error('timeout')), 1000);
    req.on('close', () => clearTimeout(t));
    req.on('error', (e) => resolve(e.message));
  }).then((why) => ({ ok: why === '', at, why }));
}

/** GETs at RATE a second (an open loop: a hung one does not slow it) until stopped; `count` tells those settled so far. */
function load(url: string): {
  stop(): Promise<{ gets: number; failed: number; failedAt: number[] }>;
  count(since: number, until?: number): { gets: number; failed: number };
} {
  const pending: Promise<{ ok: boolean; at: number; why: string }>[] = [];
  const settled: { ok: boolean; at: number }[] = [];
  const timer = setInterval(() => pending.push(strictGet(`${url}/api/books`).then((r) => (settled.push(r), r))), 1000 / RATE);
  return {
    async stop() {
      clearInterval(timer);
      const all = await Promise.all(pending);
      const failed = all.filter((r) => !r.ok);
      if (process.env.FAULTS_DEBUG) for (const f of failed) console.error(`failed GET sent at ${f.at}: ${f.why}`);
      return { gets: all.length, failed: failed.length, failedAt: failed.map((r) => r.at) };
    },
    count(since, until = Number.POSITIVE_INFINITY) {
      const in_ = settled.filter((r) => r.at >= since && r.at < until);
      return { gets: in_.length, failed: in_.filter((r) => !r.ok).length };
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 10): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return Date.now() - t0;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

async function setUp(name: string, setup: Setup): Promise<{ file: string; url: string; upstreamOnHost?: string | undefined }> {
  await execa('node', [cli, 'rehearse', '--down', '--name', name], { reject: false });
  const mode = setup === 'dynamic' ? 'dynamic' : 'reload';
  const up = await execa('node', [cli, 'rehearse', '--name', name, '--replicas', String(REPLICAS), '--port', '0', '--keep', '--nginx-mode', mode], {
    reject: false,
  });
  if (up.exitCode !== 0) throw new Error(`rehearse failed:\n${up.stdout}\n${up.stderr}`);
  const nginx = await docker.getContainer(`${name}-nginx`).inspect();
  const port = nginx.NetworkSettings.Ports['80/tcp']?.[0]?.HostPort;
  const confD = (nginx.Mounts as { Source: string; Destination: string }[]).find((m) => m.Destination === '/etc/nginx/conf.d')?.Source;
  if (setup === 'minimal') {
    if (!confD) throw new Error('the minimal setup needs conf.d bind-mounted (a local engine)');
    writeFileSync(join(confD, 'default.conf'), `server {\n    listen 80;\n    location / {\n        proxy_pass http://${name.replace(/-/g, '_')};\n    }\n}\n`);
    const r = await execa('docker', ['exec', `${name}-nginx`, 'nginx', '-s', 'reload'], { reject: false });
    if (r.exitCode !== 0) throw new Error(`nginx reload: ${r.stderr}`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'faults-'));
  const file = join(dir, 'fleet.yaml');
  const lb =
    mode === 'dynamic'
      ? `{ nginx: { container: ${name}-nginx, host: local, upstream: ${name.replace(/-/g, '_')}, mode: dynamic, peersFile: /run/fleetroll/${name.replace(/-/g, '_')}.peers } }`
      : `{ nginx: { container: ${name}-nginx, host: local, upstream: ${name.replace(/-/g, '_')}, upstreamFile: /etc/nginx/conf.d/upstream.conf } }`;
  writeFileSync(
    file,
    `service: ${name}
image: fleetroll-example:1.1.0
replicas: ${REPLICAS}
port: 8080
hosts: [{ name: local, docker: unix:///var/run/docker.sock, network: ${name}-net }]
probes: { readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 } }
loadBalancers: [${lb}]
`,
  );
  // A rehearsal records no revision: a deploy of the file makes the fleet one the watch keeps.
  const deployed = await execa('node', [cli, 'deploy', '-f', file], { reject: false });
  if (deployed.exitCode !== 0) throw new Error(`deploy failed:\n${deployed.stdout}\n${deployed.stderr}`);
  return { file, url: `http://127.0.0.1:${port}`, upstreamOnHost: mode === 'reload' && confD ? join(confD, 'upstream.conf') : undefined };
}

async function instances(name: string) {
  const list = await docker.listContainers({ all: true, filters: { label: [`fleetroll.service=${name}`, 'fleetroll.managed=true'] } });
  return list.filter((c) => c.State === 'running');
}

async function inject(fault: Fault, id: string, network: string): Promise<() => Promise<void>> {
  const c = docker.getContainer(id);
  if (fault === 'SIGKILL') await c.kill({ signal: 'SIGKILL' });
  else if (fault === 'docker stop') await c.stop({ t: 10 });
  else if (fault === 'pause 6 s') {
    await c.pause();
    return () => c.unpause().catch(() => {});
  } else {
    await docker.getNetwork(network).disconnect({ Container: id, Force: true });
    return () =>
      docker
        .getNetwork(network)
        .connect({ Container: id })
        .catch(() => {});
  }
  return async () => {};
}

/**
 * A deploy of a version that crashes 2 s after it is ready (Docker restarting it: `unless-stopped`), maxSurge 1 /
 * maxUnavailable 0, minReadySeconds 5, progressDeadlineSeconds 15, with the watch running (it yields to the deploy).
 */
async function crashAfterReady(setup: Setup, env: { file: string; url: string }): Promise<Row> {
  const file = env.file.replace(/\.yaml$/, '-crash.yaml');
  writeFileSync(
    file,
    `${readFileSync(env.file, 'utf8')}strategy: { type: RollingUpdate, rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }
minReadySeconds: 5
progressDeadlineSeconds: 15
env: { CRASH_AFTER_READY_SECONDS: "2" }
restart: unless-stopped
`,
  );
  const l = load(env.url);
  await sleep(2000);
  const t0 = Date.now();
  const child = execa('node', [cli, 'deploy', '-f', file], { reject: false });
  // FAULTS_DEBUG=1: the deploy's lines timed from its start, to line the failed GETs up with its steps.
  if (process.env.FAULTS_DEBUG) {
    child.stdout?.on('data', (d: Buffer) => process.stderr.write(`${Date.now() - t0} ms: ${d.toString()}`));
    child.stderr?.on('data', (d: Buffer) => process.stderr.write(`${Date.now() - t0} ms (stderr): ${d.toString()}`));
  }
  const r = await child;
  const deploySeconds = Math.round((Date.now() - t0) / 100) / 10;
  await sleep(2000);
  const { gets, failed, failedAt } = await l.stop();
  if (r.exitCode !== 1) console.error(`the deploy was to fail (exit 1), it exited ${r.exitCode}:\n${r.stdout}\n${r.stderr}`);
  const row: Row = { setup, fault: 'crash after ready (deploy)', gets, failed, failedAt: failedAt.map((t) => t - t0), deployExit: r.exitCode, deploySeconds };
  console.log(JSON.stringify(row));
  return row;
}

async function one(name: string, setup: Setup, fault: Fault, env: { file: string; url: string; upstreamOnHost?: string | undefined }, watchOut: () => string) {
  if (fault === 'crash after ready (deploy)') return crashAfterReady(setup, env);
  const victim = (await instances(name))[0]!;
  const victimName = victim.Names[0]!.replace(/^\//, '');
  const l = load(env.url);
  await sleep(2000);
  const saidBefore = watchOut().length;
  const t0 = Date.now();
  // Polled from before the fault's call: `docker stop` returns only once the app has stopped, seconds after its SIGTERM's event.
  const path = env.upstreamOnHost;
  const fileDown = path
    ? until(
        'the upstream file to list it down',
        () => parseUpstreamServers(readFileSync(path, 'utf8')).every((s) => s.name !== victimName || s.down),
        10_000,
      ).catch(() => undefined)
    : Promise.resolve(undefined);
  const undo = await inject(fault, victim.Id, `${name}-net`);
  const outFileMs = await fileDown;
  if (fault === 'pause 6 s' || fault === 'disconnect 6 s') {
    await sleep(Math.max(0, 6000 - (Date.now() - t0)));
    await undo();
  }
  const undoneAt = watchOut().length;
  const wholeMs = await until(
    'the fleet whole again',
    () => /watch: (healed \(|whole again)/.test(watchOut().slice(undoneAt)) || /watch: healed \(/.test(watchOut().slice(saidBefore)),
    60_000,
    50,
  )
    .then(() => Date.now() - t0)
    .catch(() => undefined);
  await sleep(2000);
  const { gets, failed, failedAt } = await l.stop();
  const said = watchOut().slice(saidBefore);
  const outWatch = new RegExp(`out of nginx: ${victimName} \\(.*?\\) (\\d+) ms after the event`).exec(said)?.[1];
  const row: Row = {
    setup,
    fault,
    outWatchMs: outWatch !== undefined ? Number(outWatch) : undefined,
    outFileMs,
    gets,
    failed,
    failedAt: failedAt.map((t) => t - t0),
    wholeMs,
  };
  console.log(JSON.stringify(row));
  // Whole and quiet before the next fault.
  await sleep(3000);
  return row;
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const engineRows: EngineRow[] = [];
  const onOwnFleet = FAULTS.filter((f) => f !== 'engine restart');
  for (const setup of onOwnFleet.length ? SETUPS : []) {
    const name = `fbench-${setup}`;
    console.log(`setting up ${setup}: a fleet of ${REPLICAS} (fleetroll rehearse --keep --name ${name}) ...`);
    const env = await setUp(name, setup);
    let watch: ChildProcess | undefined;
    try {
      watch = spawn('node', [cli, 'watch', '-f', env.file, '--interval', '2s', '--settle', '1s'], { stdio: ['ignore', 'pipe', 'inherit'] });
      let out = '';
      watch.stdout!.on('data', (b: Buffer) => (out += b.toString()));
      await until('the watch to say the fleet is whole', () => /whole at revision/.test(out), 120_000, 200);
      for (const fault of onOwnFleet) rows.push(await one(name, setup, fault, env, () => out));
    } finally {
      watch?.kill('SIGTERM');
      await sleep(1000);
      await execa('node', [cli, 'rehearse', '--down', '--name', name], { reject: false });
    }
  }
  if (FAULTS.includes('engine restart'))
    for (const mode of ['reload', 'dynamic'] as const) {
      if (!SETUPS.includes(mode === 'reload' ? 'minimal' : 'dynamic')) continue;
      console.log(`engine restart, ${mode} mode: a fleet of ${REPLICAS} on a second engine (scripts/second-engine.sh) behind an nginx on this machine ...`);
      engineRows.push(await engineRestart(cli, mode, load));
    }
  mkdirSync('bench-out', { recursive: true });
  writeFileSync('bench-out/faults.json', JSON.stringify({ rate: RATE, replicas: REPLICAS, rows, engineRows }, null, 2));
  const f = (v: number | undefined) => (v === undefined ? '—' : String(v));
  console.log('\n| nginx | fault | out of nginx (watch, ms) | upstream file down (ms) | failed GETs | whole again (s) |');
  console.log('| --- | --- | ---: | ---: | ---: | ---: |');
  for (const r of rows)
    console.log(
      `| ${r.setup} | ${r.fault} | ${f(r.outWatchMs)} | ${f(r.outFileMs)} | ${r.failed} of ${r.gets} | ${r.wholeMs === undefined ? (r.deployExit !== undefined ? `deploy exit ${r.deployExit} after ${r.deploySeconds} s` : '—') : (r.wholeMs / 1000).toFixed(1)} |`,
    );
  if (engineRows.length) {
    console.log(
      '\n| nginx | engine stop took (s) | engine down (s) | whole again after it answered (s) | failed GETs while down | failed GETs in the 10 s after whole |',
    );
    console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
    for (const r of engineRows)
      console.log(
        `| ${r.mode === 'reload' ? 'reload, minimal nginx.conf' : 'dynamic'} | ${(r.stopMs / 1000).toFixed(1)} | ${(r.downMs / 1000).toFixed(1)} | ${f(r.wholeAfterMs === undefined ? undefined : Number((r.wholeAfterMs / 1000).toFixed(1)))} | ${r.outage.failed} of ${r.outage.gets} | ${r.after.failed} of ${r.after.gets} |`,
      );
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
