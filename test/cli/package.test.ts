/**
 * fleetroll as an embedder gets it: `npm pack` of the built tree (`npm test`
 * builds first; the pack runs no script, so it packs exactly that dist/),
 * installed into an empty ESM project, then used there: the library imported
 * by its name from a .mjs, the `fleetroll` bin, and a TypeScript consumer
 * (the shipped examples/library/deploy.ts among it) type-checked against the
 * installed declarations alone. No Docker: plan, simulate and validate do not
 * reach a host. In test/cli rather than test/unit: the install takes seconds
 * (from npm's cache when it has everything, else from the registry).
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { guard } from '../support/wait.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const { version } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version: string };
const dir = mkdtempSync(join(tmpdir(), 'fleetroll-package-'));
const project = join(dir, 'consumer');
after(() => rmSync(dir, { recursive: true, force: true }));

// The outer npm's settings (npm test sets npm_config_* and npm_lifecycle_*) are not the consumer's.
const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));

/** Runs a command to its end; `timeout` is a hang guard at the default test concurrency (scaled to this run's). */
function run(cmd: string, args: string[], cwd: string, timeout = 60_000) {
  const r = spawnSync(cmd, args, { cwd, env, encoding: 'utf8', timeout: guard(timeout) });
  return { code: r.status, stdout: r.stdout ?? '', stderr: `${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

let files: string[] = [];

before(
  () => {
    for (const f of ['dist/index.js', 'dist/index.d.ts', 'dist/cli/main.js']) assert.ok(existsSync(join(root, f)), `${f} is missing: run npm run build first`);
    const pack = run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir], root);
    assert.equal(pack.code, 0, pack.stderr);
    const [info] = JSON.parse(pack.stdout) as { filename: string; files: { path: string }[] }[];
    assert.ok(info, pack.stdout);
    files = info.files.map((f) => f.path);
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }));
    // The package has no install script; --ignore-scripts skips its dependencies' optional native builds (ssh2's), which nothing here needs.
    const install = (mode: string) =>
      run('npm', ['install', mode, '--ignore-scripts', '--no-audit', '--no-fund', '--no-package-lock', join(dir, info.filename)], project, 180_000);
    let r = install('--offline');
    if (r.code !== 0 && /ENOTCACHED/.test(r.stderr)) r = install('--prefer-offline');
    assert.equal(r.code, 0, r.stderr);
  },
  { timeout: guard(240_000) },
);

describe('fleetroll as a package, installed into an empty project', () => {
  it('the tarball holds the library with its declarations, the bin, the templates and the examples; no source', () => {
    for (const f of [
      'dist/index.js',
      'dist/index.d.ts',
      'dist/wiring.js',
      'dist/config/zod.js',
      'dist/config/zod.d.ts',
      'dist/cli/main.js',
      'templates/upstream.conf.tmpl',
      'examples/fleet.yaml',
      'examples/library/deploy.ts',
      'package.json',
    ]) {
      assert.ok(files.includes(f), `${f} is in the tarball`);
    }
    assert.deepEqual(
      files.filter((f) => f.startsWith('src/') || f.startsWith('test/')),
      [],
    );
  });

  it('an ESM program imports plan, simulate, loadFleet, validate and the errors by the package name', () => {
    writeFileSync(
      join(project, 'check.mjs'),
      `import { plan, simulate, loadFleet, validate, FleetrollError, ValidationError, ExitCode } from 'fleetroll';
const file = new URL('./node_modules/fleetroll/examples/fleet.yaml', import.meta.url).pathname;
const fleet = await loadFleet(file);
const planned = await plan(file);
const fromFlags = await plan({ replicas: 4, maxSurge: 1, maxUnavailable: 0 });
const { deploy: _deploy, ...simulated } = await simulate(fleet);
const valid = await validate(file);
const error = await plan({ replicas: -1 }).catch((e) => e);
console.log(JSON.stringify({
  service: fleet.service,
  waves: planned.plan.rolling.waves,
  fromFlags: fromFlags.plan.rolling.waves,
  simulated,
  notes: valid.notes.length,
  error: { fleetroll: error instanceof FleetrollError, validation: error instanceof ValidationError, exitCode: error.exitCode, invalidInput: ExitCode.invalidInput, message: error.message },
}));
`,
    );
    const r = run(process.execPath, ['check.mjs'], project);
    assert.equal(r.code, 0, r.stderr);
    const out = JSON.parse(r.stdout) as Record<string, unknown>;
    assert.equal(out.service, 'bookstore-api');
    assert.deepEqual(out.waves, [
      [3, 0],
      [3, 1],
      [2, 2],
      [1, 3],
      [0, 3],
    ]);
    assert.deepEqual(out.fromFlags, [
      [4, 0],
      [4, 1],
      [3, 2],
      [2, 3],
      [1, 4],
      [0, 4],
    ]);
    assert.ok((out.notes as number) > 0, 'validate says where the access logs are');
    assert.deepEqual(out.error, {
      fleetroll: true,
      validation: true,
      exitCode: 2,
      invalidInput: 2,
      message: 'replicas: must be a whole number from 0 to 10000, got -1',
    });
    // The library's prediction is the installed CLI's own, at nominal costs (the library reads no fleet state).
    const cli = run(
      join(project, 'node_modules/.bin/fleetroll'),
      ['simulate', '-f', 'node_modules/fleetroll/examples/fleet.yaml', '--costs', 'nominal', '--json'],
      project,
    );
    assert.equal(cli.code, 0, cli.stderr);
    const { costs, ...cliSimulated } = JSON.parse(cli.stdout) as { costs: { source: string } };
    assert.equal(costs.source, 'nominal');
    assert.deepEqual(out.simulated, cliSimulated);
    assert.deepEqual([(out.simulated as { durationMs: number }).durationMs, (out.simulated as { waves: number }).waves], [12050, 4]);
  });

  const binRows: [string, string[], number, RegExp][] = [
    ['--version', ['--version'], 0, new RegExp(`^${version.replaceAll('.', '\\.')}\n$`)],
    [
      'validate -f of the shipped example',
      ['validate', '-f', 'node_modules/fleetroll/examples/fleet.yaml'],
      0,
      /^node_modules\/fleetroll\/examples\/fleet\.yaml: valid\nservice bookstore-api: 3 × fleetroll-example:1\.0\.0/,
    ],
    ['validate -f of a missing file exits 2', ['validate', '-f', 'nope.yaml'], 2, /cannot read fleet file nope\.yaml: no such file/],
  ];
  for (const [name, args, code, output] of binRows) {
    it(`npx fleetroll ${name}`, () => {
      const r = run('npx', ['--no-install', 'fleetroll', ...args], project);
      assert.equal(r.code, code, r.stdout + r.stderr);
      assert.match(code === 0 ? r.stdout : r.stderr, output);
    });
  }

  it('a TypeScript consumer type-checks against the installed declarations (strict, skipLibCheck off, nodenext)', () => {
    copyFileSync(join(project, 'node_modules/fleetroll/examples/library/deploy.ts'), join(project, 'deploy.ts'));
    writeFileSync(
      join(project, 'ports.ts'),
      `import { buildDeps, deployWith, loadFleet, plan, simulate, validate, FleetrollError, RolloutFailedError, ExitCode, type Clock, type DeployResult, type Prober, type RolloutEvent, type Router, type Runtime, type StateStore } from 'fleetroll';

/** The default wiring with a prober of one's own in front of the fleet's. */
export async function rollWithMyProber(file: string, registered: (address: string | undefined) => Promise<boolean>): Promise<DeployResult> {
  const fleet = await loadFleet(file);
  const deps = await buildDeps(fleet);
  const prober: Prober = { ready: async (t) => (await registered(t.address)) && deps.prober.ready(t), version: (address) => deps.prober.version(address) };
  const seen: RolloutEvent['type'][] = [];
  return deployWith(fleet, { ...deps, prober, events: (e) => seen.push(e.type) });
}

export async function predict(): Promise<number> {
  const p = await plan({ replicas: 4, maxSurge: '25%' });
  const waves: [number, number][] = p.plan.type === 'RollingUpdate' ? p.plan.rolling.waves : [];
  const s = await simulate({ replicas: 4 }, { timings: { startupMs: 500 }, onEvent: (e: RolloutEvent, atMs: number) => void [e.type, atMs] });
  const { warnings } = await validate('fleet.yaml');
  return waves.length + s.mixedVersionWindowMs + warnings.length;
}

export function explain(err: unknown): string {
  if (err instanceof RolloutFailedError) return \`\${err.phase}: \${err.message}\`;
  if (err instanceof FleetrollError) return \`\${err.code} (exit \${err.exitCode === ExitCode.invalidInput ? 'invalid input' : err.exitCode}): \${err.hint ?? ''}\`;
  return String(err);
}

export type Ports = [Runtime, Router, Prober, Clock, StateStore];
`,
    );
    const tsconfig = (files: string[]) => ({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        skipLibCheck: false,
        types: ['node'],
        typeRoots: [join(root, 'node_modules/@types')],
      },
      files,
    });
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify(tsconfig(['deploy.ts', 'ports.ts'])));
    // A strict check of every declaration (skipLibCheck off): about 20 s alone, over a minute with
    // the suite at twice its concurrency, and more at a load of 40; a hang guard, not a bound.
    const r = run(process.execPath, [tsc, '-p', 'tsconfig.json'], project, 900_000);
    assert.equal(r.code, 0, r.stdout + r.stderr);

    // The declarations are real types, not `any`: a misuse fails the same check.
    writeFileSync(
      join(project, 'misuse.ts'),
      "import { plan } from 'fleetroll';\nexport const waves: string = (await plan({ replicas: 4 })).strategy.maxSurge;\n",
    );
    writeFileSync(join(project, 'tsconfig.misuse.json'), JSON.stringify(tsconfig(['misuse.ts'])));
    const bad = run(process.execPath, [tsc, '-p', 'tsconfig.misuse.json'], project, 900_000);
    assert.equal(bad.code, 2, bad.stdout + bad.stderr);
    assert.match(bad.stdout, /misuse\.ts\(2,14\): error TS2322: Type 'number' is not assignable to type 'string'/);
  });
});
