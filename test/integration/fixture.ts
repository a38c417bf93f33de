/**
 * Shared pieces of the integration tests: real Docker engine, real nginx.
 * Every test fleet gets a unique name; everything it creates carries
 * fleetroll labels with that name and is removed by label afterwards.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import { createServer } from 'node:net';
import { execa } from 'execa';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { DockerRuntime, ensureNetwork, getFile } from '../../src/adapters/docker.js';
import { removeFleetState } from '../../src/adapters/fleetState.js';
import { defaultPeersFile, parsePeers } from '../../src/adapters/nginxDynamic.js';
import { HttpProber } from '../../src/adapters/http.js';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../../src/adapters/localImages.js';
import { PLACEHOLDER_SERVER, parseUpstreamServers } from '../../src/core/upstream.js';
import { DEMO_LABEL, demoNames, startNginx, teardown, waitForHttp, type DemoNames } from '../../src/experiment/rehearse.js';
import { PEERS_MOUNT, stageConfDir } from '../../src/experiment/demoStage.js';
import { ACCESS_LOG } from '../../src/experiment/rehearse.js';
import { LABELS } from '../../src/ports.js';
import type { RequestRecord } from '../../src/experiment/metrics.js';
import { startLoad as startProbeLoad } from '../../src/experiment/probes.js';
import { readDefaultTemplate } from '../../src/wiring.js';
import { reportEnv, reportLeak, superviseExit } from '../support/hang.js';
import { guard, waitFor } from '../support/wait.js';

export const root = fileURLToPath(new URL('../..', import.meta.url));
export const bin = join(root, 'dist/cli/main.js');
export const runtime = new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' });
export const docker = runtime.docker;
export const prober = new HttpProber({ readinessPath: '/health/ready', versionPath: '/api/version', timeoutMs: 1000 });

/**
 * What an instance answers on its version endpoint, asked until it answers
 * (a probe with no answer in 1 s is asked again, 100 ms doubling to 1 s
 * apart, for up to 30 s scaled to the run), else `error: <the last failure>`.
 * An answer is returned as it is, right or wrong: only silence is retried. On
 * a busy machine one try failed for all four instances of a fleet that had
 * just deployed fine.
 */
export async function answeredVersion(address: string): Promise<string> {
  const deadline = Date.now() + guard(30_000);
  let pause = 100;
  for (;;) {
    try {
      return await prober.version(address);
    } catch (e) {
      if (Date.now() + pause > deadline) return `error: ${(e as Error).message}`;
      await new Promise((r) => setTimeout(r, pause));
      pause = Math.min(1000, pause * 2);
    }
  }
}
export const UPSTREAM_FILE = '/etc/nginx/conf.d/upstream.conf';

let images: Promise<{ nginx: string }> | undefined;
/** Builds the example app at 1.0.0 and 1.1.0 and the nginx image, once per test process. */
export function ensureImages(): Promise<{ nginx: string }> {
  images ??= (async () => {
    const base = await ensureNodeBaseImage();
    await buildAppImage({ version: '1.0.0', base });
    await buildAppImage({ version: '1.1.0', base });
    return { nginx: await ensureNginxBaseImage() };
  })();
  return images;
}

let luaImage: Promise<string> | undefined;
/** The nginx image with the Lua module and fleetroll's balancer (the dynamic mode), once per test process. */
export function ensureLuaNginxImage(): Promise<string> {
  luaImage ??= ensureImages().then(() => ensureNginxBaseImage({ lua: true }));
  return luaImage;
}

export function uniqueName(prefix: string): string {
  return `${prefix}-${Math.random().toString(36).slice(2, 7)}`;
}

