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

  it("the dynamic nginx mode takes blue-green's preview and canary.force (the Lua balances both)", async () => {
    const canary = await loadFleet(
      file(
        `${BASE}strategy:\n  type: Canary\n  canary: { steps: [{ setWeight: 50 }], force: "header:X-Canary" }\nloadBalancers:\n  - nginx: { exec: true, mode: dynamic, upstream: api }\n`,
      ),
    );
    assert.equal(canary.strategy.type === 'Canary' && canary.strategy.canary.force, 'header:X-Canary');
    const bg = await loadFleet(
      file(
        `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { preview: { upstream: api_preview } }\nloadBalancers:\n  - nginx: { exec: true, mode: dynamic, upstream: api }\n`,
      ),
    );
    assert.equal(bg.strategy.type === 'BlueGreen' && bg.strategy.blueGreen.previewUpstream, 'api_preview');
  });

  it('reads JSON too', async () => {
    const f = await loadFleet(file(JSON.stringify({ service: 'x', image: 'x:2', replicas: 1, port: 80 }), 'fleet.json'));
    assert.equal(f.version, '2');
  });

  it('shared defaults from a file apply when the fleet has no strategy', async () => {
    file('strategy:\n  rollingUpdate: { maxSurge: 2, maxUnavailable: 0 }\nminReadySeconds: 5\n', 'team.yaml');
    const f = await loadFleet(file(`${BASE}defaults: ./team.yaml\n`));
    assert.deepEqual(
      [f.strategy.maxSurge, f.strategy.maxUnavailable, f.strategy.sources.maxSurge, f.minReadySeconds, f.timingSources.minReadySeconds],
      [2, 0, 'defaults', 5, 'defaults'],
    );
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

  it('state.etcd from the fleet file, or else from shared defaults; absent: the Docker volume', async () => {
    const own = await loadFleet(file(`${BASE}state: { etcd: { endpoints: ["http://10.0.0.5:2379"] } }\n`));
    assert.deepEqual(own.state, { etcd: { endpoints: ['http://10.0.0.5:2379'], prefix: '/fleetroll' } });
    const shared = await loadFleet(file(`${BASE}defaults:\n  state: { etcd: { endpoints: ["https://e1:2379"], prefix: /prod } }\n`));
    assert.deepEqual(shared.state, { etcd: { endpoints: ['https://e1:2379'], prefix: '/prod' } });
    assert.equal((await loadFleet(file(BASE))).state, undefined);
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
    {
      name: 'ssh identityFile not absolute',
      text: `${BASE}hosts:\n  - { name: a, docker: "ssh://u@h", ssh: { identityFile: id_rsa } }\n`,
      path: 'hosts/0/ssh/identityFile',
      message: /absolute path/,
    },
    {
      name: 'tls on an ssh:// host',
      text: `${BASE}hosts:\n  - { name: a, docker: "ssh://u@h", tls: { ca: /a, cert: /b, key: /c } }\n`,
      path: 'hosts/0/tls',
      message: /only applies to a tcp:\/\/ endpoint/,
    },
    { name: 'hostParallelism of 0', text: `${BASE}hostParallelism: 0\n`, path: 'hostParallelism', message: /integer from 1 to 1000, got 0/ },
    { name: 'unknown top-level field', text: `${BASE}replica: 3\n`, path: '', message: /unknown field "replica"/ },
    { name: 'bad maxSurge', text: `${BASE}strategy:\n  rollingUpdate: { maxSurge: "25 %" }\n`, path: 'strategy/rollingUpdate/maxSurge', message: /got "25 %"/ },
    {
      name: 'unavailable over 100%',
      text: `${BASE}strategy:\n  rollingUpdate: { maxUnavailable: 120% }\n`,
      path: 'strategy/rollingUpdate/maxUnavailable',
      message: /100%/,
    },
    {
      name: 'Recreate with rollingUpdate',
      text: `${BASE}strategy:\n  type: Recreate\n  rollingUpdate: { maxSurge: 1 }\n`,
      path: 'strategy/rollingUpdate',
      message: /Recreate/,
    },
    {
      name: 'unknown strategy type',
      text: `${BASE}strategy:\n  type: Linear\n`,
      path: 'strategy/type',
      message: /"RollingUpdate", "Recreate", "BlueGreen" or "Canary", got "Linear"/,
    },
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
    {
      name: 'nginx placement missing',
      text: `${BASE}loadBalancers:\n  - nginx: { upstreamFile: /etc/nginx/u.conf, upstream: api }\n`,
      path: 'loadBalancers/0/nginx',
      message: /container .* or exec: true/,
    },
    {
      name: 'nginx on an unknown host',
      text: `${BASE}loadBalancers:\n  - nginx: { container: lb, host: nowhere, upstreamFile: /etc/nginx/u.conf, upstream: api }\n`,
      path: 'loadBalancers/0/nginx/host',
      message: /must name an entry in hosts/,
    },
    {
      name: 'reload mode with no upstream file',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, upstream: api }\n`,
      path: 'loadBalancers/0/nginx/upstreamFile',
      message: /required in mode reload.*or set mode: dynamic/,
    },
    {
      name: 'dynamic mode with an upstream file',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, mode: dynamic, upstreamFile: /etc/nginx/u.conf, upstream: api }\n`,
      path: 'loadBalancers/0/nginx/upstreamFile',
      message: /does not apply with mode: dynamic/,
    },
    {
      name: 'dynamic mode with a template',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, mode: dynamic, template: ./u.tmpl, upstream: api }\n`,
      path: 'loadBalancers/0/nginx/template',
      message: /does not apply with mode: dynamic/,
    },
    {
      name: 'a peers file in reload mode',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, peersFile: /tmp/p, upstream: api }\n`,
      path: 'loadBalancers/0/nginx/peersFile',
      message: /only applies with mode: dynamic/,
    },
    {
      name: 'an unknown nginx mode',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, mode: lua, upstream: api }\n`,
      path: 'loadBalancers/0/nginx/mode',
      message: /must be reload .* or dynamic .*, got "lua"/,
    },
    {
      name: 'a peers file path with a quote',
      text: `${BASE}loadBalancers:\n  - nginx: { exec: true, mode: dynamic, peersFile: "/tmp/p\\"x", upstream: api }\n`,
      path: 'loadBalancers/0/nginx/peersFile',
      message: /absolute path/,
    },
    { name: 'duplicate host names', text: `${BASE}hosts:\n  - { name: a }\n  - { name: a }\n`, path: 'hosts/1/name', message: /duplicate/ },
    {
      name: 'bad docker endpoint',
      text: `${BASE}hosts:\n  - { name: a, docker: "http://x" }\n`,
      path: 'hosts/0/docker',
      message: /unix:\/\/\/path, tcp:\/\/host:port or ssh/,
    },
    { name: 'probe path with a space', text: `${BASE}probes:\n  readiness: { path: "/health ready" }\n`, path: 'probes/readiness/path', message: /HTTP path/ },
    {
      name: 'deadline not above minReadySeconds',
      text: `${BASE}minReadySeconds: 30\nprogressDeadlineSeconds: 30\n`,
      path: 'progressDeadlineSeconds',
      message: /greater than minReadySeconds/,
    },
    { name: 'env key with a dash', text: `${BASE}env: { "MY-KEY": "x" }\n`, path: 'env/MY-KEY', message: /env names must be letters/ },
    { name: 'image with a space', text: BASE.replace('bookstore-api:1.0.0', '"bookstore api:1"'), path: 'image', message: /image reference/ },
    {
      name: 'state.etcd endpoint with no scheme',
      text: `${BASE}state: { etcd: { endpoints: ["10.0.0.5:2379"] } }\n`,
      path: 'state/etcd/endpoints/0',
      message: /etcd client URL: http:\/\/host:port/,
    },
    {
      name: 'state.etcd with no endpoints',
      text: `${BASE}state: { etcd: { endpoints: [] } }\n`,
      path: 'state/etcd/endpoints',
      message: /at least one etcd endpoint/,
    },
    {
      name: 'state.etcd prefix not starting with /',
      text: `${BASE}state: { etcd: { endpoints: ["http://a:2379"], prefix: fleetroll } }\n`,
      path: 'state/etcd/prefix',
      message: /starting with "\/"/,
    },
    {
      name: 'state.etcd with a password in the file',
      text: `${BASE}state: { etcd: { endpoints: ["http://a:2379"], password: x } }\n`,
      path: 'state/etcd',
      message: /password/,
    },
    { name: 'state with a backend fleetroll does not know', text: `${BASE}state: { consul: {} }\n`, path: 'state', message: /consul/ },
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
    await assert.rejects(
      loadFleet(join(dir, 'nope.yaml')),
      (err: unknown) => err instanceof FleetrollError && err.exitCode === 2 && /no such file/.test(err.message),
    );
  });

  it('a bad --image flag is named', async () => {
    const got = await issues(BASE, { image: 'has space' });
    assert.equal(got[0]?.path, '--image');
  });
});

