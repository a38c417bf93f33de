/**
 * A hang guard for the CLI processes the tests start. A fleetroll command
 * that never exits (a stream or timer left open keeps Node's event loop
 * alive) would otherwise hold its test, and the whole run, until CI's own
 * time limit, with nothing in the log to say where. After `limitMs` the
 * child is asked for Node's diagnostic report (`--report-on-signal`, set in
 * its NODE_OPTIONS by `reportEnv`), which lists what was still open, then
 * killed; the test fails with that list and the command's output.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { guard } from './wait.js';

/** How long a CLI run in a test may take before it counts as hung, scaled to the run's concurrency. */
export const CLI_HANG_MS = guard(360_000);

/**
 * The environment that lets `superviseExit` ask the child for a report (a
 * SIGUSR2 writes it into the returned dir), with the CLI's leak check on.
 */
export function reportEnv(env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fleetroll-report-'));
  const options = [env.NODE_OPTIONS, '--report-on-signal', '--report-signal=SIGUSR2', `--report-directory=${dir}`].filter(Boolean).join(' ');
  // The CLI names what it left open when it had to end itself (src/cli/main.ts).
  return { env: { ...env, NODE_OPTIONS: options, FLEETROLL_LEAK_CHECK: '1' }, dir };
}

interface Report {
  libuv?: {
    type: string;
    is_active?: boolean;
    is_referenced?: boolean;
    remoteEndpoint?: unknown;
    localEndpoint?: unknown;
    details?: string;
    repeat?: number;
    firesInMsFromNow?: number;
  }[];
  javascriptStack?: { message?: string; stack?: string[] };
}

/** What a diagnostic report says keeps the process alive: the active, referenced libuv handles. */
export function openHandles(report: Report): string[] {
  return (report.libuv ?? [])
    .filter((h) => h.is_active && h.is_referenced && h.type !== 'signal')
    .map((h) => {
      const where = h.remoteEndpoint ?? h.localEndpoint;
      const timer = h.firesInMsFromNow !== undefined ? ` fires in ${h.firesInMsFromNow} ms${h.repeat ? `, every ${h.repeat} ms` : ''}` : '';
      return `${h.type}${where ? ` ${JSON.stringify(where)}` : ''}${h.details ? ` ${h.details}` : ''}${timer}`;
    });
}

/**
 * Calls `onHang` with an explanation if `child` has not exited within
 * `limitMs`, after killing it. Returns a function that cancels the guard
 * (call it on exit); the report dir is removed either way.
 */
export function superviseExit(child: ChildProcess, what: string, dir: string, onHang: (why: string) => void, limitMs = CLI_HANG_MS): () => void {
  let done = false;
  const cancel = () => {
    done = true;
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  };
  const timer = setTimeout(() => {
    void (async () => {
      child.kill('SIGUSR2');
      let report: Report | undefined;
      for (let i = 0; i < 50 && !report; i++) {
        await new Promise((r) => setTimeout(r, 100));
        const file = readdirSync(dir).find((f) => f.endsWith('.json'));
        if (file) {
          try {
            report = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Report;
          } catch {
            // still being written
          }
        }
      }
      child.kill('SIGKILL');
      if (done) return;
      const open = report ? openHandles(report) : ['(no diagnostic report came back)'];
      const stack = report?.javascriptStack?.stack?.slice(0, 8).join('\n    ') ?? '';
      cancel();
      onHang(
        `${what} did not exit within ${Math.round(limitMs / 1000)} s (the tests' hang guard, test/support/hang.ts); still open:\n  ${open.join('\n  ')}${stack ? `\n  stack at the time:\n    ${stack}` : ''}`,
      );
    })();
  }, limitMs);
  timer.unref();
  return cancel;
}

/** A CLI run that had to end itself with a handle still open says so on stderr (src/cli/main.ts): shown in the test's output. */
export function reportLeak(what: string, stderr: string): void {
  const line = /^fleetroll: leak check: .*$/m.exec(stderr)?.[0];
  if (line) console.error(`${what}: ${line}`);
}
