/**
 * `validate` refuses what a deploy would refuse before touching a host
 * (config/checks.ts, run by every fleet load): the reproducers of hostile
 * input found by fuzzing, each with its accepted neighbour, and the pure
 * checks' tables. The nginx name limit proved on the real binary and hooks
 * that cannot run are in test/local/validate-checks.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { dockerEndpointProblem, hookArgumentProblem, imageReferenceProblem, ipv4Problem } from '../../src/config/checks.js';
import { BASE, canary, fleetFilesIn, lb, u } from '../support/fleet-checks.js';

const dir = mkdtempSync(join(tmpdir(), 'fleetroll-checks-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const { file, issuesOf } = fleetFilesIn(dir);

writeFileSync(join(dir, 'good.tmpl'), 'upstream {{upstream}} {\n{{servers}}\n}\n');
writeFileSync(join(dir, 'no-servers.tmpl'), 'upstream {{upstream}} {\n    server 127.0.0.1:9 down;\n}\n');
mkdirSync(join(dir, 'a-directory.tmpl'));

describe('fleet load refuses what deploy would refuse', () => {
  // [name, fleet file, field path or undefined (accepted), message pattern]
  const rows: [string, string, string | undefined, RegExp?][] = [
    [
      'a template that does not exist',
      `${BASE}${lb('api', ', template: ./nope.tmpl')}`,
      'loadBalancers/0/nginx/template',
      /cannot read upstream template .*nope\.tmpl.*no such file/,
    ],
    [
      'a template without {{servers}}',
      `${BASE}${lb('api', ', template: ./no-servers.tmpl')}`,
      'loadBalancers/0/nginx/template',
      /must contain \{\{servers\}\}/,
    ],
    ['a template that is a directory', `${BASE}${lb('api', ', template: ./a-directory.tmpl')}`, 'loadBalancers/0/nginx/template', /is a directory/],
    ['a readable template with {{servers}} (relative to the fleet file)', `${BASE}${lb('api', ', template: ./good.tmpl')}`, undefined],
    ['tcp:// port 99999', `${BASE}hosts:\n  - { name: h1, docker: "tcp://h:99999" }\n`, 'hosts/0/docker', /port must be from 1 to 65535, got 99999/],
    ['ssh:// port 99999', `${BASE}hosts:\n  - { name: h1, docker: "ssh://u@h:99999" }\n`, 'hosts/0/docker', /port must be from 1 to 65535, got 99999/],
    ['tcp:// port 0', `${BASE}hosts:\n  - { name: h1, docker: "tcp://h:0" }\n`, 'hosts/0/docker', /port must be from 1 to 65535, got 0/],
    ['tcp:// port 65535', `${BASE}hosts:\n  - { name: h1, docker: "tcp://h:65535" }\n`, undefined],
    ['a host name with an empty label', `${BASE}hosts:\n  - { name: h1, docker: "ssh://u@a..b" }\n`, 'hosts/0/docker', /empty label/],
    [
      'publishAddress 999.999.999.999',
      `${BASE}hosts:\n  - { name: h1, publishAddress: 999.999.999.999 }\n`,
      'hosts/0/publishAddress',
      /four numbers from 0 to 255.*"999"/,
    ],
    ['publishAddress 255.255.255.255', `${BASE}hosts:\n  - { name: h1, publishAddress: 255.255.255.255 }\n`, undefined],
    [
      'a 30-character upstream with stickyKey cookie:my-session',
      `${BASE}${canary('stickyKey: cookie:my-session')}${lb(u(30))}`,
      'loadBalancers/0/nginx/upstream',
      /strategy\/canary\/stickyKey "cookie:my-session".*\$fleetroll_u{30}_sticky: 47 characters.*over 46.*at most 29 characters \(got 30\)/,
    ],
    ['a 29-character upstream with stickyKey cookie:my-session', `${BASE}${canary('stickyKey: cookie:my-session')}${lb(u(29))}`, undefined],
    ['a 64-character upstream with stickyKey cookie:session (no map: $cookie_session)', `${BASE}${canary('stickyKey: cookie:session')}${lb(u(64))}`, undefined],
    [
      'a 31-character upstream with canary.force',
      `${BASE}${canary('force: header:X-Canary')}${lb(u(31))}`,
      'loadBalancers/0/nginx/upstream',
      /strategy\/canary\/force "header:X-Canary".*\$fleetroll_u{31}_route: 47 characters.*at most 30 characters \(got 31\)/,
    ],
    ['a 30-character upstream with canary.force', `${BASE}${canary('force: header:X-Canary')}${lb(u(30))}`, undefined],
    ['a 64-character upstream outside a canary', `${BASE}${lb(u(64))}`, undefined],
    ['image "a:" (an empty tag, so an empty version)', `${BASE.replace('api:1', '"a:"')}`, 'image', /empty tag/],
    ['image "a//b:1" (an empty name part)', `${BASE.replace('api:1', '"a//b:1"')}`, 'image', /empty name part/],
    ['image with a bad digest', `${BASE.replace('api:1', '"a@sha256:abc"')}`, 'image', /digest after "@" must be sha256:<64 lowercase hex digits>/],
    ['image registry:port/name:tag@digest', `${BASE.replace('api:1', `"registry.example.com:5000/team/api:1.2@sha256:${'a'.repeat(64)}"`)}`, undefined],
    ['a hook argument with a NUL byte', `${BASE}hooks:\n  postDeploy: ["/bin/echo", "a\\0b"]\n`, 'hooks/postDeploy/1', /NUL byte \(U\+0000\) at character 2/],
    ['a hook program with an escape character', `${BASE}hooks:\n  preDeploy: ["./check\\e[31m.sh"]\n`, 'hooks/preDeploy/0', /control character U\+001B/],
    ['a hook argument with tab and newline', `${BASE}hooks:\n  postWave: ["/bin/echo", "a\\tb\\nc"]\n`, undefined],
  ];
  for (const [name, text, path, message] of rows) {
    it(`${name}: ${path === undefined ? 'accepted' : `refused at ${path}`}`, async () => {
      const issues = await issuesOf(text);
      if (path === undefined) return assert.deepEqual(issues, []);
      assert.equal(issues.length, 1, JSON.stringify(issues));
      assert.equal(issues[0]?.path, path);
      assert.match(issues[0]?.message ?? '', message!);
    });
  }

  it('the stickyKey names its defaults file when the strategy comes from there', async () => {
    file(`strategy:\n  type: Canary\n  canary: { stickyKey: cookie:a-b, steps: [{ setWeight: 10 }] }\n`, 'team-defaults.yaml');
    const issues = await issuesOf(`${BASE}defaults: ./team-defaults.yaml\n${lb(u(40))}`);
    assert.equal(issues.length, 1, JSON.stringify(issues));
    assert.match(issues[0]?.message ?? '', /team-defaults\.yaml: strategy\/canary\/stickyKey "cookie:a-b"/);
  });

  it('--image gets the same image check, under --image', async () => {
    const issues = await issuesOf(BASE, { image: 'api:' });
    assert.deepEqual(
      issues.map((i) => i.path),
      ['--image'],
    );
    assert.match(issues[0]?.message ?? '', /empty tag/);
  });

  it('deploy-time problems are listed with the schema-level cross-field ones, in one pass', async () => {
    const issues = await issuesOf(`${BASE.replace('api:1', '"a:"')}progressDeadlineSeconds: 5\nminReadySeconds: 10\n`);
    assert.deepEqual(issues.map((i) => i.path).sort(), ['image', 'progressDeadlineSeconds']);
  });
});

describe('imageReferenceProblem', () => {
  const rows: [string, string, RegExp | undefined][] = [
    ['name only', 'api', undefined],
    ['name:tag', 'api:1.0.0', undefined],
    ['registry with a port, no tag', 'localhost:5000/api', undefined],
    ['nested path, separators', 'ghcr.io/my-org/my__app.x:v1_2-rc', undefined],
    ['digest only', `api@sha256:${'0'.repeat(64)}`, undefined],
    ['sha512 digest', `api:1@sha512:${'f'.repeat(128)}`, undefined],
    ['empty tag', 'a:', /empty tag/],
    ['tag starting with "-"', 'a:-x', /tag "-x" must be/],
    ['tag over 128', `a:${'t'.repeat(129)}`, /at most 128/],
    ['trailing "/"', 'a/', /empty name part/],
    ['uppercase name part', 'team/MyApp:1', /name part "MyApp" must be lowercase/],
    ['double dot in a name part', 'a..b:1', /name part "a\.\.b"/],
    ['registry ending in "-"', 'reg-.io/a:1', /registry "reg-\.io"/],
    ['digest too short', 'a@sha256:abcd', /digest/],
    ['digest uppercase hex', `a@sha256:${'A'.repeat(64)}`, /digest/],
    ['unknown digest algorithm', `a@md5:${'0'.repeat(32)}`, /digest/],
    ['empty digest', 'a@', /digest/],
    ['two "@"', `a@sha256:${'0'.repeat(64)}@x`, /digest/],
  ];
  for (const [name, ref, want] of rows) {
    it(`${name}: ${JSON.stringify(ref.length > 40 ? `${ref.slice(0, 40)}...` : ref)}`, () => {
      const p = imageReferenceProblem(ref);
      if (want === undefined) assert.equal(p, undefined);
      else assert.match(p ?? '(accepted)', want);
    });
  }
});

describe('dockerEndpointProblem', () => {
  const rows: [string, string, RegExp | undefined][] = [
    ["unix socket (not this check's)", 'unix:///var/run/docker.sock', undefined],
    ['tcp host:port', 'tcp://docker-1.example.com:2376', undefined],
    ['tcp IPv4', 'tcp://10.0.0.5:2375', undefined],
    ['ssh without port', 'ssh://deploy@web-1', undefined],
    ['ssh with port', 'ssh://deploy@web-1:2222', undefined],
    ['tcp port 99999', 'tcp://h:99999', /port must be from 1 to 65535, got 99999/],
    ['ssh port 99999', 'ssh://u@h:99999', /port must be from 1 to 65535/],
    ['ssh port 0', 'ssh://h:0', /got 0/],
    ['host starting with "-"', 'tcp://-h:2375', /label "-h"/],
    ['host ending with "-"', 'ssh://u@web-', /label "web-"/],
    ['trailing dot', 'tcp://h.:2375', /empty label/],
    ['IPv4 octet over 255', 'tcp://10.0.0.256:2375', /"256"/],
    ['label over 63', `tcp://${'a'.repeat(64)}.com:2375`, /label/],
    ['host over 253', `tcp://${Array.from({ length: 64 }, () => 'abc').join('.')}:2375`, /at most 253/],
  ];
  for (const [name, endpoint, want] of rows) {
    it(name, () => {
      const p = dockerEndpointProblem(endpoint);
      if (want === undefined) assert.equal(p, undefined);
      else assert.match(p ?? '(accepted)', want);
    });
  }
});

describe('ipv4Problem', () => {
  const rows: [string, boolean][] = [
    ['0.0.0.0', true],
    ['127.0.0.1', true],
    ['255.255.255.255', true],
    ['256.0.0.1', false],
    ['999.999.999.999', false],
    ['010.0.0.1', false],
    ['1.2.3', false],
    ['1.2.3.4.5', false],
    ['1..3.4', false],
  ];
  for (const [addr, ok] of rows) {
    it(`${addr}: ${ok ? 'accepted' : 'refused'}`, () => assert.equal(ipv4Problem(addr) === undefined, ok, ipv4Problem(addr)));
  }
});

describe('hookArgumentProblem', () => {
  const rows: [string, string, RegExp | undefined][] = [
    ['plain', '--max-errors', undefined],
    ['spaces, tab, newline, unicode', 'a b\tc\nd é', undefined],
    ['NUL', 'a\0', /NUL byte/],
    ['carriage return', 'a\rb', /U\+000D/],
    ['escape', '\u001b[2J', /U\+001B at character 1/],
    ['DEL', 'x\u007f', /U\+007F/],
  ];
  for (const [name, arg, want] of rows) {
    it(name, () => {
      const p = hookArgumentProblem(arg);
      if (want === undefined) assert.equal(p, undefined);
      else assert.match(p ?? '(accepted)', want);
    });
  }
});
