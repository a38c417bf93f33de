/**
 * A team's docker-compose.yml as the fleet's container, on a real Docker
 * engine behind a real nginx, through the built CLI (docs/compose.md):
 *
 *  - the reverse form: `fleetroll deploy -f docker-compose.yml --service api`,
 *    the fleet settings in x-fleetroll: blocks; the compose fields reach the
 *    containers, a tag change in the compose file rolls out under load, plan
 *    shows the field diff, and the ${DB_PASSWORD} secret appears nowhere but in
 *    the containers' environment;
 *  - adopted from one: containers started the way compose starts the repo's
 *    docker-compose.yml (anchors, merge keys, build, container_name), adopted
 *    with a fleet file's `compose: { file, service, ignore }`, then rolled; the
 *    new instances keep the compose service's environment, labels, init and
 *    stop_grace_period (each asserted: they were once dropped silently);
 *  - a compose field fleetroll cannot honour is refused (exit 2) by validate
 *    and deploy, naming the field and why, and nothing is created.
 *
 * docker-compose itself is not needed: the test starts the "compose"
 * containers with the engine API and the settings compose would use.
 *
 * The app images are this file's own tags (fleetroll-cinteg2:*), built from
 * examples/app, for the reason container.test.ts gives: the shared
 * fleetroll-example tags are rebuilt by whichever worktree's examples/app ran
 * last, and this file needs the app's /api/env-digest and /api/data.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type Dockerode from 'dockerode';
import { execa } from 'execa';
import { ACCESS_LOG } from '../../src/experiment/rehearse.js';
import { FleetStateStore } from '../../src/adapters/fleetState.js';
import { LABELS } from '../../src/ports.js';
import { docker, guard, runCli, UPSTREAM_FILE, useFleets, type CliRun, type TestFleet } from './fixture.js';
import { get, inspectAll, removeVolumes, report, stateArchive, underLoad, ownAppImages, sha256 } from './rollouts.js';

const fleet = useFleets();
const APP = 'fleetroll-cinteg2';
const { V1, V2 } = ownAppImages(APP);
/** On every container this file starts itself (the "compose" ones), to remove them by label. */
const OWN = 'cinteg2.test';

/** The fixture's nginx as a loadBalancers entry (YAML flow mapping). */
const lbOf = (f: TestFleet) =>
  `{ nginx: { container: ${f.names.nginx}, host: local, upstreamFile: ${UPSTREAM_FILE}, upstream: ${f.names.upstream}, accessLog: ${ACCESS_LOG} } }`;
const hostOf = (f: TestFleet) => `{ name: local, docker: "unix:///var/run/docker.sock", network: ${f.names.network} }`;

/** The example image has no shell or curl: node itself asks the readiness endpoint (as examples/compose-service does). */
const HEALTH_TEST = ['CMD', 'node', '-e', "fetch('http://127.0.0.1:8080/health/ready').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"];

interface ServiceFile {
  image: string;
  labels: Record<string, string>;
  maxFile: string;
  /** Replaces the ports: line (for the refused-field test). */
  ports?: string;
  /** More service keys, as YAML lines (indented by 4). */
  more?: string;
}

/** A compose file with one service `api` whose fleet settings are in x-fleetroll: blocks (form 2). */
function composeWithFleet(f: TestFleet, s: ServiceFile): string {
  return `# written by test/integration/compose.test.ts
name: ${f.names.service}

x-fleetroll:
  hosts: [${hostOf(f)}]
  strategy: { type: RollingUpdate, rollingUpdate: { maxSurge: 1, maxUnavailable: 0 } }
  drainSeconds: 1
  progressDeadlineSeconds: 60
  # Run by sh on this machine, which reads the variable itself: as in a fleet
  # file, fleetroll must not interpolate it (it prints a hook's argv).
  hooks: { preDeploy: [sh, -c, 'test -n "$DB_PASSWORD"'] }

services:
  api:
    image: ${s.image}
    environment:
      DB_PASSWORD: "\${DB_PASSWORD:?set DB_PASSWORD}"
      DATABASE_URL: "postgres://bookstore:\${DB_PASSWORD}@db.internal:5432/bookstore"
      DATA_DIR: /home/node
      WARMUP_SECONDS: "0.5"
      PRESTOP_SECONDS: "1"
    ${s.ports ?? 'ports: ["8080"]'}
    volumes: [data:/home/node]
    mem_limit: 128m
    logging:
      driver: json-file
      options: { max-size: 1m, max-file: "${s.maxFile}" }
    labels: ${JSON.stringify(s.labels)}
    healthcheck:
      test: ${JSON.stringify(HEALTH_TEST)}
      interval: 1s
      timeout: 20s
      retries: 3
      start_period: 1s
    stop_grace_period: 8s
    networks:
      fleet: { aliases: [bookstore-api] }
${s.more ?? ''}    x-fleetroll:
      service: ${f.names.service}
      replicas: 2
      probes:
        readiness: { healthcheck: true, periodMs: 100 }
        version: { path: /api/version }
      loadBalancers: [${lbOf(f)}]

volumes:
  data: {}

networks:
  fleet: { name: ${f.names.network} }
`;
}

