/**
 * The layering rules of .dependency-cruiser.cjs, run the way `npm run lint:deps`
 * runs them: the real tree passes (known violations aside), and a forbidden
 * import, written into a temporary folder inside src/ and removed afterwards,
 * fails naming the rule it breaks.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const depcruise = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

interface Violation {
  rule: string;
  from: string;
  to: string;
}

/** `npm run lint:deps` as CI runs it: the exit code, and the violations it prints ("error <rule>: <from> → <to>"). */
function lintDeps(): { code: number | null; violations: Violation[]; output: string } {
  const r = spawnSync(process.execPath, [depcruise, 'src', '--config', '.dependency-cruiser.cjs', '--ignore-known', '.dependency-cruiser-known-violations.json'], {
    cwd: root,
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
  });
  const output = `${r.stdout}${r.stderr}`;
  const violations = [...output.matchAll(/^\s*error (\S+): (\S+) →[ \t]*(\S*)/gm)].map((m) => ({ rule: m[1] ?? '', from: m[2] ?? '', to: m[3] ?? '' }));
  return { code: r.status, violations, output };
}

/** Writes `files` into a fresh folder under src/<layer>, runs the check, removes the folder. */
function withProbe<T>(layer: string, files: (dir: string) => Record<string, string>, check: (dir: string) => T): T {
  const dir = mkdtempSync(join(root, 'src', layer, 'arch-probe-'));
  try {
    for (const [name, text] of Object.entries(files(relative(root, dir)))) writeFileSync(join(dir, name), text);
    return check(relative(root, dir));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('architecture rules (dependency-cruiser)', () => {
  it('the real tree passes', () => {
    const r = lintDeps();
    assert.deepEqual(r.violations, [], 'no violations beyond the known ones');
    assert.equal(r.code, 0, r.output);
  });

  const rows: [string, string, Record<string, string>, string, string][] = [
    ['core importing the Docker adapter', 'core', { 'probe.ts': "import { DockerRuntime } from '../../adapters/docker.js';\nexport const probe = DockerRuntime;\n" }, 'core-no-outer-layers', 'src/adapters/docker.ts'],
    ['core reading files', 'core', { 'probe.ts': "import { readFileSync } from 'node:fs';\nexport const probe = readFileSync;\n" }, 'core-no-node-builtins', 'fs'],
    ['core using execa', 'core', { 'probe.ts': "import { execa } from 'execa';\nexport const probe = execa;\n" }, 'core-no-impure-packages', 'execa'],
    ['the engine importing an adapter', 'engine', { 'probe.ts': "import { HttpProber } from '../../adapters/http.js';\nexport const probe = HttpProber;\n" }, 'engine-not-adapters', 'src/adapters/http.ts'],
    ['an adapter importing the CLI', 'adapters', { 'probe.ts': "import { table } from '../../cli/output.js';\nexport const probe = table;\n" }, 'only-cli-imports-cli', 'src/cli/output.ts'],
    ['an adapter importing the engine', 'adapters', { 'probe.ts': "import { revisionOf } from '../../engine/revision.js';\nexport const probe = revisionOf;\n" }, 'adapters-not-engine-or-cli', 'src/engine/revision.ts'],
    ['the engine importing the default wiring', 'engine', { 'probe.ts': "import { buildDeps } from '../../wiring.js';\nexport const probe = buildDeps;\n" }, 'wiring-only-from-entry-points', 'src/wiring.ts'],
    ['an adapter importing the default wiring', 'adapters', { 'probe.ts': "import { fleetHandles } from '../../wiring.js';\nexport const probe = fleetHandles;\n" }, 'wiring-only-from-entry-points', 'src/wiring.ts'],
    ['a module inside importing the library index', 'engine', { 'probe.ts': "import { plan } from '../../index.js';\nexport const probe = plan;\n" }, 'nothing-imports-the-index', 'src/index.ts'],
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
      withProbe(layer, () => files, (dir) => {
        const r = lintDeps();
        assert.notEqual(r.code, 0, `the check fails:\n${r.output}`);
        const mine = r.violations.filter((v) => v.from.startsWith(`${dir}/`));
        assert.ok(
          mine.some((v) => v.rule === rule && v.to.includes(target)),
          `expected ${rule} from ${dir}, got:\n${r.output}`,
        );
        assert.deepEqual(r.violations.filter((v) => !v.from.startsWith(`${dir}/`)), [], 'nothing else is reported');
      }));
  }
});
