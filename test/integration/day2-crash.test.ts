/**
 * Recovery after fleetroll is killed with SIGKILL at different points of a
 * rollout: the next deploy converges with zero failed requests.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { FleetStateStore } from '../../src/adapters/fleetState.js';
import { bin, docker, failedOf, root, runCli, useFleets, startLoad } from './fixture.js';

const fleet = useFleets();

describe('crash-safe resume', () => {
  for (const point of ['after-mark-down', 'before-reload', 'after-stop', 'waiting-for-readiness']) {
    it(`SIGKILL ${point}: the next deploy converges with zero failed requests`, async () => {
      const f = await fleet(`it-kill`);
      // A warm-up of 1 s makes the point waiting-for-readiness certain (about ten failed probes per
      // instance): an app that answered its first probe ready, as on a busy machine it may once
      // the probe itself runs late, never reached it and the deploy simply completed.
      const file = f.fleetFile({
        replicas: 3,
        maxSurge: 1,
        maxUnavailable: 0,
        drainSeconds: 1,
        image: 'fleetroll-example:1.0.0',
        env: { WARMUP_SECONDS: '1' },
      });
      assert.equal((await runCli(['deploy', '-f', file])).code, 0);
      const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 1 });
      const killed = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => {
        const child = spawn(process.execPath, [bin, 'deploy', '-f', file, '--image', 'fleetroll-example:1.1.0'], {
          cwd: root,
          stdio: 'ignore',
          env: { ...process.env, FLEETROLL_FAULT: `kill-at:${point}:2` },
        });
        child.on('close', (code, signal) => res({ code, signal }));
      });
      assert.equal(killed.signal, 'SIGKILL', `the fault point ${point} was reached`);
      const again = await runCli(['deploy', '-f', file, '--image', 'fleetroll-example:1.1.0']);
      const records = await load.stop();
      assert.equal(again.code, 0, again.stdout + again.stderr);
      assert.match(again.stdout, /took over a stale lock/);
      assert.match(again.stdout, /recovering: the previous rollout .* stopped without finishing/);
      assert.deepEqual(await f.versions(), ['1.1.0', '1.1.0', '1.1.0']);
      const list = await f.instances();
      assert.equal(list.length, 3, 'no orphan containers');
      assert.equal(new Set(list.map((i) => i.name)).size, 3);
      const up = await f.upstream();
      assert.deepEqual([up.up, up.down], [3, 0]);
      const journal = await new FleetStateStore(docker, f.names.service, 'local').journal();
      assert.ok(
        journal.some((e) => e.step === 'recovered'),
        'the journal shows the recovery',
      );
      assert.deepEqual(failedOf(records), [], `${failedOf(records).length} of ${records.length} failed`);
    });
  }
});