export interface TestFleet {
  names: DemoNames;
  url: string;
  dir: string;
  /** Writes a fleet file for this fleet and returns its path. */
  fleetFile(opts: FleetFileOptions): string;
  upstream(container?: string): Promise<{ up: number; down: number; content: string }>;
  /** What nginx logged (fleetroll_json lines of ACCESS_LOG), parsed: to tell which request failed where. */
  accessLog(container?: string): Promise<Record<string, string>[]>;
  /** Deploys `replicas` × 1.0.0 (maxSurge 1, maxUnavailable 0) and returns the revision label they carry. */
  at100(replicas?: number): Promise<string>;
  /** A second (third...) nginx on the same network, for HA tests. */
  addLoadBalancer(suffix: string): Promise<{ container: string; url: string }>;
  instances(): ReturnType<DockerRuntime['list']>;
  versions(): Promise<string[]>;
  cleanup(): Promise<void>;
}

export interface FleetFileOptions {
  image?: string;
  replicas?: number;
  maxSurge?: number | string;
  maxUnavailable?: number | string;
  env?: Record<string, string>;
  template?: string;
  drainSeconds?: number;
  progressDeadlineSeconds?: number;
  minReadySeconds?: number;
  version?: string;
  type?: 'RollingUpdate' | 'Recreate' | 'BlueGreen' | 'Canary';
  /** Canary: its block (steps, stickyKey, canaryReplicas), written as given. */
  canary?: Record<string, unknown>;
  /** The analysis: block, written as given. */
  analysis?: Record<string, unknown>;
  /** BlueGreen: seconds the old set is kept after the switch. */
  scaleDownDelaySeconds?: number;
  /** BlueGreen: more of its block (preview, autoPromote), written as given. */
  blueGreen?: Record<string, unknown>;
  replacementPolicy?: 'TerminationStarted' | 'TerminationComplete';
  onFailure?: 'pause' | 'rollback';
  hooks?: Record<string, unknown>;
  /** More load balancers: [container name, upstream name, template?]. */
  extraLoadBalancers?: { container: string; upstream: string; template?: string }[];
  /** Every load balancer's `accessLog:` (default ACCESS_LOG, where startNginx's nginx logs fleetroll_json); false: none. */
  accessLog?: string | false;
  /** Container fields (volumes, user, labels, ...), each written as `key: <JSON>` as given. */
  container?: Record<string, unknown>;
  /** The state: block (state.etcd), written as given. */
  state?: Record<string, unknown>;
}

/**
 * A network and an nginx container (published on 127.0.0.1), ready for a
 * fleet. mode dynamic: nginx with fleetroll's Lua balancer
 * (templates/nginx-dynamic.conf.example), the fleet file's load balancer in
 * mode dynamic, and upstream() reads the peers file.
 */
