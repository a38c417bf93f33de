/**
 * Integration tests for the adapters against the REAL Docker engine and REAL nginx
 * (run as root after scripts/setup-host.sh):
 *
 *   npx tsx --test test/integration/adapters.test.ts
 *
 * Everything created here carries the label fleetroll.test=adapters and is removed by
 * that label in after(), pass or fail; the private nginx started for NginxExecRouter is
 * stopped by its pid. Traffic goes only to 127.0.0.1 and to containers started here.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { execa } from 'execa';
import { DockerRuntime, dockerOptions, ensureNetwork, execIn, getFile, putFile } from '../../src/adapters/docker.js';
import { SshDockerAgent } from '../../src/adapters/ssh.js';
import { HttpProber } from '../../src/adapters/http.js';
import { buildAppImage, ensureNginxBaseImage, ensureNodeBaseImage } from '../../src/adapters/localImages.js';
import { NginxContainerRouter, RESTORED_EMPTY } from '../../src/adapters/nginx.js';
import { NginxExecRouter } from '../../src/adapters/nginxExec.js';
import { hupMaster, procWorkers } from '../../src/adapters/nginxProc.js';
import { workerSnapshot } from '../../src/adapters/nginxWorkers.js';
import { FleetrollError } from '../../src/errors.js';
import { LABELS as FLEETROLL_LABELS, type InstanceInfo } from '../../src/ports.js';
import { waitFor } from './fixture.js';

const TEST_LABEL = { 'fleetroll.test': 'adapters' };
const RUN = `${process.pid.toString(36)}${Date.now().toString(36).slice(-4)}`;
const LABELS = { ...TEST_LABEL, 'fleetroll.test.run': RUN };
const NET = `fleetroll-adapters-${RUN}`;
const NGINX_BIN = '/usr/sbin/nginx';
const SECRET = 'hunter2-do-not-print';

const runtime = new DockerRuntime({ name: 'local', docker: 'unix:///var/run/docker.sock' });
const docker = runtime.docker;
const prober = new HttpProber({ readinessPath: '/health/ready', versionPath: '/api/version', timeoutMs: 1000 });

let appImage = '';
let nginxImage = '';
let app: InstanceInfo | undefined;
let privateNginx: { dir: string; pidFile: string } | undefined;
const t0 = Date.now();
const figures: string[] = [];
const figure = (what: string, ms: number) => figures.push(`${what}: ${ms} ms`);

// ---------------------------------------------------------------------------------------
// helpers

function httpGet(url: string, timeoutMs = 2000): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers: { Connection: 'close' }, timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms: ${url}`)));
    req.on('error', reject);
  });
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

async function rejectsWith(p: Promise<unknown>, code: string): Promise<FleetrollError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof FleetrollError, `expected a FleetrollError, got ${String(err)}`);
    assert.equal(err.code, code, `expected ${code}, got ${err.code}: ${err.message}`);
    assert.equal(err.exitCode, 1);
    return err;
  }
  assert.fail(`expected a rejection with ${code}`);
}

/** n requests through a proxy; every one must be 200 with the expected version. */
async function allServe(base: string, n: number, version: string): Promise<void> {
  for (let i = 0; i < n; i++) {
    const r = await httpGet(`${base}/api/version`);
    assert.equal(r.status, 200, `request ${i + 1} through ${base}: HTTP ${r.status} ${r.body.slice(0, 200)}`);
    assert.equal(r.body, version);
  }
}

async function cleanup(): Promise<void> {
  const filters = { label: [`fleetroll.test=adapters`] };
  const containers = await docker.listContainers({ all: true, filters });
  await Promise.all(
    containers.map((c) =>
      docker
        .getContainer(c.Id)
        .remove({ force: true, v: true })
        .catch(() => {}),
    ),
  );
  const nets = await docker.listNetworks({ filters });
  for (const n of nets)
    await docker
      .getNetwork(n.Id)
      .remove()
      .catch(() => {});
}

