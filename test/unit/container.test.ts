/**
 * The container fields of a fleet file, one named row per field:
 * what the fleet file says, what validation makes of it (or the path and
 * message it refuses it with, exit 2), and what reaches Docker in the
 * Engine API's create body.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import { containerConfigOf } from '../../src/config/container.js';
import { composeDurationSeconds } from '../../src/config/containerRuntime.js';
import { parseBytes, splitWords } from '../../src/config/containerValues.js';
import { bindSources, CONTAINER_DEFAULTS, dockerCreateBody, namedVolumes, type ContainerConfig, type CreateBase } from '../../src/core/container.js';
import { ValidationError } from '../../src/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-ctests-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const FLEET_FILE = join(dir, 'fleet.yaml');
mkdirSync(join(dir, 'secrets'));
writeFileSync(join(dir, 'secrets', 'db.txt'), 'not-a-real-password\n');
writeFileSync(join(dir, 'api.env'), 'FROM_FILE=file-value\nSHARED=from-file\n');

const BASE = { service: 'api', image: 'api:1.0.0', replicas: 1, port: 8080 };
const NO_VARS = () => undefined;

function load(fields: Record<string, unknown>, vars: Record<string, string> = {}): Promise<Fleet> {
  return fleetFromObject({ ...BASE, ...fields }, FLEET_FILE, {}, (n) => vars[n]);
}

/** The issues of a refused fleet, after checking it is refused the way the CLI exits 2. */
async function refusal(fields: Record<string, unknown>, vars: Record<string, string> = {}): Promise<{ path: string; message: string }[]> {
  try {
    await load(fields, vars);
  } catch (err) {
    assert.ok(err instanceof ValidationError, `expected a ValidationError, got ${String(err)}`);
    assert.equal(err.exitCode, 2);
    return [...err.issues];
  }
  return assert.fail(`expected ${JSON.stringify(fields)} to be refused`);
}

const CREATE: CreateBase = {
  name: 'api-abc123-1',
  image: 'api:1.0.0',
  env: { A: '1' },
  labels: { 'fleetroll.service': 'api' },
  port: 8080,
  network: 'bridge',
  stopTimeoutSeconds: 30,
};

function bodyOf(f: Fleet): Record<string, unknown> & { HostConfig: Record<string, unknown> } {
  return dockerCreateBody({ ...CREATE, secretSources: f.secretSources }, f.container) as Record<string, unknown> & { HostConfig: Record<string, unknown> };
}

interface Accepted {
  name: string;
  fields: Record<string, unknown>;
  vars?: Record<string, string>;
  /** The normalized container config (deepEqual on fleet.container). */
  config?: ContainerConfig;
  /** Top-level create-body keys (deepEqual each). */
  body?: Record<string, unknown>;
  /** HostConfig keys (deepEqual each). */
  host?: Record<string, unknown>;
  /** Keys that must not be in the body ("HostConfig.X" for HostConfig's). */
  absent?: string[];
}

interface Refused {
  name: string;
  fields: Record<string, unknown>;
  vars?: Record<string, string>;
  path: string;
  message: RegExp;
}

