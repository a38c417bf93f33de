/**
 * Fuzzing what a user hands fleetroll: fleet files, defaults
 * files, upstream templates and experiment specs, generated from a fixed
 * seed (FUZZ_SEED to change it; every failure names it and the case).
 *
 * For every case:
 *   - the built CLI (`node dist/cli/main.js`) exits 0 or 2: never 1, never a
 *     crash, a stack trace or "an unexpected error";
 *   - within a time and memory bound measured as a ratio against a plain
 *     `validate -f examples/fleet.yaml` in the same run (CPU time and peak
 *     RSS of the child from /usr/bin/time, wall time as the hang guard);
 *   - no secret marker (put into env values, env files, ${VAR} values,
 *     registry passwords, secret files) in any output of validate,
 *     `validate --json` or plan;
 *   - every accepted fleet's upstream files, rendered as the engine renders
 *     them (core/upstream renderUpstream with each load balancer's template,
 *     main, preview and forced-route upstreams, canary hash and weights) pass
 *     the real `nginx -t`.
 * The bulk runs in-process through the loaders (config/load loadFleet,
 * experiment/spec loadExperimentSpec); a sample of each kind also goes
 * through the CLI, whose outcome must agree with the loader's.
 *
 * Then one named row per reproducer from the issue.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { spawnSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { loadFleet, type Fleet } from '../../src/config/load.js';
import { FleetrollError } from '../../src/errors.js';
import { forceRoute, renderUpstream, splitTraffic, type UpstreamEntry, type UpstreamInput } from '../../src/core/upstream.js';
import { expandCells, loadExperimentSpec, MAX_PLANNED_RUNS, planRuns } from '../../src/experiment/spec.js';
import { BIN, cleanupCli, crashIn, median, pool, ROOT, runCli, type CliResult } from '../support/fuzz-cli.js';
import { defaultsCaseArb, experimentCaseArb, fleetCaseArb, SECRET_VAR, templateCaseArb, type FileCase } from '../support/fuzz-gen.js';
import { nginxCheckAll, type Rendered } from '../support/fuzz-nginx.js';

const SEED = process.env.FUZZ_SEED !== undefined ? Number(process.env.FUZZ_SEED) : 230_523;
/** Distinctive enough that no message holds it by chance; the tail is checked on its own too (a parser may drop the prefix). */
const TAIL = (SEED >>> 0).toString(16).padStart(8, '0') + 'q7z';
const MARKER = `FUZZSECRET_${TAIL}`;
const CHILD_ENV = { [SECRET_VAR]: MARKER };
process.env[SECRET_VAR] = MARKER;

/** The bounds, as ratios of the baseline `validate` of examples/fleet.yaml measured in this run. */
const CPU_RATIO = 5;
const RSS_RATIO = 3;
/** Wall time is shared with whatever else the machine runs: a hang guard, not a measurement. */
const WALL_RATIO = 25;
/** An in-process load may take at most this share of a whole CLI validate's CPU time. */
const INPROC_RATIO = 2;
const CONCURRENCY = 2;

/** Cases per kind: in-process (milliseconds each) and through the CLI (a node start-up each, ~150 ms of CPU). */
const COUNTS = {
  fleet: { inProcess: 400, cli: 60 },
  defaults: { inProcess: 150, cli: 20 },
  template: { inProcess: 150, cli: 16 },
  experiment: { inProcess: 200, cli: 20 },
};

const NGINX = ['/usr/sbin/nginx', '/usr/bin/nginx'].find((p) => existsSync(p));
const DEFAULT_TEMPLATE = readFileSync(join(ROOT, 'templates/upstream.conf.tmpl'), 'utf8');
const work = mkdtempSync(join(tmpdir(), 'fleetroll-fuzz-'));
after(() => {
  rmSync(work, { recursive: true, force: true });
  cleanupCli();
});

const reproduce = (kind: string, index?: number) =>
  `seed ${SEED}, ${kind}${index !== undefined ? ` case ${index}` : ''}; rerun: FUZZ_SEED=${SEED} npx tsx --test test/local/fuzz.test.ts`;

interface Baseline {
  wallMs: number;
  cpuMs: number | undefined;
  rssKb: number | undefined;
}
let base: Baseline = { wallMs: 0, cpuMs: undefined, rssKb: undefined };
const wallLimit = () => Math.max(1, base.wallMs) * WALL_RATIO;

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run npm run build first`);
  // At the concurrency the cases run at, so both see the same machine.
  const runs = await pool(Array.from({ length: 6 }), CONCURRENCY, () => runCli({ args: ['validate', '-f', 'examples/fleet.yaml'], timeoutMs: 30_000 }));
  for (const r of runs) assert.equal(r.code, 0, `baseline validate failed: ${r.stderr}`);
  const cpu = runs.map((r) => r.cpuMs).filter((x): x is number => x !== undefined);
  const rss = runs.map((r) => r.maxRssKb).filter((x): x is number => x !== undefined);
  base = { wallMs: median(runs.map((r) => r.wallMs)), cpuMs: cpu.length ? median(cpu) : undefined, rssKb: rss.length ? median(rss) : undefined };
  console.log(
    `fuzz: seed ${SEED}; baseline validate of examples/fleet.yaml: wall ${base.wallMs.toFixed(0)} ms, cpu ${base.cpuMs?.toFixed(0) ?? 'n/a'} ms, max RSS ${base.rssKb ?? 'n/a'} KB`,
  );
});

/** Everything wrong with one CLI run; `want` narrows the allowed exit codes. */
function cliProblems(r: CliResult, want: readonly number[] = [0, 2]): string[] {
  const out = `${r.stdout}\n${r.stderr}`;
  const problems: string[] = [];
  if (r.killed) problems.push(`killed after ${r.wallMs.toFixed(0)} ms (> ${WALL_RATIO}× the baseline's ${base.wallMs.toFixed(0)} ms wall)`);
  else if (r.code === null || !want.includes(r.code)) problems.push(`exit ${r.code ?? r.signal}, want ${want.join(' or ')}`);
  const crash = crashIn(out);
  if (crash !== undefined) problems.push(`crash in the output: ${JSON.stringify(crash)}`);
  if (out.includes(MARKER) || out.includes(TAIL)) problems.push('a secret marker is in the output');
  if (base.cpuMs !== undefined && r.cpuMs !== undefined && r.cpuMs > base.cpuMs * CPU_RATIO)
    problems.push(`cpu ${r.cpuMs.toFixed(0)} ms > ${CPU_RATIO}× the baseline's ${base.cpuMs.toFixed(0)} ms`);
  if (base.rssKb !== undefined && r.maxRssKb !== undefined && r.maxRssKb > base.rssKb * RSS_RATIO)
    problems.push(`max RSS ${r.maxRssKb} KB > ${RSS_RATIO}× the baseline's ${base.rssKb} KB`);
  if (!r.killed && r.wallMs > wallLimit()) problems.push(`wall ${r.wallMs.toFixed(0)} ms > ${WALL_RATIO}× the baseline's ${base.wallMs.toFixed(0)} ms`);
  return problems;
}

