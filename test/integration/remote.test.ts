/**
 * Docker hosts reached the ways real remote hosts are: tcp:// with TLS client
 * certificates, ssh:// with a key in an ssh-agent, and an image pulled from a
 * registry. Each runs against a real engine started by scripts/second-engine.sh
 * (its own data-root, socket and bridge fr-NAME on this machine), a real sshd,
 * ssh-agent and docker-registry started here on free 127.0.0.1 ports, and nginx
 * routing to container IPs on those bridges (no publishAddress): on this machine,
 * or, for the ssh host, in a container on that host (upstream written and nginx
 * reloaded through the archive and exec APIs over ssh).
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import Dockerode from 'dockerode';
import { DockerRuntime, execIn, getFile, putFile } from '../../src/adapters/docker.js';
import { SshDockerAgent } from '../../src/adapters/ssh.js';
import { removeFleetState } from '../../src/adapters/fleetState.js';
import { parseUpstreamServers } from '../../src/core/upstream.js';
import { LABELS } from '../../src/ports.js';
import { readDefaultTemplate } from '../../src/wiring.js';
import { demoNames, startNginx, teardown, waitForHttp, type DemoNames } from '../../src/experiment/rehearse.js';
import {
  answeredVersion,
  docker,
  ensureImages,
  guard,
  failedOf,
  freePort,
  root,
  runCli,
  runtime,
  startLocalNginx,
  uniqueName,
  UPSTREAM_FILE,
  startLoad,
  waitFor,
} from './fixture.js';

const APP = 'fleetroll-example';
const work = mkdtempSync(join(tmpdir(), 'fleetroll-remote-'));
const children: ChildProcess[] = [];
let stopping = false;
/** Every (runtime, service) a test deployed, for the cleanup. */
const deployed: { rt: DockerRuntime; service: string; names?: DemoNames }[] = [];
const nginxConfs: string[] = [];

const listening = (port: number) =>
  new Promise<boolean>((res) => {
    const s = createConnection(port, '127.0.0.1', () => (s.end(), res(true)));
    s.on('error', () => res(false));
  });

/** A background process of this test, killed in `after`. */
function daemon(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  let err = '';
  child.stderr?.on('data', (d: Buffer) => (err = (err + d.toString()).slice(-4000)));
  child.on('exit', (code) => {
    if (code && !stopping) console.error(`${cmd} exited with ${code}: ${err}`);
  });
  children.push(child);
  return child;
}

/** The built CLI with extra environment (ssh: SSH_AUTH_SOCK, HOME for known_hosts). */
const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, { env });

/** scripts/second-engine.sh start NAME [--tls]: its stdout lines. */
async function engine(name: string, tls = false): Promise<string[]> {
  const r = await execa('bash', [join(root, 'scripts/second-engine.sh'), 'start', name, ...(tls ? ['--tls'] : [])], { stdin: 'ignore' });
  return String(r.stdout).trim().split('\n');
}

/**
 * Removes the app image (every tag, and untagged leftovers) from one of the
 * test's own engines, so that a deploy has to bring it: by copy, or by pull.
 */
async function withoutAppImages(rt: DockerRuntime): Promise<void> {
  for (const img of await rt.docker.listImages()) {
    const tags = (img.RepoTags ?? []).filter((t) => t !== '<none>:<none>');
    if (tags.length === 0)
      await rt.docker
        .getImage(img.Id)
        .remove({ force: true })
        .catch(() => {});
    for (const tag of tags)
      if (tag.includes(`${APP}:`))
        await rt.docker
          .getImage(tag)
          .remove({ force: true })
          .catch(() => {});
  }
}

/** nginx on this machine with one upstream in a file fleetroll rewrites; its loadBalancers entry. */
async function localNginx(upstream: string): Promise<{ url: string; upstreamFile: string; lb: string }> {
  const n = await startLocalNginx(mkdtempSync(join(work, 'nginx-')), upstream);
  nginxConfs.push(n.conf);
  return { url: n.url, upstreamFile: n.upstreamFile, lb: `{ exec: true, config: ${n.conf}, upstreamFile: ${n.upstreamFile}, upstream: ${upstream} }` };
}

interface FleetOpts {
  service: string;
  image: string;
  replicas: number;
  host: string;
  /** The loadBalancers entry's nginx mapping, as YAML. */
  lb: string;
}