const ACCEPTED: Accepted[] = [
  // command / entrypoint
  {
    name: 'command: a string is split into words like compose (quotes, backslashes; no shell)',
    fields: { command: 'node "my server.mjs" --name a\\ b' },
    config: { command: ['node', 'my server.mjs', '--name', 'a b'] },
    body: { Cmd: ['node', 'my server.mjs', '--name', 'a b'] },
  },
  {
    name: 'command: a list is taken as the argv',
    fields: { command: ['node', 'server.mjs'] },
    config: { command: ['node', 'server.mjs'] },
    body: { Cmd: ['node', 'server.mjs'] },
  },
  { name: 'entrypoint: a list', fields: { entrypoint: ['/bin/app'] }, config: { entrypoint: ['/bin/app'] }, body: { Entrypoint: ['/bin/app'] } },
  { name: 'entrypoint: a string', fields: { entrypoint: '/bin/app --flag' }, body: { Entrypoint: ['/bin/app', '--flag'] } },
  // workingDir / user
  { name: 'workingDir', fields: { workingDir: '/app' }, config: { workingDir: '/app' }, body: { WorkingDir: '/app' } },
  { name: 'user: UID:GID', fields: { user: '1000:1000' }, config: { user: '1000:1000' }, body: { User: '1000:1000' } },
  { name: 'user: a name', fields: { user: 'node' }, body: { User: 'node' } },
  // volumes
  {
    name: 'volumes: short bind, read-only',
    fields: { volumes: ['/srv/conf/app.conf:/etc/app/app.conf:ro'] },
    config: { mounts: [{ type: 'bind', source: '/srv/conf/app.conf', target: '/etc/app/app.conf', readOnly: true }] },
    host: { Mounts: [{ Type: 'bind', Source: '/srv/conf/app.conf', Target: '/etc/app/app.conf', ReadOnly: true }] },
    absent: ['HostConfig.Binds'],
  },
  {
    name: 'volumes: short bind, rw by default',
    fields: { volumes: ['/srv/data:/data'] },
    host: { Mounts: [{ Type: 'bind', Source: '/srv/data', Target: '/data', ReadOnly: false }] },
  },
  {
    name: 'volumes: short named volume',
    fields: { volumes: ['uploads:/var/lib/app'] },
    host: { Mounts: [{ Type: 'volume', Source: 'uploads', Target: '/var/lib/app', ReadOnly: false }] },
  },
  {
    name: 'volumes: short named volume with nocopy',
    fields: { volumes: ['uploads:/data:ro,nocopy'] },
    host: { Mounts: [{ Type: 'volume', Source: 'uploads', Target: '/data', ReadOnly: true, VolumeOptions: { NoCopy: true } }] },
  },
  {
    name: 'volumes: long bind',
    fields: { volumes: [{ type: 'bind', source: '/srv/x', target: '/x', readOnly: true }] },
    host: { Mounts: [{ Type: 'bind', Source: '/srv/x', Target: '/x', ReadOnly: true }] },
  },
  {
    name: 'volumes: long volume with nocopy',
    fields: { volumes: [{ type: 'volume', source: 'uploads', target: '/data', volume: { nocopy: true } }] },
    host: { Mounts: [{ Type: 'volume', Source: 'uploads', Target: '/data', ReadOnly: false, VolumeOptions: { NoCopy: true } }] },
  },
  {
    name: 'volumes: long tmpfs with size and mode',
    fields: { volumes: [{ type: 'tmpfs', target: '/scratch', tmpfs: { size: '1m', mode: 0o1777 } }] },
    host: { Mounts: [{ Type: 'tmpfs', Target: '/scratch', ReadOnly: false, TmpfsOptions: { SizeBytes: 1048576, Mode: 0o1777 } }] },
  },
  {
    name: 'volumes: a relative short bind source is resolved against the fleet file directory',
    fields: { volumes: ['./conf:/etc/app:ro'] },
    host: { Mounts: [{ Type: 'bind', Source: join(dir, 'conf'), Target: '/etc/app', ReadOnly: true }] },
  },
  {
    name: 'volumes: a ../ short bind source too',
    fields: { volumes: ['../shared:/shared'] },
    host: { Mounts: [{ Type: 'bind', Source: join(dir, '..', 'shared'), Target: '/shared', ReadOnly: false }] },
  },
  {
    name: 'volumes: a relative long bind source is resolved',
    fields: { volumes: [{ type: 'bind', source: './conf', target: '/c' }] },
    host: { Mounts: [{ Type: 'bind', Source: join(dir, 'conf'), Target: '/c', ReadOnly: false }] },
  },
  // tmpfs
  { name: 'tmpfs: one path as a string', fields: { tmpfs: '/scratch' }, config: { tmpfs: { '/scratch': '' } }, host: { Tmpfs: { '/scratch': '' } } },
  {
    name: 'tmpfs: a list with options',
    fields: { tmpfs: ['/scratch:size=64m,mode=1777', '/run'] },
    host: { Tmpfs: { '/scratch': 'size=64m,mode=1777', '/run': '' } },
  },
  // readOnly
  { name: 'readOnly: true is a read-only root filesystem', fields: { readOnly: true }, config: { readOnly: true }, host: { ReadonlyRootfs: true } },
  { name: "readOnly: false leaves Docker's default", fields: { readOnly: false }, config: { readOnly: false }, absent: ['HostConfig.ReadonlyRootfs'] },
  // resources
  { name: 'resources.memory: "256m"', fields: { resources: { memory: '256m' } }, config: { memoryBytes: 268435456 }, host: { Memory: 268435456 } },
  { name: 'resources.memory: bytes', fields: { resources: { memory: 536870912 } }, host: { Memory: 536870912 } },
  { name: 'resources.memory: "1g"', fields: { resources: { memory: '1g' } }, host: { Memory: 1073741824 } },
  {
    name: 'resources.memoryReservation',
    fields: { resources: { memoryReservation: '128m' } },
    config: { memoryReservationBytes: 134217728 },
    host: { MemoryReservation: 134217728 },
  },
  { name: 'resources.cpus: 0.5', fields: { resources: { cpus: 0.5 } }, config: { nanoCpus: 500_000_000 }, host: { NanoCpus: 500_000_000 } },
  { name: 'resources.cpus: "1.5"', fields: { resources: { cpus: '1.5' } }, host: { NanoCpus: 1_500_000_000 } },
  { name: 'resources.pidsLimit', fields: { resources: { pidsLimit: 100 } }, config: { pidsLimit: 100 }, host: { PidsLimit: 100 } },
  { name: 'resources.pidsLimit: -1 is no limit', fields: { resources: { pidsLimit: -1 } }, host: { PidsLimit: -1 } },
  // restart
  { name: 'restart: no', fields: { restart: 'no' }, host: { RestartPolicy: { Name: 'no' } } },
  { name: 'restart: always', fields: { restart: 'always' }, host: { RestartPolicy: { Name: 'always' } } },
  { name: 'restart: on-failure', fields: { restart: 'on-failure' }, host: { RestartPolicy: { Name: 'on-failure' } } },
  {
    name: 'restart: on-failure:5',
    fields: { restart: 'on-failure:5' },
    config: { restart: { name: 'on-failure', maxRetries: 5 } },
    host: { RestartPolicy: { Name: 'on-failure', MaximumRetryCount: 5 } },
  },
  { name: 'restart: unless-stopped', fields: { restart: 'unless-stopped' }, host: { RestartPolicy: { Name: 'unless-stopped' } } },
  { name: 'restart: unset is unless-stopped (the default)', fields: {}, config: {}, host: { RestartPolicy: { Name: 'unless-stopped' } } },
  // labels
  { name: 'labels: a map (values as strings)', fields: { labels: { team: 'books', tier: 2 } }, config: { labels: { team: 'books', tier: '2' } } },
  { name: 'labels: a list of KEY=VALUE', fields: { labels: ['team=books', 'note=a=b'] }, config: { labels: { team: 'books', note: 'a=b' } } },
  // logging
  {
    name: 'logging: driver and options',
    fields: { logging: { driver: 'local', options: { 'max-size': '10m', 'max-file': 3 } } },
    config: { logging: { driver: 'local', options: { 'max-size': '10m', 'max-file': '3' } } },
    host: { LogConfig: { Type: 'local', Config: { 'max-size': '10m', 'max-file': '3' } } },
  },
  {
    name: 'logging: options alone keep the json-file driver',
    fields: { logging: { options: { 'max-size': '1m' } } },
    host: { LogConfig: { Type: 'json-file', Config: { 'max-size': '1m' } } },
  },
  {
    name: 'logging: unset is a capped json-file log (the default)',
    fields: {},
    host: { LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } } },
  },
  // extraHosts
  {
    name: 'extraHosts: a list of host:ip and host=ip',
    fields: { extraHosts: ['db.internal:10.0.0.5', 'cache=10.0.0.6'] },
    config: { extraHosts: ['db.internal:10.0.0.5', 'cache:10.0.0.6'] },
    host: { ExtraHosts: ['db.internal:10.0.0.5', 'cache:10.0.0.6'] },
  },
  {
    name: 'extraHosts: a map, host-gateway and IPv6',
    fields: { extraHosts: { 'db.internal': '10.0.0.5', gw: 'host-gateway', v6: '::1' } },
    host: { ExtraHosts: ['db.internal:10.0.0.5', 'gw:host-gateway', 'v6:::1'] },
  },
  // ulimits
  {
    name: 'ulimits: a number (soft = hard) and { soft, hard }',
    fields: { ulimits: { nofile: { soft: 1024, hard: 2048 }, nproc: 512 } },
    config: {
      ulimits: [
        { name: 'nofile', soft: 1024, hard: 2048 },
        { name: 'nproc', soft: 512, hard: 512 },
      ],
    },
    host: {
      Ulimits: [
        { Name: 'nofile', Soft: 1024, Hard: 2048 },
        { Name: 'nproc', Soft: 512, Hard: 512 },
      ],
    },
  },
  {
    name: 'ulimits: hard -1 is unlimited',
    fields: { ulimits: { memlock: { soft: 1024, hard: -1 } } },
    host: { Ulimits: [{ Name: 'memlock', Soft: 1024, Hard: -1 }] },
  },
  // capabilities, signal, sizes, sysctls, devices, gpus
  { name: 'capAdd', fields: { capAdd: ['NET_ADMIN', 'CAP_SYS_TIME'] }, host: { CapAdd: ['NET_ADMIN', 'CAP_SYS_TIME'] } },
  { name: 'capDrop', fields: { capDrop: ['ALL'] }, host: { CapDrop: ['ALL'] } },
  { name: 'stopSignal', fields: { stopSignal: 'SIGINT' }, config: { stopSignal: 'SIGINT' }, body: { StopSignal: 'SIGINT' } },
  { name: 'shmSize: "64m"', fields: { shmSize: '64m' }, config: { shmSizeBytes: 67108864 }, host: { ShmSize: 67108864 } },
  { name: 'shmSize: bytes', fields: { shmSize: 1048576 }, host: { ShmSize: 1048576 } },
  { name: 'sysctls: a map', fields: { sysctls: { 'net.core.somaxconn': 1024 } }, host: { Sysctls: { 'net.core.somaxconn': '1024' } } },
  { name: 'sysctls: a list', fields: { sysctls: ['net.ipv4.tcp_syncookies=1'] }, host: { Sysctls: { 'net.ipv4.tcp_syncookies': '1' } } },
  {
    name: 'devices: full and short forms',
    fields: { devices: ['/dev/fuse:/dev/fuse:rwm', '/dev/snd', '/dev/ttyUSB0:/dev/ttyS0:r'] },
    host: {
      Devices: [
        { PathOnHost: '/dev/fuse', PathInContainer: '/dev/fuse', CgroupPermissions: 'rwm' },
        { PathOnHost: '/dev/snd', PathInContainer: '/dev/snd', CgroupPermissions: 'rwm' },
        { PathOnHost: '/dev/ttyUSB0', PathInContainer: '/dev/ttyS0', CgroupPermissions: 'r' },
      ],
    },
  },
  { name: 'gpus: all', fields: { gpus: 'all' }, config: { gpus: 'all' }, host: { DeviceRequests: [{ Driver: '', Count: -1, Capabilities: [['gpu']] }] } },
  { name: 'gpus: 2', fields: { gpus: 2 }, host: { DeviceRequests: [{ Driver: '', Count: 2, Capabilities: [['gpu']] }] } },
  // networks: joined by the runtime between create and start, not in the body
  {
    name: 'networks: names and { name, aliases }',
    fields: { networks: ['fleet-net', { name: 'backend', aliases: ['api', 'api.backend'] }] },
    config: {
      networks: [
        { name: 'fleet-net', aliases: [] },
        { name: 'backend', aliases: ['api', 'api.backend'] },
      ],
    },
    host: { NetworkMode: 'bridge' },
    absent: ['NetworkingConfig'],
  },
  {
    // A compose service's network is often the fleet's own (hosts[].network): the runtime skips joining it again, so its aliases go in at create.
    name: 'networks: hosts[].network itself with aliases: they are set on the endpoint at create',
    fields: {
      networks: [
        { name: 'bridge', aliases: ['api', 'api.internal'] },
        { name: 'backend', aliases: ['api-b'] },
      ],
    },
    body: { NetworkingConfig: { EndpointsConfig: { bridge: { Aliases: ['api', 'api.internal'] } } } },
    host: { NetworkMode: 'bridge' },
  },
  { name: 'networks: hosts[].network itself without aliases: no NetworkingConfig', fields: { networks: ['bridge', 'backend'] }, absent: ['NetworkingConfig'] },
  // healthcheck
  {
    name: 'healthcheck: CMD with durations',
    fields: { healthcheck: { test: ['CMD', 'curl', '-f', 'http://localhost/'], interval: '10s', timeout: '3s', retries: 3, startPeriod: '1m30s' } },
    config: { healthcheck: { test: ['CMD', 'curl', '-f', 'http://localhost/'], intervalMs: 10_000, timeoutMs: 3_000, retries: 3, startPeriodMs: 90_000 } },
    body: { Healthcheck: { Test: ['CMD', 'curl', '-f', 'http://localhost/'], Interval: 10e9, Timeout: 3e9, Retries: 3, StartPeriod: 90e9 } },
  },
  {
    name: 'healthcheck: CMD-SHELL, 500ms',
    fields: { healthcheck: { test: ['CMD-SHELL', 'curl -f http://localhost/ || exit 1'], interval: '500ms' } },
    body: { Healthcheck: { Test: ['CMD-SHELL', 'curl -f http://localhost/ || exit 1'], Interval: 5e8 } },
  },
  {
    name: "healthcheck: a string runs in the image's shell",
    fields: { healthcheck: { test: 'curl -f http://localhost/', interval: 5 } },
    body: { Healthcheck: { Test: ['CMD-SHELL', 'curl -f http://localhost/'], Interval: 5e9 } },
  },
  {
    name: 'healthcheck: disable',
    fields: { healthcheck: { disable: true } },
    config: { healthcheck: { disable: true } },
    body: { Healthcheck: { Test: ['NONE'] } },
  },
  { name: "healthcheck: unset leaves the image's own", fields: {}, absent: ['Healthcheck'] },
  // secrets
  {
    name: 'secrets + secretFiles: a read-only bind under /run/secrets, the file resolved against the fleet file',
    fields: { secrets: ['db_password', { source: 'db_password', target: 'pw' }], secretFiles: { db_password: { file: './secrets/db.txt' } } },
    config: {
      secrets: [
        { name: 'db_password', target: 'db_password' },
        { name: 'db_password', target: 'pw' },
      ],
    },
    host: {
      Mounts: [
        { Type: 'bind', Source: join(dir, 'secrets', 'db.txt'), Target: '/run/secrets/db_password', ReadOnly: true },
        { Type: 'bind', Source: join(dir, 'secrets', 'db.txt'), Target: '/run/secrets/pw', ReadOnly: true },
      ],
    },
  },
  // dockerCreateOptions
  {
    name: "dockerCreateOptions: HostConfig keys merge into fleetroll's, top-level keys join the body",
    fields: { dockerCreateOptions: { HostConfig: { OomScoreAdj: 100 }, Hostname: 'api-host' } },
    config: { createOptions: { HostConfig: { OomScoreAdj: 100 }, Hostname: 'api-host' } },
    body: { Hostname: 'api-host', Image: 'api:1.0.0' },
    host: { OomScoreAdj: 100, Init: true, NetworkMode: 'bridge' },
  },
];

