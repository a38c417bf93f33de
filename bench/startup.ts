/**
 * CLI startup benchmark: whole `fleetroll` processes, side by side
 * with a bare `node -e 0`, so what the CLI itself costs to start is visible.
 *
 * Each command runs N times (after one unmeasured warm-up run, for the file
 * cache); the median wall time and the largest max RSS (from
 * `/usr/bin/time -f %M`, shown in MiB as "MB") are reported, with the ratio
 * to `node -e 0`.
 * Targets: `--version`, `plan` and `validate` within 0.3 s and 60 MB; the
 * process exits 1 when one is missed.
 *
 *   npx tsx bench/startup.ts [--runs 5] [--no-build]
 *
 * It measures dist/ (what users run), so it builds first unless --no-build.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';

const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const RUNS = Number(arg('--runs') ?? 5);
const TARGET_MS = 300;
const TARGET_MB = 60;
const TIME = '/usr/bin/time';

if (!process.argv.includes('--no-build')) {
  const b = spawnSync('npm', ['run', '--silent', 'build'], { stdio: 'inherit' });
  if (b.status !== 0) process.exit(b.status ?? 1);
}
const main = 'dist/cli/main.js';
if (!existsSync(main)) throw new Error(`${main} is missing: run npm run build`);

interface Case {
  name: string;
  args: string[];
  /** Held to the targets (the baseline is not). */
  target: boolean;
}

const cases: Case[] = [
  { name: 'node -e 0', args: ['-e', '0'], target: false },
  { name: 'fleetroll --version', args: [main, '--version'], target: true },
  { name: 'fleetroll plan --replicas 4 --json', args: [main, 'plan', '--replicas', '4', '--json'], target: true },
  { name: 'fleetroll validate -f examples/fleet.yaml', args: [main, 'validate', '-f', 'examples/fleet.yaml'], target: true },
  { name: 'fleetroll --help', args: [main, '--help'], target: false },
];

const haveTime = existsSync(TIME);
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-startup-'));

/** One process: wall time (ms, measured here) and max RSS (MB, from /usr/bin/time; NaN without it). */
function once(args: string[]): { ms: number; mb: number } {
  const out = join(dir, 'time.txt');
  const [cmd, argv] = haveTime ? [TIME, ['-f', '%M', '-o', out, process.execPath, ...args]] : [process.execPath, args];
  const t0 = performance.now();
  const r = spawnSync(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited with ${r.status}: ${r.stderr.toString()}`);
  const kb = haveTime ? Number(readFileSync(out, 'utf8').trim().split('\n').pop()) : NaN;
  return { ms, mb: kb / 1024 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

try {
  console.log(`node ${process.version}, ${RUNS} runs each (median wall time, max RSS)${haveTime ? '' : '; no /usr/bin/time: RSS not measured'}\n`);
  let base: { ms: number; mb: number } | undefined;
  let failed = 0;
  for (const c of cases) {
    once(c.args); // warm-up
    const runs = Array.from({ length: RUNS }, () => once(c.args));
    const ms = median(runs.map((r) => r.ms));
    const mb = Math.max(...runs.map((r) => r.mb));
    base ??= { ms, mb };
    const ok = !c.target || (ms <= TARGET_MS && (Number.isNaN(mb) || mb <= TARGET_MB));
    if (!ok) failed++;
    console.log(
      `${c.target ? (ok ? 'ok  ' : 'SLOW') : '    '} ${c.name.padEnd(44)} ${ms.toFixed(0).padStart(5)} ms (×${(ms / base.ms).toFixed(1)})  ${mb.toFixed(0).padStart(4)} MB (×${(mb / base.mb).toFixed(1)})${c.target ? `  target ${TARGET_MS} ms, ${TARGET_MB} MB` : ''}`,
    );
  }
  process.exitCode = failed > 0 ? 1 : 0;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
