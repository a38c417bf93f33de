/**
 * The layering rules of .dependency-cruiser.cjs, run through
 * dependency-cruiser's own API on the configuration `npm run lint:deps`
 * uses (its rules, options, tsconfig and known violations): the real tree
 * passes, and a forbidden import fails naming the rule it breaks. The
 * forbidden imports are written into a copy of src/ in a temporary folder
 * (the rules match paths such as ^src/core/), never into src/ itself, and
 * the check runs in this process rather than a depcruise child per row.
 */
import assert from 'node:assert/strict';
import { copyFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { cruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const root = fileURLToPath(new URL('../..', import.meta.url));
/** What the check reads besides src/: the configuration, the known violations, the tsconfig it names. */
const CONFIG_FILES = ['.dependency-cruiser.cjs', '.dependency-cruiser-known-violations.json', 'tsconfig.json', 'package.json'];

interface Violation {
  rule: string;
  from: string;
  to: string;
}

/**
 * `npm run lint:deps` in `base` (a tree with src/ and the configuration):
 * the exit code, and the violations the err reporter prints ("error <rule>:
 * <from> → <to>"). The configuration's relative paths (tsconfig.json) are
 * read from the working directory, as the CLI reads them, so the check runs
 * there; the tests of this file run one after another.
 */
async function lintDeps(base: string): Promise<{ code: number; violations: Violation[]; output: string }> {
  const cwd = process.cwd();
  process.chdir(base);
  try {
    const options = await extractDepcruiseOptions('./.dependency-cruiser.cjs');
    const knownViolations = JSON.parse(await readFile('.dependency-cruiser-known-violations.json', 'utf8')) as never;
    const tsConfigFile = (options as { tsConfig?: { fileName?: string } }).tsConfig?.fileName;
    const tsConfig = tsConfigFile ? extractTSConfig(tsConfigFile) : undefined;
    const r = await cruise(['src'], { ...options, knownViolations, outputType: 'err' }, {}, { tsConfig });
    const output = typeof r.output === 'string' ? r.output : JSON.stringify(r.output);
    const violations = [...output.replace(/\u001b\[[0-9;]*m/g, '').matchAll(/^\s*error (\S+): (\S+) →[ \t]*(\S*)/gm)].map((m) => ({
      rule: m[1] ?? '',
      from: m[2] ?? '',
      to: m[3] ?? '',
    }));
    return { code: r.exitCode, violations, output };
  } finally {
    process.chdir(cwd);
  }
}

/** A copy of the tree the check reads, in a temporary folder: probes go there, not into src/. */
let copy = '';
before(() => {
  copy = mkdtempSync(join(tmpdir(), 'fleetroll-arch-'));
  cpSync(join(root, 'src'), join(copy, 'src'), { recursive: true });
  for (const f of CONFIG_FILES) copyFileSync(join(root, f), join(copy, f));
  // Packages resolve to the real node_modules: core-no-impure-packages matches their paths.
  symlinkSync(join(root, 'node_modules'), join(copy, 'node_modules'), 'dir');
});
after(() => {
  if (copy) rmSync(copy, { recursive: true, force: true });
});

/** Writes `files` into a fresh folder under the copy's src/<layer>, runs the check there, removes the folder. */
async function withProbe<T>(layer: string, files: Record<string, string>, check: (dir: string, r: Awaited<ReturnType<typeof lintDeps>>) => T): Promise<T> {
  const dir = join('src', layer, `arch-probe-${process.pid}`);
  mkdirSync(join(copy, dir));
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(join(copy, dir, name), text);
    return check(dir, await lintDeps(copy));
  } finally {
    rmSync(join(copy, dir), { recursive: true, force: true });
  }
}

describe('architecture rules (dependency-cruiser)', () => {
  it('the real tree passes', async () => {
    const r = await lintDeps(root);
    assert.deepEqual(r.violations, [], 'no violations beyond the known ones');
    assert.equal(r.code, 0, r.output);
  });

  const rows: [string, string, Record<string, string>, string, string][] = [
    [
      'core importing the Docker adapter',
      'core',
      { 'probe.ts': "import { DockerRuntime } from '../../adapters/docker.js';\nexport const probe = DockerRuntime;\n" },
      'core-no-outer-layers',
      'src/adapters/docker.ts',
    ],
    [
      'core reading files',
      'core',
      { 'probe.ts': "import { readFileSync } from 'node:fs';\nexport const probe = readFileSync;\n" },
      'core-no-node-builtins',
      'fs',
    ],
    ['core using execa', 'core', { 'probe.ts': "import { execa } from 'execa';\nexport const probe = execa;\n" }, 'core-no-impure-packages', 'execa'],
    [
      'the engine importing an adapter',
      'engine',
      { 'probe.ts': "import { HttpProber } from '../../adapters/http.js';\nexport const probe = HttpProber;\n" },
      'engine-not-adapters',
      'src/adapters/http.ts',
    ],
    [
      'an adapter importing the CLI',
      'adapters',
      { 'probe.ts': "import { table } from '../../cli/output.js';\nexport const probe = table;\n" },
      'only-cli-imports-cli',
      'src/cli/output.ts',
    ],
    [
      'an adapter importing the engine',
      'adapters',
      { 'probe.ts': "import { revisionOf } from '../../engine/revision.js';\nexport const probe = revisionOf;\n" },
      'adapters-not-engine-or-cli',
      'src/engine/revision.ts',
    ],
    [
      'the engine importing the default wiring',
      'engine',
      { 'probe.ts': "import { buildDeps } from '../../wiring.js';\nexport const probe = buildDeps;\n" },
      'wiring-only-from-entry-points',
      'src/wiring.ts',
    ],
    [
      'an adapter importing the default wiring',
      'adapters',
      { 'probe.ts': "import { fleetHandles } from '../../wiring.js';\nexport const probe = fleetHandles;\n" },
      'wiring-only-from-entry-points',
      'src/wiring.ts',
    ],
    [
      'a module inside importing the library index',
      'engine',
      { 'probe.ts': "import { plan } from '../../index.js';\nexport const probe = plan;\n" },
      'nothing-imports-the-index',
      'src/index.ts',
    ],
    [
      'a cycle',
      'core',
      { 'a.ts': "import { b } from './b.js';\nexport const a = () => b;\n", 'b.ts': "import { a } from './a.js';\nexport const b = () => a;\n" },
      'no-circular',
      '',
    ],
  ];
  for (const [name, layer, files, rule, target] of rows) {
    it(`${name} fails with ${rule}`, () =>
      withProbe(layer, files, (dir, r) => {
        assert.notEqual(r.code, 0, `the check fails:\n${r.output}`);
        const mine = r.violations.filter((v) => v.from.startsWith(`${dir}/`));
        assert.ok(
          mine.some((v) => v.rule === rule && v.to.includes(target)),
          `expected ${rule} from ${dir}, got:\n${r.output}`,
        );
        assert.deepEqual(
          r.violations.filter((v) => !v.from.startsWith(`${dir}/`)),
          [],
          'nothing else is reported',
        );
      }));
  }
});