const REFUSED: Refused[] = [
  { name: 'command: an unclosed quote', fields: { command: 'node "server.mjs' }, path: 'command', message: /unclosed " quote/ },
  { name: 'command: not a string or list', fields: { command: 5 }, path: 'command', message: /must be a command: a string or a list of arguments, got 5/ },
  { name: 'command: a line break in an argument', fields: { command: ['node', 'a\nb'] }, path: 'command/1', message: /NUL byte or a line break/ },
  { name: 'entrypoint: not a string or list', fields: { entrypoint: { a: 1 } }, path: 'entrypoint', message: /must be an entrypoint/ },
  { name: 'workingDir: relative', fields: { workingDir: 'app' }, path: 'workingDir', message: /absolute path.*got "app"/ },
  { name: 'workingDir: ..', fields: { workingDir: '/app/../etc' }, path: 'workingDir', message: /no "\.\."/ },
  { name: 'user: shell characters', fields: { user: 'root; rm -rf /' }, path: 'user', message: /must be a user: NAME, UID or UID:GID/ },
  {
    name: 'volumes: an anonymous volume',
    fields: { volumes: ['/var/lib/app'] },
    path: 'volumes/0',
    message: /anonymous volume \("\/var\/lib\/app"\) is deleted with its instance.*NAME:\/var\/lib\/app/,
  },
  {
    name: 'volumes: the same target twice',
    fields: { volumes: ['/srv/a:/data', { type: 'volume', source: 'uploads', target: '/data' }] },
    path: 'volumes/1/target',
    message: /target \/data is already mounted by volumes\/0/,
  },
  { name: 'volumes: a bad mode', fields: { volumes: ['/srv/a:/a:rx'] }, path: 'volumes/0', message: /mode must be ro or rw/ },
  { name: 'volumes: a relative target', fields: { volumes: ['/srv/a:data'] }, path: 'volumes/0', message: /target must be an absolute path/ },
  { name: 'volumes: too many colons', fields: { volumes: ['/a:/b:ro:x'] }, path: 'volumes/0', message: /SOURCE:TARGET\[:ro\|rw\]/ },
  { name: 'volumes: a bad volume name', fields: { volumes: ['my volume:/data'] }, path: 'volumes/0', message: /a volume name must be letters/ },
  {
    name: 'volumes: a long bind without source',
    fields: { volumes: [{ type: 'bind', target: '/x' }] },
    path: 'volumes/0/source',
    message: /is required for a bind mount/,
  },
  {
    name: 'volumes: a long bind with a bare relative source',
    fields: { volumes: [{ type: 'bind', source: 'conf', target: '/x' }] },
    path: 'volumes/0/source',
    message: /absolute host path \(one starting with \.\/ or \.\.\/ is resolved/,
  },
  {
    name: 'volumes: a tmpfs with a source',
    fields: { volumes: [{ type: 'tmpfs', source: 'x', target: '/x' }] },
    path: 'volumes/0/source',
    message: /a tmpfs mount has no source/,
  },
  {
    name: 'volumes: an unknown type',
    fields: { volumes: [{ type: 'nfs', target: '/x' }] },
    path: 'volumes/0/type',
    message: /must be "bind", "volume" or "tmpfs", got "nfs"/,
  },
  {
    name: 'volumes: readOnly not a boolean',
    fields: { volumes: [{ type: 'bind', source: '/x', target: '/x', readOnly: 'yes' }] },
    path: 'volumes/0/readOnly',
    message: /must be true or false, got "yes"/,
  },
  { name: 'volumes: a long form without target', fields: { volumes: [{ type: 'bind', source: '/x' }] }, path: 'volumes/0/target', message: /is required/ },
  {
    name: 'volumes: a bad tmpfs size',
    fields: { volumes: [{ type: 'tmpfs', target: '/t', tmpfs: { size: 'huge' } }] },
    path: 'volumes/0/tmpfs/size',
    message: /bytes or a size like "64m"/,
  },
  {
    name: 'volumes: a bad tmpfs mode',
    fields: { volumes: [{ type: 'tmpfs', target: '/t', tmpfs: { mode: 99999 } }] },
    path: 'volumes/0/tmpfs/mode',
    message: /file mode from 0 to 0o7777/,
  },
  {
    name: 'volumes: createHostPath',
    fields: { volumes: [{ type: 'bind', source: '/x', target: '/x', bind: { createHostPath: true } }] },
    path: 'volumes/0/bind/createHostPath',
    message: /never creates host paths/,
  },
  {
    name: 'volumes: an unknown long-form field',
    fields: { volumes: [{ type: 'bind', source: '/x', target: '/x', consistency: 'cached' }] },
    path: 'volumes/0',
    message: /unknown field "consistency"/,
  },
  { name: 'volumes: not a list', fields: { volumes: '/a:/b' }, path: 'volumes', message: /must be a list of volumes/ },
  { name: 'tmpfs: bad options', fields: { tmpfs: ['/scratch:size=lots'] }, path: 'tmpfs/0', message: /options must be size=N\[k\|m\|g\]/ },
  { name: 'tmpfs: a relative path', fields: { tmpfs: 'scratch' }, path: 'tmpfs/0', message: /absolute path in the container, got "scratch"/ },
  { name: 'tmpfs: not a path or list', fields: { tmpfs: 5 }, path: 'tmpfs', message: /must be a path or a list of paths .*got 5/ },
  { name: 'readOnly: not a boolean', fields: { readOnly: 'yes' }, path: 'readOnly', message: /must be true or false, got "yes"/ },
  { name: 'resources.memory: too small', fields: { resources: { memory: '1m' } }, path: 'resources/memory', message: /at least 6291456 bytes.*got "1m"/ },
  {
    name: 'resources.memory: not a size',
    fields: { resources: { memory: 'lots' } },
    path: 'resources/memory',
    message: /must be a memory limit: bytes or a size like "256m"/,
  },
  {
    name: 'resources.memoryReservation: negative',
    fields: { resources: { memoryReservation: -1 } },
    path: 'resources/memoryReservation',
    message: /must be a memory reservation/,
  },
  { name: 'resources.cpus: 0', fields: { resources: { cpus: 0 } }, path: 'resources/cpus', message: /above 0 and at most 1024.*got 0/ },
  { name: 'resources.cpus: not a number', fields: { resources: { cpus: 'two' } }, path: 'resources/cpus', message: /got "two"/ },
  { name: 'resources.pidsLimit: a fraction', fields: { resources: { pidsLimit: 1.5 } }, path: 'resources/pidsLimit', message: /integer from -1 to 4194304/ },
  { name: 'resources: an unknown field', fields: { resources: { cpu: 1 } }, path: 'resources', message: /unknown field "cpu"/ },
  {
    name: 'restart: a bad value',
    fields: { restart: 'sometimes' },
    path: 'restart',
    message: /"no", "always", "on-failure", "on-failure:N" or "unless-stopped", got "sometimes"/,
  },
  { name: 'restart: a count on always', fields: { restart: 'always:3' }, path: 'restart', message: /got "always:3"/ },
  {
    name: 'labels: fleetroll.* is reserved',
    fields: { labels: { 'fleetroll.revision': 'x' } },
    path: 'labels/fleetroll.revision',
    message: /starting with "fleetroll\." are fleetroll's own/,
  },
  { name: 'labels: fleetroll.* in a list too', fields: { labels: ['fleetroll.service=other'] }, path: 'labels/fleetroll.service', message: /fleetroll's own/ },
  { name: 'labels: a list entry without =', fields: { labels: ['team'] }, path: 'labels/0', message: /must be "KEY=VALUE", got "team"/ },
  { name: 'logging: a bad driver name', fields: { logging: { driver: 'Json File' } }, path: 'logging/driver', message: /log driver name/ },
  {
    name: 'logging: an option that is not a string or number',
    fields: { logging: { options: { compress: true } } },
    path: 'logging/options/compress',
    message: /must be a string or a number, got true/,
  },
  {
    name: 'extraHosts: a bad IP',
    fields: { extraHosts: ['db:999.0.0.1'] },
    path: 'extraHosts/0',
    message: /must be an IP address \(or host-gateway\) for db, got "999\.0\.0\.1"/,
  },
  { name: 'extraHosts: a bad IP in a map', fields: { extraHosts: { db: 'not-an-ip' } }, path: 'extraHosts/db', message: /must be an IP address/ },
  { name: 'extraHosts: a bad host name', fields: { extraHosts: ['-db:10.0.0.1'] }, path: 'extraHosts/0', message: /must be a host name/ },
  { name: 'ulimits: soft above hard', fields: { ulimits: { nofile: { soft: 4096, hard: 2048 } } }, path: 'ulimits/nofile', message: /soft at most hard/ },
  {
    name: 'ulimits: soft unlimited under a hard limit',
    fields: { ulimits: { nofile: { soft: -1, hard: 2048 } } },
    path: 'ulimits/nofile',
    message: /soft at most hard/,
  },
  { name: 'ulimits: a bad name', fields: { ulimits: { NOFILE: 5 } }, path: 'ulimits/NOFILE', message: /ulimit name like nofile/ },
  {
    name: 'ulimits: neither number nor { soft, hard }',
    fields: { ulimits: { nofile: { soft: 1 } } },
    path: 'ulimits/nofile',
    message: /must be a number or \{ soft, hard \}/,
  },
  { name: 'capAdd: lowercase', fields: { capAdd: ['net_admin'] }, path: 'capAdd/0', message: /capability name like NET_ADMIN/ },
  { name: 'capDrop: not a list', fields: { capDrop: 'ALL' }, path: 'capDrop', message: /list of capability names/ },
  { name: 'stopSignal: lowercase', fields: { stopSignal: 'int' }, path: 'stopSignal', message: /signal name like SIGINT/ },
  { name: 'shmSize: not a size', fields: { shmSize: '64 mega' }, path: 'shmSize', message: /must be a size/ },
  { name: 'sysctls: a bad name', fields: { sysctls: { 'Net.Core': 1 } }, path: 'sysctls/Net.Core', message: /sysctl name like net\.core\.somaxconn/ },
  { name: 'devices: a relative path', fields: { devices: ['fuse'] }, path: 'devices/0', message: /HOST_PATH\[:CONTAINER_PATH\[:PERMISSIONS\]\]/ },
  { name: 'devices: bad permissions', fields: { devices: ['/dev/fuse:/dev/fuse:rwx'] }, path: 'devices/0', message: /permissions of r, w, m/ },
  { name: 'gpus: 0', fields: { gpus: 0 }, path: 'gpus', message: /must be "all" or a number of GPUs from 1 to 64, got 0/ },
  { name: 'gpus: some', fields: { gpus: 'some' }, path: 'gpus', message: /must be "all" or a number of GPUs from 1 to 64, got "some"/ },
  { name: 'networks: a bad name', fields: { networks: ['back end'] }, path: 'networks/0', message: /Docker network name/ },
  {
    name: 'networks: a bad alias',
    fields: { networks: [{ name: 'backend', aliases: ['api!'] }] },
    path: 'networks/0/aliases/0',
    message: /must be a DNS name, got "api!"/,
  },
  { name: 'healthcheck: CMD without a program', fields: { healthcheck: { test: ['CMD'] } }, path: 'healthcheck/test', message: /must start with "CMD"/ },
  {
    name: 'healthcheck: an unknown first word',
    fields: { healthcheck: { test: ['curl', '-f', 'http://localhost/'] } },
    path: 'healthcheck/test',
    message: /must start with "CMD"/,
  },
  { name: 'healthcheck: no test', fields: { healthcheck: { interval: '10s' } }, path: 'healthcheck/test', message: /is required \(or disable: true\)/ },
  {
    name: 'healthcheck: a bad duration',
    fields: { healthcheck: { test: ['CMD', 'true'], interval: 'soon' } },
    path: 'healthcheck/interval',
    message: /must be an interval: seconds or a duration like "10s"/,
  },
  {
    name: 'healthcheck: negative retries',
    fields: { healthcheck: { test: ['CMD', 'true'], retries: -1 } },
    path: 'healthcheck/retries',
    message: /number of retries from 0 to 1000, got -1/,
  },
  { name: 'healthcheck: not a mapping', fields: { healthcheck: 'curl localhost' }, path: 'healthcheck', message: /must be a mapping \{ test, interval/ },
  {
    name: 'secrets: names no secretFiles entry',
    fields: { secrets: ['api_key'] },
    path: 'secrets/0',
    message: /names no entry of secretFiles \(none defined\)/,
  },
  {
    name: 'secrets: names another entry than defined',
    fields: { secrets: ['api_key'], secretFiles: { db_password: { file: './secrets/db.txt' } } },
    path: 'secrets/0',
    message: /names no entry of secretFiles \(db_password\)/,
  },
  {
    name: 'secrets: two secrets at one target',
    fields: { secrets: ['db_password', { source: 'db_password', target: 'db_password' }], secretFiles: { db_password: { file: './secrets/db.txt' } } },
    path: 'secrets/1/target',
    message: /\/run\/secrets\/db_password is already mounted by secrets\/0/,
  },
  {
    name: 'secretFiles: a file that does not exist',
    fields: { secrets: ['db'], secretFiles: { db: { file: './secrets/missing.txt' } } },
    path: 'secretFiles/db/file',
    message: /cannot read .*missing\.txt: no such file/,
  },
  {
    name: 'secretFiles: a bad name',
    fields: { secretFiles: { 'db password': { file: './secrets/db.txt' } } },
    path: 'secretFiles/db password',
    message: /secret names are letters, digits/,
  },
  { name: 'secretFiles: no file', fields: { secretFiles: { db: {} } }, path: 'secretFiles/db/file', message: /is required: the path of a file/ },
  {
    name: "dockerCreateOptions: Cmd is fleetroll's (command)",
    fields: { dockerCreateOptions: { Cmd: ['x'] } },
    path: 'dockerCreateOptions/Cmd',
    message: /is set by fleetroll \(use the fleet file's own fields/,
  },
  {
    name: "dockerCreateOptions: Env is fleetroll's",
    fields: { dockerCreateOptions: { Env: ['A=1'] } },
    path: 'dockerCreateOptions/Env',
    message: /is set by fleetroll/,
  },
  {
    name: "dockerCreateOptions: NetworkingConfig is fleetroll's",
    fields: { dockerCreateOptions: { NetworkingConfig: {} } },
    path: 'dockerCreateOptions/NetworkingConfig',
    message: /is set by fleetroll/,
  },
  {
    name: "dockerCreateOptions: HostConfig.Binds is fleetroll's (volumes)",
    fields: { dockerCreateOptions: { HostConfig: { Binds: ['/:/host'] } } },
    path: 'dockerCreateOptions/HostConfig/Binds',
    message: /is set by fleetroll \(use hosts\[\]\.network, volumes or networks\)/,
  },
  {
    name: "dockerCreateOptions: HostConfig.NetworkMode is fleetroll's",
    fields: { dockerCreateOptions: { HostConfig: { NetworkMode: 'host' } } },
    path: 'dockerCreateOptions/HostConfig/NetworkMode',
    message: /is set by fleetroll/,
  },
  {
    name: 'dockerCreateOptions: a key that is not PascalCase',
    fields: { dockerCreateOptions: { hostname: 'x' } },
    path: 'dockerCreateOptions/hostname',
    message: /PascalCase/,
  },
  {
    name: 'dockerCreateOptions: HostConfig not a mapping',
    fields: { dockerCreateOptions: { HostConfig: 5 } },
    path: 'dockerCreateOptions/HostConfig',
    message: /must be a mapping/,
  },
];

function get(body: Record<string, unknown>, key: string): unknown {
  return key.startsWith('HostConfig.') ? (body.HostConfig as Record<string, unknown>)[key.slice('HostConfig.'.length)] : body[key];
}

describe('container fields: accepted, and what reaches the Docker create body', () => {
  for (const row of ACCEPTED) {
    it(row.name, async () => {
      const f = await load(row.fields, row.vars);
      if (row.config) assert.deepEqual(f.container, row.config);
      const body = bodyOf(f);
      for (const [k, v] of Object.entries(row.body ?? {})) assert.deepEqual(body[k], v, k);
      for (const [k, v] of Object.entries(row.host ?? {})) assert.deepEqual(body.HostConfig[k], v, `HostConfig.${k}`);
      for (const k of row.absent ?? []) assert.equal(get(body, k), undefined, `${k} must not be set`);
    });
  }
});

describe('container fields: refused with the field path and what is allowed (exit 2)', () => {
  for (const row of REFUSED) {
    it(row.name, async () => {
      const issues = await refusal(row.fields, row.vars);
      const at = issues.filter((i) => i.path === row.path);
      assert.equal(at.length, 1, `one issue at ${row.path}, got ${JSON.stringify(issues)}`);
      assert.match(at[0]!.message, row.message);
      assert.equal(issues.length, 1, `only that issue, got ${JSON.stringify(issues)}`);
    });
  }
});

describe('dockerCreateBody', () => {
  it("with no container fields: fleetroll's base, the defaults, and nothing else", () => {
    const body = dockerCreateBody(CREATE);
    assert.deepEqual(body, {
      name: 'api-abc123-1',
      Image: 'api:1.0.0',
      Env: ['A=1'],
      Labels: { 'fleetroll.service': 'api' },
      ExposedPorts: { '8080/tcp': {} },
      StopTimeout: 30,
      HostConfig: {
        Init: true,
        NetworkMode: 'bridge',
        RestartPolicy: { Name: 'unless-stopped' },
        LogConfig: { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } },
      },
    });
  });

  it('CONTAINER_DEFAULTS are what the base body uses', () => {
    const host = dockerCreateBody(CREATE).HostConfig as Record<string, unknown>;
    assert.deepEqual(host.RestartPolicy, { Name: CONTAINER_DEFAULTS.restart.name });
    assert.deepEqual(host.LogConfig, { Type: CONTAINER_DEFAULTS.logging.driver, Config: CONTAINER_DEFAULTS.logging.options });
  });

  it('a worker without a port exposes and publishes nothing', () => {
    const body = dockerCreateBody({ ...CREATE, port: undefined, publishAddress: '10.0.0.1' });
    assert.equal(body.ExposedPorts, undefined);
    assert.equal((body.HostConfig as Record<string, unknown>).PortBindings, undefined);
  });

  it('publishAddress publishes the app port on that address', () => {
    const host = dockerCreateBody({ ...CREATE, publishAddress: '10.0.0.1' }).HostConfig as Record<string, unknown>;
    assert.deepEqual(host.PortBindings, { '8080/tcp': [{ HostIp: '10.0.0.1', HostPort: '' }] });
  });

  it('a secret without a host path (not written yet) is not mounted', () => {
    const host = dockerCreateBody(CREATE, { secrets: [{ name: 'db', target: 'db' }] }).HostConfig as Record<string, unknown>;
    assert.equal(host.Mounts, undefined);
  });

  it("the escape hatch cannot drop fleetroll's HostConfig keys by replacing HostConfig", () => {
    const host = dockerCreateBody(CREATE, { memoryBytes: 268435456, createOptions: { HostConfig: { OomScoreAdj: -500 } } }).HostConfig as Record<
      string,
      unknown
    >;
    assert.deepEqual([host.Memory, host.OomScoreAdj, host.NetworkMode, host.Init], [268435456, -500, 'bridge', true]);
  });
});

describe('namedVolumes and bindSources', () => {
  const c: ContainerConfig = {
    mounts: [
      { type: 'volume', source: 'uploads', target: '/a', readOnly: false },
      { type: 'volume', source: 'uploads', target: '/b', readOnly: true },
      { type: 'bind', source: '/srv/conf', target: '/c', readOnly: true },
      { type: 'bind', source: '/srv/conf', target: '/d', readOnly: true },
      { type: 'tmpfs', target: '/t', readOnly: false },
      { type: 'volume', source: 'cache', target: '/e', readOnly: false },
    ],
  };
  it('named volumes, each once, in order', () => assert.deepEqual(namedVolumes(c), ['uploads', 'cache']));
  it('bind sources, each once', () => assert.deepEqual(bindSources(c), ['/srv/conf']));
  it('none without mounts', () => assert.deepEqual([namedVolumes(undefined), bindSources({})], [[], []]));
});

describe('splitWords', () => {
  const rows: [string, string, string[] | { error: string }][] = [
    ['plain words', 'node server.mjs --port 80', ['node', 'server.mjs', '--port', '80']],
    ['runs of spaces and tabs', '  a \t b  ', ['a', 'b']],
    ['double quotes keep spaces', 'sh -c "echo hi there"', ['sh', '-c', 'echo hi there']],
    ['single quotes keep backslashes', "echo 'a\\nb'", ['echo', 'a\\nb']],
    ['escaped quote inside double quotes', 'echo "say \\"hi\\""', ['echo', 'say "hi"']],
    ['backslash-space outside quotes', 'a\\ b c', ['a b', 'c']],
    ['an empty quoted word is a word', 'a "" b', ['a', '', 'b']],
    ['quotes join to a word', 'pre"mid"post', ['premidpost']],
    ['no shell: $ and ; are literal', 'echo $HOME; ls', ['echo', '$HOME;', 'ls']],
    ['empty', '', []],
    ['an unclosed double quote', 'echo "x', { error: 'has an unclosed " quote' }],
    ['an unclosed single quote', "echo 'x", { error: "has an unclosed ' quote" }],
  ];
  for (const [name, input, want] of rows) it(name, () => assert.deepEqual(splitWords(input), want));
});

describe('parseBytes', () => {
  const rows: [string, unknown, number | undefined][] = [
    ['bytes as a number', 1048576, 1048576],
    ['"256m"', '256m', 268435456],
    ['"1g"', '1g', 1073741824],
    ['"512k"', '512k', 524288],
    ['"100b"', '100b', 100],
    ['"64MB" (compose also takes the b)', '64MB', 67108864],
    ['"1.5g"', '1.5g', 1610612736],
    ['a plain number string', '4096', 4096],
    ['negative', -1, undefined],
    ['a fraction of a byte', 1.5, undefined],
    ['an unknown unit', '5t', undefined],
    ['words', 'lots', undefined],
    ['not a string or number', true, undefined],
  ];
  for (const [name, input, want] of rows) it(name, () => assert.equal(parseBytes(input), want));
});

describe('composeDurationSeconds', () => {
  const rows: [string, string, number | undefined][] = [
    ['seconds', '10s', 10],
    ['milliseconds', '500ms', 0.5],
    ['minutes and seconds', '1m30s', 90],
    ['hours', '2h', 7200],
    ['microseconds', '250us', 0.00025],
    ['a bare number is seconds', '30', 30],
    ['a fraction', '1.5s', 1.5],
    ['an unknown unit', '1d', undefined],
    ['words', 'soon', undefined],
    ['empty', '', undefined],
  ];
  for (const [name, input, want] of rows) it(name, () => assert.equal(composeDurationSeconds(input), want));
});

describe('containerConfigOf', () => {
  it('nothing set: an empty config (so the revision hash is the one before container fields)', () => assert.deepEqual(containerConfigOf({}), {}));
  it('empty lists and maps are left out', () =>
    assert.deepEqual(containerConfigOf({ volumes: [], labels: {}, capAdd: [], tmpfs: {}, dockerCreateOptions: {} }), {}));
});

describe('fleetFromObject: interpolation, env files, relative paths', () => {
  it('${VAR} in a string field is replaced from the lookup', async () => {
    const f = await load({ image: 'registry.example/api:${TAG}', workingDir: '/srv/${APP}' }, { TAG: '2.0.0', APP: 'books' });
    assert.deepEqual([f.image, f.version, f.container.workingDir], ['registry.example/api:2.0.0', '2.0.0', '/srv/books']);
  });

  it('${VAR:-default} takes the default when unset or empty', async () => {
    const unset = await load({ image: 'api:${TAG:-1.2.3}' });
    const empty = await load({ image: 'api:${TAG:-1.2.3}' }, { TAG: '' });
    const set = await load({ image: 'api:${TAG:-1.2.3}' }, { TAG: '9' });
    assert.deepEqual([unset.image, empty.image, set.image], ['api:1.2.3', 'api:1.2.3', 'api:9']);
  });

  it('${VAR:?message} refuses an unset variable, naming the field and the variable', async () => {
    const issues = await refusal({ env: { DB_PASSWORD: '${DB_PASSWORD:?set it in CI}' } });
    assert.deepEqual(issues, [{ path: 'env/DB_PASSWORD', message: 'variable DB_PASSWORD is required: set it in CI' }]);
  });

  it('an unset ${VAR} in env without a default is an empty value, and says so', async () => {
    const f = await load({ env: { DB_PASSWORD: '${DB_PASSWORD}', LEVEL: '${LEVEL:-info}' } });
    assert.deepEqual(f.env, { DB_PASSWORD: '', LEVEL: 'info' });
    assert.deepEqual(
      f.strategy.notes.filter((n) => n.startsWith('env/')),
      ['env/DB_PASSWORD: ${DB_PASSWORD} is not set, so the value is empty (write ${DB_PASSWORD:?message} to require it)'],
    );
  });

  it('$$ is a literal $ and not a variable', async () => {
    const f = await load({ env: { PRICE: 'US$$5' } });
    assert.deepEqual([f.env?.PRICE, f.envSources], ['US$5', {}]);
  });

  it('env entries from variables are secrets (kept as written); literal ones are not', async () => {
    const f = await load({ env: { DB_PASSWORD: '${DB_PASSWORD}', URL: 'postgres://app:${DB_PASSWORD}@db/app', LOG_LEVEL: 'info' } }, { DB_PASSWORD: 's3cret' });
    assert.deepEqual(f.env, { DB_PASSWORD: 's3cret', URL: 'postgres://app:s3cret@db/app', LOG_LEVEL: 'info' });
    assert.deepEqual(f.envSources, { DB_PASSWORD: '${DB_PASSWORD}', URL: 'postgres://app:${DB_PASSWORD}@db/app' });
  });

  it('a refusal never carries a secret value', async () => {
    const issues = await refusal({ env: { DB_PASSWORD: '${DB_PASSWORD}' }, command: 'x "unclosed' }, { DB_PASSWORD: 'MARKER-7f3a' });
    assert.ok(!JSON.stringify(issues).includes('MARKER-7f3a'));
  });

  it('hooks are not interpolated (they read variables themselves)', async () => {
    const f = await load({ hooks: { preDeploy: ['./notify.sh', '${SLACK_TOKEN}'] } }, { SLACK_TOKEN: 'tok' });
    assert.deepEqual(f.hooks?.preDeploy, ['./notify.sh', '${SLACK_TOKEN}']);
  });

  it('envFile: merged under env (env wins); its entries are secrets from the file', async () => {
    const f = await load({ envFile: './api.env', env: { SHARED: 'from-env' } });
    assert.deepEqual(f.env, { SHARED: 'from-env', FROM_FILE: 'file-value' });
    assert.deepEqual(f.envSources, { FROM_FILE: 'envFile:./api.env' });
  });

  it('envFile: a list', async () => {
    writeFileSync(join(dir, 'second.env'), 'SECOND=2\n');
    const f = await load({ envFile: ['./api.env', './second.env'] });
    assert.deepEqual(f.env, { FROM_FILE: 'file-value', SHARED: 'from-file', SECOND: '2' });
  });

  it('envFile: a missing file is refused at its path', async () => {
    const issues = await refusal({ envFile: ['./api.env', './nope.env'] });
    assert.deepEqual(issues, [{ path: 'envFile/1', message: `cannot read env file ${join(dir, 'nope.env')}: no such file` }]);
  });

  it('envFile: a malformed line is refused naming the file and line, not its content', async () => {
    writeFileSync(join(dir, 'bad.env'), 'OK=1\nthis is the secret line\n');
    const issues = await refusal({ envFile: './bad.env' });
    assert.equal(issues.length, 1);
    assert.equal(issues[0]!.path, 'envFile');
    assert.match(issues[0]!.message, /bad\.env: line 2: expected KEY=VALUE/);
    assert.ok(!issues[0]!.message.includes('secret line'));
  });

  it('secretFiles: the file is absolute and its content digested; unused definitions are dropped', async () => {
    const f = await load({ secrets: ['db'], secretFiles: { db: { file: './secrets/db.txt' }, unused: { file: './secrets/db.txt' } } });
    assert.deepEqual(f.secretSources, { db: join(dir, 'secrets', 'db.txt') });
    assert.deepEqual(Object.keys(f.secretDigests), ['db']);
    assert.match(f.secretDigests.db!, /^[0-9a-f]{64}$/);
  });

  it('a variable in a bind source, then resolved against the fleet file', async () => {
    const f = await load({ volumes: ['./${CONF_DIR}:/etc/app:ro'] }, { CONF_DIR: 'conf' });
    assert.deepEqual(bindSources(f.container), [join(dir, 'conf')]);
  });

  it('no variables at all: the lookup is never needed', async () => {
    const f = await fleetFromObject({ ...BASE, command: ['node', 'server.mjs'] }, FLEET_FILE, {}, NO_VARS);
    assert.deepEqual([f.envSources, f.container.command], [{}, ['node', 'server.mjs']]);
  });
});
