/**
 * bench:faults' engine restart: the fleet's Docker engine stopped and started
 * again under `fleetroll watch` (a VM reboot), in reload and dynamic modes.
 *
 * The fleet's only engine here also runs the other setups' nginx, so this one
 * puts the fleet on a second engine (scripts/second-engine.sh, name `fb`,
 * instances published on 127.0.0.1) behind an nginx on this machine
 * (`exec: true`): reload mode with a minimal nginx.conf (proxy_pass only),
 * dynamic mode with templates/nginx-dynamic.conf.example. Every instance is
 * on the stopped engine, so GETs fail while it is down whatever fleetroll
 * does; what is measured is how long after the engine answers again the
 * fleet is whole (Docker restarted the instances, `restart: unless-stopped`,
 * at new host ports the watch follows) and that no GET fails from then on.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { execa } from 'execa';
import { removeFleetState } from '../src/adapters/fleetState.js';
import { dynamicNginxConf } from '../src/experiment/demoStage.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const ENGINE = 'fb';

export interface EngineRow {
  mode: 'reload' | 'dynamic';
  /** How long `second-engine.sh stop` took (dockerd stopping its containers, then itself). */
  stopMs: number;
  /** From the engine stopped to it answering again (10 s down, then dockerd's start). */
  downMs: number;
  /** From the engine answering to the watch saying the fleet is whole again. */
  wholeAfterMs: number | undefined;
  /** GETs sent from the stop until the fleet was whole again: every instance was on that engine. */
  outage: { gets: number; failed: number };
  /** GETs sent once the watch said whole, for 10 s. */
  after: { gets: number; failed: number };
}

interface Load {
  /** GETs sent since `since` (ms, Date.now()), and how many failed. */
  count(since: number, until?: number): { gets: number; failed: number };
}

const engine = async (cmd: 'start' | 'stop') =>
  String((await execa('bash', [join(root, 'scripts/second-engine.sh'), cmd, ENGINE], { stdin: 'ignore' })).stdout).trim();

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (a && typeof a === 'object' ? resolve(a.port) : reject(new Error('no port'))));
    });
  });
}

