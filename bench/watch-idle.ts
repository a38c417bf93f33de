/**
 * `fleetroll watch` at rest: a whole fleet of 3 (a rehearsal's, left
 * running), the watch looking every 2 s, beside `node -e` idling, both
 * started together and measured over the same window (this machine is shared
 * and noisy: the figure is a ratio). Also counts the archive calls the watch
 * makes on the fleet's containers (Docker's archive-path and extract-to-dir
 * events): each costs the engine a process of its own, CPU that the watch's
 * own figure does not show.
 *
 *   npx tsx bench/watch-idle.ts                 # 600 s
 *   WATCH_IDLE_SECONDS=120 npx tsx bench/watch-idle.ts
 *   FLEETROLL_CLI=/other/checkout/dist/cli/main.js npx tsx bench/watch-idle.ts   # another build, same fleet
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Dockerode from 'dockerode';
import { execa } from 'execa';

const seconds = Number(process.env.WATCH_IDLE_SECONDS ?? 600);
const cli = process.env.FLEETROLL_CLI ?? fileURLToPath(new URL('../dist/cli/main.js', import.meta.url));
const name = 'wbench';
const docker = new Dockerode();

/** CPU seconds (user + system) and resident memory of a live process, from /proc. */
function usage(pid: number): { cpu: number; rssMb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const ticks = Number(fields[11]) + Number(fields[12]);
  const rss = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  return { cpu: ticks / 100, rssMb: rss / 1024 };
}

async function main(): Promise<void> {
  console.log(`setting up a fleet of 3 (fleetroll rehearse --keep --name ${name}) ...`);
  await execa('node', [cli, 'rehearse', '--down', '--name', name], { reject: false });
  const up = await execa('node', [cli, 'rehearse', '--name', name, '--replicas', '3', '--port', '0', '--keep'], { reject: false });
  if (up.exitCode !== 0) throw new Error(`rehearse failed:\n${up.stdout}\n${up.stderr}`);
  const dir = mkdtempSync(join(tmpdir(), 'watch-idle-'));
  const file = join(dir, 'fleet.yaml');
  writeFileSync(
    file,
    `service: ${name}
image: fleetroll-example:1.1.0
replicas: 3
port: 8080
hosts: [{ name: local, docker: unix:///var/run/docker.sock, network: ${name}-net }]
probes: { readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 } }
loadBalancers: [{ nginx: { container: ${name}-nginx, host: local, upstream: ${name}, upstreamFile: /etc/nginx/conf.d/upstream.conf } }]
`,
  );
  // A rehearsal records no revision: a deploy of the file makes the fleet one the watch keeps.
  const deployed = await execa('node', [cli, 'deploy', '-f', file], { reject: false });
  if (deployed.exitCode !== 0) throw new Error(`deploy failed:\n${deployed.stdout}\n${deployed.stderr}`);
  const archive: Record<string, number> = {};
  const events = await docker.getEvents({ filters: { type: ['container'], event: ['archive-path', 'extract-to-dir'] } });
  events.on('data', (b: Buffer) => {
    for (const line of b.toString().split('\n').filter(Boolean)) {
      const e = JSON.parse(line) as { Actor?: { Attributes?: { name?: string } } };
      const who = e.Actor?.Attributes?.name ?? '?';
      if (who.includes(name)) archive[who] = (archive[who] ?? 0) + 1;
    }
  });
  let watch: ChildProcess | undefined;
  let idle: ChildProcess | undefined;
  try {
    watch = spawn('node', [cli, 'watch', '-f', file, '--interval', '2s'], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    watch.stdout!.on('data', (b: Buffer) => (out += b.toString()));
    const t0 = Date.now();
    while (!/whole at revision/.test(out)) {
      if (Date.now() - t0 > 120_000) throw new Error(`the watch did not say the fleet is whole:\n${out}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    idle = spawn('node', ['-e', 'setInterval(() => {}, 1e9)'], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, 1000));
    for (const k of Object.keys(archive)) delete archive[k];
    const w0 = usage(watch.pid!);
    const i0 = usage(idle.pid!);
    console.log(`measuring ${seconds} s ...`);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const w1 = usage(watch.pid!);
    const i1 = usage(idle.pid!);
    const wCpu = w1.cpu - w0.cpu;
    const iCpu = Math.max(0.01, i1.cpu - i0.cpu);
    const calls = Object.values(archive).reduce((a, b) => a + b, 0);
    console.log(`watch at rest over ${seconds} s (a look every 2 s, 3 instances): CPU ${wCpu.toFixed(2)} s, RSS ${w1.rssMb.toFixed(1)} MB`);
    console.log(`node -e idling, same window:                  CPU ${iCpu.toFixed(2)} s, RSS ${i1.rssMb.toFixed(1)} MB`);
    console.log(`ratio: CPU ${(wCpu / iCpu).toFixed(1)}x, memory ${(w1.rssMb / i1.rssMb).toFixed(2)}x`);
    console.log(
      `archive calls on the fleet's containers (each a process of dockerd's own): ${calls} (${((calls / seconds) * 60).toFixed(1)} a minute): ${JSON.stringify(archive)}`,
    );
    console.log(`the watch said:\n${out.trim().split('\n').slice(-3).join('\n')}`);
  } finally {
    watch?.kill('SIGTERM');
    idle?.kill('SIGKILL');
    (events as unknown as { destroy(): void }).destroy();
    await execa('node', [cli, 'rehearse', '--down', '--name', name], { reject: false });
  }
}

await main();
