/**
 * A private registry with a password, on the real engine: docker-registry
 * (distribution) with htpasswd auth on a free 127.0.0.1 port (dockerd talks
 * plain HTTP to 127.0.0.0/8 registries). The app is pushed with credentials,
 * its local tag removed, and a fleet serving 1.0.0 under load is deployed to
 * the registry's 1.1.0 with `registry:` and `pull: always`: no failed
 * request through nginx, status and history show the pinned digest, every
 * container runs it, and the password is in no output, no state, no journal
 * and no container. A wrong password fails preflight (exit 1) naming the
 * server and the user, and changes nothing.
 *
 * Everything it creates is named registry-...; the fleet fixture labels and
 * removes its network, nginx and instances.
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadFleet } from '../../src/config/load.js';
import { buildDeps, fleetHandles } from '../../src/wiring.js';
import { LABELS } from '../../src/ports.js';
import { docker, failedOf, guard, freePort, root, runCli, startLoad, useFleets, waitFor, type CliRun } from './fixture.js';

const fleet = useFleets();
const PASSWORD = `registry-pw-${Math.random().toString(36).slice(2, 10)}`;
const USER = 'fleetroll';
const dir = mkdtempSync(join(tmpdir(), 'registry-test-'));
let registry = '';
let repo = '';
let child: ChildProcess | undefined;
const auth = () => ({ username: USER, password: PASSWORD, serveraddress: registry });

/** A bcrypt htpasswd line (distribution accepts only bcrypt): python3's crypt, else apache2-utils' htpasswd. */
function htpasswdLine(user: string, password: string): string {
  const py = spawnSync('python3', ['-W', 'ignore', '-c', 'import crypt,sys; print(crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH)))', password], {
    encoding: 'utf8',
  });
  const hash = py.status === 0 ? py.stdout.trim() : '';
  if (hash.startsWith('$2')) return `${user}:${hash}\n`;
  const h = spawnSync('htpasswd', ['-nbB', user, password], { encoding: 'utf8' });
  if (h.status === 0) return h.stdout.trim() + '\n';
  throw new Error('no bcrypt: need python3 with crypt (Debian 12) or htpasswd (apt-get install apache2-utils)');
}

async function progress(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += chunk.toString();
  const failed = text
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as { error?: string })
    .find((m) => m.error);
  if (failed) throw new Error(failed.error);
  return text;
}

/**
 * The fleet file with registry: and pull: always. The password comes from the
 * environment through the fleet file's ${VAR} interpolation where this
 * fleetroll has it (src/config/interpolate.ts); else it is written in.
 */
function withRegistry(file: string, password: string): string {
  const interpolates = existsSync(join(root, 'src/config/interpolate.ts'));
  appendFileSync(
    file,
    `registry: { server: "${registry}", username: ${USER}, password: ${JSON.stringify(interpolates ? '${REGISTRY_PASSWORD}' : password)} }\npull: always\n`,
  );
  return file;
}

