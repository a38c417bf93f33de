/**
 * The tests' hang guard (test/support/hang.ts) on real child processes: a
 * process kept alive by an open timer or socket is killed and named, one that
 * exits in time is left alone.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { reportEnv, superviseExit } from '../support/hang.js';

/**
 * The guard is started once the child says it runs: a SIGUSR2 that reaches
 * node before it has set up its report handler ends it instead (at load 30 a
 * child once took longer than the 1.5 s limit to start).
 */
function run(script: string, limitMs: number): Promise<{ hung?: string; code?: number | null }> {
  const { env, dir } = reportEnv(process.env);
  const child = spawn(process.execPath, ['-e', `process.stdout.write('up\\n'); ${script}`], { env, stdio: ['ignore', 'pipe', 'ignore'] });
  return new Promise((resolve) => {
    let cancel = () => {};
    child.stdout.once('data', () => (cancel = superviseExit(child, 'the child', dir, (hung) => resolve({ hung }), limitMs)));
    child.on('close', (code) => {
      cancel();
      resolve({ code });
    });
  });
}

describe('the hang guard for CLI runs in tests', () => {
  it('a process held open by a timer: killed after the limit, the timer named', async () => {
    const r = await run('setInterval(() => {}, 60_000)', 1500);
    assert.ok(r.hung, 'reported as hung');
    assert.match(r.hung, /the child did not exit within 2 s/);
    assert.match(r.hung, /timer .*fires in/);
  });

  it('a process held open by a socket: the socket and its address named', async () => {
    const r = await run("require('net').createServer().listen(0, '127.0.0.1')", 1500);
    assert.ok(r.hung, 'reported as hung');
    assert.match(r.hung, /tcp .*127\.0\.0\.1/);
  });

  it('a process that exits in time: its exit code, no report', async () => {
    const r = await run('setTimeout(() => process.exit(3), 100)', 5000);
    assert.deepEqual(r, { code: 3 });
  });
});
