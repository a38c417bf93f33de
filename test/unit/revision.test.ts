/**
 * The revision hash with container fields and secrets, and what
 * the fleet's state keeps of a revision: references and digests, never a
 * secret value.
 */
import assert from 'node:assert/strict';
import { createHash, createHmac } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import { containerFields } from '../../src/config/container.js';
import { NOT_KEPT } from '../../src/config/secrets.js';
import type { ContainerConfig } from '../../src/core/container.js';
import { revisionOf, secretDigest, type RevisionInput } from '../../src/engine/revision.js';
import { fleetForRecord, recordSpec, scrubLegacySecrets } from '../../src/engine/records.js';
import { ValidationError } from '../../src/errors.js';
import type { FleetState, RevisionRecord } from '../../src/ports.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-ctests-rev-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const FLEET_FILE = join(dir, 'fleet.yaml');
mkdirSync(join(dir, 'secrets'));
writeFileSync(join(dir, 'secrets', 'a.txt'), 'secret file A\n');
writeFileSync(join(dir, 'secrets', 'b.txt'), 'secret file B\n');

const BASE = { service: 'bookstore-api', image: 'bookstore-api:1.0.0', replicas: 3, port: 8080 };
const SPEC: RevisionInput = { image: 'bookstore-api:1.0.0', env: undefined, port: 8080, version: '1.0.0' };
const KEY = '0123456789abcdef0123456789abcdef';

const load = (fields: Record<string, unknown>, vars: Record<string, string> = {}) => fleetFromObject({ ...BASE, ...fields }, FLEET_FILE, {}, (n) => vars[n]);

describe('revisionOf: a fleet with nothing secret keeps the hash it always had', () => {
  it('pinned: sha256(JSON.stringify({ image, env: [], port, version })).slice(0, 10), as before container fields', () => {
    assert.equal(revisionOf(SPEC), '9d33c6efec');
    assert.equal(
      revisionOf(SPEC),
      createHash('sha256')
        .update(JSON.stringify({ image: SPEC.image, env: [], port: SPEC.port, version: SPEC.version }))
        .digest('hex')
        .slice(0, 10),
    );
  });

  it('pinned: with restartedAt, as before', () => assert.equal(revisionOf({ ...SPEC, env: {}, restartedAt: '2026-01-01T00:00:00.000Z' }), '895c87337e'));

  it('the same fleet loaded from a file, with no container field set', async () => assert.equal(revisionOf(await load({})), '9d33c6efec'));

  it("the fleet's key does not change an unkeyed hash (no secret to protect)", () => assert.equal(revisionOf({ ...SPEC, revisionKey: KEY }), '9d33c6efec'));

  it('an empty container config is no container field', () => assert.equal(revisionOf({ ...SPEC, container: {}, secretDigests: {} }), '9d33c6efec'));
});

describe('revisionOf: keyed when the spec holds env or secret files', () => {
  const withEnv: RevisionInput = { ...SPEC, env: { DB_PASSWORD: '123456' } };

  it('two keys, two hashes; one key, one hash', () => {
    const a = revisionOf({ ...withEnv, revisionKey: KEY });
    assert.notEqual(a, revisionOf({ ...withEnv, revisionKey: 'another-key' }));
    assert.equal(a, revisionOf({ ...withEnv, revisionKey: KEY }));
    assert.match(a, /^[0-9a-f]{10}$/);
  });

  it('not derivable without the key: not the plain sha256 of the spec, not the keyless HMAC', () => {
    const canonical = JSON.stringify({ image: SPEC.image, env: [['DB_PASSWORD', '123456']], port: SPEC.port, version: SPEC.version });
    const keyed = revisionOf({ ...withEnv, revisionKey: KEY });
    assert.notEqual(keyed, createHash('sha256').update(canonical).digest('hex').slice(0, 10));
    assert.notEqual(keyed, createHmac('sha256', 'fleetroll-revision:').update(canonical).digest('hex').slice(0, 10));
    assert.notEqual(keyed, revisionOf(withEnv));
  });

  it('a secret file alone makes it keyed', () => {
    const files = { ...SPEC, secretDigests: { db: 'a'.repeat(64) } };
    assert.notEqual(revisionOf({ ...files, revisionKey: KEY }), revisionOf({ ...files, revisionKey: 'another-key' }));
  });

  it('a secret value change changes the hash', () => {
    assert.notEqual(revisionOf({ ...withEnv, revisionKey: KEY }), revisionOf({ ...withEnv, env: { DB_PASSWORD: '123457' }, revisionKey: KEY }));
  });

  it("a secret file's content change changes the hash", () => {
    assert.notEqual(
      revisionOf({ ...SPEC, secretDigests: { db: 'a'.repeat(64) }, revisionKey: KEY }),
      revisionOf({ ...SPEC, secretDigests: { db: 'b'.repeat(64) }, revisionKey: KEY }),
    );
  });

  it('a rotated secret file is a new revision, loaded from the fleet file', async () => {
    const a = await load({ secrets: ['db'], secretFiles: { db: { file: './secrets/a.txt' } } });
    const b = await load({ secrets: ['db'], secretFiles: { db: { file: './secrets/b.txt' } } });
    assert.notEqual(revisionOf({ ...a, revisionKey: KEY }), revisionOf({ ...b, revisionKey: KEY }));
  });

  it('env order does not matter; numbers and strings alike', () => {
    assert.equal(revisionOf({ ...SPEC, env: { A: '1', B: 2 }, revisionKey: KEY }), revisionOf({ ...SPEC, env: { B: '2', A: 1 }, revisionKey: KEY }));
  });
});