async function nginxConf(mode: 'reload' | 'dynamic', dir: string, upstream: string, port: number): Promise<{ conf: string; lb: string }> {
  const conf = join(dir, 'nginx.conf');
  const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((x) => `    ${x}_temp_path ${dir}/${x}_temp;`).join('\n');
  const head = `daemon on;\npid ${dir}/nginx.pid;\nerror_log ${dir}/error.log warn;\n`;
  if (mode === 'reload') {
    const upstreamFile = join(dir, 'upstream.conf');
    writeFileSync(upstreamFile, `upstream ${upstream} {\n    server 127.0.0.1:9 down;\n}\n`);
    writeFileSync(
      conf,
      `${head}worker_processes 1;\nevents { worker_connections 1024; }\nhttp {\n${temp}\n    access_log off;\n    include ${upstreamFile};\n    server { listen 127.0.0.1:${port}; location / { proxy_pass http://${upstream}; } }\n}\n`,
    );
    return { conf, lb: `{ exec: true, config: ${conf}, upstreamFile: ${upstreamFile}, upstream: ${upstream} }` };
  }
  writeFileSync(
    conf,
    `${(await dynamicNginxConf(upstream))
      .replace('listen 80;', `listen 127.0.0.1:${port};`)
      .replace('lua_package_path "/etc/nginx/fleetroll/?.lua;;";', `lua_package_path "${join(root, 'templates')}/?.lua;;";`)
      .replace(/access_log \/var\/log\/nginx\/fleetroll\.log fleetroll_json;/, `access_log ${dir}/fleetroll.log fleetroll_json;`)
      .replace('http {', `http {\n${temp}`)}\n${head}`,
  );
  return { conf, lb: `{ exec: true, config: ${conf}, mode: dynamic, upstream: ${upstream} }` };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const t0 = Date.now();
  while (!check()) {
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/**
 * One engine restart in `mode`: `startLoad(url)` starts the strict client on
 * nginx's address and is stopped by the caller once this returns.
 */
export async function engineRestart(
  cli: string,
  mode: 'reload' | 'dynamic',
  startLoad: (url: string) => Load & { stop(): Promise<unknown> },
): Promise<EngineRow> {
  const endpoint = (await engine('start')).split('\n')[0]!;
  const dir = mkdtempSync(join(tmpdir(), `fbench-engine-${mode}-`));
  const service = `fbench-engine-${mode}`;
  const upstream = service.replace(/-/g, '_');
  const port = await freePort();
  const { conf, lb } = await nginxConf(mode, dir, upstream, port);
  await execa('/usr/sbin/nginx', ['-c', conf, '-e', `${dir}/error.log`], { stdin: 'ignore' });
  const file = join(dir, 'fleet.yaml');
  writeFileSync(
    file,
    `service: ${service}
image: fleetroll-example:1.1.0
replicas: 4
port: 8080
env: { WARMUP_SECONDS: "0.5" }
hosts:
  - { name: ${ENGINE}, docker: "${endpoint}", publishAddress: 127.0.0.1 }
probes: { readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 } }
restart: unless-stopped
loadBalancers:
  - nginx: ${lb}
`,
  );
  let watch: ReturnType<typeof spawn> | undefined;
  let load: (Load & { stop(): Promise<unknown> }) | undefined;
  try {
    const deployed = await execa('node', [cli, 'deploy', '-f', file], { reject: false });
    if (deployed.exitCode !== 0) throw new Error(`deploy failed:\n${deployed.stdout}\n${deployed.stderr}`);
    watch = spawn('node', [cli, 'watch', '-f', file, '--interval', '2s', '--settle', '1s'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    watch.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    await until('the watch to say the fleet is whole', () => /whole at revision/.test(out), 120_000);
    load = startLoad(`http://127.0.0.1:${port}`);
    await sleep(3000);
    const stopAt = Date.now();
    const saidBefore = out.length;
    await engine('stop');
    const stoppedAt = Date.now();
    await until('the watch to say it cannot see the fleet', () => /cannot see|unreachable|does not answer/.test(out.slice(saidBefore)), 60_000).catch(() => {});
    await sleep(Math.max(0, 10_000 - (Date.now() - stoppedAt)));
    await engine('start');
    const backAt = Date.now();
    const heard = out.length;
    const wholeAt = await until(
      'the watch to say the fleet is whole again',
      () => /watch: (healed \(|whole at revision|whole again)/.test(out.slice(heard)),
      120_000,
    )
      .then(() => Date.now())
      .catch(() => undefined);
    const afterFrom = wholeAt ?? Date.now();
    await sleep(10_000);
    const row: EngineRow = {
      mode,
      stopMs: stoppedAt - stopAt,
      downMs: backAt - stoppedAt,
      wholeAfterMs: wholeAt === undefined ? undefined : wholeAt - backAt,
      outage: load.count(stopAt, afterFrom),
      after: load.count(afterFrom),
    };
    console.log(JSON.stringify(row));
    return row;
  } finally {
    await load?.stop();
    watch?.kill('SIGTERM');
    await sleep(1000);
    // The engine keeps its data-root: the fleet and its state go, so that the next run starts clean.
    const d = new Dockerode({ socketPath: endpoint.replace(/^unix:\/\//, '') });
    for (const c of await d.listContainers({ all: true, filters: { label: [`fleetroll.service=${service}`] } }).catch(() => []))
      await d
        .getContainer(c.Id)
        .remove({ force: true })
        .catch(() => {});
    await removeFleetState(d, service).catch(() => {});
    await execa('/usr/sbin/nginx', ['-c', conf, '-e', `${dir}/error.log`, '-s', 'stop'], { reject: false, stdin: 'ignore' });
    await engine('stop').catch(() => {});
    if (!process.env.FAULTS_DEBUG) rmSync(dir, { recursive: true, force: true });
    else console.error(`kept ${dir} (FAULTS_DEBUG): ${readFileSync(join(dir, 'error.log'), 'utf8').slice(-2000)}`);
  }
}
