import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { loadFleet } from '../../src/config/load.js';
import { FleetrollError, ValidationError } from '../../src/errors.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-config-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let n = 0;
function file(text: string, name = `fleet-${n++}.yaml`): string {
  const p = join(dir, name);
  writeFileSync(p, text);
  return p;
}

const BASE = `service: bookstore-api
image: bookstore-api:1.0.0
replicas: 3
port: 8080
`;

async function issues(text: string, cli = {}): Promise<{ path: string; message: string }[]> {
  try {
    await loadFleet(file(text), cli);
  } catch (err) {
    assert.ok(err instanceof ValidationError, String(err));
    assert.equal(err.exitCode, 2);
    return [...err.issues];
  }
  assert.fail('expected the fleet file to be rejected');
}

describe('loadFleet: defaults', () => {
  it('fills in every default and takes the version from the image tag', async () => {
    const f = await loadFleet(file(BASE));
    assert.equal(f.version, '1.0.0');
    assert.deepEqual(
      [f.minReadySeconds, f.progressDeadlineSeconds, f.revisionHistoryLimit, f.drainSeconds, f.terminationGracePeriodSeconds, f.onFailure],
      [0, 600, 10, 2, 30, 'pause'],
    );
    assert.deepEqual([f.strategy.maxSurge, f.strategy.maxUnavailable], [1, 0]);
    assert.deepEqual(f.hosts, [{ name: 'local', docker: 'unix:///var/run/docker.sock' }]);
    assert.equal(f.probes.readiness.path, '/health/ready');
  });

  it('--image overrides the image and its tag becomes the version', async () => {
    const f = await loadFleet(file(`${BASE}version: 1.0.0\n`), { image: 'bookstore-api:1.1.0' });
    assert.deepEqual([f.image, f.version], ['bookstore-api:1.1.0', '1.1.0']);
  });

  it('reads JSON too', async () => {
    const f = await loadFleet(file(JSON.stringify({ service: 'x', image: 'x:2', replicas: 1, port: 80 }), 'fleet.json'));
    assert.equal(f.version, '2');
  });

  it('shared defaults from a file apply when the fleet has no strategy', async () => {
    file('strategy:\n  rollingUpdate: { maxSurge: 2, maxUnavailable: 0 }\nminReadySeconds: 5\n', 'team.yaml');
    const f = await loadFleet(file(`${BASE}defaults: ./team.yaml\n`));
    assert.deepEqual([f.strategy.maxSurge, f.strategy.maxUnavailable, f.strategy.sources.maxSurge, f.minReadySeconds, f.timingSources.minReadySeconds], [2, 0, 'defaults', 5, 'defaults']);
  });

  it('hostParallelism layers like the timings: flag, fleet, shared defaults, built-in 8', async () => {
    const layered = file(`${BASE}defaults:\n  hostParallelism: 3\n`);
    const cases: [string, Promise<{ hostParallelism: number; timingSources: { hostParallelism: string } }>, number, string][] = [
      ['built-in', loadFleet(file(BASE)), 8, 'builtin'],
      ['shared defaults', loadFleet(layered), 3, 'defaults'],
      ['the fleet over its defaults', loadFleet(file(`${BASE}hostParallelism: 5\ndefaults:\n  hostParallelism: 3\n`)), 5, 'fleet'],
      ['the flag over everything', loadFleet(layered, { hostParallelism: 1 }), 1, 'cli'],
    ];
    for (const [name, loading, value, source] of cases) {
      const f = await loading;
      assert.deepEqual([f.hostParallelism, f.timingSources.hostParallelism], [value, source], name);
    }
  });

  it('inline shared defaults work the same way', async () => {
    const f = await loadFleet(file(`${BASE}defaults:\n  strategy: { type: Recreate }\n`));
    assert.equal(f.strategy.type, 'Recreate');
  });
});