/** Two different values of every ContainerConfig field (the type makes a new field fail to compile until it has a row). */
const FIELD_VALUES: { [K in keyof ContainerConfig]-?: [NonNullable<ContainerConfig[K]>, NonNullable<ContainerConfig[K]>] } = {
  command: [
    ['node', 'server.mjs'],
    ['node', 'worker.mjs'],
  ],
  entrypoint: [['/bin/app'], ['/bin/other']],
  workingDir: ['/app', '/srv'],
  user: ['1000', '1000:1000'],
  mounts: [[{ type: 'bind', source: '/srv/a', target: '/a', readOnly: true }], [{ type: 'bind', source: '/srv/a', target: '/a', readOnly: false }]],
  tmpfs: [{ '/scratch': '' }, { '/scratch': 'size=64m' }],
  readOnly: [true, false],
  memoryBytes: [268435456, 536870912],
  memoryReservationBytes: [134217728, 67108864],
  nanoCpus: [500_000_000, 1_000_000_000],
  pidsLimit: [100, 200],
  restart: [
    { name: 'on-failure', maxRetries: 3 },
    { name: 'on-failure', maxRetries: 4 },
  ],
  labels: [{ team: 'books' }, { team: 'music' }],
  logging: [
    { driver: 'json-file', options: { 'max-size': '10m' } },
    { driver: 'json-file', options: { 'max-size': '20m' } },
  ],
  extraHosts: [['db:10.0.0.5'], ['db:10.0.0.6']],
  ulimits: [[{ name: 'nofile', soft: 1024, hard: 2048 }], [{ name: 'nofile', soft: 1024, hard: 4096 }]],
  capAdd: [['NET_ADMIN'], ['SYS_TIME']],
  capDrop: [['ALL'], ['NET_RAW']],
  stopSignal: ['SIGINT', 'SIGQUIT'],
  shmSizeBytes: [67108864, 134217728],
  sysctls: [{ 'net.core.somaxconn': '1024' }, { 'net.core.somaxconn': '2048' }],
  devices: [[{ host: '/dev/fuse', container: '/dev/fuse', permissions: 'rwm' }], [{ host: '/dev/fuse', container: '/dev/fuse', permissions: 'r' }]],
  gpus: ['all', 1],
  networks: [[{ name: 'backend', aliases: [] }], [{ name: 'backend', aliases: ['api'] }]],
  healthcheck: [{ test: ['CMD', 'true'], intervalMs: 10_000 }, { disable: true }],
  secrets: [[{ name: 'db', target: 'db' }], [{ name: 'db', target: 'pw' }]],
  createOptions: [{ HostConfig: { OomScoreAdj: 100 } }, { HostConfig: { OomScoreAdj: 200 } }],
};

describe('revisionOf: every container field changes the hash', () => {
  const base = revisionOf(SPEC);
  for (const [field, [a, b]] of Object.entries(FIELD_VALUES)) {
    it(field, () => {
      const ha = revisionOf({ ...SPEC, container: { [field]: a } });
      const hb = revisionOf({ ...SPEC, container: { [field]: b } });
      assert.notEqual(ha, base, 'setting it');
      assert.notEqual(ha, hb, 'changing it');
      // Keyed too (the fleet has env): the field still counts.
      assert.notEqual(
        revisionOf({ ...SPEC, env: { A: '1' }, revisionKey: KEY, container: { [field]: a } }),
        revisionOf({ ...SPEC, env: { A: '1' }, revisionKey: KEY, container: { [field]: b } }),
      );
    });
  }

  it('key order inside a field does not matter', () => {
    assert.equal(
      revisionOf({ ...SPEC, container: { labels: { a: '1', b: '2' }, sysctls: { x: '1', y: '2' } } }),
      revisionOf({ ...SPEC, container: { sysctls: { y: '2', x: '1' }, labels: { b: '2', a: '1' } } }),
    );
  });

  it('an undefined field is an unset field', () =>
    assert.equal(revisionOf({ ...SPEC, container: { command: ['x'], user: undefined } }), revisionOf({ ...SPEC, container: { command: ['x'] } })));
});