export async function startTestFleet(prefix: string, o: FleetStart = {}): Promise<TestFleet> {
  const dynamic = o.mode === 'dynamic';
  // The dynamic mode's peers file in a host directory bind-mounted into nginx (written as a plain file), or at its default inside it.
  const peersFile = o.peersDir !== undefined ? `${PEERS_MOUNT}/{upstream}.peers` : undefined;
  const nginx = dynamic ? await ensureLuaNginxImage() : (await ensureImages()).nginx;
  const names = demoNames(uniqueName(prefix));
  await ensureNetwork(docker, names.network, { [DEMO_LABEL]: names.service });
  const port = await startNginx(docker, names, nginx, 0, await readDefaultTemplate(), o.mode, {
    ...(o.confInContainer ? {} : { confDir: stageConfDir(names.nginx) }),
    ...(o.peersDir !== undefined ? { peersDir: o.peersDir } : {}),
  });
  const peers = peersFile?.replace('{upstream}', names.upstream) ?? defaultPeersFile(names.upstream);
  const url = `http://127.0.0.1:${port}`;
  await waitForHttp(url, 10_000);
  const dir = mkdtempSync(join(tmpdir(), `${names.service}-`));
  let n = 0;
  return {
    names,
    url,
    dir,
    fleetFile(o) {
      const strategy =
        o.type === 'Recreate'
          ? 'strategy:\n  type: Recreate\n'
          : o.type === 'BlueGreen'
            ? `strategy:\n  type: BlueGreen\n  blueGreen: ${JSON.stringify({ scaleDownDelaySeconds: o.scaleDownDelaySeconds ?? 30, ...o.blueGreen })}\n`
            : o.type === 'Canary'
              ? `strategy:\n  type: Canary\n  canary: ${JSON.stringify(o.canary ?? { steps: [{ setWeight: 50 }] })}\n  rollingUpdate: { maxSurge: ${JSON.stringify(o.maxSurge ?? 1)}, maxUnavailable: ${JSON.stringify(o.maxUnavailable ?? 0)} }\n`
              : o.maxSurge !== undefined || o.maxUnavailable !== undefined
                ? `strategy:\n  rollingUpdate: { ${[o.maxSurge !== undefined ? `maxSurge: ${JSON.stringify(o.maxSurge)}` : '', o.maxUnavailable !== undefined ? `maxUnavailable: ${JSON.stringify(o.maxUnavailable)}` : ''].filter(Boolean).join(', ')} }\n`
                : '';
      const accessLog = o.accessLog === false ? '' : `      accessLog: ${o.accessLog ?? ACCESS_LOG}\n`;
      const extra = (o.extraLoadBalancers ?? [])
        .map(
          (lb) =>
            `  - nginx:\n      container: ${lb.container}\n      host: local\n      ${dynamic ? 'mode: dynamic' : `upstreamFile: ${UPSTREAM_FILE}`}\n      upstream: ${lb.upstream}\n${lb.template ? `      template: ${lb.template}\n` : ''}${accessLog}`,
        )
        .join('');
      const more = [
        o.minReadySeconds !== undefined ? `minReadySeconds: ${o.minReadySeconds}\n` : '',
        o.version !== undefined ? `version: ${JSON.stringify(o.version)}\n` : '',
        o.onFailure ? `onFailure: ${o.onFailure}\n` : '',
        o.replacementPolicy ? `replacementPolicy: ${o.replacementPolicy}\n` : '',
        o.hooks ? `hooks: ${JSON.stringify(o.hooks)}\n` : '',
        o.analysis ? `analysis: ${JSON.stringify(o.analysis)}\n` : '',
        o.state ? `state: ${JSON.stringify(o.state)}\n` : '',
        ...Object.entries(o.container ?? {}).map(([k, v]) => `${k}: ${JSON.stringify(v)}\n`),
      ].join('');
      const env = { WARMUP_SECONDS: '0.5', PRESTOP_SECONDS: '1', ...o.env };
      const text = `service: ${names.service}
image: ${o.image ?? 'fleetroll-example:1.0.0'}
replicas: ${o.replicas ?? 4}
port: 8080
env: ${JSON.stringify(env)}
hosts:
  - { name: local, docker: "unix:///var/run/docker.sock", network: ${names.network} }
probes:
  readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 }
${strategy}drainSeconds: ${o.drainSeconds ?? 1}
terminationGracePeriodSeconds: 10
progressDeadlineSeconds: ${o.progressDeadlineSeconds ?? 60}
loadBalancers:
  - nginx:
      container: ${names.nginx}
      host: local
      ${dynamic ? `mode: dynamic${peersFile !== undefined ? `\n      peersFile: ${peers}` : ''}` : `upstreamFile: ${UPSTREAM_FILE}`}
      upstream: ${names.upstream}
${o.template ? `      template: ${o.template}\n` : ''}${accessLog}${extra}${more}`;
      const file = join(dir, `fleet-${n++}.yaml`);
      writeFileSync(file, text);
      return file;
    },
    async at100(this: TestFleet, replicas = 3) {
      const r = await runCli(['deploy', '-f', this.fleetFile({ replicas, maxSurge: 1, maxUnavailable: 0 })]);
      assert.equal(r.code, 0, r.stderr);
      const revs = new Set((await this.instances()).map((i) => i.labels[LABELS.revision]));
      assert.equal(revs.size, 1);
      return [...revs][0] ?? '';
    },
    async addLoadBalancer(suffix) {
      const more = { ...names, nginx: `${names.nginx}-${suffix}` };
      // The same mode as the fleet's first nginx (a dynamic fleet's image has the Lua module).
      const p = await startNginx(docker, more, nginx, 0, await readDefaultTemplate(), o.mode, o.confInContainer ? {} : { confDir: stageConfDir(more.nginx) });
      const u = `http://127.0.0.1:${p}`;
      await waitForHttp(u, 10_000);
      return { container: more.nginx, url: u };
    },
    async upstream(container = names.nginx) {
      const content = (await getFile(docker, container, dynamic ? peers : UPSTREAM_FILE)) ?? '';
      const servers = dynamic ? (parsePeers(content)?.servers ?? []) : parseUpstreamServers(content);
      return { up: servers.filter((s) => !s.down).length, down: servers.filter((s) => s.down).length, content };
    },
    async accessLog(container = names.nginx) {
      const text = (await getFile(docker, container, ACCESS_LOG)) ?? '';
      return text.split('\n').flatMap((l) => {
        try {
          return [JSON.parse(l) as Record<string, string>];
        } catch {
          return [];
        }
      });
    },
    instances: () => runtime.list({ [LABELS.service]: names.service }),
    async versions() {
      const list = await runtime.list({ [LABELS.service]: names.service });
      return Promise.all(list.map((i) => answeredVersion(i.address ?? '')));
    },
    async cleanup() {
      await teardown(docker, names);
      await removeFleetState(docker, names.service);
    },
  };
}

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the built CLI without blocking the test (samplers keep running meanwhile); `env` adds to the environment. */
export function runCli(args: string[], opts: { signal?: AbortSignal; env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> {
  return runNode([bin, ...args], opts);
}

/**
 * Runs node with these arguments from the project root, without blocking the
 * test; collects its output. A run that outlives the hang guard is killed and
 * rejects with what kept it open (test/support/hang.ts).
 */
export function runNode(nodeArgs: string[], opts: { signal?: AbortSignal; env?: NodeJS.ProcessEnv } = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const { env, dir } = reportEnv({ ...process.env, ...opts.env });
    const child = spawn(process.execPath, nodeArgs, {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
      ...(opts.signal ? { signal: opts.signal } : {}),
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const unguard = superviseExit(child, `node ${nodeArgs.map(shortPath).join(' ')}`, dir, (why) =>
      reject(new Error(`${why}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`)),
    );
    child.on('error', (err) => {
      unguard();
      reject(err);
    });
    child.on('close', (code) => {
      unguard();
      reportLeak(`node ${nodeArgs.map(shortPath).join(' ')}`, stderr);
      resolve({ code, stdout, stderr });
    });
  });
}

const shortPath = (a: string) => (a.startsWith(root) ? a.slice(root.length) : a);

/**
 * Samples the fleet every `everyMs` while `work` runs: containers running,
 * and servers up in the nginx upstream file.
 */
export async function sampleDuring<T>(
  fleet: TestFleet,
  work: Promise<T>,
  everyMs = 100,
): Promise<{ result: T; maxAlive: number; minUp: number; samples: number }> {
  let done = false;
  let maxAlive = 0;
  let minUp = Number.POSITIVE_INFINITY;
  let samples = 0;
  const loop = (async () => {
    while (!done) {
      const [list, up] = await Promise.all([fleet.instances(), fleet.upstream()]);
      maxAlive = Math.max(maxAlive, list.filter((i) => i.running).length);
      minUp = Math.min(minUp, up.up);
      samples++;
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  try {
    const result = await work;
    return { result, maxAlive, minUp, samples };
  } finally {
    done = true;
    await loop;
  }
}

/**
 * For a test file: builds the images before its tests, and returns
 * `fleet(prefix)`, which starts a test fleet that is removed after them.
 */
/** How a test fleet's nginx is set up: reload or dynamic mode; dynamic with `peersDir`: that host directory bind-mounted for the peers file. */
export interface FleetStart {
  mode?: 'reload' | 'dynamic';
  peersDir?: string;
  /** conf.d inside the nginx container (its files through Docker's archive API), not bind-mounted from this machine. */
  confInContainer?: boolean;
}

export function useFleets(): (prefix: string, o?: FleetStart) => Promise<TestFleet> {
  const fleets: TestFleet[] = [];
  before(async () => {
    await ensureImages();
  });
  after(async () => {
    await Promise.all(fleets.map((f) => f.cleanup()));
  });
  return async (prefix, o) => {
    const f = await startTestFleet(prefix, o);
    fleets.push(f);
    return f;
  };
}

const loads = new Set<ReturnType<typeof startProbeLoad>>();

/**
 * Load from the probes that a failed test cannot leave running: a test that
 * fails before its own `load.stop()` would otherwise keep the file's process
 * (and CI) alive with request timers. Every load still going is stopped when
 * the file's tests end; stop() is idempotent.
 */
export function startLoad(...args: Parameters<typeof startProbeLoad>): ReturnType<typeof startProbeLoad> {
  const load = startProbeLoad(...args);
  loads.add(load);
  return load;
}

after(async () => {
  await Promise.all([...loads].map((l) => l.stop().catch(() => [])));
});

export { guard, waitFor } from '../support/wait.js';

/**
 * Waits until `load` has recorded `n` more requests than it had when called:
 * a measurement window counted in requests, not in guessed milliseconds (on a
 * busy machine a fixed sleep may see none).
 */
export async function moreRequests(load: ReturnType<typeof startProbeLoad>, n: number, what = 'requests', timeoutMs = 20_000): Promise<void> {
  const from = load.snapshot().length;
  await waitFor(`${n} ${what} through nginx (had ${from})`, () => load.snapshot().length >= from + n, timeoutMs, 20);
}

/** Runs load until it has recorded `n` requests, then stops it and returns every record. */
export async function loadOf(
  url: string,
  n: number,
  profile: Parameters<typeof startProbeLoad>[1] = { getPerSecond: 20, postConcurrency: 0 },
): Promise<RequestRecord[]> {
  const load = startLoad(url, profile); // on a timeout, the file's after() stops it
  await moreRequests(load, n);
  return load.stop();
}

/**
 * Each failed request with what nginx logged within a second of it (time,
 * status, the upstream it tried and what that said): the message of an
 * assertion that no request failed, so a failure says which and why.
 * `loadStart` is the load's start on the wall clock (Date.now() - elapsed()).
 */
export async function explainFailed(f: TestFleet, records: RequestRecord[], loadStart: number): Promise<string> {
  const failed = failedOf(records);
  if (failed.length === 0) return 'no request failed';
  const log = await f.accessLog().catch(() => []);
  return `${failed.length} of ${records.length} requests failed:\n${failed
    .map((r) => {
      const at = loadStart + r.t;
      const near = log
        .filter((l) => Math.abs(Number(l.time) * 1000 - at) < 1000)
        .map(
          (l) =>
            `      ${new Date(Number(l.time) * 1000).toISOString()} ${l.method} ${l.uri} → ${l.status} via ${l.upstream_addr || '-'} (${l.upstream_status || '-'}, ${l.request_time} s)`,
        );
      return `  ${new Date(at).toISOString()} ${r.method} ${r.path}: ${r.error ?? `HTTP ${r.status}`} after ${Math.round(r.latencyMs)} ms${r.retried ? ` (resent after ${r.retryError})` : ''}; nginx logged within 1 s:\n${near.join('\n') || '      (nothing)'}`;
    })
    .join('\n')}`;
}

/** Requests a user would call failed: no response, a 4xx/5xx, or a broken body. */
export function failedOf(records: RequestRecord[]): RequestRecord[] {
  return records.filter((x) => x.error !== undefined || x.status === undefined || x.status >= 400);
}

export interface RunningCli {
  child: ReturnType<typeof spawn>;
  /** Resolves with the exit code (null when killed by a signal) and all output. */
  exited: Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** What it printed on stdout so far. */
  stdout(): string;
}

/** Starts the built CLI in the background and resolves once its stdout matches `until`. */
export async function startCliUntil(args: string[], until: RegExp): Promise<RunningCli> {
  const { env, dir } = reportEnv(process.env);
  const child = spawn(process.execPath, [bin, ...args], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], env });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stdout: string; stderr: string }>((res, rej) => {
    const unguard = superviseExit(child, `fleetroll ${args.join(' ')}`, dir, (why) => rej(new Error(`${why}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`)));
    child.on('close', (code) => {
      unguard();
      reportLeak(`fleetroll ${args.join(' ')}`, stderr);
      res({ code, stdout, stderr });
    });
  });
  await new Promise<void>((res, rej) => {
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
      if (until.test(stdout)) res();
    });
    exited.then((r) => rej(new Error(`fleetroll ${args.join(' ')} exited (${r.code}) before printing ${until}:\n${r.stdout}${r.stderr}`)), rej);
  });
  return { child, exited, stdout: () => stdout };
}

