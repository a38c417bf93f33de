/**
 * fleetroll as a library on a real Docker engine behind a real nginx:
 * examples/library/deploy.ts, which imports `deploy` from 'fleetroll' (the
 * source, through tsconfig's paths, as tsx runs it), rolls a test fleet, and
 * the CLI then finds the library's rollouts in the fleet's history.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { ManagedResult } from '../../src/index.js';
import { root, runCli, runNode, useFleets, type CliRun } from './fixture.js';

const fleet = useFleets();
const EXAMPLE = join(root, 'examples/library/deploy.ts');

/** `node --import tsx examples/library/deploy.ts <args>`, without blocking the test. */
function runExample(args: string[]): Promise<CliRun> {
  return runNode(['--import', 'tsx', EXAMPLE, ...args]);
}

describe('the library: examples/library/deploy.ts', () => {
  it('deploys 2 × 1.0.0, then rolls to 1.1.0: every instance reports the new version, and the history has both', async () => {
    const f = await fleet('it-lib');
    const file = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0 });

    const first = await runExample([file]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0']);

    const r = await runExample([file, 'fleetroll-example:1.1.0']);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    const out = JSON.parse(r.stdout) as ManagedResult;
    assert.equal(out.version, '1.1.0');
    assert.equal(out.revisionNumber, 2);
    assert.deepEqual(
      out.instances.map((i) => i.version),
      ['1.1.0', '1.1.0'],
    );
    assert.ok(out.health !== undefined, 'the health numbers of the access log, as the CLI reports them');
    assert.equal((r.stderr.match(/^verified \S+ at 1\.1\.0$/gm) ?? []).length, 2, r.stderr);
    assert.match(r.stderr, /^complete: version 1\.1\.0$/m);

    assert.deepEqual((await f.versions()).sort(), ['1.1.0', '1.1.0']);
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [2, 0], up.content);

    const history = await runCli(['history', '-f', file, '--json']);
    assert.equal(history.code, 0, history.stderr);
    const records = JSON.parse(history.stdout) as { number: number; version: string; outcome: string; changeCause: string }[];
    assert.deepEqual(
      records.map((x) => [x.number, x.version, x.outcome, x.changeCause]),
      [
        [1, '1.0.0', 'complete', "examples/library/deploy.ts (the file's image)"],
        [2, '1.1.0', 'complete', 'examples/library/deploy.ts fleetroll-example:1.1.0'],
      ],
    );
  });

  it('a version that never becomes ready: exit 1 with the deadline named, the old instances still in the upstream', async () => {
    const f = await fleet('it-libfail');
    const good = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0 });
    const first = await runExample([good]);
    assert.equal(first.code, 0, first.stdout + first.stderr);
    const bad = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, env: { BROKEN_NEVER_READY: '1' }, progressDeadlineSeconds: 5 });
    const r = await runExample([bad, 'fleetroll-example:1.1.0']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.equal(r.stdout, '', 'no result printed');
    assert.match(r.stderr, /^error: /m);
    assert.match(r.stderr, /made no progress for 5 s \(progressDeadlineSeconds\)/);
    assert.match(r.stderr, /^hint: /m);
    assert.equal((await f.versions()).filter((v) => v === '1.0.0').length, 2, 'both old instances still answer');
    const up = await f.upstream();
    assert.deepEqual([up.up, up.down], [2, 0], up.content);
  });
});
