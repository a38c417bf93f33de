/**
 * Day-2 operations on a real fleet: history that lives with the fleet, undo,
 * restart, and adopting containers started by hand. (status, pause, the lock:
 * day2-status.test.ts; crash recovery: day2-crash.test.ts)
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Readable } from 'node:stream';
import { execa } from 'execa';
import { createTar } from '../../src/adapters/tar.js';
import { DEMO_LABEL } from '../../src/experiment/rehearse.js';
import { bin, docker, failedOf, root, runCli, useFleets, startLoad } from './fixture.js';

const fleet = useFleets();

interface HistoryRow {
  number: number;
  image: string;
  version: string;
  outcome: string;
  changeCause: string;
  env: string[];
  digest?: string;
}
async function history(file: string, cwd = root): Promise<HistoryRow[]> {
  const r = await execa(process.execPath, [bin, 'history', '-f', file, '--json'], { cwd, reject: false });
  assert.equal(r.exitCode, 0, String(r.stderr));
  return JSON.parse(String(r.stdout)) as HistoryRow[];
}

describe('revisions: history, undo, restart', () => {
  it('records every rollout, undoes to the previous revision as a new one, and restarts in place', async () => {
    const f = await fleet('it-hist');
    const v1 = f.fleetFile({ replicas: 2, maxSurge: 1, maxUnavailable: 0, env: { DB_PASSWORD: 'hunter2' } });
    assert.equal((await runCli(['deploy', '-f', v1, '--change-cause', 'first release'])).code, 0);
    const r2 = await runCli(['deploy', '-f', v1, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(r2.code, 0, r2.stderr);

    // From another working directory (another machine would do the same): the history is on the fleet.
    const h = await history(v1, '/tmp');
    assert.deepEqual(
      h.map((r) => [r.number, r.version, r.outcome]),
      [
        [1, '1.0.0', 'complete'],
        [2, '1.1.0', 'complete'],
      ],
    );
    assert.equal(h[0]?.changeCause, 'first release');
    assert.deepEqual(h[0]?.env, ['DB_PASSWORD', 'PRESTOP_SECONDS', 'WARMUP_SECONDS'], 'env names only');
    const shown = await runCli(['history', '-f', v1, '--revision', '1']);
    assert.doesNotMatch(shown.stdout + (await runCli(['history', '-f', v1, '--json'])).stdout, /hunter2/, 'secrets never shown');

    const undo = await runCli(['undo', '-f', v1]);
    assert.equal(undo.code, 0, undo.stderr);
    assert.deepEqual(await f.versions(), ['1.0.0', '1.0.0']);
    const h3 = await history(v1);
    assert.deepEqual(h3.map((r) => [r.number, r.version, r.changeCause]).at(-1), [3, '1.0.0', 'undo to revision 1']);

    const redo = await runCli(['undo', '-f', v1]);
    assert.equal(redo.code, 0, redo.stderr);
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0'], 'an undo can be undone');

    const before = (await f.instances()).map((i) => i.name).sort();
    const restart = await runCli(['restart', '-f', v1]);
    assert.equal(restart.code, 0, restart.stderr);
    const afterNames = (await f.instances()).map((i) => i.name).sort();
    assert.equal(afterNames.filter((n) => before.includes(n)).length, 0, 'every instance was replaced');
    assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0']);
    // A plain deploy of the same file afterwards changes nothing (the restart marker is kept).
    const again = await runCli(['deploy', '-f', v1, '--image', 'fleetroll-example:1.1.0']);
    assert.equal(again.code, 0);
    assert.match(again.stdout, /0 wave\(s\)/);
    assert.deepEqual((await f.instances()).map((i) => i.name).sort(), afterNames);

    const missing = await runCli(['undo', '-f', v1, '--to-revision', '99']);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--to-revision: no revision 99/);
  });

  it('undo runs the build recorded for the revision: its tag alone gone is no matter; the build gone fails in preflight', async () => {
    const f = await fleet('it-undoimg');
    const tag = `fleetroll-example:${f.names.service}`;
    // A build of its own (1.0.0 plus a label: a new image ID), so removing it takes no other test's image.
    const build = async (from: string) => {
      const context = await createTar({ name: 'Dockerfile', content: `FROM ${from}\nLABEL fleetroll.test=${f.names.service}\n` });
      const built = await docker.buildImage(Readable.from([context]) as unknown as NodeJS.ReadableStream, {
        t: tag,
        labels: { [DEMO_LABEL]: f.names.service },
      });
      await new Promise((resolve, reject) => docker.modem.followProgress(built, (err: unknown) => (err ? reject(err) : resolve(undefined))));
    };
    await build('fleetroll-example:1.0.0');
    const file = f.fleetFile({ replicas: 1, image: tag, version: '1.0.0', env: { APP_X: '1' } });
    // 1.1.0 first: the fleet's state container takes the first image it deploys, which then cannot be removed.
    assert.equal((await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'])).code, 0);
    assert.equal((await runCli(['deploy', '-f', file])).code, 0);
    const id = (await docker.getImage(tag).inspect()).Id;
    assert.equal((await history(file))[1]?.digest, id, 'a local build is pinned to its image ID');
    assert.equal((await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'])).code, 0);
    // The tag moves to another build (of its own again, so that untagging it later touches no shared image): undo still runs revision 2's.
    await build('fleetroll-example:1.1.0');
    assert.notEqual((await docker.getImage(tag).inspect()).Id, id);
    const back = await runCli(['undo', '-f', file, '--to-revision', '2']);
    assert.equal(back.code, 0, back.stderr);
    assert.deepEqual(await f.versions(), ['1.0.0']);
    assert.equal((await docker.getContainer((await f.instances())[0]!.id).inspect()).Config.Image, id);
    assert.equal((await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'])).code, 0);
    await docker.getImage(tag).remove();
    await docker.getImage(id).remove();
    const r = await runCli(['undo', '-f', file, '--to-revision', '2']);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`preflight failed, nothing was changed:\\s+image ${tag} is not present on host local as the recorded build ${id}`));
    assert.deepEqual(await f.versions(), ['1.1.0']);
  });
});

describe('adopting a running fleet', () => {
  it('takes over containers started by hand without restarting them, then deploy rolls them with zero failed requests', async () => {
    const f = await fleet('it-adopt');
    const role = `legacy-${f.names.service}`;
    const started: string[] = [];
    for (let i = 1; i <= 3; i++) {
      const c = await docker.createContainer({
        name: `${f.names.service}-legacy-${i}`,
        Image: 'fleetroll-example:1.0.0',
        Env: ['PRESTOP_SECONDS=1'],
        Labels: { 'legacy.role': role },
        HostConfig: { NetworkMode: f.names.network, Init: true },
      });
      await c.start();
      started.push(c.id);
    }
    try {
      const file = f.fleetFile({ replicas: 3, maxSurge: 1, maxUnavailable: 0, drainSeconds: 1 });
      const before = await Promise.all(started.map(async (id) => (await docker.getContainer(id).inspect()).State.StartedAt));
      const r = await runCli(['adopt', '-f', file, '--match', `legacy.role=${role}`]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /adopted 3 container\(s\) as revision 1/);
      const startedAgain = await Promise.all(started.map(async (id) => (await docker.getContainer(id).inspect()).State.StartedAt));
      assert.deepEqual(startedAgain, before, 'not restarted');
      const up = await f.upstream();
      assert.deepEqual([up.up, up.down], [3, 0]);
      assert.equal(await (await fetch(`${f.url}/api/version`)).text(), '1.0.0', 'nginx now routes to them');
      const status = JSON.parse((await runCli(['status', '-f', file, '--json'])).stdout) as { instances: { name: string; ready: boolean }[] };
      assert.equal(status.instances.filter((i) => i.ready).length, 3);

      const again = await runCli(['adopt', '-f', file, '--match', `legacy.role=${role}`]);
      assert.equal(again.code, 2, 'adopting twice is refused');

      const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
      const d = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
      const records = await load.stop();
      assert.equal(d.code, 0, d.stdout + d.stderr);
      assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
      for (const id of started) await assert.rejects(docker.getContainer(id).inspect(), 'the adopted containers were replaced');
      assert.deepEqual(failedOf(records), []);
      const h = await history(file);
      assert.deepEqual(
        h.map((x) => [x.number, x.version, x.outcome]),
        [
          [1, '1.0.0', 'complete'],
          [2, '1.1.0', 'complete'],
        ],
      );
      assert.match(h[0]?.changeCause ?? '', /adopted 3 running container\(s\)/);
    } finally {
      await Promise.all(
        started.map((id) =>
          docker
            .getContainer(id)
            .remove({ force: true })
            .catch(() => {}),
        ),
      );
    }
  });
});
