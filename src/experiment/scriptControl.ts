/**
 * The script control for experiments: the *proper* hand-written rolling
 * script (`rolling.sh` of the article fleetroll grew from), generalised to
 * batches of b instances. Per batch of old instances, in order:
 *
 *   1. rewrite every load balancer's upstream with the batch marked `down`
 *      (every other running instance up), `nginx -t`, reload;
 *   2. sleep drainSeconds, so in-flight requests finish;
 *   3. stop the batch gracefully (`docker stop a b`, side by side), remove
 *      it, then start b containers of the new revision on the same hosts,
 *      one after another as a script's `docker run -d` lines would;
 *   4. poll readiness of each new one every pollSeconds until it passes,
 *      giving up after progressDeadlineSeconds;
 *   5. rewrite the upstream with everything running up, `nginx -t`, reload.
 *
 * It is what a careful engineer writes by hand, so it is the bar fleetroll
 * must clear: a measured baseline for duration, mixed-version window and
 * reloads, on the same fleet, nginx and load as fleetroll in the same
 * experiment. It goes through the same ports (Runtime, Router, Prober) and
 * emits the same RolloutEvents as the engine, so every metric is computed the
 * same way for both.
 *
 * A control, never for real deploys: it keeps no journal, cannot resume,
 * pause or roll back, and waits for each batch to finish before the next.
 */
import type { Fleet } from '../config/load.js';
import { renderUpstream } from '../core/upstream.js';
import { instanceSpec, randomSuffix, RolloutFailedError, systemClock, type DeployDeps } from '../engine/rollout.js';
import { revisionOf } from '../engine/revision.js';
import { FleetrollError } from '../errors.js';
import { LABELS, type InstanceInfo } from '../ports.js';

export interface ScriptOptions {
  /** Old instances replaced per batch (the engine's maxSurge 0 / maxUnavailable b). */
  batch: number;
  /** Seconds between two readiness polls of a new instance; default 1 (the script's `sleep 1`). */
  pollSeconds?: number | undefined;
}

const byName = (a: InstanceInfo, b: InstanceInfo) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
/** Oldest first, as a script walks its instances 1, 2, 3. */
const byAge = (a: InstanceInfo, b: InstanceInfo) => Number(a.labels[LABELS.created] ?? 0) - Number(b.labels[LABELS.created] ?? 0) || byName(a, b);

export async function scriptRollout(fleet: Fleet, deps: DeployDeps, opts: ScriptOptions): Promise<void> {
  if (!Number.isInteger(opts.batch) || opts.batch < 1) throw new RangeError(`script batch must be a positive integer, got ${opts.batch}`);
  const clock = deps.clock ?? systemClock;
  const emit = deps.events ?? (() => {});
  const pollMs = (opts.pollSeconds ?? 1) * 1000;
  const revision = revisionOf(fleet);
  const labels = { [LABELS.service]: fleet.service, [LABELS.managed]: 'true' };
  const listAll = async () => (await Promise.all([...deps.runtimes.values()].map((rt) => rt.list(labels)))).flat();
  const runtime = (host: string) => {
    const rt = deps.runtimes.get(host);
    if (!rt) throw new FleetrollError('E_INTERNAL', `no runtime for host ${host}`);
    return rt;
  };

  const first = await listAll();
  const old = first.filter((i) => i.labels[LABELS.revision] !== revision).sort(byAge);
  // What nginx sends traffic to before the first write: every running instance.
  let up = new Set(first.filter((i) => i.running && i.address).map((i) => i.name));
  let reloads = 0;

  /** Steps 1 and 5: every running instance listed, `down` ones marked down; write, `nginx -t`, reload, per load balancer. */
  const rewriteUpstream = async (down: ReadonlySet<string>, action: 'drain' | 'enable') => {
    const running = (await listAll()).filter((i) => i.running && i.address).sort(byName);
    const servers = running.map((i) => ({ address: i.address ?? '', down: down.has(i.name), name: i.name }));
    for (const lb of deps.routers) {
      await lb.router.writeAndTest(renderUpstream(lb.template, { service: fleet.service, upstream: lb.upstream, servers }));
      await lb.router.reload();
      reloads++;
    }
    const nowUp = new Set(servers.filter((s) => !s.down).map((s) => s.name));
    emit({ type: 'upstream', action, down: servers.filter((s) => s.down).map((s) => s.name), up: [...nowUp].filter((n) => !up.has(n)), reloads });
    up = nowUp;
  };

  for (let index = 1, at = 0; at < old.length; index++, at += opts.batch) {
    const batch = old.slice(at, at + opts.batch);
    const names = batch.map((v) => v.name);
    emit({ type: 'wave', index, start: batch.length, stop: names });

    await rewriteUpstream(new Set(names), 'drain');

    if (fleet.drainSeconds > 0) {
      emit({ type: 'draining', names, seconds: fleet.drainSeconds });
      await clock.sleep(fleet.drainSeconds * 1000);
    }

    await Promise.all(
      batch.map(async (v) => {
        const rt = runtime(v.host);
        await rt.stop(v.id, fleet.terminationGracePeriodSeconds);
        await rt.remove(v.id);
        emit({ type: 'stopped', name: v.name, host: v.host });
      }),
    );
    const fresh: InstanceInfo[] = [];
    for (const v of batch) {
      const host = fleet.hosts.find((h) => h.name === v.host);
      const spec = { ...instanceSpec(fleet, revision, (deps.nameSuffix ?? randomSuffix)(), host?.network, clock.now()), publishAddress: host?.publishAddress };
      const started = await runtime(v.host).run(spec);
      emit({ type: 'started', name: started.name, host: started.host, address: started.address });
      fresh.push(started);
    }

    await waitReady(fresh);

    await rewriteUpstream(new Set(), 'enable');
  }

  /** Step 4: every pollMs ask each new instance that is not ready yet; fail after progressDeadlineSeconds. */
  async function waitReady(instances: readonly InstanceInfo[]): Promise<void> {
    const deadline = clock.now() + fleet.progressDeadlineSeconds * 1000;
    let pending = [...instances];
    for (;;) {
      const answers = await Promise.all(
        pending.map(async (i) => (i.address ? deps.prober.ready({ id: i.id, host: i.host, address: i.address }).catch(() => false) : false)),
      );
      for (const [k, i] of pending.entries()) if (answers[k]) emit({ type: 'ready', name: i.name });
      pending = pending.filter((_, k) => !answers[k]);
      if (pending.length === 0) return;
      if (clock.now() >= deadline) {
        emit({ type: 'failed', reason: 'progress deadline exceeded' });
        throw new RolloutFailedError(
          `script control: ${pending.map((i) => i.name).join(', ')} did not become ready within ${fleet.progressDeadlineSeconds} s (progressDeadlineSeconds); the batch is left marked down`,
          'look at the instance logs; this is the experiment control, not a deploy: nothing is rolled back',
        );
      }
      await clock.sleep(pollMs);
    }
  }
}
