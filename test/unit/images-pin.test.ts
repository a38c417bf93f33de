/**
 * Pull policies, registry credentials and pinning, on fake Docker hosts with
 * an image store and a fake registry that checks a password: `always` pulls
 * on every host, `never` fails naming the host that lacks the image,
 * `missing` copies; a wrong password fails preflight naming the server and
 * the user and never the password; the tag is resolved once to a build and a
 * host where the tag moved is given the pinned build (pulled by digest or
 * copied) or, with `pull: never`, fails preflight naming it.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { describe, it } from 'node:test';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import { registrySchema, pullSchema } from '../../src/config/images.js';
import { isImageId, parseImageRef, repoDigestFor, shortDigest } from '../../src/core/imageRef.js';
import { credentialsFromConfig } from '../../src/adapters/registryAuth.js';
import { RolloutFailedError } from '../../src/errors.js';
import type { RolloutEvent } from '../../src/engine/events.js';
import { HostWork } from '../../src/engine/hostWork.js';
import { instanceSpec } from '../../src/engine/instances.js';
import { pinImage } from '../../src/engine/pin.js';
import { preflight } from '../../src/engine/preflight.js';
import { redact } from '../../src/engine/images.js';
import { revisionOf } from '../../src/engine/revision.js';
import { fleetForRecord } from '../../src/engine/records.js';
import { LABELS, type ImageInfo, type InstanceInfo, type RegistryAuth, type Runtime } from '../../src/ports.js';

const SERVER = 'reg.test:5000';
const REPO = `${SERVER}/api`;
const TAG = `${REPO}:1.0`;
const PASSWORD = 'pw-MARKER-5f3a';
const id = (c: string) => `sha256:${c.repeat(64)}`;
const dig = (c: string) => `sha256:${c.repeat(64)}`;

/** A registry: tag or digest → image ID; pulls need the password. */
class FakeRegistry {
  tags = new Map<string, string>();
  digests = new Map<string, string>();
  pulls: { host: string; ref: string; auth?: RegistryAuth | undefined }[] = [];
  publish(tag: string, imageId: string, digest: string) {
    this.tags.set(tag, imageId);
    this.digests.set(`${REPO}@${digest}`, imageId);
  }
  digestOf(imageId: string): string | undefined {
    return [...this.digests].find(([, v]) => v === imageId)?.[0];
  }
}

/** A Docker host that only does images. */
class ImageHost implements Runtime {
  /** ref (tag) → ID; IDs with their RepoDigests. */
  tags = new Map<string, string>();
  images = new Map<string, string[]>();
  calls: string[] = [];
  constructor(
    readonly host: string,
    private readonly registry: FakeRegistry,
  ) {}
  has(tag: string, imageId: string, repoDigests: string[] = []) {
    this.tags.set(tag, imageId);
    this.images.set(imageId, repoDigests);
    return this;
  }
  private resolve(ref: string): string | undefined {
    if (this.images.has(ref)) return ref;
    if (this.tags.has(ref)) return this.tags.get(ref);
    return [...this.images].find(([, ds]) => ds.includes(ref))?.[0];
  }
  async ping() {}
  async imageExists(ref: string) {
    return this.resolve(ref) !== undefined;
  }
  async imageInfo(ref: string): Promise<ImageInfo | undefined> {
    const i = this.resolve(ref);
    return i ? { id: i, repoDigests: [...(this.images.get(i) ?? [])] } : undefined;
  }
  async pullImage(ref: string, auth?: RegistryAuth) {
    this.calls.push(`pull ${ref}`);
    this.registry.pulls.push({ host: this.host, ref, auth });
    if (auth?.password !== PASSWORD) return `Head "http://${SERVER}/v2/api/manifests/1.0": no basic auth credentials`;
    const got = this.registry.tags.get(ref) ?? this.registry.digests.get(ref);
    if (!got) return 'manifest unknown';
    const digest = this.registry.digestOf(got)!;
    this.images.set(got, [...new Set([...(this.images.get(got) ?? []), digest])]);
    if (!ref.includes('@')) this.tags.set(ref, got);
    return undefined;
  }
  async saveImage(ref: string) {
    this.calls.push(`save ${ref}`);
    const i = this.resolve(ref)!;
    const tags = [...this.tags].filter(([, v]) => v === i).map(([t]) => t);
    // A save by ID carries no tags; like Docker, no RepoDigests either way.
    return Readable.from([JSON.stringify({ id: i, tags: ref === i ? [] : tags })]);
  }
  async loadImage(tar: NodeJS.ReadableStream) {
    let text = '';
    for await (const c of tar) text += c.toString();
    const { id: i, tags } = JSON.parse(text) as { id: string; tags: string[] };
    this.calls.push(`load ${i}`);
    if (!this.images.has(i)) this.images.set(i, []);
    for (const t of tags) this.tags.set(t, i);
  }
  async networkExists() {
    return true;
  }
  async inspect(): Promise<InstanceInfo | undefined> {
    return undefined;
  }
  async list() {
    return [];
  }
  async run(): Promise<InstanceInfo> {
    throw new Error('not here');
  }
  async stop() {}
  async remove() {}
  async logs() {
    return '';
  }
  async specOf() {
    return undefined;
  }
  async health() {
    return 'none' as const;
  }
  async exec() {
    return 0;
  }
  async containerImage() {
    return undefined;
  }
}