const excerpt = (s: string, n = 600) => (s.length > n ? `${s.slice(0, n)}... (${s.length} characters)` : s);

function describeRun(r: CliResult): string {
  return `fleetroll ${r.args.join(' ')} → exit ${r.code ?? r.signal}, wall ${r.wallMs.toFixed(0)} ms, cpu ${r.cpuMs?.toFixed(0) ?? '?'} ms, rss ${r.maxRssKb ?? '?'} KB\n  stdout: ${excerpt(r.stdout.trim(), 300)}\n  stderr: ${excerpt(r.stderr.trim(), 500)}`;
}

function assertCli(r: CliResult, want: readonly number[] = [0, 2], context = ''): void {
  const problems = cliProblems(r, want);
  assert.deepEqual(problems, [], `${context}\n${describeRun(r)}`);
}

/** Per-kind figures for the report. */
interface Stats {
  inProcess: { cases: number; accepted: number; refused: number; crashed: number; slowestMs: number };
  cli: { runs: number; byCode: Record<string, number>; slowestWallMs: number; slowestCpuMs: number; maxRssKb: number };
  nginx?: { files: number; configs: number; runs: number; failures: number; batchOnly: number; byStrategy: Record<string, number> };
}
const stats: Record<string, Stats> = {};
after(() => {
  const lines = Object.entries(stats).map(([kind, s]) => {
    const codes = Object.entries(s.cli.byCode)
      .map(([c, n]) => `exit ${c}: ${n}`)
      .join(', ');
    const ng = s.nginx
      ? `; nginx -t: ${s.nginx.files} files (${Object.entries(s.nginx.byStrategy)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}) in ${s.nginx.configs} configs (${s.nginx.runs} runs), ${s.nginx.failures} failing, ${s.nginx.batchOnly} batch-only failures`
      : '';
    return `  ${kind}: in-process ${s.inProcess.cases} (accepted ${s.inProcess.accepted}, refused ${s.inProcess.refused}, crashed ${s.inProcess.crashed}, slowest ${s.inProcess.slowestMs.toFixed(1)} ms); CLI ${s.cli.runs} runs (${codes || 'none'}; slowest wall ${s.cli.slowestWallMs.toFixed(0)} ms, cpu ${s.cli.slowestCpuMs.toFixed(0)} ms; max RSS ${s.cli.maxRssKb} KB)${ng}`;
  });
  console.log(`fuzz figures (seed ${SEED}):\n${lines.join('\n')}`);
});

function statsFor(kind: string): Stats {
  return (stats[kind] ??= {
    inProcess: { cases: 0, accepted: 0, refused: 0, crashed: 0, slowestMs: 0 },
    cli: { runs: 0, byCode: {}, slowestWallMs: 0, slowestCpuMs: 0, maxRssKb: 0 },
  });
}

function noteCli(kind: string, r: CliResult): void {
  const s = statsFor(kind).cli;
  s.runs++;
  const code = r.killed ? 'killed' : String(r.code ?? r.signal);
  s.byCode[code] = (s.byCode[code] ?? 0) + 1;
  s.slowestWallMs = Math.max(s.slowestWallMs, r.wallMs);
  s.slowestCpuMs = Math.max(s.slowestCpuMs, r.cpuMs ?? 0);
  s.maxRssKb = Math.max(s.maxRssKb, r.maxRssKb ?? 0);
}

function writeCase(kind: string, i: number, c: FileCase): string {
  const dir = join(work, kind, String(i));
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(c.files)) writeFileSync(join(dir, name), text);
  return join(dir, c.main);
}

type InProcess<T> = { ok: true; value: T; ms: number } | { ok: false; error: unknown; ms: number };

/**
 * Runs one load, timed in this process's CPU time (the cases run one at a
 * time): compared with the baseline's CPU time, as like with like. Wall time
 * counted whatever else the machine ran: with the whole suite at once, a
 * 441 ms wall load was a 2× "failure" against a 210 ms CPU baseline.
 */
async function inProcess<T>(f: () => Promise<T>): Promise<InProcess<T>> {
  const start = process.cpuUsage();
  const ms = () => {
    const d = process.cpuUsage(start);
    return (d.user + d.system) / 1000;
  };
  try {
    const value = await f();
    return { ok: true, value, ms: ms() };
  } catch (error) {
    return { ok: false, error, ms: ms() };
  }
}

