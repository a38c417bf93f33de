/**
 * The built CLI, run as a user runs it: `node dist/cli/main.js ...` (what the
 * `fleetroll` bin points at). `npm test` builds first.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'dist/cli/main.js');
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-cli-'));
after(() => rmSync(dir, { recursive: true, force: true }));

function fleetroll(...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('fleetroll CLI', () => {
  it('--help lists the commands and exit codes', () => {
    const r = fleetroll('--help');
    assert.equal(r.code, 0);
    for (const cmd of ['deploy', 'history', 'undo', 'restart', 'status', 'pause', 'resume', 'lock', 'adopt', 'rehearse', 'plan', 'simulate', 'validate'])
      assert.match(r.stdout, new RegExp(`^  ${cmd}`, 'm'));
    assert.match(r.stdout, /2 invalid input/);
  });

  it('--version prints the package version', () => {
    const r = fleetroll('--version');
    assert.equal(r.code, 0);
    assert.match(r.stdout.trim(), /^\d+\.\d+\.\d+$/);
  });

  const planRows: [string, string[], object][] = [
    [
      '4 replicas 1/1',
      ['--replicas', '4', '--max-surge', '1', '--max-unavailable', '1'],
      {
        replicas: 4,
        maxSurge: 1,
        maxUnavailable: 1,
        minAvailable: 3,
        maxTotal: 5,
        waves: [
          [4, 0],
          [3, 2],
          [1, 4],
          [0, 4],
        ],
      },
    ],
    [
      '4 replicas 1/0',
      ['--replicas', '4', '--max-surge', '1', '--max-unavailable', '0'],
      {
        replicas: 4,
        maxSurge: 1,
        maxUnavailable: 0,
        minAvailable: 4,
        maxTotal: 5,
        waves: [
          [4, 0],
          [4, 1],
          [3, 2],
          [2, 3],
          [1, 4],
          [0, 4],
        ],
      },
    ],
    [
      '10 replicas, defaults 25%/25%',
      ['--replicas', '10'],
      {
        replicas: 10,
        maxSurge: 3,
        maxUnavailable: 2,
        minAvailable: 8,
        maxTotal: 13,
        waves: [
          [10, 0],
          [8, 5],
          [3, 10],
          [0, 10],
        ],
      },
    ],
    [
      'the example fleet file',
      ['-f', 'examples/fleet.yaml'],
      {
        replicas: 3,
        maxSurge: 1,
        maxUnavailable: 0,
        minAvailable: 3,
        maxTotal: 4,
        waves: [
          [3, 0],
          [3, 1],
          [2, 2],
          [1, 3],
          [0, 3],
        ],
      },
    ],
    [
      'a flag overrides the file',
      ['-f', 'examples/fleet.yaml', '--max-unavailable', '1'],
      {
        replicas: 3,
        maxSurge: 1,
        maxUnavailable: 1,
        minAvailable: 2,
        maxTotal: 4,
        waves: [
          [3, 0],
          [2, 2],
          [0, 3],
        ],
      },
    ],
  ];
  for (const [name, args, want] of planRows) {
    it(`plan --json: ${name}`, () => {
      const r = fleetroll('plan', ...args, '--json');
      assert.equal(r.code, 0, r.stderr);
      assert.deepEqual(JSON.parse(r.stdout), want);
    });
  }

  it('plan explains where each value came from and names the mode', () => {
    const r = fleetroll('plan', '-f', 'examples/layered/orders.yaml');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /maxSurge\s+50%\s+3\s+shared defaults/);
    assert.match(r.stdout, /mode: availability/);
    assert.match(r.stdout, /^1\s+3\s+0\s+6 \/ 3/m);
  });

  it('plan says when a group overrides a value, on stderr with --json', () => {
    const human = fleetroll('plan', '-f', 'examples/layered/search-cluster.yaml');
    assert.match(human.stdout, /note: group: true forces maxSurge 100%; ignoring 1/);
    const json = fleetroll('plan', '-f', 'examples/layered/search-cluster.yaml', '--json');
    assert.equal(json.code, 0);
    assert.deepEqual(JSON.parse(json.stdout).waves, [
      [3, 0],
      [3, 3],
      [0, 3],
    ]);
    assert.match(json.stderr, /warning: group: true forces maxSurge/);
  });

  const badRows: [string, string[], RegExp][] = [
    ['plan with neither -f nor --replicas', ['plan'], /--replicas: is required without -f/],
    ['both zero', ['plan', '--replicas', '4', '--max-surge', '0', '--max-unavailable', '0%'], /--max-surge and --max-unavailable: .*may not both be 0/],
    ['malformed surge', ['plan', '--replicas', '4', '--max-surge', '25 %'], /--max-surge: .*got "25 %"/],
    ['unavailable over 100%', ['plan', '--replicas', '4', '--max-unavailable', '101%'], /--max-unavailable: must not be greater than 100%/],
    ['replicas not a number', ['plan', '--replicas', 'four'], /--replicas: must be a whole number/],
    ['unknown command', ['deploy-all'], /unknown command/],
    ['unknown option', ['plan', '--replicas', '3', '--surge', '1'], /unknown option '--surge'/],
    ['missing fleet file', ['validate', '-f', 'nope.yaml'], /cannot read fleet file nope.yaml: no such file/],
    ['simulate with a bad jitter', ['simulate', '--replicas', '3', '--jitter', '2'], /--jitter: must be a fraction from 0 to 1/],
    ['simulate with a bad timing', ['simulate', '--replicas', '3', '--startup', '-1'], /--startup: must be a number of seconds/],
    [
      'deploy with a bad --host-parallelism',
      ['deploy', '-f', 'examples/fleet.yaml', '--host-parallelism', '0'],
      /--host-parallelism: must be a whole number from 1 to 1000, got 0/,
    ],
    ['deploy with a bad --lock-wait', ['deploy', '-f', 'examples/fleet.yaml', '--lock-wait', 'soon'], /--lock-wait: must be a duration like 30s, 5m or 1h/],
    ['undo with a bad --to-revision', ['undo', '-f', 'examples/fleet.yaml', '--to-revision', 'last'], /--to-revision: must be a whole number/],
    ['adopt with an unsafe --match', ['adopt', '-f', 'examples/fleet.yaml', '--match', 'a;b'], /--match: must be key=value or a name pattern/],
    ['deploy with a missing fleet file', ['deploy', '-f', 'nope.yaml'], /cannot read fleet file nope.yaml/],
  ];
  for (const [name, args, message] of badRows) {
    it(`exit 2 and a clear message: ${name}`, () => {
      const r = fleetroll(...args);
      assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stderr, message);
      assert.equal(r.stdout, '');
    });
  }

  it('--verbose prints the chain of causes of an error, each with its stack', () => {
    const plain = fleetroll('validate', '-f', 'nope.yaml');
    assert.equal(plain.code, 2);
    assert.doesNotMatch(plain.stderr, /caused by|^\s+at /m, 'without --verbose: the message only');
    const r = fleetroll('--verbose', 'validate', '-f', 'nope.yaml');
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^error: cannot read fleet file nope\.yaml: no such file$/m);
    assert.match(r.stderr, /^FleetrollError: cannot read fleet file nope\.yaml: no such file\n\s+at /m, 'the error, with its stack');
    assert.match(r.stderr, /^caused by: Error: ENOENT: no such file or directory, open '.*nope\.yaml'\n\s+at /m, 'its cause, with its stack');
  });

  it('validate: a good file passes, a bad one lists every problem with its path', () => {
    assert.equal(fleetroll('validate', '-f', 'examples/fleet.yaml').code, 0);
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'service: Bad_Name\nimage: x:1\nreplicas: 3\nport: 8080\nstrategy:\n  rollingUpdate: { maxSurge: abc }\n');
    const r = fleetroll('validate', '-f', bad);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /2 problems/);
    assert.match(r.stderr, /service: must be lowercase/);
    assert.match(r.stderr, /strategy\/rollingUpdate\/maxSurge: must be a non-negative integer/);
  });

  it('validate --json hides env values (they may be secrets)', () => {
    const f = join(dir, 'secret.yaml');
    writeFileSync(f, 'service: api\nimage: api:1\nreplicas: 1\nport: 80\nenv: { DB_PASSWORD: hunter2 }\n');
    const r = fleetroll('validate', '-f', f, '--json');
    assert.equal(r.code, 0, r.stderr);
    assert.doesNotMatch(r.stdout, /hunter2/);
    assert.deepEqual(JSON.parse(r.stdout).env, ['DB_PASSWORD']);
  });

  it('simulate --json reports the prediction', () => {
    const r = fleetroll('simulate', '--replicas', '2', '--max-surge', '1', '--max-unavailable', '0', '--startup', '3', '--drain', '2', '--stop', '1', '--json');
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout);
    assert.deepEqual(
      [out.durationMs, out.waves, out.peakInstances, out.lowestCapacity, out.mixedVersionWindowMs, out.reloads],
      // The hand-worked row of test/unit/simulate.test.ts: the engine on a virtual clock (was 12 s with blocking waves).
      [9050, 3, 4, 2, 3000, 2],
    );
  });

  it('simulate says what a peak is made of, per strategy', () => {
    const rows: [string, RegExp][] = [
      ['examples/fleet.yaml', /peak instances\s+\d+ containers alive \(replicas \d+ \+ surge \d+/],
      ['examples/canary.yaml', /peak instances\s+\d+ containers alive \(replicas 10 \+ the canary instances of the steps, then the rolling update's surge 2/],
      ['examples/bluegreen.yaml', /peak instances\s+\d+ containers alive \(replicas \d+ \+ the whole new set beside them/],
    ];
    for (const [file, peak] of rows) {
      const r = fleetroll('simulate', '-f', file, '--startup', '2');
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, peak, file);
    }
  });

  it('simulate prints a readable summary', () => {
    const r = fleetroll('simulate', '-f', 'examples/fleet.yaml', '--startup', '5');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /duration\s+[\d.]+ s/);
    assert.match(r.stdout, /mixed-version window\s+\d+ s/);
    assert.match(r.stdout, /load-balancer reloads\s+\d+/);
  });
});

describe('fleetroll CLI: BlueGreen and Canary are planned and validated', () => {
  it('plan --json of the blue-green example: the waves and every step', () => {
    const r = fleetroll('plan', '-f', 'examples/bluegreen.yaml', '--json');
    assert.equal(r.code, 0, r.stderr);
    const p = JSON.parse(r.stdout);
    assert.deepEqual(
      { ...p, steps: p.steps.map((s: { kind: string; trafficNewPercent: number; alive: number }) => [s.kind, s.trafficNewPercent, s.alive]) },
      {
        type: 'BlueGreen',
        replicas: 3,
        maxSurge: 3,
        maxUnavailable: 0,
        minAvailable: 3,
        maxTotal: 6,
        waves: [
          [3, 0],
          [3, 3],
          [0, 3],
        ],
        steps: [
          ['startNew', 0, 6],
          ['preview', 0, 6],
          ['prePromotion', 0, 6],
          ['switch', 100, 6],
          ['scaleDownDelay', 100, 6],
          ['removeOld', 100, 6],
        ],
        peakAlive: 6,
      },
    );
  });

  it('plan --json of the canary example: steps with canary counts and weights, then the rolling waves', () => {
    const r = fleetroll('plan', '-f', 'examples/canary.yaml', '--json');
    assert.equal(r.code, 0, r.stderr);
    const p = JSON.parse(r.stdout);
    assert.deepEqual([p.type, p.replicas, p.maxSurge, p.maxUnavailable, p.peakAlive], ['Canary', 10, 2, 0, 19]);
    assert.deepEqual(
      p.steps.map((s: { kind: string; new: number; old: number; trafficNewPercent: number }) => [s.kind, s.new, s.old, s.trafficNewPercent]),
      [
        ['setWeight', 1, 10, 10],
        ['pause', 1, 10, 10],
        ['analysis', 1, 10, 10],
        ['setWeight', 5, 10, 50],
        ['pause', 5, 10, 50],
      ],
    );
    assert.deepEqual(p.steps[4].seconds, null, 'pause {} waits for resume or promote');
    assert.deepEqual(p.waves, [
      [10, 5],
      [5, 7],
      [3, 9],
      [1, 10],
      [0, 10],
    ]);
  });

  it('plan explains a canary for people: the steps table and the rolling update after it', () => {
    const r = fleetroll('plan', '-f', 'examples/canary.yaml');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /stickyKey\s+cookie:session\s+service's strategy/);
    assert.match(r.stdout, /^1\s+setWeight 10: start 1 canary instance\s+1\s+10\s+10%\s+11$/m);
    assert.match(r.stdout, /^5\s+pause until `fleetroll promote` \(or `abort`\)\s+5\s+10\s+50%\s+15$/m);
    assert.match(r.stdout, /then a rolling update \(maxSurge 2, maxUnavailable 0\) from 10 stable and 5 canary instances/);
    assert.match(r.stdout, /^1\s+2\s+5\s+5 \/ 7\s+10\.\.15\s+17$/m);
    assert.doesNotMatch(r.stdout, /not done yet|lands with/, 'deploy carries canaries out now');
  });

  it('plan explains a blue-green rollout for people', () => {
    const r = fleetroll('plan', '-f', 'examples/bluegreen.yaml');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^1\s+start 3 new instances out of traffic; wait until every one is available\s+3\s+3\s+100% \/ 0%\s+6$/m);
    assert.match(r.stdout, /^4\s+switch every upstream to the new set: one rewrite and one reload per load balancer\s+3\s+3\s+0% \/ 100%\s+6$/m);
    assert.match(r.stdout, /mixed-version window: one reload \(the switch\); rollback: `fleetroll undo` within 30 s of the switch is one reload back/);
  });

  it('validate tells a canary user what their nginx upstream gets and that proxy_pass stays', () => {
    const r = fleetroll('validate', '-f', 'examples/canary.yaml');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /strategy Canary \(service's strategy\), 10 replicas/);
    assert.match(r.stdout, /steps\s+setWeight 10, pause 5 min, analysis, setWeight 50, pause until promoted\s+service's strategy/);
    assert.match(r.stdout, /the upstream gets `hash \$cookie_session consistent;` and a weight on every server/);
    assert.match(r.stdout, /proxy_pass http:\/\/bookstore_api stays as it is: nothing to change in nginx.conf/);
  });

  it('validate with canary.force says what the file gets and the one line of nginx.conf to change; a header with "_" is warned about', () => {
    const f = join(dir, 'canary-force.yaml');
    const fleet = (force: string) =>
      `service: api\nimage: api:1\nreplicas: 4\nport: 80\nstrategy:\n  type: Canary\n  canary: { steps: [{ setWeight: 25 }], force: "${force}" }\nloadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: api }\n`;
    writeFileSync(f, fleet('header:X-Canary'));
    const r = fleetroll('validate', '-f', f);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /force\s+header:X-Canary: "always" → canary, "never" → stable\s+service's strategy/);
    assert.match(
      r.stdout,
      /canary\.force \(header X-Canary\): the same file gets `map \.\.\. \$fleetroll_api_route` and `upstream fleetroll_api_canary` \/ `upstream fleetroll_api_stable`/,
    );
    assert.match(r.stdout, /change nginx\.conf once: `proxy_pass http:\/\/api;` → `proxy_pass http:\/\/\$fleetroll_api_route;`/);
    assert.doesNotMatch(r.stdout, /nothing to change in nginx\.conf/);
    assert.equal(r.stderr, '');
    writeFileSync(f, fleet('header:X_Canary'));
    const u = fleetroll('validate', '-f', f);
    assert.equal(u.code, 0, u.stderr);
    assert.match(u.stderr, /warning: strategy\/canary\/force: header X_Canary has "_": nginx drops such headers unless `underscores_in_headers on;`/);
  });

  it('validate warns when a custom template brings its own balancing method', () => {
    writeFileSync(join(dir, 'lc.tmpl'), 'upstream {{upstream}} {\n    least_conn;\n{{servers}}\n}\n');
    const f = join(dir, 'canary-lc.yaml');
    writeFileSync(
      f,
      'service: api\nimage: api:1\nreplicas: 4\nport: 80\nstrategy:\n  type: Canary\n  canary: { steps: [{ setWeight: 25 }] }\nloadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: api, template: ./lc.tmpl }\n',
    );
    const r = fleetroll('validate', '-f', f);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stderr, /warning: loadBalancers\/0\/nginx\/template: sets its own load-balancing method \(least_conn\); remove it/);
  });

  it('validate describes the blue-green switch and the preview upstream', () => {
    const r = fleetroll('validate', '-f', 'examples/bluegreen.yaml');
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /scaleDownDelaySeconds\s+30\s+service's strategy/);
    assert.match(r.stdout, /the same file also gets `upstream bookstore_preview \{ \.\.\. \}`/);
  });

  it('a canary step that does not fit is exit 2 with its path', () => {
    const f = join(dir, 'bad-canary.yaml');
    writeFileSync(f, 'service: api\nimage: api:1\nreplicas: 4\nport: 80\nstrategy:\n  type: BlueGreen\n  canary: { steps: [{ setWeight: 10, pause: {} }] }\n');
    const r = fleetroll('plan', '-f', f);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /strategy\/canary: applies only to type Canary, but type is BlueGreen; with BlueGreen, allowed: blueGreen/);
    assert.match(r.stderr, /strategy\/canary\/steps\/0: must be exactly one of setWeight, pause or analysis/);
  });
});