async function fleetOf(extra: Record<string, unknown> = {}, hosts = ['a', 'b']): Promise<Fleet> {
  return fleetFromObject(
    {
      service: 'api',
      image: TAG,
      replicas: 2,
      port: 8080,
      hosts: hosts.map((name) => ({ name })),
      registry: { server: SERVER, username: 'ci', password: PASSWORD },
      ...extra,
    },
    'fleet.yaml',
  );
}

function world() {
  const registry = new FakeRegistry();
  registry.publish(TAG, id('1'), dig('d'));
  const a = new ImageHost('a', registry);
  const b = new ImageHost('b', registry);
  const events: string[] = [];
  const s = {
    runtimes: new Map<string, Runtime>([
      ['a', a],
      ['b', b],
    ]),
    clock: { now: () => 0, sleep: async () => {}, timer: () => ({ cancel() {} }) },
    emit: (e: RolloutEvent) => events.push(JSON.stringify(e)),
    copyImages: true,
  };
  return { registry, a, b, events, s };
}

/** Preflight then pinning, as rollout.ts prepare() runs them. */
async function prepare(fleet: Fleet, s: ReturnType<typeof world>['s']): Promise<Fleet> {
  const work = new HostWork(4);
  await preflight(fleet, [], work, s);
  return pinImage(fleet, work, s);
}

async function failure(p: Promise<unknown>): Promise<RolloutFailedError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof RolloutFailedError, `expected a preflight failure, got ${String(err)}`);
  assert.equal(err.phase, 'preflight');
  assert.equal(err.exitCode, 1);
  return err;
}

describe('pull policies', () => {
  it('always: pulls on every host even where the image is present, with the fleet registry credentials', async () => {
    const w = world();
    w.a.has(TAG, id('1'), [`${REPO}@${dig('d')}`]);
    w.b.has(TAG, id('1'), [`${REPO}@${dig('d')}`]);
    const f = await prepare(await fleetOf({ pull: 'always' }), w.s);
    assert.deepEqual(w.registry.pulls.map((p) => `${p.host} ${p.ref}`).sort(), [`a ${TAG}`, `b ${TAG}`]);
    for (const p of w.registry.pulls) assert.deepEqual(p.auth, { serveraddress: SERVER, username: 'ci', password: PASSWORD });
    assert.equal(f.digest, `${REPO}@${dig('d')}`);
  });

  it('always with a wrong password: preflight fails naming every host, the server and the user, never the password', async () => {
    const w = world();
    const wrong = 'wrong-MARKER-77';
    const fleet = await fleetOf({ pull: 'always', registry: { server: SERVER, username: 'ci', password: wrong } });
    const err = await failure(prepare(fleet, w.s));
    assert.match(err.message, /^preflight failed, nothing was changed:/);
    for (const h of ['a', 'b'])
      assert.match(
        err.message,
        new RegExp(`could not pull image ${TAG.replace(/[.:/]/g, '\\$&')} on host ${h}: .*no basic auth credentials \\(registry reg\\.test:5000 as user ci\\)`),
      );
    for (const text of [err.message, err.hint ?? '', JSON.stringify(err.details), ...w.events]) {
      assert.doesNotMatch(text, /MARKER/, 'no password in any message or event');
    }
  });

  it('never: a host without the image fails preflight naming it; nothing is pulled or copied', async () => {
    const w = world();
    w.a.has(TAG, id('1'));
    const err = await failure(prepare(await fleetOf({ pull: 'never' }), w.s));
    assert.match(err.message, /image reg\.test:5000\/api:1\.0 is not present on host b, and pull: never neither pulls nor copies it/);
    assert.doesNotMatch(err.message, /host a/);
    assert.deepEqual([...w.a.calls, ...w.b.calls], []);
  });

  it('missing (the default): present hosts are left alone, a host without it gets a copy', async () => {
    const w = world();
    w.a.has(TAG, id('1'));
    const f = await prepare(await fleetOf(), w.s);
    assert.equal(f.pull, 'missing');
    assert.deepEqual(w.registry.pulls, []);
    assert.deepEqual(w.b.calls, [`load ${id('1')}`]);
    // A local build: no registry digest anywhere, so the pin is the image ID.
    assert.equal(f.digest, id('1'));
    assert.equal(f.pinnedImage, id('1'));
  });

  it('credentials are sent only to their own registry', async () => {
    const w = world();
    const err = await failure(prepare(await fleetOf({ pull: 'always', image: 'other.example/api:1.0' }), w.s));
    assert.match(
      err.message,
      /image other\.example\/api:1\.0 is on registry other\.example, but registry\/server is reg\.test:5000: fleetroll sends the credentials only to their own registry/,
    );
    assert.deepEqual(w.registry.pulls, []);
  });
});