/** What is wrong with an in-process outcome: a crash instead of exit 2, a secret in the message, too slow. */
function inProcessProblems(r: InProcess<unknown>, timed = true): string[] {
  const problems: string[] = [];
  if (!r.ok) {
    const e = r.error;
    if (!(e instanceof FleetrollError))
      problems.push(
        `threw ${(e as Error)?.name ?? typeof e}: ${excerpt(String((e as Error)?.message ?? e), 300)} (the CLI would exit 1 with "an unexpected error")`,
      );
    else if (e.exitCode !== 2) problems.push(`threw ${e.name} with exit code ${e.exitCode}, want 2: ${excerpt(e.message, 300)}`);
    const text = e instanceof Error ? `${e.message}\n${(e as FleetrollError).hint ?? ''}` : String(e);
    if (text.includes(MARKER) || text.includes(TAIL)) problems.push(`a secret marker is in the message: ${excerpt(text, 300)}`);
  }
  if (timed && base.cpuMs !== undefined && r.ms > base.cpuMs * INPROC_RATIO)
    problems.push(`took ${r.ms.toFixed(0)} ms of cpu in-process, > ${INPROC_RATIO}× the baseline CLI validate's ${base.cpuMs.toFixed(0)} ms cpu`);
  return problems;
}

function noteInProcess(kind: string, r: InProcess<unknown>): void {
  const s = statsFor(kind).inProcess;
  s.cases++;
  if (r.ok) s.accepted++;
  else if (r.error instanceof FleetrollError && r.error.exitCode === 2) s.refused++;
  else s.crashed++;
  s.slowestMs = Math.max(s.slowestMs, r.ms);
}

/** A problem without its particulars (numbers, quoted text, paths), to count failures by kind. */
const problemClass = (p: string) =>
  (p.split('\n')[0] ?? '')
    .replace(/\/tmp\/\S+/g, 'FILE')
    .replace(/"[^"]*"/g, '"…"')
    .replace(/[0-9]+(?:\.[0-9]+)?/g, 'N')
    .slice(0, 90);

function failureReport(kind: string, failures: { index: number; problems: string[]; text: string }[]): string {
  const classes = new Map<string, number>();
  for (const f of failures) for (const c of new Set(f.problems.map(problemClass))) classes.set(c, (classes.get(c) ?? 0) + 1);
  const summary = [...classes]
    .sort((a, b) => b[1] - a[1])
    .map(([c, n]) => `  ${n} × ${c}`)
    .join('\n');
  return `${failures.length} ${kind} case(s) failed (${reproduce(kind)}), by problem:\n${summary}\nthe first ones:\n${failures
    .slice(0, 5)
    .map((f) => `--- case ${f.index}: ${f.problems.join('; ')}\n${excerpt(f.text, 1500)}`)
    .join('\n')}`;
}

const caseText = (c: FileCase) =>
  Object.entries(c.files)
    .map(([n, t]) => `# ${n}:\n${t}`)
    .join('\n');

// ---------------------------------------------------------------------------------------------
// The upstream files the engine would write for an accepted fleet.

/** Servers as the engine lists them: container addresses (or the host's publishAddress and a published port), instance names `<service>-<revision>-<suffix>`. */
function fleetServers(fleet: Fleet, count: number, first: number, revision: string): UpstreamEntry[] {
  return Array.from({ length: count }, (_, k) => {
    const i = first + k;
    const host = fleet.hosts[i % fleet.hosts.length];
    const address = host?.publishAddress !== undefined ? `${host.publishAddress}:${32768 + i}` : `172.18.${Math.floor(i / 250)}.${(i % 250) + 2}:${fleet.port}`;
    return { address, down: false, name: `${fleet.service}-${revision}-${(i * 7919).toString(36).padStart(5, '0')}` };
  });
}