function fleetFile(o: FleetOpts): string {
  const text = `service: ${o.service}
image: ${o.image}
replicas: ${o.replicas}
port: 8080
env: { WARMUP_SECONDS: "0.5", PRESTOP_SECONDS: "1" }
hosts:
  - ${o.host}
probes:
  readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 }
strategy:
  rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }
drainSeconds: 1
terminationGracePeriodSeconds: 10
progressDeadlineSeconds: 60
loadBalancers:
  - nginx: ${o.lb}
`;
  const f = join(work, `${o.service}-${Math.random().toString(36).slice(2, 7)}.yaml`);
  writeFileSync(f, text);
  return f;
}

async function running(rt: DockerRuntime, service: string) {
  return (await rt.list({ [LABELS.service]: service })).filter((c) => c.running);
}

async function versionsOn(rt: DockerRuntime, service: string): Promise<string[]> {
  const v: string[] = [];
  for (const c of await running(rt, service)) v.push(await answeredVersion(c.address ?? ''));
  return v.sort();
}

/** The servers nginx routes to, from the upstream file fleetroll wrote. */
function upstreamServers(content: string): string[] {
  return parseUpstreamServers(content)
    .filter((s) => !s.down)
    .map((s) => s.address)
    .sort();
}

/** The /24 second-engine.sh gives engine NAME's bridge fr-NAME. */
async function bridgePrefix(name: string): Promise<string> {
  const r = await execa('ip', ['-4', '-o', 'addr', 'show', 'dev', `fr-${name}`]);
  const m = /inet (10\.213\.\d+)\.1\//.exec(String(r.stdout));
  assert.ok(m, `fr-${name} has a 10.213.x.1 address: ${r.stdout}`);
  return m[1]!;
}

before(async () => {
  await ensureImages();
});