describe('pinning the tag to one build', () => {
  it('every host has the same build: the digest is the registry digest and containers use it', async () => {
    const w = world();
    w.a.has(TAG, id('1'), [`${REPO}@${dig('d')}`]);
    w.b.has(TAG, id('1'), [`${REPO}@${dig('d')}`]);
    const fleet = await fleetOf();
    const f = await prepare(fleet, w.s);
    assert.equal(f.digest, `${REPO}@${dig('d')}`);
    assert.equal(f.pinnedImage, f.digest);
    assert.equal(f.image, TAG, 'the image as written stays for display');
    const spec = instanceSpec(f, revisionOf(f), 'x', undefined, 0);
    assert.equal(spec.image, f.digest);
    assert.equal(spec.labels[LABELS.imageRef], TAG);
    assert.equal(spec.labels[LABELS.digest], f.digest);
    assert.ok(w.events.some((e) => e.includes(`pinned image ${TAG} to ${REPO}@${dig('d')}`)));
  });

  it('the tag moved on host b: b is given the pinned build by a pull of the digest', async () => {
    const w = world();
    w.registry.publish(`${REPO}:next`, id('2'), dig('e'));
    w.a.has(TAG, id('1'), [`${REPO}@${dig('d')}`]);
    w.b.has(TAG, id('2'), [`${REPO}@${dig('e')}`]);
    const f = await prepare(await fleetOf(), w.s);
    assert.equal(f.digest, `${REPO}@${dig('d')}`);
    assert.deepEqual(w.b.calls, [`pull ${REPO}@${dig('d')}`]);
    assert.equal((await w.b.imageInfo(f.pinnedImage!))?.id, id('1'));
    assert.equal(f.pinnedImage, f.digest);
  });

  it('the tag moved on host b and b cannot pull: the build is copied by ID, and containers use the ID', async () => {
    const w = world();
    w.a.has(TAG, id('1'), [`${REPO}@${dig('d')}`]);
    w.b.has(TAG, id('2'));
    // No credentials reach b's pull (the registry refuses): the copy makes it consistent.
    const f = await prepare(await fleetOf({ registry: { server: SERVER, username: 'ci', password: 'wrong' } }), w.s);
    assert.deepEqual(w.a.calls, [`save ${id('1')}`]);
    assert.deepEqual(w.b.calls, [`pull ${REPO}@${dig('d')}`, `load ${id('1')}`]);
    assert.equal(f.digest, `${REPO}@${dig('d')}`, 'the recorded digest is the registry digest');
    assert.equal(f.pinnedImage, id('1'), 'b has no registry digest for its copy: every container uses the image ID');
  });

  it('the tag moved on host b with pull: never: preflight fails naming b', async () => {
    const w = world();
    w.a.has(TAG, id('1'));
    w.b.has(TAG, id('2'));
    const err = await failure(prepare(await fleetOf({ pull: 'never' }), w.s));
    assert.match(
      err.message,
      new RegExp(
        `image ${TAG.replace(/[.:/]/g, '\\$&')} is build sha256:222222222222 on host b, but the deploy pinned it to sha256:111111111111 \\(found on host a\\): the tag moved, and pull: never`,
      ),
    );
    assert.deepEqual(w.b.calls, []);
  });

  it('the tag moved on host b, no pull and no copy possible: preflight fails naming b and why', async () => {
    const w = world();
    w.a.has(TAG, id('1'));
    w.b.has(TAG, id('2'));
    const err = await failure(prepare(await fleetOf(), { ...w.s, copyImages: false }));
    assert.match(
      err.message,
      /on host b, but the deploy pinned it to sha256:111111111111 \(found on host a\): the tag moved; could not give host b the pinned build \(image copies are off\)/,
    );
  });

  it('a recorded digest (undo, resume) is what the hosts must have, whatever the tag names now', async () => {
    const w = world();
    w.registry.publish(`${REPO}:next`, id('2'), dig('e'));
    w.a.has(TAG, id('2'), [`${REPO}@${dig('e')}`]).has('old', id('1'), [`${REPO}@${dig('d')}`]);
    w.b.has(TAG, id('2'), [`${REPO}@${dig('e')}`]);
    const record = {
      number: 1,
      hash: 'x',
      image: TAG,
      digest: `${REPO}@${dig('d')}`,
      version: '1.0',
      port: 8080,
      env: {},
      changeCause: '',
      who: '',
      when: '',
      outcome: 'complete' as const,
    };
    const f = await prepare(fleetForRecord(await fleetOf(), record), w.s);
    assert.equal(f.digest, record.digest);
    // pull: missing copies first: b gets the recorded build (by ID) from a, whatever its tag names.
    assert.deepEqual(w.a.calls, [`save ${id('1')}`]);
    assert.deepEqual(w.b.calls, [`load ${id('1')}`]);
    assert.equal(f.pinnedImage, id('1'), 'the copy has no registry digest: containers use the ID');
    // pull: always pulls the recorded digest, not the tag, on every host.
    const w2 = world();
    const f2 = await prepare(fleetForRecord(await fleetOf({ pull: 'always' }), record), w2.s);
    assert.deepEqual(w2.registry.pulls.map((p) => `${p.host} ${p.ref}`).sort(), [`a ${record.digest}`, `b ${record.digest}`]);
    assert.equal(f2.pinnedImage, record.digest);
  });

  it('hosts that cannot say which build they have are not pinned (simulated hosts)', async () => {
    const w = world();
    w.a.has(TAG, id('1'));
    w.b.has(TAG, id('1'));
    const bare = Object.assign(Object.create(Object.getPrototypeOf(w.b) as object) as ImageHost, w.b, { imageInfo: undefined });
    const f = await pinImage(await fleetOf(), new HostWork(2), {
      ...w.s,
      runtimes: new Map<string, Runtime>([
        ['a', w.a],
        ['b', bare],
      ]),
    });
    assert.equal(f.digest, undefined);
    assert.equal(instanceSpec(f, 'r', 'x', undefined, 0).image, TAG);
  });
});

