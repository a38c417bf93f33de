/**
 * The error contract a CI script relies on: ERROR_CODES (src/errorCodes.ts,
 * re-exported by src/errors.ts) is the one list of codes, docs/errors.md says
 * the same (generated from it by scripts/errors-doc.ts), every 'E_*' literal
 * in src/ is a catalogued code, and each error class ends with the code and
 * exit code the catalogue gives.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { renderErrorsDoc } from '../../scripts/errors-doc.js';
import { LockHeldError } from '../../src/adapters/fleetState.js';
import { printFailureJson, type Out } from '../../src/cli/output.js';
import { run } from '../../src/cli/program.js';
import { UnsafeStickyKeyError, stickyKeyVariable } from '../../src/core/accessLog.js';
import { UnsafeUpstreamValueError, forceRoute } from '../../src/core/upstream.js';
import { interpolateString } from '../../src/config/interpolate.js';
import { hostFailure } from '../../src/engine/controller.js';
import {
  ERROR_CODES,
  ExitCode,
  FleetrollError,
  InterruptedError,
  PausedError,
  ReportedFailure,
  RolloutFailedError,
  ValidationError,
  exitCodesOf,
  fieldError,
  type ErrorCode,
  type ExitCodeValue,
} from '../../src/errors.js';
import { VirtualClock } from '../../src/sim/clock.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const doc = readFileSync(join(root, 'docs/errors.md'), 'utf8');
const CODES = Object.keys(ERROR_CODES) as ErrorCode[];

/** Every .ts file under src/. */
function sourceFiles(dir = join(root, 'src')): string[] {
  const files: string[] = [];
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) files.push(...sourceFiles(p));
    else if (e.name.endsWith('.ts')) files.push(p);
  }
  return files;
}

const sources = sourceFiles().map((f) => ({ file: relative(root, f), text: readFileSync(f, 'utf8') }));

/** The sections of docs/errors.md: `### E_X` headings with the exit code line under each. */
function docCodes(): Map<string, number[]> {
  const out = new Map<string, number[]>();
  const re = /^### (E_[A-Z_]+)\s*\n+Exit code: (\d+)(?: \(or ([\d, ]+), see below\))?$/gm;
  for (const m of doc.matchAll(re)) out.set(m[1]!, [Number(m[2]), ...(m[3] ? m[3].split(',').map((x) => Number(x.trim())) : [])]);
  return out;
}

describe('docs/errors.md and ERROR_CODES', () => {
  it('the page is what scripts/errors-doc.ts makes of the catalogue (run `npx tsx scripts/errors-doc.ts` after changing a code)', () => {
    assert.equal(doc, renderErrorsDoc());
  });

  it('every catalogued code has its section on the page, with its exit codes', () => {
    const sections = docCodes();
    for (const c of CODES) assert.deepEqual(sections.get(c), [...exitCodesOf(c)], `docs/errors.md: ### ${c} with "Exit code: ${exitCodesOf(c).join(', ')}"`);
  });

  it('every code the page names is catalogued', () => {
    const named = new Set([...doc.matchAll(/\bE_[A-Z][A-Z_]*\b/g)].map((m) => m[0]));
    assert.deepEqual(
      [...named].filter((c) => !(c in ERROR_CODES)),
      [],
    );
    assert.deepEqual([...docCodes().keys()].sort(), [...CODES].sort());
  });

  it('the exit code table lists every ExitCode, with its value and name', () => {
    const rows = [...doc.matchAll(/^\| (\d+) \| `(\w+)` \|/gm)].map((m) => [Number(m[1]), m[2]]);
    assert.deepEqual(
      rows,
      Object.entries(ExitCode).map(([name, value]) => [value, name]),
    );
  });

  it("the page's runnable example prints what the CLI prints", async () => {
    const block = /```console runnable exit=(\d+)\n\$ fleetroll (.*)\n(.*)\n```/.exec(doc);
    assert.ok(block, 'a runnable console example');
    const printed: unknown[] = [];
    const out: Out = { line: () => {}, json: (v) => printed.push(v), warn: () => {} };
    const write = process.stderr.write;
    process.stderr.write = (() => true) as typeof process.stderr.write;
    let code: number;
    try {
      code = await run(block[2]!.split(' '), out);
    } finally {
      process.stderr.write = write;
    }
    assert.equal(code, Number(block[1]));
    assert.deepEqual(
      printed.map((v) => JSON.stringify(v)),
      [block[3]],
    );
  });
});