const goodUpstream = (address: string) => `upstream test_api {\n  server ${address} max_fails=1 fail_timeout=2s; # app\n}\n`;
const BROKEN = 'upstream test_api { server ; }\n';
const PLACEHOLDER = 'upstream test_api {\n  server 127.0.0.1:9 down; # placeholder\n  server 127.0.0.1:10;\n}\n';
const SERVER_BLOCK = (listen: string, extra = '') =>
  `server {\n  listen ${listen};\n  location / {\n    proxy_pass http://test_api;\n    proxy_connect_timeout 1s;\n${extra}  }\n}\n`;

// ---------------------------------------------------------------------------------------

before(async () => {
  let t = Date.now();
  await runtime.ping();
  const nodeBase = await ensureNodeBaseImage();
  nginxImage = await ensureNginxBaseImage();
  appImage = await buildAppImage({ version: '1.0.0', base: nodeBase });
  figure('images ready (cached builds)', Date.now() - t);
  await cleanup();
  await ensureNetwork(runtime, NET, LABELS);

  t = Date.now();
  app = await runtime.run({
    name: `fleetroll-adapters-app-${RUN}`,
    image: appImage,
    env: { PRESTOP_SECONDS: '0', SECRET_TOKEN: SECRET },
    port: 8080,
    network: NET,
    labels: { ...LABELS, role: 'app' },
    stopTimeoutSeconds: 5,
  });
  const address = app.address;
  assert.ok(address, 'app has an address');
  const readyMs = await waitFor('app ready', () => prober.ready(address));
  figure('app container run → ready', Date.now() - t);
  figure('  of which readiness polling', readyMs);
});

after(async () => {
  if (privateNginx) {
    const pid = Number((await readFile(privateNginx.pidFile, 'utf8').catch(() => '')).trim());
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGTERM');
      } catch {
        /* already gone */
      }
    }
    await rm(privateNginx.dir, { recursive: true, force: true });
  }
  await cleanup();
  const left = await docker.listContainers({ all: true, filters: { label: ['fleetroll.test=adapters'] } });
  assert.equal(left.length, 0, 'every labelled container removed');
  figures.push(`whole file: ${Date.now() - t0} ms`);
  console.log(`timings\n${figures.map((f) => `  ${f}`).join('\n')}`);
});

