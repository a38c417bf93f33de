/**
 * What a heal (`fleetroll watch`'s rollout in heal mode, on the simulated
 * world) keeps beside the invariants every rollout keeps
 * (sim-invariants.ts), checked after every event:
 *  - a container of a revision the fleet's history does not know is never
 *    stopped, removed or started, and nginx keeps routing to it exactly as
 *    it did (in if it was in, out if it was out);
 *  - no write lists up a server that is not a running, ready container
 *    (a heal takes an unready one out at its first change, and a stray);
 *  - no nginx is written a second time before every other was written once
 *    (one change per load balancer: a heal does not burst);
 *  - no container starts on a host that already runs its maxInstances
 *    containers of the fleet, whatever their revision.
 * `assertWhole` is how a heal must end.
 */
import assert from 'node:assert/strict';
import { parseUpstreamServers } from '../../src/core/upstream.js';
import { LABELS } from '../../src/ports.js';
import { UNKNOWN_REVISION } from '../../src/sim/fleetAtStart.js';
import { isReady, type SimContainer, type SimWorld } from '../../src/sim/ports.js';
import type { DriverChecks } from './sim-invariants.js';

const foreign = (c: SimContainer) => c.labels[LABELS.revision] === UNKNOWN_REVISION;

export interface HealChecks extends DriverChecks {
  /** Addresses of the unknown revision's containers each nginx routed to at the start (by nginx name). */
  foreignRouted: Map<string, Set<string>>;
  /** Writes per nginx (by name). */
  writes: Map<string, number>;
  /** The unknown revision's containers running at the start. */
  theirs: SimContainer[];
}

export function healChecks(hosts: readonly { name: string; maxInstances?: number | undefined }[] = []): HealChecks {
  const violations: string[] = [];
  const foreignRouted = new Map<string, Set<string>>();
  const writes = new Map<string, number>();
  const theirs: SimContainer[] = [];
  return {
    violations,
    foreignRouted,
    writes,
    theirs,
    world: (w, clock) => {
      theirs.push(...[...w.containers.values()].filter((c) => foreign(c) && c.state === 'running'));
      for (const r of w.routers) {
        foreignRouted.set(r.name, new Set(theirs.filter((c) => r.up.has(c.address)).map((c) => c.address)));
        writes.set(r.name, 0);
      }
      const before = w.onEvent;
      w.onEvent = (e) => {
        before?.(e);
        const fail = (m: string) => violations.push(`t=${clock.now()}: ${m}`);
        if (e.kind !== 'written' && e.kind !== 'reloaded' && foreign(e.c)) fail(`${e.c.name}, of a revision the fleet's history does not know, ${e.kind}`);
        if (e.kind === 'started') {
          const max = hosts.find((h) => h.name === e.c.host)?.maxInstances;
          const alive = [...w.containers.values()].filter((c) => c.host === e.c.host && c.state === 'running').length;
          if (max !== undefined && alive > max) fail(`${e.c.name} started on ${e.c.host}: ${alive} containers of the fleet run there, maxInstances ${max}`);
        }
        if (e.kind !== 'written') return;
        const n = (writes.get(e.lb.name) ?? 0) + 1;
        writes.set(e.lb.name, n);
        const fewest = Math.min(...writes.values());
        if (n > fewest + 1) fail(`${e.lb.name} written a ${n}th time while another nginx was written ${fewest} time(s)`);
        const up = new Set(e.up());
        for (const a of up) {
          const c = w.byAddress(a);
          if (!c || !isReady(w, c)) fail(`${e.lb.name} written with ${c?.name ?? a} up, ${c ? 'not ready' : 'which no container has'}`);
        }
        for (const c of theirs) {
          const was = foreignRouted.get(e.lb.name)?.has(c.address) ?? false;
          if (was && !up.has(c.address)) fail(`${e.lb.name} written without ${c.name} (unknown revision), which it routed to`);
          if (!was && up.has(c.address)) fail(`${e.lb.name} written with ${c.name} (unknown revision) up, which it did not route to`);
        }
      };
    },
  };
}

/**
 * The end of a heal: `replicas` running instances of `revision`; every nginx's
 * file and the config in force list exactly them (and the unknown revision's
 * containers it routed to at the start), none down, but for those at
 * `leftOut` (unready ones the heal took out and left to the watch), which no
 * nginx lists; the unknown revision's containers still run as they did.
 */
export function assertWhole(world: SimWorld, revision: string, replicas: number, checks: HealChecks, leftOut: readonly string[] = []): void {
  const running = [...world.containers.values()].filter((c) => c.state === 'running' && c.labels[LABELS.revision] === revision);
  assert.equal(running.filter((c) => leftOut.includes(c.address)).length, leftOut.length, 'the instances left out still run');
  const current = running.filter((c) => !leftOut.includes(c.address));
  replicas -= leftOut.length;
  assert.equal(current.length, replicas, `${current.length} running instances of the current revision, replicas ${replicas}`);
  for (const c of checks.theirs)
    assert.ok(world.containers.get(c.id) === c && c.state === 'running' && !c.stopping, `${c.name} (unknown revision) runs as it did`);
  for (const r of world.routers) {
    const want = [...current.map((c) => c.address), ...(checks.foreignRouted.get(r.name) ?? [])].sort();
    const listed = parseUpstreamServers(r.file ?? '');
    assert.deepEqual(
      listed.filter((x) => x.down).map((x) => x.name),
      [],
      `${r.name}'s file lists no server down`,
    );
    assert.deepEqual(listed.map((x) => x.address).sort(), want, `${r.name}'s file lists exactly the running instances`);
    assert.deepEqual([...r.up].sort(), want, `${r.name} routes to exactly the running instances`);
  }
}