/** Two fleet-file spellings of every container field, loaded (the type makes a new field fail to compile until it has a row). */
const RAW_VALUES: Record<keyof typeof containerFields, [Record<string, unknown>, Record<string, unknown>]> = {
  command: [{ command: 'node server.mjs' }, { command: 'node worker.mjs' }],
  entrypoint: [{ entrypoint: '/bin/app' }, { entrypoint: ['/bin/app', '-v'] }],
  workingDir: [{ workingDir: '/app' }, { workingDir: '/srv' }],
  user: [{ user: '1000' }, { user: '1001' }],
  volumes: [{ volumes: ['uploads:/data'] }, { volumes: ['uploads:/data:ro'] }],
  tmpfs: [{ tmpfs: '/scratch' }, { tmpfs: '/scratch:size=64m' }],
  readOnly: [{ readOnly: true }, { readOnly: false }],
  resources: [{ resources: { memory: '256m' } }, { resources: { memory: '257m' } }],
  restart: [{ restart: 'always' }, { restart: 'no' }],
  labels: [{ labels: { team: 'books' } }, { labels: ['team=music'] }],
  logging: [{ logging: { driver: 'local' } }, { logging: { driver: 'json-file' } }],
  extraHosts: [{ extraHosts: ['db:10.0.0.5'] }, { extraHosts: { db: '10.0.0.6' } }],
  ulimits: [{ ulimits: { nproc: 512 } }, { ulimits: { nproc: 513 } }],
  capAdd: [{ capAdd: ['NET_ADMIN'] }, { capAdd: ['SYS_TIME'] }],
  capDrop: [{ capDrop: ['ALL'] }, { capDrop: ['NET_RAW'] }],
  stopSignal: [{ stopSignal: 'SIGINT' }, { stopSignal: 'SIGTERM' }],
  shmSize: [{ shmSize: '64m' }, { shmSize: '65m' }],
  sysctls: [{ sysctls: { 'net.core.somaxconn': 1024 } }, { sysctls: ['net.core.somaxconn=1025'] }],
  devices: [{ devices: ['/dev/fuse'] }, { devices: ['/dev/fuse:/dev/fuse:r'] }],
  gpus: [{ gpus: 'all' }, { gpus: 2 }],
  networks: [{ networks: ['backend'] }, { networks: [{ name: 'backend', aliases: ['api'] }] }],
  healthcheck: [{ healthcheck: { test: 'true' } }, { healthcheck: { disable: true } }],
  secrets: [
    { secrets: ['db'], secretFiles: { db: { file: './secrets/a.txt' } } },
    { secrets: [{ source: 'db', target: 'pw' }], secretFiles: { db: { file: './secrets/a.txt' } } },
  ],
  secretFiles: [
    { secrets: ['db'], secretFiles: { db: { file: './secrets/a.txt' } } },
    { secrets: ['db'], secretFiles: { db: { file: './secrets/b.txt' } } },
  ],
  dockerCreateOptions: [{ dockerCreateOptions: { Hostname: 'a' } }, { dockerCreateOptions: { Hostname: 'b' } }],
};

describe('revisionOf: every fleet-file container field changes the hash of the loaded fleet', () => {
  for (const [field, [a, b]] of Object.entries(RAW_VALUES)) {
    it(field, async () => {
      const [base, fa, fb] = await Promise.all([load({}), load(a), load(b)]);
      const hash = (f: Fleet) => revisionOf({ ...f, revisionKey: KEY });
      assert.notEqual(hash(fa), hash(base), 'setting it');
      assert.notEqual(hash(fa), hash(fb), 'changing it');
    });
  }
});

describe('secretDigest', () => {
  it('keyed, short, deterministic, and not the value', () => {
    const d = secretDigest('123456', KEY);
    assert.match(d, /^hmac-sha256:[0-9a-f]{16}$/);
    assert.equal(d, secretDigest('123456', KEY));
    assert.notEqual(d, secretDigest('123456', 'another-key'));
    assert.notEqual(d, secretDigest('123457', KEY));
    assert.ok(!d.includes('123456'));
  });
});