describe('DockerRuntime', () => {
  test('ping fails clearly when the engine is not there', async () => {
    const gone = new DockerRuntime({ name: 'nowhere', docker: 'unix:///tmp/fleetroll-no-such.sock' });
    const err = await rejectsWith(gone.ping(), 'E_DOCKER_UNREACHABLE');
    assert.match(err.message, /nowhere/);
    assert.match(err.message, /unix:\/\/\/tmp\/fleetroll-no-such\.sock/);
    assert.match(err.message, /dockerd/);
  });

  test('tcp:// and ssh:// endpoints: options, and unreachable is E_DOCKER_UNREACHABLE', async () => {
    // ssh:// is HTTP over SshDockerAgent's channels (one SSH connection per host).
    const ssh = dockerOptions({ name: 'vm1', docker: 'ssh://deploy@vm1:2222' });
    assert.ok(ssh.agent instanceof SshDockerAgent);
    assert.deepEqual(ssh.agent.target, { host: 'vm1', port: 2222, username: 'deploy' });
    const keyed = dockerOptions({ name: 'vm1', docker: 'ssh://deploy@vm1', ssh: { identityFile: '/etc/fleetroll/vm1_ed25519' } });
    assert.ok(keyed.agent instanceof SshDockerAgent);
    assert.deepEqual(keyed.agent.target, { host: 'vm1', port: 22, username: 'deploy', identityFile: '/etc/fleetroll/vm1_ed25519' });
    assert.deepEqual(
      { ...ssh, agent: undefined },
      {
        socketPath: undefined,
        host: 'vm1',
        port: 2222,
        username: undefined,
        ca: undefined,
        cert: undefined,
        key: undefined,
        agent: undefined,
        pathPrefix: undefined,
        timeout: undefined,
        protocol: 'http',
      },
    );
    const tcp = dockerOptions({ name: 'vm2', docker: 'tcp://vm2' });
    assert.equal(tcp.protocol, 'http');
    assert.equal(tcp.port, '2375');
    assert.throws(
      () => dockerOptions({ name: 'vm3', docker: 'tcp://vm3:2376', tls: { ca: '/nonexistent/ca.pem', cert: '/x', key: '/y' } }),
      (e: unknown) => e instanceof FleetrollError && e.exitCode === 2 && /hosts\[vm3\]\/tls\/ca: cannot read \/nonexistent\/ca\.pem/.test(e.message),
    );
    for (const endpoint of ['tcp://127.0.0.1:1', 'ssh://nobody@127.0.0.1:1']) {
      const err = await rejectsWith(new DockerRuntime({ name: 'closed', docker: endpoint }).ping(2000), 'E_DOCKER_UNREACHABLE');
      assert.match(err.message, /ECONNREFUSED/);
      assert.ok(err.message.includes(endpoint));
    }
  });

  test('rejects an unsupported endpoint as invalid input', () => {
    assert.throws(
      () => new DockerRuntime({ name: 'x', docker: 'http://h:1' }),
      (e: unknown) => e instanceof FleetrollError && e.exitCode === 2,
    );
  });

  test('run / list / address / logs / stop / remove (idempotent)', async () => {
    const name = `fleetroll-adapters-rt-${RUN}`;
    const labels = { ...LABELS, role: 'rt' };
    let t = Date.now();
    const info = await runtime.run({
      name,
      image: appImage,
      env: { PRESTOP_SECONDS: '0', SECRET_TOKEN: SECRET },
      port: 8080,
      network: NET,
      labels,
      stopTimeoutSeconds: 7,
    });
    figure('runtime.run (create+start+inspect)', Date.now() - t);
    assert.equal(info.name, name);
    assert.equal(info.host, 'local');
    assert.equal(info.running, true);
    assert.equal(info.state, 'running');
    assert.match(info.address ?? '', /^\d+\.\d+\.\d+\.\d+:8080$/);
    assert.equal(info.labels[FLEETROLL_LABELS.port], '8080');
    assert.equal(info.labels.role, 'rt');

    const inspected = await docker.getContainer(info.id).inspect();
    assert.equal(inspected.HostConfig.Init, true);
    // Without a restart field the default: Docker restarts a crashed instance, and a capped log.
    assert.equal(inspected.HostConfig.RestartPolicy?.Name, 'unless-stopped');
    assert.deepEqual(inspected.HostConfig.LogConfig, { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } });
    assert.equal((inspected.Config as { StopTimeout?: number }).StopTimeout, 7);
    assert.equal(inspected.NetworkSettings.Networks[NET]?.IPAddress + ':8080', info.address);

    const listed = await runtime.list(labels);
    assert.equal(listed.length, 1);
    assert.equal(listed[0]?.id, info.id);
    assert.equal(listed[0]?.address, info.address);
    assert.equal(listed[0]?.running, true);

    await waitFor('rt ready', () => prober.ready(info.address!));
    assert.match(await runtime.logs(info.id, 10), /listening port=8080/);
    assert.doesNotMatch(await runtime.logs(info.id, 10), /[\x00-\x08]/, 'logs are demultiplexed');

    t = Date.now();
    await runtime.stop(info.id, 5);
    figure('runtime.stop of a ready app (SIGTERM, PRESTOP_SECONDS=0)', Date.now() - t);
    await runtime.stop(info.id, 5); // 304: already stopped
    const stopped = await runtime.list(labels);
    assert.equal(stopped[0]?.running, false);
    assert.equal(stopped[0]?.state, 'exited');
    assert.equal(stopped[0]?.exitCode, 0, 'the app exits 0 on SIGTERM (Init: true forwards it)');
    assert.equal(stopped[0]?.address, undefined);

    await runtime.remove(info.id);
    await runtime.remove(info.id); // 404: already gone
    await runtime.stop(info.id, 1); // 404: gone is success too
    assert.equal(await runtime.logs(info.id, 5), '');
    assert.deepEqual(await runtime.list(labels), []);
  });

  test('a missing image is E_IMAGE_MISSING naming image and host', async () => {
    assert.equal(await runtime.imageExists(appImage), true);
    assert.equal(await runtime.imageExists('fleetroll-no-such-image:0.0.0'), false);
    const err = await rejectsWith(
      runtime.run({
        name: `fleetroll-adapters-noimg-${RUN}`,
        image: 'fleetroll-no-such-image:0.0.0',
        env: { SECRET_TOKEN: SECRET },
        port: 8080,
        labels: LABELS,
        stopTimeoutSeconds: 1,
      }),
      'E_IMAGE_MISSING',
    );
    assert.match(err.message, /fleetroll-no-such-image:0\.0\.0/);
    assert.match(err.message, /local/);
    assert.doesNotMatch(err.message, new RegExp(SECRET));
  });

  test('a name clash is a clear error naming the container, without env values', async () => {
    const err = await rejectsWith(
      runtime.run({ name: app!.name, image: appImage, env: { SECRET_TOKEN: SECRET }, port: 8080, labels: LABELS, stopTimeoutSeconds: 1 }),
      'E_NAME_CONFLICT',
    );
    assert.match(err.message, new RegExp(app!.name));
    assert.match(err.message, /already in use/);
    assert.doesNotMatch(err.message, new RegExp(SECRET));
    assert.doesNotMatch(JSON.stringify(err.cause ?? {}), new RegExp(SECRET));
  });

  test('a missing network fails and leaves no container behind', async () => {
    const name = `fleetroll-adapters-nonet-${RUN}`;
    await rejectsWith(
      runtime.run({ name, image: appImage, env: {}, port: 8080, network: `fleetroll-no-such-net-${RUN}`, labels: LABELS, stopTimeoutSeconds: 1 }),
      'E_NETWORK_MISSING',
    );
    assert.equal((await runtime.list({ ...LABELS })).filter((c) => c.name === name).length, 0);
  });

  test('ensureNetwork is idempotent', async () => {
    const a = await ensureNetwork(runtime, NET, LABELS);
    const b = await ensureNetwork(docker, NET, LABELS);
    assert.equal(a, b);
    const inspected = await docker.getNetwork(a).inspect();
    assert.equal(inspected.Labels?.['fleetroll.test'], 'adapters');
    assert.equal(inspected.Driver, 'bridge');
  });

  test('execIn / putFile / getFile', async () => {
    const r = await execIn(docker, app!.id, ['node', '-e', 'console.log("out"); console.error("err"); process.exit(3)']);
    assert.deepEqual(r, { exitCode: 3, stdout: 'out\n', stderr: 'err\n' });
    const content = 'line one\nzwei – drei\n'.repeat(100);
    await putFile(docker, app!.id, '/tmp/fleetroll-test.txt', content);
    assert.equal(await getFile(docker, app!.id, '/tmp/fleetroll-test.txt'), content);
    assert.equal(await getFile(docker, app!.id, '/tmp/no-such-file'), undefined);
    await rejectsWith(getFile(docker, 'fleetroll-no-such-container', '/tmp/x'), 'E_CONTAINER_MISSING');
    await rejectsWith(execIn(docker, 'fleetroll-no-such-container', ['true']), 'E_CONTAINER_MISSING');
  });
});

