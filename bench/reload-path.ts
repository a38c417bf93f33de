/**
 * The reload path against its floor: one upstream change to nginx
 * in a container on the local engine, as fleetroll makes it
 * (NginxContainerRouter.writeAndTest + reload: the file in, `nginx -t`, the
 * reload, and the confirmation that every worker is a new one), against the
 * raw operations it cannot do without, timed side by side in alternating
 * rounds on the same nginx: the archive PUT, `nginx -t` by exec, `nginx -s
 * reload` by exec, and `docker top` polled back to back until the workers
 * are new ones (the reload in force, learnt as soon as the engine can tell).
 *
 * Twice, on two nginx containers: conf.d inside the container (the file
 * through Docker's archive API, both ways) and conf.d bind-mounted from this
 * machine (the file written on the host, both ways; demoStage.ts stageConfDir).
 *
 *   npx tsx bench/reload-path.ts [--rounds 15] [--conf both|archive|bind] [--docker unix:///var/run/docker.sock]
 *
 * It prints the median of each and two ratios per pair, with their medians:
 * fleetroll's change to in force against the raw operations alone (the
 * target, 1.3 ×; exit 1 when the median misses it), and against the raw
 * operations with the workers polled back to back after them.
 */
import { performance } from 'node:perf_hooks';
import { DockerRuntime } from '../src/adapters/docker.js';
import { execIn, putFile } from '../src/adapters/dockerFiles.js';
import { NginxContainerRouter } from '../src/adapters/nginx.js';
import { hostFiles } from '../src/adapters/nginxPlace.js';
import { ensureNginxBaseImage } from '../src/adapters/localImages.js';
import { type DemoNames, demoNames, stageConfDir, startNginx, teardown } from '../src/experiment/demoStage.js';
import { LABELS } from '../src/ports.js';

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const ROUNDS = Number(arg('--rounds') ?? 15);
const TARGET = 1.3;
const runtime = new DockerRuntime({ name: 'local', docker: arg('--docker') ?? 'unix:///var/run/docker.sock' });
const docker = runtime.docker;
const CONF = arg('--conf') ?? 'both';
const FILE = '/etc/nginx/conf.d/upstream.conf';

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

async function workers(names: DemoNames): Promise<Set<string>> {
  const t = (await docker.getContainer(names.nginx).top({ ps_args: '-o pid,args' })) as { Titles: string[]; Processes: string[][] };
  const pid = t.Titles.indexOf('PID');
  const args = t.Titles.findIndex((x) => x === 'COMMAND' || x === 'ARGS' || x === 'CMD');
  return new Set(t.Processes.filter((p) => /nginx: worker process\s*$/.test(p[args] ?? '')).map((p) => p[pid] ?? ''));
}

/** A different but valid upstream each round, so every write is a real change. */
const upstream = (names: DemoNames, n: number) =>
  `upstream ${names.upstream} {\n    server 10.255.${n % 250}.1:8080;\n    server 10.255.${n % 250}.2:8080 down;\n}\n`;

/** The raw operations: the time until `nginx -s reload` returned (`ops`) and until the workers were new (`total`). */
async function raw(names: DemoNames, confDir: string | undefined, n: number, before: Set<string>): Promise<{ ops: number; total: number }> {
  const t0 = performance.now();
  if (confDir !== undefined) await hostFiles.write(`${confDir}/upstream.conf`, upstream(names, n));
  else await putFile(docker, names.nginx, FILE, upstream(names, n));
  const test = await execIn(docker, names.nginx, ['nginx', '-t']);
  if (test.exitCode !== 0) throw new Error(`nginx -t: ${test.stderr}`);
  const reload = await execIn(docker, names.nginx, ['nginx', '-s', 'reload']);
  if (reload.exitCode !== 0) throw new Error(`reload: ${reload.stderr}`);
  const ops = performance.now() - t0;
  for (;;) {
    const now = await workers(names);
    if (now.size > 0 && ![...now].some((p) => before.has(p))) break;
  }
  return { ops, total: performance.now() - t0 };
}

