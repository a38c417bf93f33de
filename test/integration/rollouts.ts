/**
 * Helpers of the integration tests that roll real fleets under load and
 * search what fleetroll wrote for a secret (container.test.ts, compose.test.ts).
 */
import { createHash } from 'node:crypto';
import { after, before, type TestContext } from 'node:test';
import { buildAppImage, ensureNodeBaseImage } from '../../src/adapters/localImages.js';
import type Dockerode from 'dockerode';
import type { RequestRecord } from '../../src/experiment/metrics.js';
import { LABELS } from '../../src/ports.js';
import { docker, explainFailed, failedOf, moreRequests, runCli, startLoad, type CliRun, type TestFleet } from './fixture.js';

export async function inspectAll(f: TestFleet): Promise<Dockerode.ContainerInspectInfo[]> {
  return Promise.all((await f.instances()).map((i) => docker.getContainer(i.id).inspect()));
}

export async function get(url: string): Promise<{ status: number; body: string; version: string | null }> {
  const r = await fetch(url);
  return { status: r.status, body: await r.text(), version: r.headers.get('x-app-version') };
}

export interface Rollout {
  run: CliRun;
  records: RequestRecord[];
  failed: RequestRecord[];
  seconds: number;
  /**
   * The assertion message for `failed`: each failed request with what nginx
   * logged near it, then the CLI's output (what the rollout did meanwhile).
   */
  why: string;
}

/** Runs the CLI with GET + POST load through nginx from before it starts until after it ends. */
export async function underLoad(f: TestFleet, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Rollout> {
  const load = startLoad(f.url, { getPerSecond: 10, postConcurrency: 2 });
  const loadStart = Date.now() - load.elapsed();
  await moreRequests(load, 5, 'requests before the rollout');
  const t0 = performance.now();
  const run = await runCli(args, { env });
  const seconds = (performance.now() - t0) / 1000;
  await moreRequests(load, 5, 'requests after the rollout');
  const records = await load.stop();
  const failed = failedOf(records);
  const why = failed.length === 0 ? 'no request failed' : `${await explainFailed(f, records, loadStart)}\nthe CLI printed:\n${run.stdout}${run.stderr}`;
  return { run, records, failed, seconds, why };
}

export function report(t: TestContext, what: string, r: Rollout): void {
  t.diagnostic(`${what}: exit ${r.run.code}, ${r.seconds.toFixed(1)} s, ${r.records.length} requests through nginx, ${r.failed.length} failed`);
}

/** Everything under /state in the fleet's state container (state.json, journal.ndjson), as the raw tar. */
export async function stateArchive(service: string): Promise<Buffer> {
  const stream = await docker.getContainer(`fleetroll-state-${service}`).getArchive({ path: '/state' });
  const chunks: Buffer[] = [];
  for await (const c of stream as AsyncIterable<Buffer>) chunks.push(c);
  return Buffer.concat(chunks);
}

export async function removeVolumes(service: string, names: string[] = []): Promise<void> {
  const { Volumes } = await docker.listVolumes({ filters: { label: [`${LABELS.volume}=${service}`] } });
  for (const n of new Set([...(Volumes ?? []).map((v) => v.Name), ...names]))
    await docker
      .getVolume(n)
      .remove()
      .catch(() => {});
}

/**
 * The example app at 1.0.0 and 1.1.0 under tags of this test file's own
 * (other files rebuild the shared fleetroll-example tags), built before its
 * tests and removed after them.
 */
export function ownAppImages(app: string): { V1: string; V2: string } {
  const V1 = `${app}:1.0.0`;
  const V2 = `${app}:1.1.0`;
  before(async () => {
    const base = await ensureNodeBaseImage();
    await buildAppImage({ version: '1.0.0', base, tag: V1 });
    await buildAppImage({ version: '1.1.0', base, tag: V2 });
  });
  after(async () => {
    for (const tag of [V1, V2])
      await docker
        .getImage(tag)
        .remove()
        .catch(() => {});
  });
  return { V1, V2 };
}

export const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