describe('HttpProber', () => {
  test('ready and version against a real app container', async () => {
    const t = Date.now();
    assert.equal(await prober.ready(app!.address!), true);
    assert.equal(await prober.version(app!.address!), '1.0.0');
    figure('one ready() + one version() probe', Date.now() - t);
  });

  test('not ready on a closed port, a 404, or a silent server (within the timeout)', async () => {
    const ip = app!.address!.split(':')[0]!;
    assert.equal(await prober.ready(`${ip}:9`), false);
    const bad = new HttpProber({ readinessPath: '/no-such-path', versionPath: '/no-such-path', timeoutMs: 1000 });
    assert.equal(await bad.ready(app!.address!), false);
    const err404 = await rejectsWith(bad.version(app!.address!), 'E_VERSION_PROBE');
    assert.match(err404.message, /HTTP 404/);

    // Accepts connections and never answers.
    const sockets: net.Socket[] = [];
    const silent = net.createServer((s) => sockets.push(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const quick = new HttpProber({ readinessPath: '/', versionPath: '/', timeoutMs: 300 });
      let t = Date.now();
      // A 300 ms timer started beside it is the control: on a busy machine both run late alike.
      const [ready, timerMs] = await Promise.all([quick.ready(`127.0.0.1:${port}`), new Promise<number>((r) => setTimeout(() => r(Date.now() - t), 300))]);
      assert.equal(ready, false);
      const readyMs = Date.now() - t;
      assert.ok(readyMs >= 280 && readyMs < timerMs + 500, `timed out after ${readyMs} ms (a 300 ms timer beside it fired after ${timerMs} ms)`);
      figure('ready() against a silent server, timeoutMs 300', readyMs);
      t = Date.now();
      const err = await rejectsWith(quick.version(`127.0.0.1:${port}`), 'E_VERSION_PROBE');
      assert.match(err.message, new RegExp(`127\\.0\\.0\\.1:${port}`));
      assert.match(err.message, /300 ms/);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => silent.close(r));
    }
    const refused = await rejectsWith(prober.version(`${ip}:9`), 'E_VERSION_PROBE');
    assert.match(refused.message, new RegExp(`${ip.replace(/\./g, '\\.')}:9`));
    assert.match(refused.message, /ECONNREFUSED/);
  });
});