describe("a compose file as the fleet's container, on a real engine under load through nginx", { concurrency: 3 }, () => {
  it(
    'the same service deployed from a compose file: its fields reach the containers, a tag change rolls out with no failed request, plan shows the diff, the secret is nowhere',
    { timeout: guard(600_000) },
    async (t) => {
      const f = await fleet('ci2-cmp');
      const svc = f.names.service;
      const volume = `${svc}_data`; // compose's name: <project>_<key>, the project from name:
      try {
        const marker = `cinteg2-${randomBytes(6).toString('hex')}-pw`;
        const withSecret = { DB_PASSWORD: marker };
        const file = join(f.dir, 'docker-compose.yml');
        const labels1 = { team: 'books', 'com.example.owner': svc };
        writeFileSync(file, composeWithFleet(f, { image: V1, labels: labels1, maxFile: '2' }));
        const outputs: { what: string; run: CliRun }[] = [];
        const cli = async (what: string, args: string[], env: NodeJS.ProcessEnv = withSecret) => {
          const run = await runCli(args, { env });
          outputs.push({ what, run });
          return run;
        };

        const valid = await cli('validate', ['validate', '-f', file, '--service', 'api']);
        assert.equal(valid.code, 0, valid.stdout + valid.stderr);
        const t0 = performance.now();
        const first = await cli('deploy 1.0.0', ['deploy', '-f', file, '--service', 'api']);
        t.diagnostic(`first deploy (2 × 1.0.0, readiness from the compose healthcheck): exit ${first.code}, ${((performance.now() - t0) / 1000).toFixed(1)} s`);
        assert.equal(first.code, 0, first.stdout + first.stderr);
        assert.ok(first.stdout.includes('hook preDeploy: running sh -c "test -n \\"$DB_PASSWORD\\""'), `the hook as written: ${first.stdout}`);
        assert.match(first.stdout, /hook preDeploy: ok/, 'and sh found the variable in its environment');

        const checkFields = (cs: Dockerode.ContainerInspectInfo[], labels: Record<string, string>, maxFile: string) => {
          assert.equal(cs.length, 2, 'replicas: 2 from x-fleetroll');
          for (const c of cs) {
            assert.equal(c.HostConfig.Memory, 128 * 1024 * 1024, `${c.Name}: mem_limit`);
            assert.deepEqual(c.HostConfig.LogConfig, { Type: 'json-file', Config: { 'max-size': '1m', 'max-file': maxFile } }, `${c.Name}: logging`);
            for (const [k, v] of Object.entries(labels)) assert.equal(c.Config.Labels[k], v, `${c.Name}: label ${k}`);
            assert.equal(c.Config.Labels[LABELS.service], svc, 'x-fleetroll service: names the fleet');
            assert.deepEqual(c.Config.Healthcheck, { Test: HEALTH_TEST, Interval: 1e9, Timeout: 20e9, Retries: 3, StartPeriod: 1e9 }, `${c.Name}: healthcheck`);
            const vol = c.Mounts.find((m) => m.Destination === '/home/node');
            assert.deepEqual([vol?.Type, vol?.Name, vol?.RW], ['volume', volume, true], `${c.Name}: the named volume, named as compose names it`);
            assert.equal((c.Config as { StopTimeout?: number }).StopTimeout, 8, `${c.Name}: stop_grace_period`);
            // The compose network is hosts[].network itself: its alias must still reach the endpoint.
            assert.ok(
              c.NetworkSettings.Networks[f.names.network]?.Aliases?.includes('bookstore-api'),
              `${c.Name}: alias bookstore-api on ${f.names.network}: ${JSON.stringify(c.NetworkSettings.Networks[f.names.network]?.Aliases)}`,
            );
            assert.ok(c.Config.Env.includes('DATA_DIR=/home/node') && c.Config.Env.includes('PRESTOP_SECONDS=1'), `${c.Name}: environment`);
            assert.ok(c.Config.Env.includes(`DB_PASSWORD=${marker}`), `${c.Name}: the secret reaches the container (so the searches below could find it)`);
            assert.ok(c.Config.Env.includes(`DATABASE_URL=postgres://bookstore:${marker}@db.internal:5432/bookstore`), `${c.Name}: an interpolated value`);
          }
        };
        const v1 = await inspectAll(f);
        checkFields(v1, labels1, '2');
        // ...and resolves: the compose alias names the fleet's instances on that network.
        const lookup = await execa(
          'docker',
          [
            'exec',
            v1[0]!.Name.slice(1),
            'node',
            '-e',
            "require('dns').lookup('bookstore-api', { all: true }, (e, a) => { if (e) { console.error(e.code); process.exit(1); } console.log(a.map((x) => x.address).sort().join(' ')); })",
          ],
          { reject: false, stdin: 'ignore' },
        );
        const ips = v1
          .map((c) => c.NetworkSettings.Networks[f.names.network]?.IPAddress)
          .sort()
          .join(' ');
        assert.equal(String(lookup.stdout).trim(), ips, `bookstore-api resolves to the instances: ${String(lookup.stderr)}`);
        assert.equal((await docker.getVolume(volume).inspect()).Labels?.[LABELS.volume], svc, 'preflight created the volume, labelled');
        const digest = await get(`${f.url}/api/env-digest?name=DB_PASSWORD`);
        assert.deepEqual([digest.status, digest.body], [200, sha256(marker)], 'the app has the secret from the CLI environment');

        // The team bumps the tag in its compose file (and a label and the log rotation with it).
        const labels2 = { ...labels1, release: 'two' };
        writeFileSync(file, composeWithFleet(f, { image: V2, labels: labels2, maxFile: '3' }));
        const plan = await cli('plan', ['plan', '-f', file, '--service', 'api']);
        assert.equal(plan.code, 0, plan.stdout + plan.stderr);
        t.diagnostic(`plan:\n${plan.stdout}`);
        assert.match(plan.stdout, /changes from the running revision 1 /);
        assert.ok(plan.stdout.includes(`~ image: ${V1} → ${V2}`), plan.stdout);
        assert.ok(plan.stdout.includes('~ version: 1.0.0 → 1.1.0'), plan.stdout);
        assert.match(plan.stdout, /~ labels: .*→ .*release/, 'the label added in the compose file');
        assert.match(plan.stdout, /~ logging: .*"max-file":"2".*→ .*"max-file":"3"/, 'the log rotation changed in the compose file');
        assert.match(plan.stdout, /env\.DB_PASSWORD: secret value unchanged/);
        assert.doesNotMatch(plan.stdout, /env\.DATA_DIR|healthcheck|resources|volumes|mounts/i, 'only what changed');

        const rollout = await underLoad(f, ['deploy', '-f', file, '--service', 'api'], withSecret);
        outputs.push({ what: 'deploy 1.1.0', run: rollout.run });
        report(t, 'rollout 1.0.0 -> 1.1.0 (the tag changed in the compose file)', rollout);
        t.diagnostic(
          `its own report: ${rollout.run.stdout
            .split('\n')
            .filter((l) => /^revision \d+ done|^health:/.test(l))
            .join('; ')}`,
        );
        assert.equal(rollout.run.code, 0, rollout.run.stdout + rollout.run.stderr);
        assert.ok(rollout.records.length > 30, `only ${rollout.records.length} requests went through`);
        assert.deepEqual(rollout.failed, [], rollout.why);
        assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0']);
        assert.ok(
          rollout.records.some((r) => r.version === '1.1.0'),
          'nginx served the new version during the measurement',
        );
        const v2 = await inspectAll(f);
        assert.equal(v2.filter((c) => v1.some((o) => o.Id === c.Id)).length, 0, 'every instance was replaced');
        checkFields(v2, labels2, '3');
        // Each instance appends "<version> <hostname>" to DATA_DIR at start: 1.1.0 reads what 1.0.0 wrote in the volume.
        const data = await get(`${f.url}/api/data`);
        for (const c of v1) assert.ok(data.body.includes(`1.0.0 ${c.Id.slice(0, 12)}\n`), `the volume kept ${c.Name}'s line: ${data.body}`);

        const again = await cli('plan after', ['plan', '-f', file, '--service', 'api']);
        assert.match(again.stdout, /changes: none \(the running revision 2 has this spec\)/);
        // Day-2 commands take the compose file too (api is its one service with an x-fleetroll: block).
        const status = await cli('status --json', ['status', '-f', file, '--json']);
        assert.equal(status.code, 0, status.stdout + status.stderr);
        const secrets = (JSON.parse(status.stdout) as { lastRollout?: { secrets?: Record<string, string> } }).lastRollout?.secrets;
        assert.equal(secrets?.DB_PASSWORD, '${DB_PASSWORD}', 'the secret kept as its reference');
        assert.match(secrets?.DATABASE_URL ?? '', /^compose:/, 'a value with a secret inside it, kept as where it came from');
        await cli('history --json', ['history', '-f', file, '--json']);

        // The secret appears in no output, no label, not in the state or the journal.
        for (const { what, run } of outputs) assert.ok(!(run.stdout + run.stderr).includes(marker), `${what} printed the secret:\n${run.stdout}${run.stderr}`);
        for (const c of v2) assert.ok(!JSON.stringify(c.Config.Labels).includes(marker), `labels of ${c.Name}`);
        const raw = await stateArchive(svc);
        assert.ok(raw.includes('journal.ndjson') && raw.includes('state.json'), 'the archive holds both files');
        assert.ok(!raw.includes(marker) && !raw.includes(sha256(marker)), 'the secret (or its plain digest) in the state volume');
        const store = new FleetStateStore(docker, svc, 'local');
        const state = await store.read();
        const last = state?.revisions.at(-1);
        assert.equal(last?.envSecrets?.DB_PASSWORD?.source, '${DB_PASSWORD}');
        assert.equal(last?.env.DB_PASSWORD, undefined, 'not kept as a literal');
        assert.equal(last?.env.DATA_DIR, '/home/node', 'a literal kept as one');
      } finally {
        await f.cleanup();
        await removeVolumes(svc, [volume]);
      }
    },
  );

  it(
    'adopted from one: containers compose started are adopted with compose: { file, service, ignore }, and the rollout keeps the compose fields',
    { timeout: guard(600_000) },
    async (t) => {
      const f = await fleet('ci2-adp');
      const svc = f.names.service;
      const role = `api-${svc}`;
      // The repo's docker-compose.yml, for this test's network and label: x- anchors,
      // merge keys, an aliased label map, build and container_name.
      const compose = `# written by test/integration/compose.test.ts
version: "3.7"

x-app: &app
  image: ${V1}
  build:
    context: ./app
    args:
      BASE: \${NODE_IMAGE:-node:20-alpine}
      APP_VERSION: 1.0.0
  init: true
  stop_grace_period: 7s
  networks: [fleet]
  environment:
    PRESTOP_SECONDS: "1"
    WARMUP_SECONDS: "0.5"
    BOOKSTORE_TIER: compose

services:
  api-1:
    <<: *app
    container_name: ${svc}-compose-1
    labels: &labels
      bookstore.role: ${role}
      com.example.team: books
  api-2:
    <<: *app
    container_name: ${svc}-compose-2
    labels: *labels
  api-3:
    <<: *app
    container_name: ${svc}-compose-3
    labels: *labels
  nginx:
    image: \${NGINX_IMAGE:-nginx:1.27-alpine}
    container_name: ${svc}-compose-nginx
    command: ["nginx", "-g", "daemon off;"]
    ports: ["127.0.0.1:18600:80"]
    networks: [fleet]
    volumes:
      - upstream:/etc/nginx/fleet

networks:
  fleet:
    name: ${f.names.network}

volumes:
  upstream: {}
`;
      writeFileSync(join(f.dir, 'docker-compose.yml'), compose);
      // What the fleet file adds: one env entry and one label, merged into the compose service's.
      const fleetFile = join(f.dir, 'fleet.yaml');
      writeFileSync(
        fleetFile,
        `service: ${svc}
compose: { file: ./docker-compose.yml, service: api-1, ignore: [build, container_name] }
image: ${V1}
replicas: 3
port: 8080
env: { FLEET_NOTE: from-the-fleet-file }
labels: { com.example.deployed-by: fleetroll }
hosts: [${hostOf(f)}]
probes:
  readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 }
strategy:
  rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }
drainSeconds: 1
progressDeadlineSeconds: 60
loadBalancers: [${lbOf(f)}]
`,
      );

      // docker compose up -d, for api-1..3: what compose gives each container (its name, labels, network, init, stop timeout).
      const started: string[] = [];
      try {
        for (let i = 1; i <= 3; i++) {
          const c = await docker.createContainer({
            name: `${svc}-compose-${i}`,
            Image: V1,
            Env: ['PRESTOP_SECONDS=1', 'WARMUP_SECONDS=0.5', 'BOOKSTORE_TIER=compose'],
            Labels: {
              'bookstore.role': role,
              'com.example.team': 'books',
              'com.docker.compose.project': svc,
              'com.docker.compose.service': `api-${i}`,
              [OWN]: svc,
            },
            StopTimeout: 7,
            HostConfig: { NetworkMode: f.names.network, Init: true },
          } as Dockerode.ContainerCreateOptions);
          await c.start();
          started.push(c.id);
        }

        const valid = await runCli(['validate', '-f', fleetFile]);
        assert.equal(valid.code, 0, valid.stdout + valid.stderr);
        assert.match(valid.stdout + valid.stderr, /services\/api-1\/build: left out, as compose\.ignore asks/);
        assert.match(valid.stdout + valid.stderr, /services\/api-1\/container_name: left out, as compose\.ignore asks/);

        const adopt = await runCli(['adopt', '-f', fleetFile, '--match', `bookstore.role=${role}`]);
        assert.equal(adopt.code, 0, adopt.stdout + adopt.stderr);
        assert.match(adopt.stdout, /adopted 3 container\(s\) as revision 1/);
        assert.deepEqual([(await f.upstream()).up, (await get(`${f.url}/api/version`)).body], [3, '1.0.0'], 'nginx routes to the adopted containers');

        const rollout = await underLoad(f, ['deploy', '-f', fleetFile, '--image', V2]);
        report(t, 'rollout of the adopted compose containers 1.0.0 -> 1.1.0', rollout);
        t.diagnostic(
          `its own report: ${rollout.run.stdout
            .split('\n')
            .filter((l) => /^revision \d+ done|^health:/.test(l))
            .join('; ')}`,
        );
        assert.equal(rollout.run.code, 0, rollout.run.stdout + rollout.run.stderr);
        assert.ok(rollout.records.length > 30, `only ${rollout.records.length} requests went through`);
        assert.deepEqual(rollout.failed, [], rollout.why);
        assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
        for (const id of started) await assert.rejects(docker.getContainer(id).inspect(), 'the adopted containers were replaced');

        // Each compose field, on every new instance: once these were dropped without a word.
        const cs = await inspectAll(f);
        assert.equal(cs.length, 3);
        for (const c of cs) {
          const env = c.Config.Env;
          for (const e of ['PRESTOP_SECONDS=1', 'WARMUP_SECONDS=0.5', 'BOOKSTORE_TIER=compose'])
            assert.ok(env.includes(e), `${c.Name}: environment ${e} (from x-app via <<: *app): ${env.join(' ')}`);
          assert.ok(env.includes('FLEET_NOTE=from-the-fleet-file'), `${c.Name}: the fleet file's env beside the compose service's`);
          assert.equal(c.Config.Labels['bookstore.role'], role, `${c.Name}: label bookstore.role (an aliased map)`);
          assert.equal(c.Config.Labels['com.example.team'], 'books', `${c.Name}: label com.example.team`);
          assert.equal(c.Config.Labels['com.example.deployed-by'], 'fleetroll', `${c.Name}: the fleet file's label beside the compose service's`);
          assert.equal(c.Config.Labels['com.docker.compose.project'], undefined, "compose's own labels were compose's, not the service's");
          assert.equal(c.HostConfig.Init, true, `${c.Name}: init`);
          assert.equal((c.Config as { StopTimeout?: number }).StopTimeout, 7, `${c.Name}: stop_grace_period 7s`);
          assert.ok(c.NetworkSettings.Networks[f.names.network], `${c.Name}: on the compose network`);
          assert.notEqual(c.Name, `/${svc}-compose-1`, 'container_name left out');
        }
        // init: true is also fleetroll's default, so the container alone cannot tell it came from the compose file: the revision can.
        const state = await new FleetStateStore(docker, svc, 'local').read();
        const rev = state?.revisions.at(-1);
        assert.equal(rev?.number, 2);
        assert.deepEqual(
          (rev?.container?.createOptions as { HostConfig?: { Init?: unknown } } | undefined)?.HostConfig,
          { Init: true },
          'init from the compose file, in the revision',
        );
        assert.equal(rev?.env.BOOKSTORE_TIER, 'compose');
        assert.equal(rev?.container?.labels?.['bookstore.role'], role);
      } finally {
        await Promise.all(
          started.map((id) =>
            docker
              .getContainer(id)
              .remove({ force: true })
              .catch(() => {}),
          ),
        );
        const mine = await docker.listContainers({ all: true, filters: { label: [`${OWN}=${svc}`] } });
        await Promise.all(
          mine.map((c) =>
            docker
              .getContainer(c.Id)
              .remove({ force: true })
              .catch(() => {}),
          ),
        );
      }
    },
  );

  it('a compose field fleetroll cannot honour: validate and deploy exit 2 naming it and why, and nothing is created', { timeout: guard(300_000) }, async () => {
    const f = await fleet('ci2-bad');
    const svc = f.names.service;
    const file = join(f.dir, 'docker-compose.yml');
    const env = { DB_PASSWORD: 'irrelevant-here' };
    const labels = { team: 'books' };
    // The control: the same file with a container port alone is valid, so the refusals below are the fields'.
    writeFileSync(file, composeWithFleet(f, { image: V1, labels, maxFile: '2' }));
    const ok = await runCli(['validate', '-f', file, '--service', 'api'], { env });
    assert.equal(ok.code, 0, ok.stdout + ok.stderr);

    writeFileSync(file, composeWithFleet(f, { image: V1, labels, maxFile: '2', ports: 'ports: ["8080:8080"]', more: '    build: ./app\n' }));
    for (const verb of ['validate', 'deploy']) {
      const r = await runCli([verb, '-f', file, '--service', 'api'], { env });
      assert.equal(r.code, 2, `${verb}: ${r.stdout}${r.stderr}`);
      assert.match(r.stderr, /services\/api\/ports\/0: publishes the fixed host port 8080: fleetroll runs several instances per host/, `${verb}: ${r.stderr}`);
      assert.match(r.stderr, /services\/api\/build: fleetroll deploys an image, it does not build one/, `${verb}: every problem at once`);
      assert.ok(!r.stderr.includes('irrelevant-here'));
    }

    // build named by a fleet file's compose: without ignore: refused, with the way out.
    writeFileSync(file, composeWithFleet(f, { image: V1, labels, maxFile: '2', more: '    build: ./app\n' }));
    const fleetFile = join(f.dir, 'fleet.yaml');
    writeFileSync(
      fleetFile,
      `service: ${svc}\ncompose: { file: ./docker-compose.yml, service: api }\nreplicas: 2\nhosts: [${hostOf(f)}]\nloadBalancers: [${lbOf(f)}]\n`,
    );
    const r = await runCli(['deploy', '-f', fleetFile], { env });
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stderr, /services\/api\/build: fleetroll deploys an image.*compose: \{ ignore: \[build\] \}/);

    assert.deepEqual(await f.instances(), [], 'no instance');
    assert.deepEqual(await docker.listContainers({ all: true, filters: { name: [`fleetroll-state-${svc}`] } }), [], 'no state container');
    assert.deepEqual((await docker.listVolumes({ filters: { name: [svc] } })).Volumes ?? [], [], "no volume (not even the compose file's named one)");
    assert.equal((await f.upstream()).up, 0, 'nginx untouched');
  });
});
