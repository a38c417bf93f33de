/**
 * The end of every rollout: prove that each instance runs the new revision.
 * With a version endpoint, ask each instance for its version: a rollout that
 * reached every step but serves the wrong version (an image tagged with the
 * wrong version, a stale cache) is a failed rollout, not a success. Without
 * one (`probes.version: false`, a worker), check what Docker knows: the
 * container runs the image ID the host's engine has for the fleet's image,
 * carries the new revision label, and its readiness probe passes.
 */
import type { Fleet } from '../config/load.js';
import { RolloutFailedError } from '../errors.js';
import { LABELS, type Prober, type Runtime } from '../ports.js';
import type { EventSink } from './events.js';

export interface Verified {
  name: string;
  host: string;
  address: string;
  version: string;
}

/** An instance as the controller leaves it: name, host, Docker id and address when known. */
export interface ToVerify {
  id: string;
  host: string;
  dockerId?: string | undefined;
  address?: string | undefined;
}

/** Verification as the fleet's probes ask for it. */
export function verify(fleet: Fleet, revision: string, instances: readonly ToVerify[], deps: { prober: Prober; runtimes: ReadonlyMap<string, Runtime> }, emit: EventSink): Promise<Verified[]> {
  return fleet.probes?.version === false ? verifyRevision(fleet, revision, instances, deps, emit) : verifyVersions(fleet, instances, deps.prober, emit);
}

export async function verifyVersions(fleet: Fleet, instances: readonly ToVerify[], prober: Prober, emit: EventSink): Promise<Verified[]> {
  const results = await Promise.all(
    instances.map(async (i) => {
      const address = i.address ?? '';
      try {
        return { name: i.id, host: i.host, address, version: await prober.version(address) };
      } catch (err) {
        return { name: i.id, host: i.host, address, version: '', error: (err as Error).message };
      }
    }),
  );
  const wrong = results.filter((r) => r.version !== fleet.version);
  for (const r of results) if (r.version === fleet.version) emit({ type: 'verified', name: r.name, version: r.version });
  if (wrong.length > 0) {
    const lines = wrong.map((r) => ('error' in r && r.error ? `${r.name} on ${r.host}: ${r.error}` : `${r.name} on ${r.host} reports version ${JSON.stringify(r.version)}, expected ${JSON.stringify(fleet.version)}`));
    throw new RolloutFailedError(
      `rollout of ${fleet.service} finished but ${wrong.length} of ${results.length} instance(s) do not serve version ${fleet.version}:\n  ${lines.join('\n  ')}`,
      'the instances are serving; check that the image was built with the version it is tagged with (or set `version:` in the fleet file), then deploy again',
      { instances: results },
    );
  }
  return results.map(({ name, host, address, version }) => ({ name, host, address, version }));
}

/** "sha256:0123456789ab…" → "sha256:0123456789ab" (enough to tell images apart in a message). */
function shortId(id: string): string {
  return id.replace(/^(sha256:[0-9a-f]{12})[0-9a-f]+$/, '$1');
}

/** What is wrong with one instance, or undefined when it runs the revision's image, carries its label and is ready. */
async function revisionProblem(fleet: Fleet, revision: string, i: ToVerify, rt: Runtime | undefined, wanted: (host: string) => Promise<string | undefined>, prober: Prober): Promise<{ problem?: string; address?: string | undefined }> {
  if (!rt) return { problem: `no runtime for host ${i.host}` };
  const id = i.dockerId ?? i.id;
  const info = await rt.inspect(id);
  if (!info) return { problem: 'its container is gone' };
  if (!info.running) return { problem: `its container is ${info.state}${info.exitCode !== undefined ? ` (exit code ${info.exitCode})` : ''}`, address: info.address };
  const label = info.labels[LABELS.revision];
  if (label !== revision) return { problem: `carries revision ${JSON.stringify(label ?? '(none)')}, expected ${revision}`, address: info.address };
  const [has, want] = await Promise.all([rt.containerImage(id), wanted(i.host)]);
  if (want === undefined) return { problem: `the engine on host ${i.host} has no image ${fleet.image} to compare with`, address: info.address };
  if (has !== want) return { problem: `runs image ${has === undefined ? '(unknown)' : shortId(has)}, but ${fleet.image} is ${shortId(want)} on host ${i.host}`, address: info.address };
  if (!(await prober.ready({ id, host: i.host, address: info.address }))) return { problem: 'its readiness probe no longer passes', address: info.address };
  return { address: info.address };
}

export async function verifyRevision(fleet: Fleet, revision: string, instances: readonly ToVerify[], deps: { prober: Prober; runtimes: ReadonlyMap<string, Runtime> }, emit: EventSink): Promise<Verified[]> {
  // One image lookup per host: the same tag can name different builds on different engines.
  const byHost = new Map<string, Promise<string | undefined>>();
  const wanted = (host: string) => {
    let p = byHost.get(host);
    if (!p) {
      p = deps.runtimes.get(host)?.imageInfo?.(fleet.image).then((x) => x?.id) ?? Promise.resolve(undefined);
      byHost.set(host, p);
    }
    return p;
  };
  const results = await Promise.all(
    instances.map(async (i) => {
      const r = await revisionProblem(fleet, revision, i, deps.runtimes.get(i.host), wanted, deps.prober).catch((err: unknown) => ({ problem: (err as Error).message, address: i.address }));
      return { name: i.id, host: i.host, address: r.address ?? i.address ?? '', version: fleet.version, problem: r.problem };
    }),
  );
  const wrong = results.filter((r) => r.problem !== undefined);
  for (const r of results) if (r.problem === undefined) emit({ type: 'verified', name: r.name, version: r.version });
  if (wrong.length > 0) {
    throw new RolloutFailedError(
      `rollout of ${fleet.service} finished but ${wrong.length} of ${results.length} instance(s) do not run revision ${revision} (image ${fleet.image}):\n  ${wrong.map((r) => `${r.name} on ${r.host}: ${r.problem}`).join('\n  ')}`,
      'the image may have changed under its tag while the rollout ran (rebuilt or pulled again): deploy again to replace what runs the old build',
      { instances: results.map(({ name, host, problem }) => ({ name, host, ...(problem !== undefined ? { problem } : {}) })) },
    );
  }
  return results.map(({ name, host, address, version }) => ({ name, host, address, version }));
}