function renderedFor(fleet: Fleet, id: string): Rendered[] {
  const out: Rendered[] = [];
  const s = fleet.strategy;
  const previewName = s.type === 'BlueGreen' ? s.blueGreen.previewUpstream : undefined;
  const forceKey = s.type === 'Canary' ? s.canary.force : undefined;
  const old = fleetServers(fleet, 3, 0, 'aaaaaaa');
  const fresh = fleetServers(fleet, 2, 3, 'bbbbbbb');
  const weight =
    s.type === 'Canary'
      ? ((s.canary.steps.find((x) => x.kind === 'setWeight' && x.weight > 0 && x.weight < 100) as { weight: number } | undefined)?.weight ?? 25)
      : 0;
  fleet.loadBalancers.forEach(({ nginx }, i) => {
    const template = nginx.template !== undefined ? readFileSync(resolve(dirname(fleet.source.file), nginx.template), 'utf8') : DEFAULT_TEMPLATE;
    const proxies = [nginx.upstream, ...(previewName ? [previewName] : []), ...(forceKey ? [forceRoute(nginx.upstream).variable] : [])];
    const phase = (name: string, servers: UpstreamEntry[], extra: Partial<UpstreamInput>, canaryUp: UpstreamEntry[] = [], stableUp: UpstreamEntry[] = []) => {
      const input: UpstreamInput = {
        service: fleet.service,
        upstream: nginx.upstream,
        servers,
        ...(previewName ? { preview: { upstream: previewName, servers: extra.preview?.servers ?? [] } } : {}),
        ...(forceKey ? { force: { key: forceKey, canary: canaryUp, stable: stableUp } } : {}),
        ...(extra.hash !== undefined ? { hash: extra.hash } : {}),
      };
      out.push({ id: `${id} lb ${i} ${name}`, content: renderUpstream(template, input), proxies });
    };
    phase('no instances', [], {});
    phase('mid-rollout', [...old.slice(0, 2), { ...old[2]!, down: true }, ...fresh], { preview: { upstream: '', servers: fresh } }, fresh, old.slice(0, 2));
    if (s.type === 'Canary') phase(`canary at ${weight}%`, splitTraffic(old, fresh, weight), { hash: s.canary.stickyKey }, fresh, old);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------

interface KindOptions {
  kind: string;
  arb: fc.Arbitrary<FileCase>;
  seed: number;
  counts: { inProcess: number; cli: number };
  load: (file: string) => Promise<unknown>;
  /** The CLI runs for a sampled case (the loader's verdict known); none for a case the CLI must not run. */
  cliArgs: (file: string, index: number, accepted: boolean) => string[][];
  /** Extra checks on an accepted value (in-process). */
  accepted?: (value: unknown) => string[];
  nginx?: boolean;
}

function fuzzKind(o: KindOptions): void {
  describe(`fuzz: ${o.kind}`, () => {
    const cases = fc.sample(o.arb, { seed: o.seed, numRuns: o.counts.inProcess });
    const verdicts: (boolean | undefined)[] = [];
    const files: string[] = [];
    const accepted: { index: number; value: unknown }[] = [];

    it(`${o.counts.inProcess} generated ${o.kind} cases through the loader: refused with exit 2 or accepted, never a crash, no secret in a message, fast`, async () => {
      const failures: { index: number; problems: string[]; text: string }[] = [];
      // Untimed first: the first load compiles the loaders (and imports what they import lazily).
      await inProcess((): Promise<unknown> =>
        o.kind === 'experiment'
          ? loadExperimentSpec(join(ROOT, 'examples/experiments/01-naive-vs-rolling.yaml'))
          : loadFleet(join(ROOT, 'examples/fleet.yaml')),
      );
      for (const [i, c] of cases.entries()) {
        const file = writeCase(o.kind, i, c);
        files.push(file);
        const r = await inProcess(() => o.load(file));
        noteInProcess(o.kind, r);
        verdicts.push(r.ok);
        const problems = [...inProcessProblems(r), ...(r.ok && o.accepted ? o.accepted(r.value) : [])];
        if (r.ok) accepted.push({ index: i, value: r.value });
        if (problems.length > 0) failures.push({ index: i, problems, text: caseText(c) });
      }
      assert.equal(failures.length, 0, failureReport(o.kind, failures));
    });

    it(`a sample of ${o.counts.cli} through the built CLI: exit 0 or 2 as the loader says, within ${CPU_RATIO}× cpu / ${RSS_RATIO}× RSS of the baseline, no secret in any output`, async () => {
      // The first cases the loader has judged: their CLI runs must agree with it.
      const sample = cases
        .map((_, i) => i)
        .filter((i) => verdicts[i] !== undefined)
        .slice(0, o.counts.cli);
      assert.ok(sample.length > 0, 'no case has a verdict: the loader test above must run first');
      const runs = sample.flatMap((i) => o.cliArgs(files[i]!, i, verdicts[i]!).map((args) => ({ index: i, args })));
      const results = await pool(runs, CONCURRENCY, (r) => runCli({ args: r.args, env: CHILD_ENV, timeoutMs: wallLimit() }));
      const failures: { index: number; problems: string[]; text: string }[] = [];
      results.forEach((r, k) => {
        const { index } = runs[k]!;
        noteCli(o.kind, r);
        const problems = cliProblems(r);
        const want = verdicts[index] ? 0 : 2;
        if (!r.killed && r.code !== want && problems.length === 0) problems.push(`exit ${r.code}, but the loader ${want === 0 ? 'accepted' : 'refused'} it`);
        if (r.code === 0 && r.args.includes('--json')) {
          try {
            JSON.parse(r.stdout);
          } catch {
            problems.push('--json printed no JSON');
          }
        }
        if (problems.length > 0) failures.push({ index, problems, text: `${describeRun(r)}\n${caseText(cases[index]!)}` });
      });
      assert.equal(failures.length, 0, failureReport(o.kind, failures));
    });

    if (o.nginx) {
      it(
        'every accepted fleet: its rendered upstream files (every phase) pass the real nginx -t',
        { skip: NGINX === undefined ? 'no nginx binary' : false },
        () => {
          const renders: Rendered[] = [];
          const byStrategy: Record<string, number> = {};
          const renderFailures: { index: number; problems: string[]; text: string }[] = [];
          for (const { index, value } of accepted) {
            try {
              const fleet = value as Fleet;
              const mine = renderedFor(fleet, `${o.kind} case ${index}`);
              const key =
                fleet.strategy.type === 'Canary'
                  ? `Canary${fleet.strategy.canary.force ? '+force' : ''}`
                  : fleet.strategy.type === 'BlueGreen' && fleet.strategy.blueGreen.previewUpstream
                    ? 'BlueGreen+preview'
                    : fleet.strategy.type;
              byStrategy[key] = (byStrategy[key] ?? 0) + mine.length;
              renders.push(...mine);
            } catch (err) {
              renderFailures.push({ index, problems: [`rendering threw: ${(err as Error).message}`], text: caseText(cases[index]!) });
            }
          }
          assert.equal(renderFailures.length, 0, failureReport(`${o.kind} render`, renderFailures));
          const outcome = nginxCheckAll(NGINX!, join(work, `${o.kind}-nginx`), renders);
          statsFor(o.kind).nginx = {
            files: outcome.files,
            configs: outcome.configs,
            runs: outcome.nginxRuns,
            failures: outcome.failures.length,
            batchOnly: outcome.batchOnlyFailures,
            byStrategy,
          };
          for (const o2 of outcome.batchOnlyOutputs) console.log(`fuzz: an nginx -t batch failed though each of its files passes alone: ${o2}`);
          assert.ok(renders.length > 0, `no ${o.kind} case was accepted (or the loader test above did not run): nothing reached nginx`);
          assert.deepEqual(
            outcome.failures.map((f) => f.id),
            [],
            `nginx -t refused rendered upstreams (${reproduce(o.kind)}):\n${outcome.failures
              .slice(0, 3)
              .map((f) => `--- ${f.id}\n${f.output}\n${excerpt(f.content, 1200)}`)
              .join('\n')}`,
          );
        },
      );
    }
  });
}

const fleetCli = (file: string, i: number) => [['validate', '-f', file, '--json'], i % 2 === 0 ? ['validate', '-f', file] : ['plan', '-f', file]];

fuzzKind({ kind: 'fleet', arb: fleetCaseArb(MARKER), seed: SEED, counts: COUNTS.fleet, load: (f) => loadFleet(f), cliArgs: fleetCli, nginx: true });
fuzzKind({
  kind: 'defaults',
  arb: defaultsCaseArb,
  seed: SEED + 1,
  counts: COUNTS.defaults,
  load: (f) => loadFleet(f),
  cliArgs: (f, i) => [i % 2 === 0 ? ['validate', '-f', f] : ['plan', '-f', f]],
  nginx: true,
});
fuzzKind({
  kind: 'template',
  arb: templateCaseArb,
  seed: SEED + 2,
  counts: COUNTS.template,
  load: (f) => loadFleet(f),
  cliArgs: (f) => [['validate', '-f', f, '--json']],
  nginx: true,
});
fuzzKind({
  kind: 'experiment',
  arb: experimentCaseArb,
  seed: SEED + 3,
  counts: COUNTS.experiment,
  load: (f) => loadExperimentSpec(f),
  // An accepted spec would start real fleets: only refused ones go through the CLI.
  cliArgs: (f, _i, ok) => (ok ? [] : [['experiment', '-f', f]]),
  accepted: (spec) => {
    const cells = expandCells(spec as Parameters<typeof expandCells>[0]);
    const runs = planRuns(cells, (spec as { repetitions: number }).repetitions);
    return runs.length > MAX_PLANNED_RUNS ? [`accepted a spec planning ${runs.length} runs, more than ${MAX_PLANNED_RUNS}`] : [];
  },
});

// ---------------------------------------------------------------------------------------------
// The harness can fail: each check above catches what it is for.

describe('fuzz harness', () => {
  const result = (o: Partial<CliResult>): CliResult => ({
    args: ['validate'],
    code: 2,
    signal: null,
    killed: false,
    stdout: '',
    stderr: 'error: f.yaml: service: must be ...\n',
    wallMs: 1,
    cpuMs: 1,
    maxRssKb: 1,
    ...o,
  });
  const rows: [string, Partial<CliResult>, RegExp][] = [
    ['exit 1', { code: 1 }, /exit 1, want 0 or 2/],
    ['the catch-all line', { code: 2, stderr: 'error: x\n(an unexpected error: run again with --verbose ...)\n' }, /crash in the output/],
    ['a stack frame', { code: 2, stderr: 'error: x\n    at readDocument (file:///x/dist/config/load.js:12:7)\n' }, /crash in the output/],
    ['the marker', { stdout: `{"env":{"A":"${MARKER}"}}` }, /secret marker/],
    ['the marker without its prefix', { stderr: `error: Unresolved alias: ${TAIL}` }, /secret marker/],
    ['a killed child', { code: null, killed: true, wallMs: 1e6 }, /killed after/],
    ['over the cpu ratio', { cpuMs: 1e9 }, /cpu .* > /],
    ['over the RSS ratio', { maxRssKb: 1e9 }, /max RSS .* > /],
  ];
  for (const [name, o, want] of rows) {
    it(`flags ${name}`, (t) => {
      // The ratios need the baseline's figures from /usr/bin/time.
      if (name.startsWith('over') && (base.cpuMs === undefined || base.rssKb === undefined)) return t.skip('no /usr/bin/time');
      assert.match(cliProblems(result(o)).join('; '), want);
    });
  }
  it('passes a clean refusal', () => assert.deepEqual(cliProblems(result({})), []));
  it('nginx -t pins a broken upstream file on that file, and passes a good one', { skip: NGINX === undefined ? 'no nginx binary' : false }, () => {
    const good = { id: 'good', content: renderUpstream(DEFAULT_TEMPLATE, { service: 'api', upstream: 'h_good', servers: [] }), proxies: ['h_good'] };
    const bad = { id: 'bad', content: 'upstream h_bad {\n    server 10.0.0.1:8080 weight=0;\n}\n', proxies: ['h_bad'] };
    const r = nginxCheckAll(NGINX!, join(work, 'harness-nginx'), [good, bad]);
    assert.deepEqual(
      r.failures.map((f) => f.id),
      ['bad'],
    );
    assert.match(r.failures[0]!.output, /weight/);
  });
});

// ---------------------------------------------------------------------------------------------
// The reproducers of hostile input found by fuzzing, one named row each.

const FLEET_HEAD = 'service: fuzz-row\nimage: app:1.0.0\nreplicas: 2\nport: 8080\n';
let rowN = 0;

function rowDir(files: Record<string, string>): string {
  const dir = join(work, 'rows', String(rowN++));
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

/** validate, validate --json and plan of one fleet file (or device, or FIFO). */
async function allCommands(file: string, want: readonly number[], context: string): Promise<CliResult[]> {
  const results = await pool(
    [
      ['validate', '-f', file],
      ['validate', '-f', file, '--json'],
      ['plan', '-f', file],
    ],
    CONCURRENCY,
    (args) => runCli({ args, env: CHILD_ENV, timeoutMs: wallLimit() }),
  );
  for (const r of results) noteCli('rows', r);
  const problems = results.flatMap((r) => cliProblems(r, want).map((p) => `${r.args[0]}${r.args.includes('--json') ? ' --json' : ''}: ${p}`));
  assert.deepEqual(problems, [], `${context}\n${results.map(describeRun).join('\n')}`);
  return results;
}

describe('fuzz reproducers', () => {
  describe('1. YAML aliases: exit 2', () => {
    const laughs = [
      'lol0: &a0 [x, x, x, x, x, x, x, x, x, x]',
      ...Array.from({ length: 9 }, (_, i) => `lol${i + 1}: &a${i + 1} [${Array(10).fill(`*a${i}`).join(', ')}]`),
    ].join('\n');
    const rows: [string, string][] = [
      ['an alias to an anchor never set (service: x, version: *nope)', 'service: x\nversion: *nope\n'],
      ['more than 100 aliases', `${FLEET_HEAD}labels:\n  base: &b x\n${Array.from({ length: 150 }, (_, i) => `  l${i}: *b`).join('\n')}\n`],
      ['billion laughs (10 levels of 10 aliases)', `${FLEET_HEAD}${laughs}\n`],
      ['an alias inside its own anchor', `${FLEET_HEAD}labels: &self { a: *self }\n`],
    ];
    for (const [name, text] of rows) it(name, async () => void (await allCommands(join(rowDir({ 'f.yaml': text }), 'f.yaml'), [2], name)));
  });

  describe('2. a secret env value YAML reads as syntax is in no output', () => {
    for (const c of ['*', '|', '>', ']', '}', '&', '!', '[', '{', '@', '`', '%']) {
      it(`unquoted value starting with ${JSON.stringify(c)}`, async () => {
        const file = join(rowDir({ 'f.yaml': `${FLEET_HEAD}env:\n  DB_PASSWORD: ${c}${MARKER}\n` }), 'f.yaml');
        // Each is YAML syntax, not text: an alias, a block scalar header, a flow end, an anchor, a tag
        // (row 3), a reserved indicator. The value must be quoted; unquoted it is refused.
        await allCommands(file, [2], `env value ${c}<secret>`);
      });
    }
    it('a secret alone on an env file line (no "=")', async () => {
      // compose's dotenv reads a bare name as "take it from the environment": accepted or refused, never echoed.
      const file = join(rowDir({ 'f.yaml': `${FLEET_HEAD}envFile: ./api.env\n`, 'api.env': `${MARKER}\n` }), 'f.yaml');
      await allCommands(file, [0, 2], 'env file');
    });
    it('a secret on an env file line that is not a dotenv line', async () => {
      const file = join(rowDir({ 'f.yaml': `${FLEET_HEAD}envFile: ./api.env\n`, 'api.env': `1BAD KEY=${MARKER}\n'${MARKER}\n` }), 'f.yaml');
      await allCommands(file, [0, 2], 'env file');
    });
    it('a registry password', async () => {
      const file = join(rowDir({ 'f.yaml': `${FLEET_HEAD}registry: { server: r.example:5000, username: ci, password: "${MARKER}" }\n` }), 'f.yaml');
      await allCommands(file, [0, 2], 'registry password');
    });
  });

  describe('3. a tag in place of a value', () => {
    it('API_TOKEN: !s3cret → exit 2 (not a silently empty value), and the would-be secret in no output', async () => {
      const file = join(rowDir({ 'f.yaml': `${FLEET_HEAD}env:\n  API_TOKEN: !s3cret\n` }), 'f.yaml');
      const results = await allCommands(file, [2], 'API_TOKEN: !s3cret');
      for (const r of results)
        assert.ok(!`${r.stdout}${r.stderr}`.includes('s3cret'), `${r.args.join(' ')} printed the tag, which is the value the user meant:\n${describeRun(r)}`);
    });
  });

  describe('4. YAML collection tags a loader must not drop silently: exit 2', () => {
    const rows: [string, string][] = [
      ['hooks: !!omap [ preDeploy: [...] ]', `${FLEET_HEAD}hooks: !!omap [ preDeploy: [./check.sh] ]\n`],
      ['strategy: !!omap [type: Recreate]', `${FLEET_HEAD}strategy: !!omap [type: Recreate]\n`],
      ['env: !!set { A, B }', `${FLEET_HEAD}env: !!set { A, B }\n`],
      ['env: !!pairs [ A: x ]', `${FLEET_HEAD}env: !!pairs [ A: x ]\n`],
    ];
    for (const [name, text] of rows) it(name, async () => void (await allCommands(join(rowDir({ 'f.yaml': text }), 'f.yaml'), [2], name)));
  });

  describe('5. prototype keys: exit 2', () => {
    const rows: [string, string, string][] = [
      ['env key __proto__ (YAML)', 'f.yaml', `${FLEET_HEAD}env:\n  __proto__: x\n`],
      ['env key __proto__ (JSON)', 'f.json', '{"service": "fuzz-row", "image": "app:1.0.0", "replicas": 2, "port": 8080, "env": {"__proto__": "x"}}\n'],
      ['top-level __proto__ holding a field', 'f.yaml', `${FLEET_HEAD}__proto__: { replicas: 5 }\n`],
    ];
    for (const [name, f, text] of rows) it(name, async () => void (await allCommands(join(rowDir({ [f]: text }), f), [2], name)));
  });

  describe('6. experiment matrix', () => {
    it('12 × 12 × 12 values × 20 strategies × 50 repetitions → exit 2, fast', async () => {
      const twelve = `[${Array.from({ length: 12 }, (_, i) => i + 1).join(', ')}]`;
      const spec = `name: huge\nrepetitions: 50\nfleet: { replicas: ${twelve}, drainSeconds: ${twelve} }\nload: { getPerSecond: ${twelve} }\nstrategies:\n${Array.from({ length: 20 }, (_, i) => `  - { name: s${i}, maxSurge: 1, maxUnavailable: 0 }`).join('\n')}\n`;
      const file = join(rowDir({ 'spec.yaml': spec }), 'spec.yaml');
      const r = await runCli({ args: ['experiment', '-f', file], env: CHILD_ENV, timeoutMs: wallLimit() });
      noteCli('rows', r);
      assertCli(r, [2], 'matrix');
      assert.match(r.stderr, /matrix: 1,728,000 runs planned/);
    });
  });

  describe('7. files that are not regular files: exit 2, fast', () => {
    // A reader that opens a FIFO waits for a writer forever: every row starts at once (a blocked
    // child takes no CPU), so a failing branch pays the wall limit once, not once per row.
    const rows: { name: string; files: (target: string) => Record<string, string> | undefined; target: string; commands: string[][] }[] = [];
    const main = (f: string) => [
      ['validate', '-f', f],
      ['validate', '-f', f, '--json'],
      ['plan', '-f', f],
    ];
    rows.push({ name: 'a FIFO as the fleet file', files: () => undefined, target: 'FIFO', commands: [] });
    rows.push({ name: '/dev/zero as the fleet file', files: () => undefined, target: '/dev/zero', commands: [] });
    rows.push({ name: '/dev/urandom as the fleet file', files: () => undefined, target: '/dev/urandom', commands: [] });
    const referenced: [string, (dev: string) => Record<string, string>][] = [
      ['the defaults file', (dev) => ({ 'f.yaml': `${FLEET_HEAD}defaults: ${dev}\n` })],
      [
        'an upstream template',
        (dev) => ({ 'f.yaml': `${FLEET_HEAD}loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: up, template: ${dev} }\n` }),
      ],
      ['an env file', (dev) => ({ 'f.yaml': `${FLEET_HEAD}envFile: ${dev}\n` })],
    ];
    for (const [what, files] of referenced)
      for (const dev of ['/dev/zero', 'FIFO']) rows.push({ name: `${dev === 'FIFO' ? 'a FIFO' : dev} as ${what}`, files, target: dev, commands: [] });
    const results = new Map<string, Promise<CliResult[]>>();
    before(() => {
      const devices: (() => Promise<void>)[] = [];
      for (const row of rows) {
        const dir = rowDir({});
        let target = row.target;
        if (target === 'FIFO') {
          target = join(dir, 'fifo');
          assert.equal(spawnSync('mkfifo', [target]).status, 0, 'mkfifo failed');
        }
        const files = row.files(target);
        for (const [n, t] of Object.entries(files ?? {})) writeFileSync(join(dir, n), t);
        const file = files ? join(dir, 'f.yaml') : target;
        // One command for a referenced file (the fleet file's reader is exercised by the rows above it).
        row.commands = files ? [['validate', '-f', file]] : main(file);
        const run = () => Promise.all(row.commands.map((args) => runCli({ args, env: CHILD_ENV, timeoutMs: wallLimit() })));
        if (row.target === 'FIFO') results.set(row.name, run());
        else {
          // Devices a reader may read without end use CPU and memory until killed: one at a time.
          let resolveRow!: (r: CliResult[]) => void;
          results.set(row.name, new Promise((r) => (resolveRow = r)));
          devices.push(async () => resolveRow(await run()));
        }
      }
      void (async () => {
        for (const d of devices) await d();
      })();
    });
    for (const row of rows) {
      it(row.name, async () => {
        const rs = await results.get(row.name)!;
        for (const r of rs) noteCli('rows', r);
        const problems = rs.flatMap((r) => cliProblems(r, [2]).map((p) => `${r.args[0]}${r.args.includes('--json') ? ' --json' : ''}: ${p}`));
        assert.deepEqual(problems, [], `${row.name}\n${rs.map(describeRun).join('\n')}`);
      });
    }
  });

  describe('8. many env keys: validate time grows linearly', () => {
    it('16,000 and 100,000 distinct keys against 1,000: cpu above the baseline per key within 2× of the 1,000-key run', async () => {
      const per: Record<number, CliResult> = {};
      // One flow mapping with the shortest keys, so that 100,000 entries stay under the 1 MiB a document may be.
      const fileFor = (n: number) => {
        const text = `${FLEET_HEAD}env: {${Array.from({ length: n }, (_, i) => `K${i.toString(36)}: 1`).join(', ')}}\n`;
        assert.ok(text.length < 1024 * 1024, `the ${n}-key file is ${text.length} bytes`);
        return join(rowDir({ 'f.yaml': text }), 'f.yaml');
      };
      const cpu0 = base.cpuMs ?? base.wallMs;
      const measure = (r: CliResult) => (r.cpuMs ?? r.wallMs) - cpu0;
      per[1000] = await runCli({ args: ['validate', '-f', fileFor(1000)], timeoutMs: wallLimit() });
      noteCli('rows', per[1000]);
      assertCli(per[1000], [0], '1,000 keys');
      // Noise floor: a tenth of the baseline per 1,000 keys.
      const perKey = Math.max(measure(per[1000]), cpu0 * 0.1) / 1000;
      const lines: string[] = [];
      for (const n of [16_000, 100_000]) {
        const budget = cpu0 + 2 * perKey * n;
        // Past 16,000 keys only if those were linear: a quadratic reader is not waited for twice.
        if (n > 16_000 && per[16_000] !== undefined && (per[16_000].code !== 0 || measure(per[16_000]) > 2 * perKey * 16_000)) break;
        const r = await runCli({ args: ['validate', '-f', fileFor(n)], timeoutMs: Math.max(wallLimit(), budget * 1.5) });
        noteCli('rows', r);
        per[n] = r;
        lines.push(
          `${n} keys: exit ${r.code ?? r.signal}, cpu ${r.cpuMs?.toFixed(0) ?? '?'} ms (budget ${budget.toFixed(0)} ms), wall ${r.wallMs.toFixed(0)} ms, rss ${r.maxRssKb ?? '?'} KB`,
        );
      }
      console.log(`fuzz row 8: baseline cpu ${cpu0.toFixed(0)} ms; 1000 keys: cpu ${per[1000].cpuMs?.toFixed(0)} ms; ${lines.join('; ')}`);
      for (const n of [16_000, 100_000]) {
        const r = per[n];
        if (r === undefined) continue;
        assert.equal(r.code, 0, `${n} keys: ${lines.join('\n')}\n${describeRun(r)}`);
        assert.ok(
          measure(r) <= 2 * perKey * n,
          `${n} keys: not linear in the key count (cpu above the baseline ${measure(r).toFixed(0)} ms, linear from 1,000 keys allows ${(2 * perKey * n).toFixed(0)} ms)\n${lines.join('\n')}`,
        );
        assert.equal(crashIn(`${r.stdout}${r.stderr}`), undefined);
      }
      // And per key from 16,000 to 100,000 (past the start-up and warm-up noise of 1,000 keys): a quadratic reader costs 6.25× more per key.
      const [a, b] = [per[16_000], per[100_000]];
      if (a !== undefined && b !== undefined) {
        assert.ok(
          measure(b) / 100_000 <= (2 * Math.max(measure(a), cpu0 * 0.1)) / 16_000,
          `per-key cost grew from 16,000 to 100,000 keys:\n${lines.join('\n')}`,
        );
      }
    });
  });

  describe('10. validate refuses what deploy would refuse: exit 2, naming the field', () => {
    const lb = (extra: string) => `loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, ${extra} }\n`;
    const long = `u${'x'.repeat(40)}`;
    const rows: [string, Record<string, string>, RegExp][] = [
      ['a missing template', { 'f.yaml': `${FLEET_HEAD}${lb('upstream: up, template: ./missing.tmpl')}` }, /loadBalancers\/0\/nginx\/template: cannot read/],
      [
        'a template without {{servers}}',
        { 'f.yaml': `${FLEET_HEAD}${lb('upstream: up, template: ./t.tmpl')}`, 't.tmpl': 'upstream {{upstream}} {\n}\n' },
        /loadBalancers\/0\/nginx\/template: .*\{\{servers\}\}/,
      ],
      ['tcp://h:99999', { 'f.yaml': `${FLEET_HEAD}hosts: [ { name: h, docker: "tcp://h:99999" } ]\n` }, /hosts\/0\/docker: .*port/],
      ['ssh://u@h:99999', { 'f.yaml': `${FLEET_HEAD}hosts: [ { name: h, docker: "ssh://u@h:99999" } ]\n` }, /hosts\/0\/docker: .*port/],
      ['publishAddress 999.999.999.999', { 'f.yaml': `${FLEET_HEAD}hosts: [ { name: h, publishAddress: 999.999.999.999 } ]\n` }, /hosts\/0\/publishAddress: /],
      [
        'a long upstream name with a cookie sticky key with "-"',
        {
          'f.yaml': `${FLEET_HEAD}strategy: { type: Canary, canary: { stickyKey: "cookie:my-session", steps: [ { setWeight: 10 } ] } }\n${lb(`upstream: ${long}`)}`,
        },
        /loadBalancers\/0\/nginx\/upstream: .*stickyKey/,
      ],
      [
        'a long upstream name with canary.force',
        { 'f.yaml': `${FLEET_HEAD}strategy: { type: Canary, canary: { force: "header:X-Canary", steps: [ { setWeight: 10 } ] } }\n${lb(`upstream: ${long}`)}` },
        /loadBalancers\/0\/nginx\/upstream: .*force/,
      ],
      ['image "a:"', { 'f.yaml': 'service: fuzz-row\nimage: "a:"\nreplicas: 2\nport: 8080\n' }, /image: .*empty tag/],
      ['a hook argument with NUL', { 'f.yaml': `${FLEET_HEAD}hooks: { preDeploy: ["./check.sh", "a\\0b"] }\n` }, /hooks\/preDeploy\/1: .*NUL/],
    ];
    for (const [name, files, message] of rows) {
      it(name, async () => {
        const [r] = await allCommands(join(rowDir(files), 'f.yaml'), [2], name);
        assert.match(r!.stderr, message);
      });
    }
  });

  describe('found by the fuzzer: what validate accepts, nginx -t accepts', () => {
    // nginx compares upstream names ignoring case: "API" and "api" in one file are a duplicate upstream.
    const rows: [string, string][] = [
      [
        'previewUpstream differing from upstream only in case',
        `${FLEET_HEAD}strategy: { type: BlueGreen, blueGreen: { previewUpstream: api } }\nloadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/u.conf, upstream: API }\n`,
      ],
    ];
    for (const [name, text] of rows) {
      it(name, { skip: NGINX === undefined ? 'no nginx binary' : false }, async () => {
        const file = join(rowDir({ 'f.yaml': text }), 'f.yaml');
        const r = await inProcess(() => loadFleet(file));
        assert.deepEqual(inProcessProblems(r, false), []);
        if (!r.ok) return;
        const outcome = nginxCheckAll(NGINX!, join(work, `row-nginx-${rowN++}`), renderedFor(r.value, name));
        assert.deepEqual(
          outcome.failures.map((f) => f.output),
          [],
          'validate accepted a fleet whose upstream file nginx -t refuses: validate should refuse it',
        );
      });
    }
  });

  describe('11. deep nesting: exit 2, no stack overflow', () => {
    const rows: [string, string][] = [
      ['2,000 nested flow sequences', `${FLEET_HEAD}labels: ${'['.repeat(2000)}${']'.repeat(2000)}\n`],
      ['1,000 nested flow mappings', `${FLEET_HEAD}labels: ${'{a: '.repeat(1000)}x${'}'.repeat(1000)}\n`],
      ['1,200 nested block mappings', `${FLEET_HEAD}labels:\n${Array.from({ length: 1200 }, (_, i) => `${' '.repeat(2 * (i + 1))}k:`).join('\n')} x\n`],
      [
        '10,000 nested flow sequences in JSON',
        `{"service": "fuzz-row", "image": "app:1", "replicas": 1, "port": 80, "labels": ${'['.repeat(10000)}${']'.repeat(10000)}}\n`,
      ],
    ];
    for (const [name, text] of rows) it(name, async () => void (await allCommands(join(rowDir({ 'f.yaml': text }), 'f.yaml'), [2], name)));
  });
});