after(async () => {
  for (const conf of nginxConfs) await execa('/usr/sbin/nginx', ['-c', conf, '-s', 'stop'], { reject: false, stdin: 'ignore' });
  for (const { rt, service, names } of deployed) {
    if (names) await teardown(rt.docker, names).catch(() => {});
    const list = await rt.list({ [LABELS.service]: service }).catch(() => []);
    await Promise.all(
      list.map((c) =>
        rt.docker
          .getContainer(c.id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
    await removeFleetState(rt.docker, service).catch(() => {});
    await withoutAppImages(rt).catch(() => {});
  }
  stopping = true;
  for (const c of children) c.kill();
  rmSync(work, { recursive: true, force: true });
});

describe('tcp:// with TLS', { timeout: guard(240_000) }, () => {
  let rt: DockerRuntime;
  let endpoint = '';
  let certs = '';
  const service = uniqueName('it-tls');
  let nginx: Awaited<ReturnType<typeof localNginx>>;
  const host = (tls: { ca: string; cert: string; key: string }) =>
    `{ name: tls, docker: "${endpoint}", tls: { ca: ${tls.ca}, cert: ${tls.cert}, key: ${tls.key} } }`;
  const good = () => ({ ca: `${certs}/ca.pem`, cert: `${certs}/cert.pem`, key: `${certs}/key.pem` });
  const file = (image: string, tls = good()) => fleetFile({ service, image, replicas: 2, host: host(tls), lb: nginx.lb });

  before(async () => {
    [endpoint = '', certs = ''] = await engine('tls', true);
    assert.match(endpoint, /^tcp:\/\/127\.0\.0\.1:\d+$/);
    rt = new DockerRuntime({ name: 'tls', docker: endpoint, tls: good() });
    deployed.push({ rt, service });
    await withoutAppImages(rt);
    nginx = await localNginx('tls_api');
  });

  it('deploys through a TLS engine (image copied over TLS) and rolls it under load with zero failed requests, nginx routing to container IPs on its bridge', async () => {
    let t = Date.now();
    const first = await cli(['deploy', '-f', file(`${APP}:1.0.0`)]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.match(first.stdout, /copied image fleetroll-example:1\.0\.0 (from this machine )?to host tls: [\d.]+ MB/);
    console.log(`tls: first deploy (2 instances, image copied) ${Date.now() - t} ms`);
    assert.deepEqual(await versionsOn(rt, service), ['1.0.0', '1.0.0']);

    const load = startLoad(nginx.url, { getPerSecond: 20, postConcurrency: 2 });
    t = Date.now();
    const r = await cli(['deploy', '-f', file(`${APP}:1.1.0`)]);
    const records = await load.stop();
    assert.equal(r.code, 0, r.stdout + r.stderr);
    console.log(`tls: rolling update under load ${Date.now() - t} ms, ${records.length} requests, ${failedOf(records).length} failed`);
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
    assert.ok(records.length > 40, `only ${records.length} requests`);
    assert.deepEqual(await versionsOn(rt, service), ['1.1.0', '1.1.0']);

    // No publishAddress: the upstream lists the containers' IPs on fr-tls, which this machine routes to.
    const prefix = await bridgePrefix('tls');
    const servers = upstreamServers(readFileSync(nginx.upstreamFile, 'utf8'));
    assert.equal(servers.length, 2, readFileSync(nginx.upstreamFile, 'utf8'));
    for (const s of servers) assert.ok(s.startsWith(`${prefix}.`) && s.endsWith(':8080'), `${s} is a container IP on fr-tls (${prefix}.0/24)`);
    assert.deepEqual(servers, (await running(rt, service)).map((c) => c.address).sort());
  });

  it('a wrong CA, or a client certificate the engine does not trust, fails in preflight naming the host; nothing changes', async () => {
    const ids = (await running(rt, service)).map((c) => c.id).sort();
    const upstreamBefore = readFileSync(nginx.upstreamFile, 'utf8');
    // A CA and a client certificate of another authority than the engine's.
    const other = join(work, 'other-ca');
    mkdirSync(other);
    const ssl = (args: string[]) => execa('openssl', args, { cwd: other, stdin: 'ignore' });
    await ssl([
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:P-256',
      '-nodes',
      '-keyout',
      'ca-key.pem',
      '-out',
      'ca.pem',
      '-subj',
      '/CN=not the engine CA',
      '-days',
      '1',
    ]);
    await ssl(['req', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'key.pem', '-out', 'client.csr', '-subj', '/CN=stranger']);
    await ssl(['x509', '-req', '-in', 'client.csr', '-CA', 'ca.pem', '-CAkey', 'ca-key.pem', '-CAcreateserial', '-days', '1', '-out', 'cert.pem']);

    const cases = [
      { what: 'wrong CA', tls: { ...good(), ca: join(other, 'ca.pem') }, why: /not signed by tls\.ca/ },
      {
        what: 'untrusted client certificate',
        tls: { ...good(), cert: join(other, 'cert.pem'), key: join(other, 'key.pem') },
        why: /client certificate|tls\.cert/,
      },
    ];
    for (const c of cases) {
      const t = Date.now();
      const r = await cli(['deploy', '-f', file(`${APP}:1.0.0`, c.tls)]);
      console.log(`tls: ${c.what} refused in ${Date.now() - t} ms: ${r.stderr.trim().split('\n').slice(1, 2).join(' ').trim()}`);
      assert.equal(r.code, 1, `${c.what}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /preflight failed, nothing was changed/, c.what);
      assert.match(r.stderr, new RegExp(`Docker host tls \\(${endpoint.replace(/[.:/]/g, '\\$&')}\\)`), c.what);
      assert.match(r.stderr, c.why, c.what);
    }
    assert.deepEqual((await running(rt, service)).map((c) => c.id).sort(), ids);
    assert.equal(readFileSync(nginx.upstreamFile, 'utf8'), upstreamBefore);
    assert.deepEqual(await versionsOn(rt, service), ['1.1.0', '1.1.0']);
  });
});

describe('ssh://', { timeout: guard(480_000) }, () => {
  let rt: DockerRuntime;
  let port = 0;
  let dir = '';
  /** HOME for the CLI: ~/.ssh/known_hosts with the sshd's host key. */
  let home = '';
  let agentSock = '';
  let sshdLog = '';
  /** An in-process SSH connection of a test, closed in `after` even when the test times out. */
  let agent: SshDockerAgent | undefined;
  const service = uniqueName('it-ssh');
  /** nginx in a container on the same engine (default bridge, port published on 127.0.0.1): fleetroll writes its upstream and reloads it over ssh. */
  const names = { ...demoNames(service), network: 'bridge' };
  let url = '';
  const upstream = async () => (await getFile(rt.docker, names.nginx, UPSTREAM_FILE)) ?? '';
  const file = (image: string, identityFile?: string) =>
    fleetFile({
      service,
      image,
      replicas: 2,
      host: `{ name: vm, docker: "ssh://root@127.0.0.1:${port}"${identityFile ? `, ssh: { identityFile: ${identityFile} }` : ''} }`,
      lb: `{ container: ${names.nginx}, host: vm, upstreamFile: ${UPSTREAM_FILE}, upstream: ${names.upstream} }`,
    });
  const accepted = () => (readFileSync(sshdLog, 'utf8').match(/Accepted publickey for root/g) ?? []).length;
  const keygen = (f: string) => execa('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', 'fleetroll-test', '-f', f], { stdin: 'ignore' });
  const homeWith = (name: string, knownHosts: string) => {
    const h = join(dir, name);
    mkdirSync(join(h, '.ssh'), { recursive: true });
    writeFileSync(join(h, '.ssh/known_hosts'), knownHosts);
    return h;
  };

  // Once (in CI) this setup ended with "the event loop has already resolved"
  // and a promise still pending, 0.4 s in, and it has not happened since: the
  // interval keeps the loop alive so that a hang fails as a timeout instead,
  // and the step lines say where it was.
  before(
    async () => {
      const alive = setInterval(() => {}, 1000);
      try {
        await sshSetup();
      } finally {
        clearInterval(alive);
      }
    },
    { timeout: guard(120_000) },
  );

  async function sshSetup(): Promise<void> {
    const step = (what: string) => console.log(`ssh setup: ${what}`);
    step('engine');
    // The engine behind the ssh host: sshd sets DOCKER_HOST for the session, so
    // the docker CLI there (`docker system dial-stdio`) talks to it.
    const [socket = ''] = await engine('ssh');
    rt = new DockerRuntime({ name: 'vm', docker: socket });
    deployed.push({ rt, service, names });
    step('images');
    await withoutAppImages(rt);
    const { nginx: nginxImage } = await ensureImages();
    if (!(await rt.imageExists(nginxImage))) await rt.loadImage(await runtime.saveImage(nginxImage));
    step('nginx');
    url = `http://127.0.0.1:${await startNginx(rt.docker, names, nginxImage, 0, await readDefaultTemplate())}`;
    await waitForHttp(url, 10_000);

    step('keys');
    dir = mkdtempSync(join(work, 'ssh-'));
    port = await freePort();
    await keygen(join(dir, 'host_key'));
    await keygen(join(dir, 'id'));
    writeFileSync(join(dir, 'authorized_keys'), readFileSync(join(dir, 'id.pub')));
    sshdLog = join(dir, 'sshd.log');
    writeFileSync(sshdLog, '');
    writeFileSync(
      join(dir, 'sshd_config'),
      [
        `Port ${port}`,
        'ListenAddress 127.0.0.1',
        `HostKey ${dir}/host_key`,
        `PidFile ${dir}/sshd.pid`,
        `AuthorizedKeysFile ${dir}/authorized_keys`,
        'PermitRootLogin prohibit-password',
        'PasswordAuthentication no',
        'KbdInteractiveAuthentication no',
        'UsePAM no',
        // The key files live under /tmp (mode 1777), which StrictModes refuses.
        'StrictModes no',
        `SetEnv DOCKER_HOST=${socket}`,
        'LogLevel VERBOSE',
        '',
      ].join('\n'),
    );
    step('sshd');
    mkdirSync('/run/sshd', { recursive: true }); // its privilege separation directory
    daemon('/usr/sbin/sshd', ['-D', '-f', join(dir, 'sshd_config'), '-E', sshdLog]);
    await waitFor(`sshd on 127.0.0.1:${port}`, () => listening(port));

    step('ssh-agent');
    agentSock = join(dir, 'agent.sock');
    daemon('ssh-agent', ['-D', '-a', agentSock]);
    await waitFor('ssh-agent', async () => (await execa('ssh-add', ['-l'], { env: { SSH_AUTH_SOCK: agentSock }, reject: false })).exitCode === 1);
    await execa('ssh-add', ['-q', join(dir, 'id')], { env: { SSH_AUTH_SOCK: agentSock }, stdin: 'ignore' });

    const hostKey = readFileSync(join(dir, 'host_key.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
    home = homeWith('home', `[127.0.0.1]:${port} ${hostKey}\n`);
  }

  after(() => agent?.destroy());

  it('deploys through ssh://root@host:port with the key in an ssh-agent, over one SSH connection: image copied, rolled under load with zero failed requests', async () => {
    const env = { SSH_AUTH_SOCK: agentSock, HOME: home };
    let t = Date.now();
    let before = accepted();
    const first = await cli(['deploy', '-f', file(`${APP}:1.0.0`)], env);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.match(first.stdout, /copied image fleetroll-example:1\.0\.0 to host vm: [\d.]+ MB/);
    console.log(`ssh: first deploy (2 instances, image copied over ssh) ${Date.now() - t} ms, ${accepted() - before} SSH connection(s)`);
    assert.equal(accepted() - before, 1, 'one SSH connection carried the whole deploy');
    assert.deepEqual(await versionsOn(rt, service), ['1.0.0', '1.0.0']);

    const load = startLoad(url, { getPerSecond: 20, postConcurrency: 2 });
    t = Date.now();
    before = accepted();
    const r = await cli(['deploy', '-f', file(`${APP}:1.1.0`)], env);
    const records = await load.stop();
    assert.equal(r.code, 0, r.stdout + r.stderr);
    console.log(
      `ssh: rolling update under load ${Date.now() - t} ms, ${records.length} requests, ${failedOf(records).length} failed, ${accepted() - before} SSH connection(s)`,
    );
    assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
    assert.ok(records.length > 40, `only ${records.length} requests`);
    assert.equal(accepted() - before, 1);
    assert.deepEqual(await versionsOn(rt, service), ['1.1.0', '1.1.0']);
    const prefix = await bridgePrefix('ssh');
    const servers = upstreamServers(await upstream());
    assert.equal(servers.length, 2);
    for (const s of servers) assert.ok(s.startsWith(`${prefix}.`), `${s} is a container IP on fr-ssh (${prefix}.0/24)`);
    assert.equal(await answeredVersion(new URL(url).host), '1.1.0', 'served through the nginx container');
  });

  it(
    'exec and file copy over ssh: 12 concurrent execs in the nginx container all finish with their output and exit code, on one SSH connection',
    { timeout: guard(120_000) },
    async () => {
      agent = new SshDockerAgent({ host: '127.0.0.1', port, username: 'root' }, { SSH_AUTH_SOCK: agentSock }, [join(home, '.ssh/known_hosts')]);
      const remote = new Dockerode({ protocol: 'http', host: '127.0.0.1', port, agent } as Dockerode.DockerOptions);
      const before = accepted();
      const t = Date.now();
      try {
        // nginx-base has no shell: `nginx -t` passes (exit 0), with a missing config it fails (exit 1); both talk on stderr.
        const runs = await Promise.all(
          Array.from({ length: 12 }, (_, i) => execIn(remote, names.nginx, i % 2 ? ['nginx', '-t', '-c', `/nonexistent-${i}.conf`] : ['nginx', '-t'])),
        );
        runs.forEach((r, i) => {
          if (i % 2) {
            assert.equal(r.exitCode, 1, r.stderr);
            assert.match(r.stderr, new RegExp(`nonexistent-${i}\\.conf`));
          } else {
            assert.equal(r.exitCode, 0, r.stderr);
            assert.match(r.stderr, /syntax is ok/);
          }
        });
        await Promise.all(Array.from({ length: 6 }, (_, i) => putFile(remote, names.nginx, `/tmp/f${i}.txt`, `content ${i}`)));
        assert.deepEqual(
          await Promise.all(Array.from({ length: 6 }, (_, i) => getFile(remote, names.nginx, `/tmp/f${i}.txt`))),
          Array.from({ length: 6 }, (_, i) => `content ${i}`),
        );
      } finally {
        agent.destroy();
        agent = undefined;
      }
      console.log(`ssh: 12 concurrent execs + 12 file copies in ${Date.now() - t} ms, ${accepted() - before} SSH connection(s)`);
      assert.equal(accepted() - before, 1);
    },
  );

  it('without an ssh-agent, uses ~/.ssh/id_ed25519 (a deploy of the current spec changes nothing)', async () => {
    const ids = (await running(rt, service)).map((c) => c.id).sort();
    const keyHome = homeWith('keyfile', readFileSync(join(home, '.ssh/known_hosts'), 'utf8'));
    writeFileSync(join(keyHome, '.ssh/id_ed25519'), readFileSync(join(dir, 'id')), { mode: 0o600 });
    const before = accepted();
    const r = await cli(['deploy', '-f', file(`${APP}:1.1.0`)], { SSH_AUTH_SOCK: '', HOME: keyHome });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(accepted() - before, 1);
    assert.deepEqual((await running(rt, service)).map((c) => c.id).sort(), ids);
  });

  it('with ssh.identityFile, logs in with that key only: a key at its own path works, a key the host does not accept fails in preflight naming it', async () => {
    const ids = (await running(rt, service)).map((c) => c.id).sort();
    // No agent and no ~/.ssh/id_*: only the named file can log in.
    const bare = homeWith('bare', readFileSync(join(home, '.ssh/known_hosts'), 'utf8'));
    mkdirSync(join(dir, 'keys'), { recursive: true });
    const deployKey = join(dir, 'keys', 'deploy_key');
    writeFileSync(deployKey, readFileSync(join(dir, 'id')), { mode: 0o600 });
    const before = accepted();
    const ok = await cli(['deploy', '-f', file(`${APP}:1.1.0`, deployKey)], { SSH_AUTH_SOCK: '', HOME: bare });
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);
    assert.equal(accepted() - before, 1);

    const wrongKey = join(dir, 'keys', 'not_authorized');
    await keygen(wrongKey);
    // Even with the agent holding the right key: identityFile is the only one tried.
    const refused = await cli(['deploy', '-f', file(`${APP}:1.0.0`, wrongKey)], { SSH_AUTH_SOCK: agentSock, HOME: bare });
    assert.equal(refused.code, 1, refused.stdout + refused.stderr);
    assert.match(refused.stderr, /preflight failed, nothing was changed/);
    assert.match(refused.stderr, new RegExp(`authentication as root failed with ssh\\.identityFile ${wrongKey.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`));
    assert.deepEqual((await running(rt, service)).map((c) => c.id).sort(), ids);
  });

  it('refuses a host key that is unknown or changed, and fails without credentials: preflight names the host, nothing changes', async () => {
    const ids = (await running(rt, service)).map((c) => c.id).sort();
    const upstreamBefore = await upstream();
    await keygen(join(dir, 'other_key'));
    const otherKey = readFileSync(join(dir, 'other_key.pub'), 'utf8').split(' ').slice(0, 2).join(' ');
    const cases = [
      {
        what: 'changed host key',
        env: { SSH_AUTH_SOCK: agentSock, HOME: homeWith('changed', `[127.0.0.1]:${port} ${otherKey}\n`) },
        why: /host key of \[127\.0\.0\.1\]:\d+ does not match/,
      },
      { what: 'unknown host', env: { SSH_AUTH_SOCK: agentSock, HOME: homeWith('unknown', `[127.0.0.1]:1 ${otherKey}\n`) }, why: /not in known_hosts/ },
      { what: 'no agent, no key', env: { SSH_AUTH_SOCK: '', HOME: home }, why: /authentication as root failed/ },
    ];
    for (const c of cases) {
      const t = Date.now();
      const r = await cli(['deploy', '-f', file(`${APP}:1.0.0`)], c.env);
      console.log(`ssh: ${c.what} refused in ${Date.now() - t} ms: ${r.stderr.trim().split('\n').slice(1, 2).join(' ').trim()}`);
      assert.equal(r.code, 1, `${c.what}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /preflight failed, nothing was changed/, c.what);
      assert.match(r.stderr, new RegExp(`Docker host vm \\(ssh://root@127\\.0\\.0\\.1:${port}\\)`), c.what);
      assert.match(r.stderr, c.why, c.what);
    }
    assert.deepEqual((await running(rt, service)).map((c) => c.id).sort(), ids);
    assert.equal(await upstream(), upstreamBefore);
  });
});

describe('pulling from a registry', { timeout: guard(240_000) }, () => {
  let rt: DockerRuntime;
  let socket = '';
  let registry = '';
  const service = uniqueName('it-reg');
  let nginx: Awaited<ReturnType<typeof localNginx>>;
  const file = (image: string) => fleetFile({ service, image, replicas: 2, host: `{ name: reg, docker: "${socket}" }`, lb: nginx.lb });

  /** The JSON progress messages of a push/pull stream; throws on one that reports an error. */
  async function progress(stream: NodeJS.ReadableStream): Promise<{ status?: string; error?: string }[]> {
    let text = '';
    for await (const chunk of stream) text += chunk.toString();
    const msgs = text
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as { status?: string; error?: string });
    const failed = msgs.find((m) => m.error);
    if (failed) throw new Error(failed.error);
    return msgs;
  }

  before(async () => {
    [socket = ''] = await engine('reg');
    rt = new DockerRuntime({ name: 'reg', docker: socket });
    deployed.push({ rt, service });
    await withoutAppImages(rt);
    nginx = await localNginx('reg_api');

    // docker-registry (distribution 2.8) with its storage in a temp dir, on a free loopback port:
    // dockerd trusts 127.0.0.0/8 registries over plain HTTP without configuration.
    const dir = mkdtempSync(join(work, 'registry-'));
    const port = await freePort();
    registry = `127.0.0.1:${port}`;
    writeFileSync(
      join(dir, 'config.yml'),
      `version: 0.1\nlog: { level: warn }\nstorage:\n  filesystem: { rootdirectory: ${dir}/data }\n  delete: { enabled: true }\nhttp:\n  addr: ${registry}\n`,
    );
    daemon('docker-registry', ['serve', join(dir, 'config.yml')]);
    await waitFor(`docker-registry on ${registry}`, async () => (await fetch(`http://${registry}/v2/`)).ok);

    // The app image goes into the registry from this machine's engine; the reg engine has none of it.
    const t = Date.now();
    await docker.getImage(`${APP}:1.0.0`).tag({ repo: `${registry}/${APP}`, tag: '1.0.0' });
    const msgs = await progress((await docker.getImage(`${registry}/${APP}:1.0.0`).push({ authconfig: {} })) as NodeJS.ReadableStream); // no auth: the header must be there all the same
    assert.ok(
      msgs.some((m) => /digest: sha256:/.test(m.status ?? '')),
      'pushed',
    );
    console.log(`registry: pushed ${APP}:1.0.0 to ${registry} in ${Date.now() - t} ms`);
    assert.equal(await rt.imageExists(`${registry}/${APP}:1.0.0`), false);
  });

  after(async () => {
    // Only the tag made for the push: the image stays on this machine's engine.
    await docker
      .getImage(`${registry}/${APP}:1.0.0`)
      .remove()
      .catch(() => {});
  });

  it('preflight pulls the image onto a host that lacks it (--no-image-copy) and the instances serve it', async () => {
    const image = `${registry}/${APP}:1.0.0`;
    const t = Date.now();
    const r = await cli(['deploy', '-f', file(image), '--no-image-copy']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    console.log(`registry: deploy with pull (2 instances) ${Date.now() - t} ms`);
    assert.match(r.stdout, new RegExp(`pulled image ${image.replace(/[.:/]/g, '\\$&')} on host reg`));
    assert.doesNotMatch(r.stdout, /copied image/);
    assert.equal(await rt.imageExists(image), true);
    assert.deepEqual(await versionsOn(rt, service), ['1.0.0', '1.0.0']);
    assert.equal(await answeredVersion(new URL(nginx.url).host), '1.0.0', 'served through nginx');
    const prefix = await bridgePrefix('reg');
    for (const s of upstreamServers(readFileSync(nginx.upstreamFile, 'utf8'))) assert.ok(s.startsWith(`${prefix}.`), `${s} is a container IP on fr-reg`);
  });

  it('an image the registry does not have fails in preflight naming the host and the image; nothing changes', async () => {
    const ids = (await running(rt, service)).map((c) => c.id).sort();
    const image = `${registry}/${APP}:9.9.9`;
    const r = await cli(['deploy', '-f', file(image), '--no-image-copy']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /preflight failed, nothing was changed/);
    assert.match(r.stderr, new RegExp(`image ${image.replace(/[.:/]/g, '\\$&')} is not present on host reg`));
    // With the engine's own reason.
    assert.match(r.stdout, /could not pull image .*9\.9\.9 on host reg: .*(not found|manifest unknown)/i);
    assert.deepEqual((await running(rt, service)).map((c) => c.id).sort(), ids);
    assert.deepEqual(await versionsOn(rt, service), ['1.0.0', '1.0.0']);
  });
});