describe('codes in src/', () => {
  const literals = sources.flatMap(({ file, text }) => [...text.matchAll(/['"`](E_[A-Z][A-Z0-9_]*)['"`]/g)].map((m) => ({ file, code: m[1]! })));

  it('every E_* string literal in src/ is a catalogued code', () => {
    assert.ok(literals.length > 50, `found only ${literals.length} literals: is the scan reading src/?`);
    assert.deepEqual(
      literals.filter((l) => !(l.code in ERROR_CODES)).map((l) => `${l.file}: ${l.code}`),
      [],
    );
  });

  it('every catalogued code is thrown somewhere in src/ (no dead entries)', () => {
    // The catalogue names every code; the error classes in src/errors.ts, which throw E_INVALID, E_REPORTED, ..., count as uses.
    const used = new Set(literals.filter((l) => l.file !== 'src/errorCodes.ts').map((l) => l.code));
    assert.deepEqual(
      CODES.filter((c) => !used.has(c)),
      [],
    );
  });

  it('an exit code passed at a call site is one the catalogue allows for that code', () => {
    const bad: string[] = [];
    for (const { file, text } of sources) {
      for (const m of text.matchAll(/FleetrollError\(\s*'(E_[A-Z_]+)',\s*(?:ExitCode\.(\w+)|(\d+)),/g)) {
        const code = m[1] as ErrorCode;
        const value = m[2] !== undefined ? ExitCode[m[2] as keyof typeof ExitCode] : Number(m[3]);
        if (!exitCodesOf(code).includes(value as ExitCodeValue)) bad.push(`${file}: ${code} with exit code ${value}`);
      }
      for (const m of text.matchAll(/FleetrollError\(\s*'(E_[A-Z_]+)',[^;]*?exitCode: ExitCode\.(\w+)/g)) {
        const code = m[1] as ErrorCode;
        const value = ExitCode[m[2] as keyof typeof ExitCode];
        if (!exitCodesOf(code).includes(value)) bad.push(`${file}: ${code} with exitCode ${m[2]}`);
      }
    }
    assert.deepEqual(bad, []);
  });

  it('no literal exit code: ExitCode.x', () => {
    const bad: string[] = [];
    for (const { file, text } of sources) {
      for (const m of text.matchAll(/FleetrollError\(\s*'E_[A-Z_]+',\s*\d+,|ReportedFailure\(\d+\)|process\.exit(?:Code\s*=\s*|\()\d+/g))
        bad.push(`${file}: ${m[0]}`);
    }
    assert.deepEqual(bad, []);
  });
});

describe('each error class ends with its code and exit code', () => {
  const caught = (f: () => unknown): unknown => {
    try {
      f();
    } catch (err) {
      return err;
    }
    assert.fail('expected a throw');
  };
  const lock = {
    holder: 'ci@runner-7',
    pid: 4242,
    command: 'fleetroll deploy -f fleet.yaml',
    started: '2026-01-01T00:00:00.000Z',
    lease: '2026-01-01T00:00:10.000Z',
    stale: false,
  };
  const rows: {
    name: string;
    make: () => unknown | Promise<unknown>;
    cls: abstract new (...args: never[]) => Error;
    code: ErrorCode;
    exitCode: ExitCodeValue;
  }[] = [
    {
      name: 'ValidationError',
      make: () => new ValidationError([{ path: 'replicas', message: 'must be a whole number' }]),
      cls: ValidationError,
      code: 'E_INVALID',
      exitCode: ExitCode.invalidInput,
    },
    { name: 'fieldError', make: () => fieldError('--max-surge', 'must be a number'), cls: ValidationError, code: 'E_INVALID', exitCode: ExitCode.invalidInput },
    { name: 'ReportedFailure (default)', make: () => new ReportedFailure(), cls: ReportedFailure, code: 'E_REPORTED', exitCode: ExitCode.rolloutFailed },
    {
      name: 'ReportedFailure (interrupted)',
      make: () => new ReportedFailure(ExitCode.interrupted),
      cls: ReportedFailure,
      code: 'E_REPORTED',
      exitCode: ExitCode.interrupted,
    },
    {
      name: 'RolloutFailedError',
      make: () => new RolloutFailedError('made no progress', 'deploy again'),
      cls: RolloutFailedError,
      code: 'E_ROLLOUT_FAILED',
      exitCode: ExitCode.rolloutFailed,
    },
    { name: 'PausedError', make: () => new PausedError('paused after 1 wave(s)'), cls: PausedError, code: 'E_PAUSED', exitCode: ExitCode.paused },
    {
      name: 'InterruptedError',
      make: () => new InterruptedError('interrupted after 1 wave(s)', 'run again'),
      cls: InterruptedError,
      code: 'E_INTERRUPTED',
      exitCode: ExitCode.interrupted,
    },
    { name: 'LockHeldError', make: () => new LockHeldError(lock, 'api'), cls: LockHeldError, code: 'E_LOCK_HELD', exitCode: ExitCode.lockHeld },
    {
      name: 'StalledError (a simulation with nothing scheduled)',
      make: () =>
        new VirtualClock().run(new Promise(() => {})).then(
          () => assert.fail('expected a rejection'),
          (err: unknown) => err,
        ),
      cls: FleetrollError,
      code: 'E_INTERNAL',
      exitCode: ExitCode.rolloutFailed,
    },
    {
      name: 'UnsafeStickyKeyError',
      make: () => caught(() => stickyKeyVariable('cookie:a b')),
      cls: UnsafeStickyKeyError,
      code: 'E_UNSAFE_VALUE',
      exitCode: ExitCode.rolloutFailed,
    },
    {
      name: 'UnsafeUpstreamValueError',
      make: () => caught(() => forceRoute('api; include /etc/passwd')),
      cls: UnsafeUpstreamValueError,
      code: 'E_UNSAFE_VALUE',
      exitCode: ExitCode.rolloutFailed,
    },
    {
      name: 'TemplateError (internal) reaches callers as a ValidationError',
      make: () => caught(() => interpolateString('${', () => undefined, 'env/A')),
      cls: ValidationError,
      code: 'E_INVALID',
      exitCode: ExitCode.invalidInput,
    },
    {
      name: 'FleetrollError: exit code from the catalogue',
      make: () => new FleetrollError('E_DOCKER', 'stopping container web-1 on vm1: 500'),
      cls: FleetrollError,
      code: 'E_DOCKER',
      exitCode: ExitCode.rolloutFailed,
    },
    {
      name: 'FleetrollError: another exit code the catalogue allows',
      make: () => new FleetrollError('E_ADOPT', 'port: is required', { exitCode: ExitCode.invalidInput }),
      cls: FleetrollError,
      code: 'E_ADOPT',
      exitCode: ExitCode.invalidInput,
    },
    {
      name: 'FleetrollError: the positional form of older callers',
      make: () => new FleetrollError('E_INTERNAL', 1, 'no runtime for host vm9'),
      cls: FleetrollError,
      code: 'E_INTERNAL',
      exitCode: ExitCode.rolloutFailed,
    },
  ];
  for (const row of rows) {
    it(`${row.name}: ${row.code}, exit ${row.exitCode}`, async () => {
      const err = await row.make();
      assert.ok(err instanceof row.cls, String(err));
      assert.ok(err instanceof FleetrollError, 'part of the hierarchy');
      assert.deepEqual([err.code, err.exitCode], [row.code, row.exitCode]);
      assert.ok(exitCodesOf(err.code).includes(err.exitCode), 'an exit code the catalogue allows');
    });
  }

  it('the classes keep their details: the issues, the lock holder, a typed rollout failure', () => {
    assert.deepEqual(new ValidationError([{ path: 'port', message: 'must be a port' }]).details, { issues: [{ path: 'port', message: 'must be a port' }] });
    assert.equal(new LockHeldError(lock, 'api').details?.holder, 'ci@runner-7');
    const err = new RolloutFailedError('canary aborted', 'fix it', { aborted: 'the analysis failed', stoppedBy: 'analysis' });
    assert.equal(err.details.stoppedBy, 'analysis');
    assert.deepEqual(new RolloutFailedError('x', '').details, {}, 'a failure without details has an empty object, never undefined');
  });

  it('a host failure during a rollout becomes E_ROLLOUT_FAILED naming the code underneath', () => {
    const wrapped = hostFailure({ service: 'api', version: '1.1.0' }, new FleetrollError('E_DOCKER_UNREACHABLE', 'cannot reach vm2'));
    assert.ok(wrapped instanceof RolloutFailedError);
    assert.deepEqual([wrapped.code, wrapped.exitCode, wrapped.details.code], ['E_ROLLOUT_FAILED', ExitCode.rolloutFailed, 'E_DOCKER_UNREACHABLE']);
  });
});

describe('--json failures', () => {
  const capture = () => {
    const printed: unknown[] = [];
    return { printed, out: { line: () => {}, json: (v: unknown) => printed.push(v), warn: () => {} } satisfies Out };
  };

  it("carry code, exitCode and details; once per error, the command's own fields kept", () => {
    const { printed, out } = capture();
    const err = new RolloutFailedError('canary aborted', 'fix it', { aborted: 'the analysis failed', stoppedBy: 'analysis' });
    printFailureJson(out, err, { stoppedBy: 'analysis' });
    printFailureJson(out, err);
    assert.deepEqual(printed, [
      {
        outcome: 'failed',
        code: 'E_ROLLOUT_FAILED',
        exitCode: 1,
        message: 'canary aborted',
        hint: 'fix it',
        details: { aborted: 'the analysis failed', stoppedBy: 'analysis' },
        stoppedBy: 'analysis',
      },
    ]);
  });

  it('a pause is outcome "paused"; an error without details has no details key; a bug is E_INTERNAL', () => {
    const { printed, out } = capture();
    printFailureJson(out, new PausedError('paused'));
    printFailureJson(out, new FleetrollError('E_LOCK_HELD', 'locked'));
    printFailureJson(out, new TypeError('x is undefined'));
    assert.deepEqual(
      printed.map((p) => JSON.parse(JSON.stringify(p))),
      [
        { outcome: 'paused', code: 'E_PAUSED', exitCode: 4, message: 'paused', hint: 'continue with `fleetroll resume -f <fleet>` (from any machine)' },
        { outcome: 'failed', code: 'E_LOCK_HELD', exitCode: 3, message: 'locked' },
        { outcome: 'failed', code: 'E_INTERNAL', exitCode: 1, message: 'x is undefined' },
      ],
    );
  });
});