describe('NginxContainerRouter', () => {
  test('writeAndTest + reload routes traffic; a broken upstream is rejected and rolled back', async () => {
    const name = `fleetroll-adapters-nginx-${RUN}`;
    const container = await docker.createContainer({
      name,
      Image: nginxImage,
      Labels: { ...LABELS, role: 'nginx' },
      ExposedPorts: { '80/tcp': {} },
      HostConfig: {
        NetworkMode: NET,
        PortBindings: { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] },
        RestartPolicy: { Name: 'no' },
      },
    });
    // Config goes in before the first start (the image has no shell to write it later).
    await putFile(docker, container.id, '/etc/nginx/conf.d/default.conf', SERVER_BLOCK('80'));
    await putFile(docker, container.id, '/etc/nginx/conf.d/upstream.conf', PLACEHOLDER);
    await container.start();
    const inspected = await container.inspect();
    const hostPort = inspected.NetworkSettings.Ports['80/tcp']?.[0]?.HostPort;
    assert.ok(hostPort, 'port 80 published');
    const base = `http://127.0.0.1:${hostPort}`;
    await waitFor('nginx answering', async () => (await httpGet(`${base}/api/version`)).status === 502);

    const router = new NginxContainerRouter({ runtime, container: name, upstreamFile: '/etc/nginx/conf.d/upstream.conf', hostName: 'local' });
    // nginx -T: every file nginx loads, the user's server block and the upstream file included.
    const dumped = await router.config();
    assert.ok(dumped.includes('# configuration file /etc/nginx/conf.d/upstream.conf:') && dumped.includes('proxy_pass http://test_api;'), dumped.slice(0, 400));
    assert.equal(router.name, `nginx ${name} on local`);
    await router.check();
    assert.equal(await router.read(), PLACEHOLDER);

    const good = goodUpstream(app!.address!);
    let t = Date.now();
    await router.writeAndTest(good);
    figure('container router writeAndTest (putFile + nginx -t via exec)', Date.now() - t);
    t = Date.now();
    await router.reload();
    const took = Date.now() - t;
    figure('container router reload (until every worker is a new one)', took);
    // reload() returns once the new config is in force: the very next requests use it.
    await allServe(base, 10, '1.0.0');
    // Where the change's time went: every part named, the reload's parts within the reload's own time.
    const parts = router.lastChange();
    // nginx is PID 1 of this container: the reload is a SIGHUP through Docker, not an exec of `nginx -s reload`.
    assert.deepEqual(
      Object.keys(parts ?? {})
        .filter((k) => k !== 'handover')
        .sort(),
      ['SIGHUP', 'confirm', 'file', 'nginx -t', 'workers'],
    );
    assert.ok(
      Object.values(parts ?? {}).every((v) => typeof v === 'number' && v >= 0),
      JSON.stringify(parts),
    );
    assert.ok((parts?.workers ?? 0) + (parts?.SIGHUP ?? 0) + (parts?.confirm ?? 0) <= took, `${JSON.stringify(parts)} within ${took} ms`);
    assert.ok((parts?.handover ?? 0) <= (parts?.confirm ?? 0), JSON.stringify(parts));
    assert.equal(await router.read(), good);
    // On this machine's engine the workers are read from /proc (nginxProc.ts): they must be the ones `docker top` lists.
    const pid = (await container.inspect()).State.Pid;
    const top = (await container.top({ ps_args: '-o pid,args' })) as { Titles: string[]; Processes: string[][] };
    const fromProc = await procWorkers(pid);
    assert.ok(fromProc, `/proc/${pid} is nginx's master`);
    assert.deepEqual([...fromProc.workers].sort(), [...workerSnapshot(top.Titles, top.Processes).workers].sort());
    assert.equal(fromProc.master, String(pid));
    assert.equal(await procWorkers(process.pid), undefined, 'a process that is not an nginx master is not taken for one');

    t = Date.now();
    const err = await rejectsWith(router.writeAndTest(BROKEN), 'E_NGINX_TEST');
    figure('container router rejected write (write, test, restore)', Date.now() - t);
    assert.match(err.message, /\[emerg\]/);
    assert.match(err.message, /invalid number of arguments in "server" directive/);
    assert.match(err.message, /upstream\.conf:1/);
    assert.match(err.message, new RegExp(name));
    assert.equal(await router.read(), good, 'the previous content is back');
    await allServe(base, 10, '1.0.0');
    await router.check();
    await router.reload(); // the restored file reloads fine
    await allServe(base, 5, '1.0.0');

    // A router that never read the file: its first write reads it, later ones know what it
    // wrote (no read before a write), and a rejected one puts exactly that back.
    const fresh = new NginxContainerRouter({ runtime, container: name, upstreamFile: '/etc/nginx/conf.d/upstream.conf', hostName: 'local' });
    const good2 = `${good}# written again\n`;
    await fresh.writeAndTest(good2);
    await fresh.reload();
    await rejectsWith(fresh.writeAndTest(BROKEN), 'E_NGINX_TEST');
    assert.equal(await router.read(), good2, 'what the router last wrote is back');
    await fresh.reload(); // no write before it: the workers are asked for here
    await allServe(base, 5, '1.0.0');

    // A file that did not exist: no rm in the image, so it is left comment-only.
    const extra = new NginxContainerRouter({ runtime, container: name, upstreamFile: '/etc/nginx/conf.d/extra.conf', hostName: 'local' });
    assert.equal(await extra.read(), undefined);
    await rejectsWith(extra.writeAndTest(BROKEN.replace('test_api', 'extra_api')), 'E_NGINX_TEST');
    assert.equal(await extra.read(), RESTORED_EMPTY);
    await router.check();

    // Errors for a missing / stopped nginx container.
    const missing = new NginxContainerRouter({
      runtime,
      container: `fleetroll-no-such-nginx-${RUN}`,
      upstreamFile: '/etc/nginx/conf.d/upstream.conf',
      hostName: 'local',
    });
    await rejectsWith(missing.check(), 'E_NGINX_MISSING');
    await rejectsWith(missing.read(), 'E_CONTAINER_MISSING');
    await container.stop({ t: 1 });
    await rejectsWith(router.check(), 'E_NGINX_NOT_RUNNING');
    await rejectsWith(router.reload(), 'E_CONTAINER_NOT_RUNNING');
  });
  test('conf.d bind-mounted from this machine (read-only inside): the file is written there, mode and owner kept; the SIGHUP goes to the verified master', async () => {
    const name = `fleetroll-adapters-nginx-bind-${RUN}`;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fleetroll-confd-'));
    const file = path.join(dir, 'upstream.conf');
    await writeFile(path.join(dir, 'default.conf'), SERVER_BLOCK('80'));
    await writeFile(file, PLACEHOLDER);
    await chmod(file, 0o640);
    await chown(file, 101, 102);
    try {
      // Read-only inside the container: Docker's archive API cannot write there, so a write that lands came the host's way.
      const container = await docker.createContainer({
        name,
        Image: nginxImage,
        Labels: { ...LABELS, role: 'nginx' },
        ExposedPorts: { '80/tcp': {} },
        HostConfig: {
          NetworkMode: NET,
          Binds: [`${dir}:/etc/nginx/conf.d:ro`],
          PortBindings: { '80/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] },
          RestartPolicy: { Name: 'no' },
        },
      });
      await container.start();
      const inspected = await container.inspect();
      const base = `http://127.0.0.1:${inspected.NetworkSettings.Ports['80/tcp']?.[0]?.HostPort}`;
      await waitFor('nginx answering', async () => (await httpGet(`${base}/api/version`)).status === 502);
      await assert.rejects(putFile(docker, name, '/etc/nginx/conf.d/upstream.conf', 'x'), 'the archive API cannot write into the read-only mount');

      const router = new NginxContainerRouter({ runtime, container: name, upstreamFile: '/etc/nginx/conf.d/upstream.conf', hostName: 'local' });
      assert.equal(await router.read(), PLACEHOLDER);
      const good = goodUpstream(app!.address!);
      await router.writeAndTest(good);
      await router.reload();
      await allServe(base, 10, '1.0.0');
      assert.equal(await readFile(file, 'utf8'), good);
      const st = await stat(file);
      assert.deepEqual([st.mode & 0o7777, st.uid, st.gid], [0o640, 101, 102], 'the file written over keeps its mode and owner');
      assert.deepEqual((await readdir(dir)).sort(), ['default.conf', 'upstream.conf'], 'no temp file left beside it');

      await rejectsWith(router.writeAndTest(BROKEN), 'E_NGINX_TEST');
      assert.equal(await readFile(file, 'utf8'), good, 'a rejected write puts the previous content back on the host');
      await allServe(base, 5, '1.0.0');

      // The watch's eject: written and reloaded with no `nginx -t` before it; in force when it returns.
      const down = `upstream test_api {\n  server ${app!.address!} down; # app\n  server 127.0.0.1:10;\n}\n`;
      await router.writeAndReloadTrusted(down);
      assert.equal(await readFile(file, 'utf8'), down);
      assert.deepEqual(
        Object.keys(router.lastChange() ?? {})
          .filter((k) => k !== 'handover')
          .sort(),
        ['SIGHUP', 'confirm', 'file', 'workers'],
        'no nginx -t on the way',
      );
      assert.notEqual((await httpGet(`${base}/api/version`)).status, 200, 'the instance marked down gets no request');
      // One nginx refuses: no new worker shows, `nginx -t` says why, the file is put back, the old config still serves.
      await router.writeAndReloadTrusted(good);
      await allServe(base, 5, '1.0.0');
      const refused = await rejectsWith(router.writeAndReloadTrusted(BROKEN), 'E_NGINX_TEST');
      assert.match(refused.message, /nginx refused the new \/etc\/nginx\/conf\.d\/upstream\.conf \(the previous content was put back\)/);
      assert.match(refused.message, /invalid number of arguments in "server" directive/);
      assert.equal(await readFile(file, 'utf8'), good);
      await allServe(base, 5, '1.0.0');

      // The master's pid is trusted only with its container's id: another id, or a process that is no nginx master, gets no signal.
      const pid = inspected.State.Pid;
      const workersNow = (await procWorkers(pid, inspected.Id))?.workers;
      assert.ok(workersNow && workersNow.size > 0, 'the master with its own container id is read');
      assert.equal(await procWorkers(pid, 'f'.repeat(64)), undefined, "another container's id: not this master");
      assert.equal(await hupMaster(pid, 'f'.repeat(64)), false);
      assert.equal(await hupMaster(process.pid, inspected.Id), false, 'a process that is not an nginx master is not signalled');
      assert.deepEqual((await procWorkers(pid, inspected.Id))?.workers, workersNow, 'nothing was signalled');
      assert.equal(await hupMaster(pid, inspected.Id), true);
      await waitFor('new workers after the SIGHUP', async () => {
        const w = (await procWorkers(pid, inspected.Id))?.workers;
        return !!w && w.size > 0 && [...w].every((x) => !workersNow.has(x));
      });
    } finally {
      await docker
        .getContainer(name)
        .remove({ force: true })
        .catch(() => {});
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('NginxExecRouter', () => {
  test('a private nginx: writeAndTest + reload, broken upstream rejected and rolled back', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'fleetroll-nginx-'));
    const pidFile = path.join(dir, 'nginx.pid');
    privateNginx = { dir, pidFile };
    const port = await freePort();
    const upstreamFile = path.join(dir, 'upstream.conf');
    await mkdir(path.join(dir, 'extra'));
    const conf = path.join(dir, 'nginx.conf');
    await writeFile(
      conf,
      [
        'daemon on;',
        'worker_processes 1;',
        `pid ${pidFile};`,
        `error_log ${dir}/error.log warn;`,
        'events { worker_connections 64; }',
        'http {',
        '  access_log off;',
        ...['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((p) => `  ${p}_temp_path ${dir}/${p}_temp;`),
        `  include ${upstreamFile};`,
        `  include ${dir}/extra/*.conf;`,
        SERVER_BLOCK(`127.0.0.1:${port}`),
        '}',
        '',
      ].join('\n'),
    );
    await writeFile(upstreamFile, PLACEHOLDER);
    const prefixArgs = ['-c', conf, '-p', `${dir}/`, '-e', `${dir}/error.log`];
    let t = Date.now();
    await execa(NGINX_BIN, prefixArgs, { stdin: 'ignore' }); // daemon on: returns once the master runs
    await waitFor('private nginx pid file', async () => existsSync(pidFile));
    figure('private nginx started', Date.now() - t);
    const base = `http://127.0.0.1:${port}`;
    await waitFor('private nginx answering', async () => (await httpGet(`${base}/api/version`)).status === 502);

    const router = new NginxExecRouter({ upstreamFile, nginxBin: NGINX_BIN, prefixArgs });
    await router.check();
    assert.equal(await router.read(), PLACEHOLDER);
    assert.ok((await router.config()).includes(`# configuration file ${upstreamFile}:`), 'nginx -T shows the upstream file');

    const good = goodUpstream(app!.address!);
    t = Date.now();
    await router.writeAndTest(good);
    figure('exec router writeAndTest (tmp + rename + nginx -t)', Date.now() - t);
    t = Date.now();
    await router.reload();
    figure('exec router reload (until every worker is a new one)', Date.now() - t);
    await allServe(base, 10, '1.0.0');

    const err = await rejectsWith(router.writeAndTest(BROKEN), 'E_NGINX_TEST');
    assert.match(err.message, /\[emerg\] invalid number of arguments in "server" directive/);
    assert.match(err.message, new RegExp(`${upstreamFile.replace(/[.]/g, '\\.')}:1`));
    assert.equal(await readFile(upstreamFile, 'utf8'), good, 'the previous content is back');
    assert.deepEqual(
      (await readdir(dir)).filter((f) => f.endsWith('.tmp')),
      [],
      'no temp files left',
    );
    await allServe(base, 10, '1.0.0');
    await router.reload();
    await allServe(base, 5, '1.0.0');

    // A file that did not exist before a failed write is removed again.
    const extraFile = path.join(dir, 'extra', 'new.conf');
    const extra = new NginxExecRouter({ upstreamFile: extraFile, nginxBin: NGINX_BIN, prefixArgs });
    assert.equal(await extra.read(), undefined);
    await rejectsWith(extra.writeAndTest(BROKEN.replace('test_api', 'extra_api')), 'E_NGINX_TEST');
    assert.equal(existsSync(extraFile), false);
    await router.check();

    // A wrong binary is a clear error, not a crash.
    const nobin = new NginxExecRouter({ upstreamFile, nginxBin: '/nonexistent/nginx', prefixArgs });
    const e2 = await rejectsWith(nobin.check(), 'E_NGINX_TEST');
    assert.match(e2.message, /ENOENT|not found|could not run/i);
  });
});