describe('a private registry with a password', { timeout: guard(300_000) }, () => {
  before(async () => {
    const port = await freePort();
    registry = `127.0.0.1:${port}`;
    repo = `${registry}/registry-app`;
    writeFileSync(join(dir, 'htpasswd'), htpasswdLine(USER, PASSWORD));
    writeFileSync(
      join(dir, 'config.yml'),
      `version: 0.1\nlog: { level: warn }\nstorage:\n  filesystem: { rootdirectory: ${dir}/data }\nhttp:\n  addr: ${registry}\nauth:\n  htpasswd: { realm: registry-test, path: ${dir}/htpasswd }\n`,
    );
    child = spawn('/usr/bin/docker-registry', ['serve', join(dir, 'config.yml')], { stdio: 'ignore' });
    await waitFor(`docker-registry on ${registry}`, async () => (await fetch(`http://${registry}/v2/`).catch(() => undefined))?.status === 401);
    // Both versions pushed with credentials; then only the local tags go (the builds stay as fleetroll-example:*).
    for (const v of ['1.0.0', '1.1.0']) {
      await docker.getImage(`fleetroll-example:${v}`).tag({ repo, tag: v });
      await progress((await docker.getImage(`${repo}:${v}`).push({ authconfig: auth() })) as NodeJS.ReadableStream);
      await docker.getImage(`${repo}:${v}`).remove();
    }
  });

  after(async () => {
    child?.kill('SIGTERM');
    // Whatever the deploys pulled: the tags and digest references of registry-app only.
    for (const img of await docker.listImages({ filters: { reference: [`${repo}`] } }).catch(() => [])) {
      for (const ref of [...(img.RepoTags ?? []), ...(img.RepoDigests ?? [])])
        if (ref.startsWith(repo))
          await docker
            .getImage(ref)
            .remove()
            .catch(() => {});
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('deploys under load with pull: always: no failed request, the digest in status and history, the password nowhere', async () => {
    const f = await fleet('registry-ok');
    const start = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0 });
    assert.equal((await runCli(['deploy', '-f', start])).code, 0);
    const file = withRegistry(f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, image: `${repo}:1.1.0` }), PASSWORD);
    const env = { REGISTRY_PASSWORD: PASSWORD };
    assert.equal(
      await docker
        .getImage(`${repo}:1.1.0`)
        .inspect()
        .then(
          () => true,
          () => false,
        ),
      false,
      'the local tag is gone: the deploy must pull',
    );

    const load = startLoad(f.url, { getPerSecond: 20, postConcurrency: 1 });
    const t0 = Date.now();
    const r = await runCli(['deploy', '-f', file, '--json'], { env });
    const wall = Date.now() - t0;
    const records = await load.stop();
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(failedOf(records), [], 'no failed request through nginx');
    assert.ok(records.length > 10, `load ran (${records.length} requests)`);
    const out = JSON.parse(r.stdout) as { digest?: string; durationMs: number };
    assert.match(out.digest ?? '', new RegExp(`^${repo.replace(/[.:/]/g, '\\$&')}@sha256:[0-9a-f]{64}$`));
    const digest = out.digest!;
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0']);

    // Every container runs the pinned reference; the image as written is on its label.
    for (const i of await f.instances()) {
      const c = await docker.getContainer(i.id).inspect();
      assert.equal(c.Config.Image, digest);
      assert.equal(c.Config.Labels[LABELS.imageRef], `${repo}:1.1.0`);
      assert.doesNotMatch(JSON.stringify(c), new RegExp(PASSWORD), 'no password in the container');
    }

    // Time spent resolving digests, from the pin's own line, against the whole deploy.
    const pinLine = /pinned image .* resolved on (\d+) host\(s\) in (\d+) ms/.exec(r.stdout + r.stderr);
    assert.ok(pinLine, 'the deploy reports its pin');
    const pinMs = Number(pinLine[2]);
    console.log(
      `registry: deploy ${out.durationMs} ms (wall ${wall} ms incl. preflight pull); resolving digests ${pinMs} ms = ${((pinMs / wall) * 100).toFixed(2)}% of the wall time`,
    );

    const status = await runCli(['status', '-f', file], { env });
    assert.match(status.stdout, new RegExp(`image pinned to ${digest.replace(/[.:/]/g, '\\$&')}`));
    assert.match(status.stdout, /2 of the desired revision, 2 ready — up to date/);
    const history = await runCli(['history', '-f', file], { env });
    assert.match(history.stdout, /DIGEST/);
    assert.match(history.stdout, new RegExp(`${repo.replace(/[.:/]/g, '\\$&')}@sha256:[0-9a-f]{12}\\s`));
    const shown = await runCli(['history', '-f', file, '--revision', '2', '--json'], { env });
    assert.equal((JSON.parse(shown.stdout) as { digest?: string }).digest, digest);

    // A redeploy of the same tag resolves to the same digest: the same revision, nothing rolls.
    const again = await runCli(['deploy', '-f', file], { env });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /0 wave\(s\)/);

    // The password is in no output, no state and no journal.
    // The state of this fleet, read with the StateStore adapter (the start file names the same service and host).
    const startFleet = await loadFleet(start);
    const handles = fleetHandles(startFleet, await buildDeps(startFleet));
    const texts: [string, string][] = [
      ['deploy output', r.stdout + r.stderr],
      ['status', status.stdout + status.stderr],
      ['history', history.stdout + history.stderr + shown.stdout],
      ['redeploy', again.stdout + again.stderr],
      ['state', JSON.stringify(await handles.store.read())],
      ['journal', JSON.stringify(await handles.store.journal())],
    ];
    for (const [what, text] of texts) assert.ok(!text.includes(PASSWORD), `no password in the ${what}`);
  });

  it('a wrong password fails preflight with exit 1 naming the server and the user, not the password; nothing changes', async () => {
    const f = await fleet('registry-deny');
    const start = f.fleetFile({ replicas: 1 });
    assert.equal((await runCli(['deploy', '-f', start])).code, 0);
    const ids = (await f.instances()).map((i) => i.id).sort();
    const before = (await runCli(['history', '-f', start, '--json'])).stdout;
    const wrong = `wrong-${PASSWORD}`;
    const file = withRegistry(f.fleetFile({ replicas: 1, image: `${repo}:1.1.0` }), wrong);
    const r: CliRun = await runCli(['deploy', '-f', file], { env: { REGISTRY_PASSWORD: wrong } });
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stderr, /preflight failed, nothing was changed/);
    assert.match(
      r.stderr,
      new RegExp(
        `could not pull image ${repo.replace(/[.:/]/g, '\\$&')}:1\\.1\\.0 on host local: .*\\(registry ${registry.replace(/[.:]/g, '\\$&')} as user ${USER}\\)`,
      ),
    );
    assert.ok(!(r.stdout + r.stderr).includes(PASSWORD), 'the password is not shown (nor the wrong one, which contains it)');
    console.log(`registry: denied: ${r.stderr.split('\n').find((l) => l.includes('could not pull')) ?? ''}`);
    assert.deepEqual((await f.instances()).map((i) => i.id).sort(), ids, 'no instance changed');
    assert.equal((await runCli(['history', '-f', start, '--json'])).stdout, before, 'no revision recorded');
    assert.deepEqual(await f.versions(), ['1.0.0']);
  });
});
