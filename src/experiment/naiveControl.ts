/**
 * The control for rehearsals and experiments: replace instances the way the
 * typical hand-written script does (kill, start, point nginx at the new one
 * at once, no drain, no readiness wait). It exists to show that the probes
 * can see failures; never use it for a real deploy.
 */
import type { Fleet } from '../config/load.js';
import { renderUpstream } from '../core/upstream.js';
import { LABELS } from '../ports.js';
import { instanceSpec, randomSuffix, systemClock, type DeployDeps } from '../engine/rollout.js';
import { revisionOf } from '../engine/revision.js';

export async function naiveReplace(fleet: Fleet, deps: DeployDeps, opts: { intervalMs: number }): Promise<void> {
  const clock = deps.clock ?? systemClock;
  const emit = deps.events ?? (() => {});
  const revision = revisionOf(fleet);
  const labels = { [LABELS.service]: fleet.service, [LABELS.managed]: 'true' };
  const hosts = fleet.hosts;
  const all = async () => (await Promise.all([...deps.runtimes.values()].map((rt) => rt.list(labels)))).flat();
  const old = (await all()).filter((i) => i.labels[LABELS.revision] !== revision);
  for (const [n, victim] of old.entries()) {
    const rt = deps.runtimes.get(victim.host);
    if (!rt) continue;
    emit({ type: 'wave', index: n + 1, start: 1, stop: [victim.name] });
    // `docker rm -f`: SIGKILL, in-flight requests die with the process.
    await rt.stop(victim.id, 0);
    await rt.remove(victim.id);
    emit({ type: 'stopped', name: victim.name, host: victim.host });
    const network = hosts.find((h) => h.name === victim.host)?.network;
    const started = await rt.run(instanceSpec(fleet, revision, randomSuffix(), network, clock.now()));
    emit({ type: 'started', name: started.name, host: started.host, address: started.address });
    const servers = (await all()).filter((i) => i.running && i.address).map((i) => ({ address: i.address ?? '', down: false, name: i.name }));
    for (const lb of deps.routers) {
      await lb.router.writeAndTest(renderUpstream(lb.template, { service: fleet.service, upstream: lb.upstream, servers }));
      await lb.router.reload();
    }
    await clock.sleep(opts.intervalMs);
  }
}