describe('the revision hash and the digest', () => {
  const base = { image: TAG, env: {}, port: 8080, version: '1.0' };
  const cases: { name: string; a: Record<string, unknown>; b: Record<string, unknown>; same: boolean }[] = [
    { name: 'no digest: the hash of the image as written, as before pinning', a: base, b: { ...base, digest: undefined }, same: true },
    { name: 'the same digest again (the tag did not move): the same revision', a: { ...base, digest: id('1') }, b: { ...base, digest: id('1') }, same: true },
    { name: 'the tag moved to a new build: a new revision', a: { ...base, digest: id('1') }, b: { ...base, digest: id('2') }, same: false },
    { name: 'pinned vs not pinned differ (plan does not know the build)', a: base, b: { ...base, digest: id('1') }, same: false },
    { name: 'the container reference is not part of it', a: { ...base, digest: id('1') }, b: { ...base, digest: id('1'), pinnedImage: id('1') }, same: true },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(revisionOf(c.a as never) === revisionOf(c.b as never), c.same);
    });
  }
});

describe('image references', () => {
  const rows: { ref: string; registry: string; path: string; tag?: string; digest?: string }[] = [
    { ref: 'nginx', registry: 'docker.io', path: 'library/nginx' },
    { ref: 'nginx:1.25', registry: 'docker.io', path: 'library/nginx', tag: '1.25' },
    { ref: 'docker.io/library/nginx:1', registry: 'docker.io', path: 'library/nginx', tag: '1' },
    { ref: 'team/api:2', registry: 'docker.io', path: 'team/api', tag: '2' },
    { ref: '127.0.0.1:5000/api:1.0.0', registry: '127.0.0.1:5000', path: 'api', tag: '1.0.0' },
    { ref: 'localhost/x/y', registry: 'localhost', path: 'x/y' },
    { ref: `reg.test:5000/api@${dig('d')}`, registry: 'reg.test:5000', path: 'api', digest: dig('d') },
  ];
  for (const r of rows) {
    it(`parses ${r.ref}`, () => {
      const p = parseImageRef(r.ref);
      assert.deepEqual(
        { registry: p.registry, path: p.path, tag: p.tag, digest: p.digest },
        { registry: r.registry, path: r.path, tag: r.tag, digest: r.digest },
      );
    });
  }
  it('picks the registry digest of the fleet repository only', () => {
    assert.equal(repoDigestFor('nginx:1', [`other/x@${dig('a')}`, `nginx@${dig('b')}`]), `nginx@${dig('b')}`);
    assert.equal(repoDigestFor(TAG, [`other.example/api@${dig('a')}`]), undefined);
    assert.equal(isImageId(id('1')), true);
    assert.equal(shortDigest(`${REPO}@${dig('d')}`), `${REPO}@sha256:dddddddddddd`);
  });
});

