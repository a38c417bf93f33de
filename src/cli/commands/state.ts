/**
 * `fleetroll state migrate`: moves a fleet's state between the Docker volume
 * on its first host and etcd (docs/state.md), under both places' locks, so
 * that no rollout writes it meanwhile.
 */
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { loadFleet } from '../../config/load.js';
import { DockerRuntime } from '../../adapters/docker.js';
import { EtcdFleetLock, EtcdStateStore } from '../../adapters/etcdState.js';
import { FleetLock, FleetStateStore, LockHeldError } from '../../adapters/fleetState.js';
import { migrateState } from '../../engine/stateMigrate.js';
import { FleetrollError, fieldError } from '../../errors.js';
import type { FleetLockPort } from '../../ports.js';
import { buildDeps, fleetIdentity } from '../../wiring.js';
import { fleetFileOption, jsonOption } from '../options.js';
import type { Out } from '../output.js';

export function registerState(program: CommandUnknownOpts, out: Out): void {
  const state = program.command('state').description("where the fleet's state and lock live: a Docker volume on the first host, or etcd (docs/state.md)");
  state
    .command('migrate')
    .description("copy the fleet's state and journal between the Docker volume on its first host and etcd (state.etcd), verify the copy, say what moved")
    .addOption(fleetFileOption())
    .requiredOption('--to <backend>', 'etcd (from the volume) or volume (from etcd)')
    .addOption(jsonOption('print the result as JSON'))
    .addHelpText(
      'after',
      `
The fleet file names the etcd cluster (state.etcd) either way. Refused while
a rollout or a watch holds the fleet (exit 3); a target that already holds a
different state, or a copy that does not read back the same, changes nothing
(exit 2). The source is left as it was.

Example:
  fleetroll state migrate -f fleet.yaml --to etcd`,
    )
    .action(async (o) => {
      const to = String(o.to);
      if (to !== 'etcd' && to !== 'volume') throw fieldError('--to', `must be etcd or volume, got ${JSON.stringify(to)}`);
      const fleet = await loadFleet(o.file);
      const etcd = fleet.state?.etcd;
      if (!etcd) throw fieldError('state', 'state.etcd is not set (in the fleet file or its defaults): it names the etcd cluster to migrate to or from');
      const deps = await buildDeps(fleet);
      const first = fleet.hosts[0]!;
      const rt = deps.runtimes.get(first.name);
      if (!(rt instanceof DockerRuntime)) throw new FleetrollError('E_INTERNAL', 'the fleet has no first host');
      await rt.ping();
      const ends = {
        volume: {
          store: new FleetStateStore(rt.docker, fleet.service, first.name),
          name: `the Docker volume fleetroll-state-${fleet.service} on ${first.name}`,
          locks: [new FleetLock(rt.docker, fleet.service), new FleetLock(rt.docker, `${fleet.service}-watch`)],
        },
        etcd: {
          store: new EtcdStateStore(etcd, fleet.service, undefined, fleetIdentity(fleet)),
          name: `etcd ${etcd.prefix.replace(/\/+$/, '')}/${fleet.service}/`,
          locks: [new EtcdFleetLock(etcd, fleet.service), new EtcdFleetLock(etcd, fleet.service, 'watch-lock')],
        },
      };
      const from = to === 'etcd' ? ends.volume : ends.etcd;
      const target = to === 'etcd' ? ends.etcd : ends.volume;
      // A running rollout or watch on either side would write what is being copied.
      for (const l of [...from.locks, ...target.locks]) {
        const info = await l.info();
        if (info) throw new LockHeldError(info, fleet.service);
      }
      const image = (await ends.volume.store.image()) ?? (await ends.volume.store.placeholderImage());
      const held: FleetLockPort[] = [];
      try {
        for (const l of [from.locks[0]!, target.locks[0]!]) {
          await l.acquire(image, 'fleetroll state migrate');
          held.push(l);
        }
        const r = await migrateState({
          service: fleet.service,
          from,
          to: target,
          image,
          discard: () => (to === 'etcd' ? ends.etcd.store.discardState() : ends.volume.store.destroy()),
        });
        if (o.json) {
          out.json({ service: fleet.service, from: from.name, to: target.name, ...r });
          return;
        }
        const what = `revision(s) ${r.revisions.join(', ') || '(none)'}, the journal (${r.journalEntries} entries)${r.paused ? ', the pause flag (the fleet is paused)' : ''}`;
        if (r.alreadyThere) out.line(`${target.name} already holds the same state as ${from.name}: ${what}; nothing was written`);
        else out.line(`copied the state of ${fleet.service} from ${from.name} to ${target.name}: ${what}; verified: the copy reads back the same`);
        out.line(
          to === 'etcd'
            ? `next: keep state.etcd in the fleet file: every command now reads and writes etcd. ${from.name} is left as it was (docker volume rm fleetroll-state-${fleet.service} and docker rm fleetroll-state-${fleet.service} on ${first.name} once you no longer want a way back).`
            : `next: remove state.etcd from the fleet file: every command then reads and writes the volume. The keys in etcd are left as they were.`,
        );
      } finally {
        for (const l of held.reverse()) await l.release().catch(() => {});
      }
    });
}