async function stage(image: string, bind: boolean): Promise<boolean> {
  const names = demoNames(`bench-reload-${bind ? 'bind' : 'archive'}-${process.pid}`);
  const confDir = bind ? stageConfDir(names.nginx) : undefined;
  await docker.createNetwork({ Name: names.network, Labels: { [LABELS.demo]: names.service } });
  try {
    await startNginx(docker, names, image, 0, `upstream {{upstream}} {\n{{servers}}\n}\n`, 'reload', confDir !== undefined ? { confDir } : {});
    const router = new NginxContainerRouter({ runtime, container: names.nginx, upstreamFile: FILE, hostName: 'local' });
    // One unmeasured change of each kind first (connections, exec set-up, page cache).
    await router.writeAndTest(upstream(names, 0));
    await router.reload();
    await raw(names, confDir, 1, await workers(names));
    const pairs: { raw: number; ops: number; full: number }[] = [];
    const parts: Record<string, number[]> = {};
    for (let i = 0; i < ROUNDS; i++) {
      const n = 2 * i + 2;
      // Alternate which goes first, so a drift in the machine's load falls on both alike.
      const fullFirst = i % 2 === 0;
      const one = async (kind: 'raw' | 'full') => {
        if (kind === 'raw') return raw(names, confDir, n, await workers(names));
        const t0 = performance.now();
        await router.writeAndTest(upstream(names, n + 1));
        await router.reload();
        const total = performance.now() - t0;
        for (const [k, v] of Object.entries(router.lastChange() ?? {})) if (typeof v === 'number') (parts[k] ??= []).push(v);
        return { ops: total, total };
      };
      const a = await one(fullFirst ? 'full' : 'raw');
      const b = await one(fullFirst ? 'raw' : 'full');
      const [f, r] = fullFirst ? [a, b] : [b, a];
      pairs.push({ full: f.total, raw: r.total, ops: r.ops });
    }
    const ratios = pairs.map((p) => p.full / p.raw);
    const opsRatios = pairs.map((p) => p.full / p.ops);
    const range = (xs: number[]) => `median ${median(xs).toFixed(2)} ×, min ${Math.min(...xs).toFixed(2)}, max ${Math.max(...xs).toFixed(2)}`;
    console.log(`reload path, ${ROUNDS} alternating rounds on ${names.nginx} (conf.d ${bind ? `bind-mounted from ${confDir}` : 'inside the container'}):`);
    console.log(
      `  raw operations (${bind ? 'host write' : 'PUT'} + nginx -t + nginx -s reload):${bind ? '              ' : '                     '}median ${median(pairs.map((p) => p.ops)).toFixed(0)} ms`,
    );
    console.log(`  the same, then docker top back to back until the workers are new:     median ${median(pairs.map((p) => p.raw)).toFixed(0)} ms`);
    console.log(`  fleetroll's change (writeAndTest + reload, to in force):              median ${median(pairs.map((p) => p.full)).toFixed(0)} ms`);
    console.log(
      `    its parts (median ms): ${Object.entries(parts)
        .map(([k, v]) => `${k} ${median(v).toFixed(0)}`)
        .join(', ')}`,
    );
    console.log(
      `  fleetroll / raw operations, per pair: ${range(opsRatios)} (target ${TARGET} ×; nginx's own hand-over of 100 ms is inside fleetroll's figure)`,
    );
    console.log(`  fleetroll / raw with its confirmation, per pair: ${range(ratios)}`);
    return median(opsRatios) <= TARGET;
  } finally {
    await teardown(docker, names);
    await docker
      .getNetwork(names.network)
      .remove()
      .catch(() => {});
  }
}

const image = await ensureNginxBaseImage();
let met = true;
for (const bind of CONF === 'both' ? [false, true] : [CONF === 'bind']) met = (await stage(image, bind)) && met;
process.exitCode = met ? 0 : 1;