/** A free TCP port on 127.0.0.1 (the OS picks it). */
export function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const a = s.address();
      s.close(() => (typeof a === 'object' && a ? res(a.port) : rej(new Error('no port'))));
    });
  });
}

export interface LocalNginx {
  url: string;
  conf: string;
  upstreamFile: string;
  stop(): Promise<void>;
}

/**
 * nginx on this machine (exec placement), its own config and pid in `dir`,
 * on a free 127.0.0.1 port, proxying to one upstream kept in a file that
 * fleetroll rewrites; it starts with the placeholder server.
 */
export async function startLocalNginx(dir: string, upstream: string, workers = 1): Promise<LocalNginx> {
  const port = await freePort();
  const conf = join(dir, 'nginx.conf');
  const upstreamFile = join(dir, 'upstream.conf');
  writeFileSync(upstreamFile, `upstream ${upstream} {\n${PLACEHOLDER_SERVER}\n}\n`);
  writeFileSync(
    conf,
    [
      'daemon on;',
      `worker_processes ${workers};`,
      `pid ${dir}/nginx.pid;`,
      `error_log ${dir}/error.log warn;`,
      'events { worker_connections 256; }',
      'http {',
      '  access_log off;',
      ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((p) => `  ${p}_temp_path ${dir}/${p}_temp;`),
      `  include ${upstreamFile};`,
      `  server { listen 127.0.0.1:${port}; location / { proxy_pass http://${upstream}; proxy_connect_timeout 1s; proxy_next_upstream error timeout; } }`,
      '}',
      '',
    ].join('\n'),
  );
  await execa('/usr/sbin/nginx', ['-c', conf, '-e', `${dir}/error.log`], { stdin: 'ignore' });
  return {
    url: `http://127.0.0.1:${port}`,
    conf,
    upstreamFile,
    stop: async () => {
      await execa('/usr/sbin/nginx', ['-c', conf, '-e', `${dir}/error.log`, '-s', 'stop'], { reject: false, stdin: 'ignore' });
    },
  };
}

/** One GET as user `user` (header X-User, and any `more` headers): the version that answered. */
export function asUser(url: string, user: string, more: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${url}/api/version`, { agent: false, headers: { 'X-User': user, ...more } }, (res) => {
      res.resume();
      res.on('end', () => resolve(String(res.headers['x-app-version'] ?? `status ${res.statusCode}`)));
    });
    req.setTimeout(5000, () => req.destroy(new Error('no answer in 5 s')));
    req.on('error', reject);
  });
}

/** Every user asks twice (with any `more` headers); returns each user's answers. */
export async function askUsers(url: string, users: number, more: Record<string, string> = {}): Promise<Map<string, string[]>> {
  const answers = new Map<string, string[]>();
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < users; i += 20) {
      await Promise.all(
        Array.from({ length: Math.min(20, users - i) }, async (_, j) => {
          const user = `user-${i + j}`;
          const v = await asUser(url, user, more);
          answers.set(user, [...(answers.get(user) ?? []), v]);
        }),
      );
    }
  }
  return answers;
}