describe('registry credentials', () => {
  it('the schema never quotes the password', () => {
    for (const password of [12345, '', null]) {
      const r = registrySchema.safeParse({ server: SERVER, username: 'ci', password });
      assert.equal(r.success, false);
      assert.doesNotMatch(JSON.stringify(r.error?.issues), /12345/);
    }
    assert.equal(registrySchema.safeParse({ server: 'https://reg.test/v2', username: 'ci', password: 'x' }).success, false);
    assert.match(pullSchema.safeParse('sometimes').error?.issues[0]?.message ?? '', /must be "always", "missing" or "never", got "sometimes"/);
  });

  it('a fleet file with a bad registry or pull names the field', async () => {
    const err = await fleetOf({ pull: 'sometimes', registry: { server: SERVER, username: 'ci' } }).then(
      () => undefined,
      (e: unknown) => e as { issues: { path: string; message: string }[] },
    );
    assert.deepEqual(err?.issues.map((i) => i.path).sort(), ['pull', 'registry/password']);
  });

  const file = '/home/u/.docker/config.json';
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const rows: { name: string; config: Record<string, unknown>; server: string; want: RegistryAuth | undefined }[] = [
    {
      name: 'auths with base64 auth',
      config: { auths: { [SERVER]: { auth: b64(`ci:${PASSWORD}`) } } },
      server: SERVER,
      want: { serveraddress: SERVER, username: 'ci', password: PASSWORD },
    },
    {
      name: 'a key with a scheme',
      config: { auths: { [`https://${SERVER}`]: { auth: b64('ci:p:w') } } },
      server: SERVER,
      want: { serveraddress: SERVER, username: 'ci', password: 'p:w' },
    },
    {
      name: 'username and password',
      config: { auths: { [SERVER]: { username: 'ci', password: 'x' } } },
      server: SERVER,
      want: { serveraddress: SERVER, username: 'ci', password: 'x' },
    },
    {
      name: 'Docker Hub under its v1 key',
      config: { auths: { 'https://index.docker.io/v1/': { auth: b64('me:x') } } },
      server: 'docker.io',
      want: { serveraddress: 'docker.io', username: 'me', password: 'x' },
    },
    { name: 'another registry: none', config: { auths: { 'other.example': { auth: b64('me:x') } } }, server: SERVER, want: undefined },
  ];
  for (const r of rows) {
    it(`config.json: ${r.name}`, async () => {
      assert.deepEqual(await credentialsFromConfig(r.config, r.server, file), r.want);
    });
  }

  it('a credential helper that is not installed is named, and the failure says which registry', async () => {
    const err = await credentialsFromConfig({ credHelpers: { [SERVER]: 'fleetroll-test-absent' } }, SERVER, file).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    assert.match(err?.message ?? '', /cannot run the credential helper docker-credential-fleetroll-test-absent for registry reg\.test:5000: not installed/);
  });

  it('redacts a secret and its base64 form', () => {
    assert.equal(redact(`a ${PASSWORD} b ${b64(PASSWORD)} c`, [PASSWORD]), 'a *** b *** c');
  });
});