const MARKERS = { password: 'MARKER-pw-51c2e', token: 'MARKER-token-9a0b4', file: 'MARKER-file-77d1f' };

async function secretFleet(): Promise<Fleet> {
  writeFileSync(join(dir, 'api.env'), `API_TOKEN=${MARKERS.token}\n`);
  writeFileSync(join(dir, 'secrets', 'db.txt'), `${MARKERS.file}\n`);
  return load(
    {
      env: { DB_PASSWORD: '${DB_PASSWORD}', DSN: 'postgres://app:${DB_PASSWORD}@db/app', LOG_LEVEL: 'info' },
      envFile: './api.env',
      secrets: ['db'],
      secretFiles: { db: { file: './secrets/db.txt' } },
      command: ['node', 'server.mjs'],
    },
    { DB_PASSWORD: MARKERS.password },
  );
}

function recordOf(fleet: Fleet, number = 3): RevisionRecord {
  return {
    number,
    hash: revisionOf({ ...fleet, revisionKey: KEY }),
    image: fleet.image,
    version: fleet.version,
    port: fleet.port,
    ...recordSpec(fleet, KEY),
    changeCause: 'test',
    who: 'test@host',
    when: '2026-01-01T00:00:00.000Z',
    outcome: 'complete',
  };
}

describe('recordSpec: the state keeps references and digests, never a secret value', () => {
  it('no secret value anywhere in the record', async () => {
    const json = JSON.stringify(recordOf(await secretFleet()));
    for (const [what, marker] of Object.entries(MARKERS)) assert.ok(!json.includes(marker), `${what} value found in ${json}`);
  });

  it('literal env as written; secrets as their source and a keyed digest; container fields; secret files by path and content digest', async () => {
    const fleet = await secretFleet();
    const r = recordSpec(fleet, KEY);
    assert.deepEqual(r.env, { LOG_LEVEL: 'info' });
    assert.deepEqual(r.envSecrets, {
      DB_PASSWORD: { source: '${DB_PASSWORD}', digest: secretDigest(MARKERS.password, KEY) },
      DSN: { source: 'postgres://app:${DB_PASSWORD}@db/app', digest: secretDigest(`postgres://app:${MARKERS.password}@db/app`, KEY) },
      API_TOKEN: { source: 'envFile:./api.env', digest: secretDigest(MARKERS.token, KEY) },
    });
    assert.deepEqual(r.container, { command: ['node', 'server.mjs'], secrets: [{ name: 'db', target: 'db' }] });
    assert.deepEqual(r.secretFiles, {
      db: { path: join(dir, 'secrets', 'db.txt'), digest: secretDigest(createHash('sha256').update(`${MARKERS.file}\n`).digest('hex'), KEY) },
    });
  });

  it('a fleet with only literal env is still marked as kept by reference (envSecrets: {})', async () => {
    const r = recordSpec(await load({ env: { LOG_LEVEL: 'info' } }), KEY);
    assert.deepEqual([r.env, r.envSecrets, r.container, r.secretFiles], [{ LOG_LEVEL: 'info' }, {}, undefined, undefined]);
  });
});

