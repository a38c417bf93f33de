/**
 * The options several commands share are declared once (src/cli/options.ts):
 * every command that takes one parses it the same way, names the flag when a
 * value is bad (exit 2, nothing on stdout), and lists it in its help. Runs the
 * built CLI like test/cli/cli.test.ts; none of these reach Docker.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const bin = join(root, 'dist/cli/main.js');

function fleetroll(...args: string[]) {
  const r = spawnSync(process.execPath, [bin, ...args], { cwd: root, encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('shared CLI options', () => {
  const badRows: [string, string[], RegExp][] = [
    ['deploy --log-format', ['deploy', '-f', 'examples/fleet.yaml', '--log-format', 'xml'], /--log-format: must be "text" or "json", got "xml"/],
    ['undo --log-format', ['undo', '-f', 'examples/fleet.yaml', '--log-format', 'yaml'], /--log-format: must be "text" or "json", got "yaml"/],
    ['rehearse --log-format', ['rehearse', '--log-format', 'x'], /--log-format: must be "text" or "json", got "x"/],
    ['restart --lock-wait', ['restart', '-f', 'examples/fleet.yaml', '--lock-wait', 'x'], /--lock-wait: must be a duration like 30s, 5m or 1h, got "x"/],
    ['resume --lock-wait', ['resume', '-f', 'examples/fleet.yaml', '--lock-wait', '5 m'], /--lock-wait: must be a duration like 30s, 5m or 1h, got "5 m"/],
    ['simulate --replicas', ['simulate', '--replicas', '-1'], /--replicas: must be a whole number from 0 to 10000/],
    ['simulate --replicas above the engine bound', ['simulate', '--replicas', '10001'], /--replicas: must be a whole number from 0 to 10000, got 10001/],
    ['simulate without -f or --replicas', ['simulate'], /--replicas: is required without -f/],
    ['simulate --max-surge', ['simulate', '--replicas', '3', '--max-surge', 'lots'], /--max-surge: .*got "lots"/],
    [
      'deploy --metrics without a host',
      ['deploy', '-f', 'examples/fleet.yaml', '--metrics', '9464'],
      /--metrics: must be HOST:PORT, e\.g\. 127\.0\.0\.1:9464.*got "9464"/,
    ],
    [
      'restart --metrics with a port too high',
      ['restart', '-f', 'examples/fleet.yaml', '--metrics', '127.0.0.1:65536'],
      /--metrics: must be HOST:PORT.*port 0 to 65535.*got "127\.0\.0\.1:65536"/,
    ],
    [
      'undo --metrics-linger',
      ['undo', '-f', 'examples/fleet.yaml', '--metrics', '127.0.0.1:0', '--metrics-linger', 'soon'],
      /--metrics-linger: must be a duration like 30s, 5m or 1h, got "soon"/,
    ],
    [
      'plan --replacement-policy',
      ['plan', '--replicas', '3', '--replacement-policy', 'Eventually'],
      /--replacement-policy: must be "TerminationStarted" or "TerminationComplete", got "Eventually"/,
    ],
  ];
  for (const [name, args, message] of badRows) {
    it(`exit 2 naming the flag: ${name}`, () => {
      const r = fleetroll(...args);
      assert.equal(r.code, 2, `${r.stdout}\n${r.stderr}`);
      assert.match(r.stderr, message);
      assert.equal(r.stdout, '');
    });
  }

  const required: string[][] = [
    ['deploy'],
    ['history'],
    ['undo'],
    ['restart'],
    ['pause'],
    ['resume'],
    ['status'],
    ['adopt', '--match', 'x'],
    ['lock', 'status'],
    ['lock', 'release'],
    ['validate'],
  ];
  for (const cmd of required) {
    it(`${cmd[0]}${cmd[0] === 'lock' ? ` ${cmd[1]}` : ''} requires -f`, () => {
      const r = fleetroll(...cmd);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /required option '-f, --file <fleet\.yaml>' not specified/);
    });
  }

  const helpRows: [string[], string[]][] = [
    [
      ['deploy'],
      [
        '-f, --file <fleet.yaml>',
        '--max-surge <n|%>',
        '--max-unavailable <n|%>',
        '--replacement-policy <policy>',
        '--lock-wait <duration>',
        '--auto-rollback',
        '--json',
        '--log-format <text|json>',
        '--metrics <host:port>',
        '--metrics-linger <duration>',
      ],
    ],
    [
      ['undo'],
      [
        '-f, --file <fleet.yaml>',
        '--lock-wait <duration>',
        '--auto-rollback',
        '--json',
        '--log-format <text|json>',
        '--metrics <host:port>',
        '--metrics-linger <duration>',
      ],
    ],
    [['resume'], ['--metrics <host:port>', '--metrics-linger <duration>']],
    [['plan'], ['-f, --file <fleet.yaml>', '--replicas <n>', '--max-surge <n|%>', '--max-unavailable <n|%>', '--replacement-policy <policy>', '--json']],
    [['simulate'], ['-f, --file <fleet.yaml>', '--replicas <n>', '--max-surge <n|%>', '--max-unavailable <n|%>', '--replacement-policy <policy>', '--json']],
    [['rehearse'], ['--docker <endpoint>', '--max-surge <n|%>', '--max-unavailable <n|%>', '--json', '--log-format <text|json>']],
    [['experiment'], ['--docker <endpoint>', '--json']],
  ];
  for (const [cmd, flags] of helpRows) {
    it(`${cmd.join(' ')} --help lists its shared flags`, () => {
      const r = fleetroll(...cmd, '--help');
      assert.equal(r.code, 0);
      for (const f of flags) assert.ok(r.stdout.includes(`  ${f}`), `${cmd.join(' ')} --help lacks ${f}`);
    });
  }

  it('--log-format and --docker show their defaults', () => {
    // Help wraps at 80 columns: compare with runs of white space as one space.
    const flat = (...args: string[]) => fleetroll(...args, '--help').stdout.replace(/\s+/g, ' ');
    assert.ok(flat('deploy').includes('--log-format <text|json> progress lines as text or as JSON log lines (default: "text")'));
    assert.ok(flat('experiment').includes('--docker <endpoint> Docker engine to use (default: "unix:///var/run/docker.sock")'));
  });
});