describe('loadFleet: bad input is rejected with the field path', () => {
  const rows: { name: string; text: string; path: string; message: RegExp }[] = [
    { name: 'missing service', text: 'image: a:1\nreplicas: 1\nport: 80\n', path: 'service', message: /required/ },
    { name: 'service with capitals', text: BASE.replace('bookstore-api\n', 'Bookstore\n'), path: 'service', message: /lowercase/ },
    { name: 'replicas not an integer', text: BASE.replace('replicas: 3', 'replicas: 2.5'), path: 'replicas', message: /integer from 0 to 10000, got 2.5/ },
    { name: 'port out of range', text: BASE.replace('port: 8080', 'port: 70000'), path: 'port', message: /port from 1 to 65535/ },
    {
      name: 'ssh settings on a tcp:// host',
      text: `${BASE}hosts:\n  - { name: a, docker: "tcp://10.0.0.1:2376", ssh: { identityFile: /k } }\n`,
      path: 'hosts/0/ssh',
      message: /only applies to an ssh:\/\/ endpoint/,
    },
    { name: 'ssh identityFile not absolute', text: `${BASE}hosts:\n  - { name: a, docker: "ssh://u@h", ssh: { identityFile: id_rsa } }\n`, path: 'hosts/0/ssh/identityFile', message: /absolute path/ },
    {
      name: 'tls on an ssh:// host',
      text: `${BASE}hosts:\n  - { name: a, docker: "ssh://u@h", tls: { ca: /a, cert: /b, key: /c } }\n`,
      path: 'hosts/0/tls',
      message: /only applies to a tcp:\/\/ endpoint/,
    },
    { name: 'hostParallelism of 0', text: `${BASE}hostParallelism: 0\n`, path: 'hostParallelism', message: /integer from 1 to 1000, got 0/ },
    { name: 'unknown top-level field', text: `${BASE}replica: 3\n`, path: '', message: /unknown field "replica"/ },
    { name: 'bad maxSurge', text: `${BASE}strategy:\n  rollingUpdate: { maxSurge: "25 %" }\n`, path: 'strategy/rollingUpdate/maxSurge', message: /got "25 %"/ },
    { name: 'unavailable over 100%', text: `${BASE}strategy:\n  rollingUpdate: { maxUnavailable: 120% }\n`, path: 'strategy/rollingUpdate/maxUnavailable', message: /100%/ },
    { name: 'Recreate with rollingUpdate', text: `${BASE}strategy:\n  type: Recreate\n  rollingUpdate: { maxSurge: 1 }\n`, path: 'strategy/rollingUpdate', message: /Recreate/ },
    { name: 'unknown strategy type', text: `${BASE}strategy:\n  type: BlueGreen\n`, path: 'strategy/type', message: /"RollingUpdate" or "Recreate"/ },
    {
      name: 'nginx directive injection through the upstream name',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: "x; include /etc/passwd" }\n`,
      path: 'loadBalancers/0/nginx/upstream',
      message: /upstream name/,
    },
    {
      name: 'injection through the upstream file path',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, upstreamFile: "/etc/nginx/u.conf;x", upstream: api }\n`,
      path: 'loadBalancers/0/nginx/upstreamFile',
      message: /absolute path/,
    },
    { name: 'nginx placement missing', text: `${BASE}loadBalancers:\n  - nginx: { upstreamFile: /etc/nginx/u.conf, upstream: api }\n`, path: 'loadBalancers/0/nginx', message: /container .* or exec: true/ },
    { name: 'nginx on an unknown host', text: `${BASE}loadBalancers:\n  - nginx: { container: lb, host: nowhere, upstreamFile: /etc/nginx/u.conf, upstream: api }\n`, path: 'loadBalancers/0/nginx/host', message: /must name an entry in hosts/ },
    { name: 'duplicate host names', text: `${BASE}hosts:\n  - { name: a }\n  - { name: a }\n`, path: 'hosts/1/name', message: /duplicate/ },
    { name: 'bad docker endpoint', text: `${BASE}hosts:\n  - { name: a, docker: "http://x" }\n`, path: 'hosts/0/docker', message: /unix:\/\/\/path, tcp:\/\/host:port or ssh/ },
    { name: 'probe path with a space', text: `${BASE}probes:\n  readiness: { path: "/health ready" }\n`, path: 'probes/readiness/path', message: /HTTP path/ },
    { name: 'deadline not above minReadySeconds', text: `${BASE}minReadySeconds: 30\nprogressDeadlineSeconds: 30\n`, path: 'progressDeadlineSeconds', message: /greater than minReadySeconds/ },
    { name: 'env key with a dash', text: `${BASE}env: { "MY-KEY": "x" }\n`, path: 'env/MY-KEY', message: /env names must be letters/ },
    { name: 'image with a space', text: BASE.replace('bookstore-api:1.0.0', '"bookstore api:1"'), path: 'image', message: /image reference/ },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const got = await issues(r.text);
      const hit = got.find((i) => i.path === r.path);
      assert.ok(hit, `no issue at "${r.path}" in ${JSON.stringify(got)}`);
      assert.match(hit.message, r.message);
    });
  }

  it('lists every problem of a file at once', async () => {
    const got = await issues('service: Bad\nimage: a:1\nreplicas: -1\nport: 0\n');
    assert.deepEqual(got.map((i) => i.path).sort(), ['port', 'replicas', 'service']);
  });

  it('a problem in a defaults file names that file', async () => {
    const team = file('strategy:\n  rollingUpdate: { maxSurge: lots }\n', 'bad-team.yaml');
    const got = await issues(`${BASE}defaults: ./bad-team.yaml\n`);
    assert.equal(got[0]?.path, `${team}: strategy/rollingUpdate/maxSurge`);
  });

  it('YAML syntax errors give line and column', async () => {
    const got = await issues('service: a\n  image: [\n');
    assert.match(got[0]?.path ?? '', /^line \d+, column \d+$/);
  });

  it('a missing file is invalid input, not a crash', async () => {
    await assert.rejects(loadFleet(join(dir, 'nope.yaml')), (err: unknown) => err instanceof FleetrollError && err.exitCode === 2 && /no such file/.test(err.message));
  });

  it('a bad --image flag is named', async () => {
    const got = await issues(BASE, { image: 'has space' });
    assert.equal(got[0]?.path, '--image');
  });
});