const LB = `loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: bookstore_api }\n`;
const CANARY = `${BASE}strategy:
  type: Canary
  rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }
  canary:
    stickyKey: cookie:session
    force: header:X-Canary
    steps:
      - setWeight: 10
      - pause: { duration: 30s }
      - analysis: {}
      - setWeight: 50
      - pause: {}
analysis: { maxErrorRate: 1% }
`;

describe('loadFleet: BlueGreen and Canary', () => {
  it('a blue-green fleet file with a preview upstream and a prePromotion hook', async () => {
    const f = await loadFleet(
      file(`${BASE}strategy:
  type: BlueGreen
  blueGreen: { scaleDownDelaySeconds: 60, preview: { upstream: bookstore_preview }, autoPromote: false }
hooks:
  prePromotion: ["./smoke-test.sh", "http://127.0.0.1:8081"]
${LB}`),
    );
    assert.equal(f.strategy.type, 'BlueGreen');
    assert.ok(f.strategy.type === 'BlueGreen');
    assert.deepEqual(
      [f.strategy.blueGreen.scaleDownDelaySeconds, f.strategy.blueGreen.previewUpstream, f.strategy.blueGreen.autoPromote],
      [60, 'bookstore_preview', false],
    );
    assert.deepEqual(f.hooks?.prePromotion, ['./smoke-test.sh', 'http://127.0.0.1:8081']);
    assert.deepEqual(f.strategy.notes, []);
  });

  it('a canary fleet file: steps, sticky key and the final rolling update', async () => {
    const f = await loadFleet(file(CANARY));
    assert.ok(f.strategy.type === 'Canary');
    assert.deepEqual(
      f.strategy.canary.steps.map((s) => s.kind),
      ['setWeight', 'pause', 'analysis', 'setWeight', 'pause'],
    );
    assert.deepEqual(f.strategy.canary.steps[1], { kind: 'pause', seconds: 30, path: 'strategy/canary/steps/1' });
    assert.deepEqual(
      [f.strategy.canary.stickyKey, f.strategy.canary.force, f.strategy.maxSurge, f.strategy.maxUnavailable],
      ['cookie:session', 'header:X-Canary', 1, 0],
    );
  });

  it('JSON works the same', async () => {
    const f = await loadFleet(
      file(
        JSON.stringify({
          service: 'x',
          image: 'x:2',
          replicas: 4,
          port: 80,
          strategy: { type: 'Canary', canary: { steps: [{ setWeight: 25 }, { pause: { duration: 60 } }] } },
        }),
        'canary.json',
      ),
    );
    assert.ok(f.strategy.type === 'Canary');
    assert.deepEqual(f.strategy.canary.steps[1], { kind: 'pause', seconds: 60, path: 'strategy/canary/steps/1' });
  });

  it('a canary from a shared defaults file, with the flag still setting the final rolling update', async () => {
    file('strategy:\n  type: Canary\n  canary:\n    steps: [{ setWeight: 20 }, { pause: {} }]\n', 'canary-team.yaml');
    const f = await loadFleet(file(`${BASE}defaults: ./canary-team.yaml\n`), { maxUnavailable: '1' });
    assert.ok(f.strategy.type === 'Canary');
    assert.deepEqual(
      [f.strategy.sources.type, f.strategy.canary.sources.steps, f.strategy.sources.maxUnavailable, f.strategy.maxUnavailable],
      ['defaults', 'defaults', 'cli', 1],
    );
    assert.match(f.strategy.canary.steps[0]?.path ?? '', /canary-team\.yaml: strategy\/canary\/steps\/0$/);
  });

  it('hooks.prePromotion with a rolling update is noted: it would never run', async () => {
    const f = await loadFleet(file(`${BASE}hooks:\n  prePromotion: ["./x"]\n`));
    assert.match(f.strategy.notes.join('\n'), /hooks.prePromotion runs only with strategy type BlueGreen/);
  });

  const rows: { name: string; text: string; path: string; message: RegExp }[] = [
    {
      name: 'canary block with type BlueGreen',
      text: `${BASE}strategy:\n  type: BlueGreen\n  canary: { steps: [{ setWeight: 10 }] }\n`,
      path: 'strategy/canary',
      message: /applies only to type Canary, but type is BlueGreen/,
    },
    {
      name: 'rollingUpdate with type BlueGreen',
      text: `${BASE}strategy:\n  type: BlueGreen\n  rollingUpdate: { maxSurge: 1 }\n`,
      path: 'strategy/rollingUpdate',
      message: /must not be set when type is BlueGreen/,
    },
    {
      name: 'a misspelt step kind',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ setWieght: 10 }]\n`,
      path: 'strategy/canary/steps/0',
      message: /unknown field "setWieght"/,
    },
    {
      name: 'a step with two kinds',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ setWeight: 10, pause: {} }]\n`,
      path: 'strategy/canary/steps/0',
      message: /exactly one of setWeight, pause or analysis/,
    },
    {
      name: 'a bare "- pause:" (null)',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps:\n      - pause:\n`,
      path: 'strategy/canary/steps/0/pause',
      message: /must be a mapping: \{ duration: 30s \} or \{\}/,
    },
    {
      name: 'a pause in days',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ pause: { duration: 2d } }]\n`,
      path: 'strategy/canary/steps/0/pause/duration',
      message: /"30s", "5m" or "1h"/,
    },
    {
      name: 'setWeight above 100',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ setWeight: 110 }]\n`,
      path: 'strategy/canary/steps/0/setWeight',
      message: /whole percent from 0 to 100, got 110/,
    },
    {
      name: 'an analysis step with no threshold anywhere',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ setWeight: 10 }, { analysis: { interval: 5s } }]\n`,
      path: 'strategy/canary/steps/1/analysis',
      message: /must set at least one threshold/,
    },
    {
      name: 'an analysis step overriding with a bad rate',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ setWeight: 10 }, { analysis: { maxErrorRate: 5 } }]\nanalysis: { maxErrorRate: 1% }\n`,
      path: 'strategy/canary/steps/1/analysis/maxErrorRate',
      message: /a percentage like "1%"/,
    },
    {
      name: 'analysis with an unknown field',
      text: `${BASE}analysis: { maxErrorRate: 1%, errorBudget: 3 }\n`,
      path: 'analysis',
      message: /unknown field "errorBudget"/,
    },
    {
      name: 'an analysis step that is a list',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    steps: [{ analysis: [1] }]\n`,
      path: 'strategy/canary/steps/0/analysis',
      message: /must be a mapping of analysis settings/,
    },
    {
      name: 'a force header with a space',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    force: "header:X Canary"\n    steps: [{ setWeight: 10 }]\n`,
      path: 'strategy/canary/force',
      message: /"header:NAME" or "cookie:NAME" .*got "header:X Canary"/,
    },
    {
      name: 'a force that is a mapping',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    force: { header: X-Canary }\n    steps: [{ setWeight: 10 }]\n`,
      path: 'strategy/canary/force',
      message: /must be "header:NAME" or "cookie:NAME"/,
    },
    {
      name: 'a sticky key with a space',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    stickyKey: "cookie:my session"\n    steps: [{ setWeight: 10 }]\n`,
      path: 'strategy/canary/stickyKey',
      message: /got "cookie:my session"/,
    },
    {
      name: 'canaryReplicas above replicas',
      text: `${BASE}strategy:\n  type: Canary\n  canary:\n    canaryReplicas: 4\n    steps: [{ setWeight: 10 }]\n`,
      path: 'strategy/canary/canaryReplicas',
      message: /at most replicas \(3\), got 4/,
    },
    { name: 'Canary without steps', text: `${BASE}strategy:\n  type: Canary\n`, path: 'strategy/canary/steps', message: /is required with type Canary/ },
    {
      name: 'an unknown blueGreen field',
      text: `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { previewPort: 8081 }\n`,
      path: 'strategy/blueGreen',
      message: /unknown field "previewPort"/,
    },
    {
      name: 'a preview block without its upstream',
      text: `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { preview: { port: 8081 } }\n`,
      path: 'strategy/blueGreen/preview',
      message: /unknown field "port"/,
    },
    {
      name: 'injection through preview.upstream',
      text: `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { preview: { upstream: "p; include /etc/passwd" } }\n`,
      path: 'strategy/blueGreen/preview/upstream',
      message: /nginx upstream name/,
    },
    {
      name: "a preview upstream named like the load balancer's upstream",
      text: `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { previewUpstream: bookstore_api }\n${LB}`,
      path: 'strategy/blueGreen/previewUpstream',
      message: /must differ from loadBalancers\/0\/nginx\/upstream/,
    },
    {
      name: 'injection through the preview upstream',
      text: `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { previewUpstream: "p; include /etc/passwd" }\n`,
      path: 'strategy/blueGreen/previewUpstream',
      message: /nginx upstream name/,
    },
    {
      name: 'scaleDownDelaySeconds over a day',
      text: `${BASE}strategy:\n  type: BlueGreen\n  blueGreen: { scaleDownDelaySeconds: 90000 }\n`,
      path: 'strategy/blueGreen/scaleDownDelaySeconds',
      message: /from 0 to 86400, got 90000/,
    },
    {
      name: 'prePromotion as a shell string',
      text: `${BASE}hooks:\n  prePromotion: "./smoke.sh && echo ok"\n`,
      path: 'hooks/prePromotion',
      message: /argument array/,
    },
    {
      name: 'a canary block in a defaults file of type BlueGreen',
      text: `${BASE}defaults:\n  strategy: { type: BlueGreen, canary: { steps: [{ setWeight: 1 }] } }\n`,
      path: 'defaults/strategy/canary',
      message: /applies only to type Canary, but type is BlueGreen/,
    },
  ];
  for (const r of rows) {
    it(`rejected with its path: ${r.name}`, async () => {
      const got = await issues(r.text);
      const hit = got.find((i) => i.path === r.path);
      assert.ok(hit, `no issue at "${r.path}" in ${JSON.stringify(got)}`);
      assert.match(hit.message, r.message);
    });
  }

  it('a bad step is reported alongside problems elsewhere in the file', async () => {
    const got = await issues(CANARY.replace('bookstore-api\n', 'Bad\n').replace('setWeight: 50', 'setWeight: 500'));
    assert.deepEqual(got.map((i) => i.path).sort(), ['service', 'strategy/canary/steps/3/setWeight']);
  });
});