describe('fleetForRecord: secrets resolved again from their references', () => {
  it('strict (undo, resume, restart): an unset variable is exit 2 naming env/DB_PASSWORD and the variable', async () => {
    const fleet = await secretFleet();
    const r = recordOf(fleet);
    try {
      fleetForRecord(fleet, r, { strict: true, lookup: () => undefined });
      assert.fail('expected a ValidationError');
    } catch (err) {
      assert.ok(err instanceof ValidationError, String(err));
      assert.equal(err.exitCode, 2);
      const pw = err.issues.find((i) => i.path === 'env/DB_PASSWORD');
      assert.ok(pw, JSON.stringify(err.issues));
      assert.match(pw.message, /revision 3 references \$\{DB_PASSWORD\}, not set in this environment/);
      assert.deepEqual(err.issues.map((i) => i.path).sort(), ['env/DB_PASSWORD', 'env/DSN']);
      assert.ok(!err.message.includes(MARKERS.password));
    }
  });

  it('strict is the default', async () => {
    const fleet = await secretFleet();
    assert.throws(() => fleetForRecord(fleet, recordOf(fleet), { lookup: () => undefined }), ValidationError);
  });

  it('lenient (status): what cannot be resolved is left out, the rest is there', async () => {
    const fleet = await secretFleet();
    const f = fleetForRecord(fleet, recordOf(fleet), { strict: false, lookup: () => undefined });
    assert.deepEqual(f.env, { LOG_LEVEL: 'info', API_TOKEN: MARKERS.token });
  });

  it('with the variable set: the same env, container and hash as the revision recorded', async () => {
    const fleet = await secretFleet();
    const r = recordOf(fleet);
    const state: FleetState = { service: 'bookstore-api', revisionKey: KEY, nextRevision: 4, revisions: [r] };
    const f = fleetForRecord({ ...fleet, env: {}, container: {} }, r, { lookup: (n) => (n === 'DB_PASSWORD' ? MARKERS.password : undefined), state });
    assert.deepEqual(f.env, fleet.env);
    assert.deepEqual(f.container, fleet.container);
    assert.deepEqual(f.envSources, fleet.envSources);
    assert.equal(revisionOf(f), r.hash);
  });

  it('strict: an env file that no longer sets the entry is exit 2 naming it', async () => {
    const fleet = await secretFleet();
    const r = recordOf(fleet);
    writeFileSync(join(dir, 'api.env'), 'OTHER=1\n');
    assert.throws(
      () => fleetForRecord(fleet, r, { lookup: (n) => (n === 'DB_PASSWORD' ? 'x' : undefined) }),
      (err: unknown) =>
        err instanceof ValidationError &&
        err.issues.length === 1 &&
        err.issues[0]!.path === 'env/API_TOKEN' &&
        /no longer sets API_TOKEN/.test(err.issues[0]!.message),
    );
  });

  it('a record from before container fields runs with none', async () => {
    const fleet = await load({ command: ['node', 'new.mjs'] });
    const r: RevisionRecord = { ...recordOf(await load({})), container: undefined };
    assert.deepEqual(fleetForRecord(fleet, r).container, {});
  });
});

describe('scrubLegacySecrets: plaintext env of old records becomes digests', () => {
  const legacy = (): RevisionRecord => ({
    number: 1,
    hash: 'abc1234567',
    image: 'bookstore-api:0.9.0',
    version: '0.9.0',
    port: 8080,
    env: { DB_PASSWORD: 'legacy-MARKER-c0ffee', LOG_LEVEL: 'debug' },
    changeCause: 'deploy',
    who: 'a@b',
    when: '2025-01-01T00:00:00.000Z',
    outcome: 'complete',
  });

  it('replaces every value of an old record with a digest, and says it changed something', () => {
    const state: FleetState = { service: 'bookstore-api', revisionKey: KEY, nextRevision: 2, revisions: [legacy()] };
    assert.equal(scrubLegacySecrets(state), true);
    const r = state.revisions[0]!;
    assert.deepEqual(r.env, {});
    assert.deepEqual(r.envSecrets, {
      DB_PASSWORD: { source: NOT_KEPT, digest: secretDigest('legacy-MARKER-c0ffee', KEY) },
      LOG_LEVEL: { source: NOT_KEPT, digest: secretDigest('debug', KEY) },
    });
    assert.ok(!JSON.stringify(state).includes('legacy-MARKER-c0ffee'));
    assert.equal(scrubLegacySecrets(state), false, 'a second pass has nothing to do');
  });

  it('leaves new records alone: secrets by reference, only literal env, container fields, adopted (no env)', async () => {
    const secretRecord = recordOf(await secretFleet(), 2);
    const literalOnly = recordOf(await load({ env: { LOG_LEVEL: 'info' } }), 3);
    const withContainer = { ...recordOf(await load({ command: ['x'] }), 4), envSecrets: undefined, env: { A: '1' } };
    const adopted: RevisionRecord = { ...legacy(), number: 5, env: {} };
    const state: FleetState = { service: 'bookstore-api', revisionKey: KEY, nextRevision: 6, revisions: [secretRecord, literalOnly, withContainer, adopted] };
    const before = JSON.stringify(state);
    assert.equal(scrubLegacySecrets(state), false);
    assert.equal(JSON.stringify(state), before);
  });

  it('undo to a scrubbed record: strict says the value was not kept; lenient leaves it out', () => {
    const state: FleetState = { service: 'bookstore-api', revisionKey: KEY, nextRevision: 2, revisions: [legacy()] };
    scrubLegacySecrets(state);
    const fleet = { source: { file: FLEET_FILE } } as Fleet;
    assert.throws(
      () => fleetForRecord(fleet, state.revisions[0]!, { lookup: () => undefined }),
      (err: unknown) =>
        err instanceof ValidationError &&
        err.issues.some(
          (i) => i.path === 'env/DB_PASSWORD' && /recorded before fleetroll kept secrets as references: its value is not in the state/.test(i.message),
        ),
    );
    assert.deepEqual(fleetForRecord(fleet, state.revisions[0]!, { strict: false, lookup: () => undefined }).env, {});
  });
});
