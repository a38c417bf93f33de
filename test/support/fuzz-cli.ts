/**
 * Runs the built CLI (`node dist/cli/main.js ...`) as a user runs it, many
 * times, a few at a time, measuring each run: wall time, CPU time
 * (user + sys) and peak RSS of the child, from /usr/bin/time where the
 * machine has it (resource figures are then per child, not per test process).
 *
 * Each child is its own process group, so a run past its time limit is
 * killed with everything it started (/usr/bin/time and the node under it)
 * and nothing else.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const BIN = join(ROOT, 'dist/cli/main.js');
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;

export interface CliResult {
  args: string[];
  /** Exit status; null when killed (see `killed`) or ended by a signal. */
  code: number | null;
  signal: string | null;
  /** Killed by us past `timeoutMs`. */
  killed: boolean;
  stdout: string;
  stderr: string;
  wallMs: number;
  /** user + sys of the child (undefined without /usr/bin/time). */
  cpuMs: number | undefined;
  /** Peak resident set size of the child in KB (undefined without /usr/bin/time). */
  maxRssKb: number | undefined;
}

export interface CliRun {
  args: string[];
  cwd?: string;
  env?: Record<string, string>;
  timeoutMs: number;
}

const scratch = mkdtempSync(join(tmpdir(), 'fleetroll-fuzz-time-'));
let nth = 0;
/** Captured output is capped: a runaway child must not take the test process's memory with it. */
const OUTPUT_CAP = 4 * 1024 * 1024;

export function cleanupCli(): void {
  rmSync(scratch, { recursive: true, force: true });
}

export function runCli(run: CliRun): Promise<CliResult> {
  const timeFile = join(scratch, `t${nth++}`);
  const argv = TIME ? ['-f', '%e %U %S %M', '-o', timeFile, process.execPath, BIN, ...run.args] : [BIN, ...run.args];
  const start = performance.now();
  return new Promise((resolve) => {
    const child = spawn(TIME ?? process.execPath, argv, {
      cwd: run.cwd ?? ROOT,
      env: { ...process.env, NO_COLOR: '1', ...run.env },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => {
      if (stdout.length < OUTPUT_CAP) stdout += d;
    });
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < OUTPUT_CAP) stderr += d;
    });
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      try {
        // The group this spawn created: /usr/bin/time and the CLI under it.
        if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }, run.timeoutMs);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const wallMs = performance.now() - start;
      let cpuMs: number | undefined;
      let maxRssKb: number | undefined;
      let status = code;
      if (TIME && existsSync(timeFile)) {
        const lines = readFileSync(timeFile, 'utf8').trim().split('\n');
        const last = (lines.at(-1) ?? '').trim().split(/\s+/).map(Number);
        if (last.length === 4 && last.every((x) => Number.isFinite(x))) {
          cpuMs = ((last[1] ?? 0) + (last[2] ?? 0)) * 1000;
          maxRssKb = last[3];
        }
        // /usr/bin/time exits with the child's status, or says which signal ended it.
        if (lines.some((l) => /Command terminated by signal/.test(l))) status = null;
        rmSync(timeFile, { force: true });
      }
      resolve({ args: run.args, code: killed ? null : status, signal: killed ? 'SIGKILL' : signal, killed, stdout, stderr, wallMs, cpuMs, maxRssKb });
    });
  });
}

/** Runs every item through `fn`, at most `concurrency` at a time, results in input order. */
export async function pool<T, R>(items: readonly T[], concurrency: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= items.length) return;
      out[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return out;
}

/** What a crash looks like in the CLI's output: a stack frame, a JS engine error, the catch-all's line. */
const CRASH_RE =
  /an unexpected error|^\s+at .+[:(]\d+:\d+\)?$|Maximum call stack|Invalid string length|heap out of memory|\b(?:TypeError|RangeError|ReferenceError|SyntaxError|InternalError)\b|Cannot read properties of|is not a function|\[object Object\]/m;

export function crashIn(text: string): string | undefined {
  return CRASH_RE.exec(text)?.[0];
}

/** The median of some numbers (the baseline of the ratios). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[m]! : ((s[m - 1] ?? 0) + (s[m] ?? 0)) / 2;
}
