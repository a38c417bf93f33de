#!/usr/bin/env node
// Runs every test file (test/*/*.test.ts) with Node's test runner, several
// files at a time (TEST_CONCURRENCY, default 4: most of an integration
// file's time is spent waiting for containers, drains and reloads, not on
// the CPU; at 5 the suite kept both cores of a CI machine busy, load 25-40,
// and timing bounds of the product and the tests were missed). The slowest files start first, so that none of them starts last
// and holds the run up alone; a file not in the list runs after them, in
// name order. Arguments are passed on to the test runner. The tests see
// TEST_CONCURRENCY too: their hang guards scale with it (test/support/wait.ts).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';

const SLOWEST_FIRST = [
  'test/integration/multihost.test.ts',
  'test/integration/dynamic.test.ts',
  'test/integration/watch.test.ts',
  'test/integration/watch-engine.test.ts',
  'test/local/fuzz.test.ts',
  'test/integration/failures.test.ts',
  'test/integration/experiment.test.ts',
  'test/integration/day2-crash.test.ts',
  'test/integration/day2.test.ts',
  'test/integration/canary.test.ts',
  'test/integration/rehearse.test.ts',
  'test/integration/deploy.test.ts',
  'test/integration/bluegreen.test.ts',
  'test/integration/strategy-hooks.test.ts',
  'test/integration/analysis.test.ts',
  'test/integration/day2-status.test.ts',
  'test/integration/remote.test.ts',
  'test/integration/bluegreen-preview.test.ts',
];

const all = readdirSync('test', { withFileTypes: true })
  .filter((d) => d.isDirectory())
  .flatMap((d) =>
    readdirSync(join('test', d.name))
      .filter((f) => f.endsWith('.test.ts'))
      .map((f) => `test/${d.name}/${f}`),
  )
  .sort();
const files = [...SLOWEST_FIRST.filter((f) => all.includes(f)), ...all.filter((f) => !SLOWEST_FIRST.includes(f))];
const concurrency = process.env.TEST_CONCURRENCY ?? '4';
// Hang guards for the run itself, so that a hang fails with a message
// instead of holding the run until CI's limit. Node applies --test-timeout to
// each file as a whole too, and kills a file that outlives it: 30 minutes
// (the longest file takes about 5 here), scaled like the tests' own guards
// (test/support/wait.ts). The CLI processes the tests start have their own,
// shorter guard, which names what kept them open (test/support/hang.ts).
// Not --test-force-exit: on Node 20 it once ended a unit file after 31 of a
// suite's 35 tests, and the run reported no failure.
const scale = Math.max(1, Number(concurrency) / 5 || 1);
const guards = [`--test-timeout=${Math.round(1_800_000 * scale)}`];
// TAP for the whole log, then a summary of the failures at its very end.
const reporters = [
  '--test-reporter=tap',
  '--test-reporter-destination=stdout',
  '--test-reporter=./scripts/failure-summary.mjs',
  '--test-reporter-destination=stdout',
];
const r = spawnSync('npx', ['tsx', '--test', `--test-concurrency=${concurrency}`, ...guards, ...reporters, ...process.argv.slice(2), ...files], {
  stdio: 'inherit',
  env: { ...process.env, TEST_CONCURRENCY: concurrency },
});
process.exit(r.status ?? 1);
