/**
 * `fleetroll watch` when the ground moves under it, on a real second Docker
 * engine (scripts/second-engine.sh, name `wr`, standing in for a VM) with
 * nginx on this machine reaching the instances on their published ports:
 *
 * - the engine's dockerd is stopped and started again (a VM reboot): the
 *   watch says it cannot see the fleet and backs off, then heals from what
 *   the engine shows when it answers (containers restarted by their
 *   `unless-stopped` policy at new published ports, their old ones taken
 *   meanwhile; or, with `restart: "no"`, not restarted at all), and Docker's
 *   events wake it again afterwards;
 * - the watch is SIGKILLed in the middle of a heal: the next watch recovers
 *   the heal's journal, the fleet converges, nothing is left orphaned, and a
 *   deploy of the same revision works afterwards.
 *
 * The figures (time to whole, requests failed during and after, nginx writes
 * per heal) are printed with t.diagnostic.
 */
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { execa } from 'execa';
import { DockerRuntime } from '../../src/adapters/docker.js';
import { removeFleetState } from '../../src/adapters/fleetState.js';
import { parseUpstreamServers } from '../../src/core/upstream.js';
import type { RequestRecord } from '../../src/experiment/metrics.js';
import { LABELS } from '../../src/ports.js';
import {
  ensureImages,
  failedOf,
  guard,
  prober,
  root,
  runCli,
  startCliUntil,
  startLoad,
  startLocalNginx,
  uniqueName,
  waitFor,
  type LocalNginx,
  type RunningCli,
} from './fixture.js';

const ENGINE = 'wr';
/** The engine's start waits up to 90 s for dockerd (scripts/second-engine.sh); its stop up to 20 s. Hang guards above both. */
const engine = (cmd: 'start' | 'stop') => execa('bash', [join(root, 'scripts/second-engine.sh'), cmd, ENGINE], { stdin: 'ignore', timeout: guard(240_000) });

let endpoint = '';
let rt: DockerRuntime | undefined;
const services: string[] = [];
const nginxes: LocalNginx[] = [];
const dirs: string[] = [];

async function cleanup(): Promise<void> {
  if (!rt) return;
  for (const service of services) {
    const list = await rt.list({ [LABELS.service]: service }).catch(() => []);
    await Promise.all(
      list.map((c) =>
        rt!.docker
          .getContainer(c.id)
          .remove({ force: true })
          .catch(() => {}),
      ),
    );
    await removeFleetState(rt.docker, service).catch(() => {});
  }
}

before(async () => {
  await ensureImages();
  endpoint = String((await engine('start')).stdout).trim();
  rt = new DockerRuntime({ name: ENGINE, docker: endpoint });
});

after(async () => {
  for (const n of nginxes) await n.stop().catch(() => {});
  // A test that failed with the engine stopped: start it to remove what the fleets left, then stop it.
  await engine('start').catch(() => {});
  await cleanup();
  await engine('stop').catch(() => {});
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface WrFleet {
  service: string;
  file: string;
  nginx: LocalNginx;
}

/** A fleet of `replicas` on the engine `wr` behind an nginx on this machine, deployed; its file. */
async function deployedFleet(prefix: string, replicas: number, env: Record<string, string> = {}, more = ''): Promise<WrFleet> {
  const service = uniqueName(prefix);
  services.push(service);
  const dir = mkdtempSync(join(tmpdir(), `${service}-`));
  dirs.push(dir);
  const upstream = service.replace(/-/g, '_');
  const nginx = await startLocalNginx(dir, upstream, 1);
  nginxes.push(nginx);
  const allEnv = { WARMUP_SECONDS: '0.5', PRESTOP_SECONDS: '1', ...env };
  const file = join(dir, 'fleet.yaml');
  writeFileSync(
    file,
    `service: ${service}
image: fleetroll-example:1.0.0
replicas: ${replicas}
port: 8080
env: { ${Object.entries(allEnv)
      .map(([k, v]) => `${k}: "${v}"`)
      .join(', ')} }
hosts:
  - { name: ${ENGINE}, docker: "${endpoint}", publishAddress: 127.0.0.1 }
probes:
  readiness: { path: /health/ready, periodMs: 100, timeoutMs: 1000 }
strategy:
  rollingUpdate: { maxSurge: 1, maxUnavailable: 0 }
drainSeconds: 1
terminationGracePeriodSeconds: 5
progressDeadlineSeconds: 120
loadBalancers:
  - nginx: { exec: true, config: ${nginx.conf}, upstreamFile: ${nginx.upstreamFile}, upstream: ${upstream} }
${more}`,
  );
  const r = await runCli(['deploy', '-f', file]);
  assert.equal(r.code, 0, r.stdout + r.stderr);
  return { service, file, nginx };
}

const instances = (f: WrFleet) => rt!.list({ [LABELS.service]: f.service });

/** Why the fleet is not whole, or undefined when it is: replicas running and ready, nginx listing exactly their addresses, none down, nothing else. */
async function notWhole(f: WrFleet, replicas: number): Promise<string | undefined> {
  const all = await instances(f);
  const running = all.filter((i) => i.running);
  if (all.length !== replicas || running.length !== replicas)
    return `${all.length} container(s), ${running.length} running: ${all.map((i) => `${i.name} ${i.state}`).join(', ')}`;
  for (const i of running)
    if (!(await prober.ready({ id: i.id, host: i.host, address: i.address }).catch(() => false))) return `${i.name} (${i.address}) not ready`;
  const servers = parseUpstreamServers(readFileSync(f.nginx.upstreamFile, 'utf8'));
  if (servers.some((s) => s.down)) return `nginx lists a server down: ${servers.map((s) => s.address).join(', ')}`;
  const listed = servers.map((s) => s.address).sort();
  const want = running.map((i) => i.address ?? '').sort();
  if (JSON.stringify(listed) !== JSON.stringify(want)) return `nginx lists ${listed.join(', ')}, the instances are at ${want.join(', ')}`;
  return undefined;
}

async function untilWhole(f: WrFleet, replicas: number, what: string, timeoutMs = 180_000): Promise<number> {
  let why: string | undefined = 'not looked at yet';
  try {
    return await waitFor(what, async () => (why = await notWhole(f, replicas)) === undefined, timeoutMs, 200);
  } catch (err) {
    throw new Error(`${(err as Error).message}: ${why}`);
  }
}

async function stopWatch(w: RunningCli | undefined): Promise<{ code: number | null; stdout: string; stderr: string } | undefined> {
  if (!w) return undefined;
  if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGTERM');
  return w.exited.catch(() => undefined);
}

/** The heals the watch's output tells of, each with the nginx writes (reloads) it printed between its "healing" and "healed" lines. */
function healsOf(stdout: string): { reasons: string; seconds: number; writes: number }[] {
  const heals: { reasons: string; seconds: number; writes: number }[] = [];
  let writes = 0;
  for (const line of stdout.split('\n')) {
    if (/watch: healing \(/.test(line)) writes = 0;
    if (/upstream: nginx -t ok, reloaded/.test(line)) writes++;
    const m = /watch: healed \(([^)]*)\) in ([0-9.]+) s/.exec(line);
    if (m) heals.push({ reasons: m[1]!, seconds: Number(m[2]), writes });
  }
  return heals;
}

const failedIn = (records: RequestRecord[], from: number, to = Number.POSITIVE_INFINITY) => failedOf(records).filter((r) => r.t >= from && r.t < to);
const describeFailed = (records: RequestRecord[]) =>
  records.map((r) => `${Math.round(r.t)} ms ${r.method} ${r.path}: ${r.error ?? `HTTP ${r.status}`} after ${Math.round(r.latencyMs)} ms`).join('\n  ');

/**
 * Something else on the machine takes these ports on 127.0.0.1 while the
 * engine is down (it answers 503 and closes): the instances cannot come back
 * on them, as after a reboot where a port went to another program. A port
 * still in use after 5 s has been taken already (another engine of the
 * machine's tests): as good for this.
 */
async function holdPorts(ports: number[]): Promise<{ close(): Promise<void>; taken: number[] }> {
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  const taken: number[] = [];
  const answer = (c: Socket) => {
    sockets.add(c.on('close', () => sockets.delete(c)).on('error', () => {}));
    // Read what comes (a socket never read would never see the client's end, and never close).
    c.resume();
    c.end('HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
  };
  const listen = (port: number) =>
    new Promise<boolean>((res) => {
      const s = createServer(answer);
      s.once('error', () => res(false));
      s.listen(port, '127.0.0.1', () => (servers.push(s), res(true)));
    });
  for (const port of ports) {
    for (let tries = 0; !(await listen(port)); tries++) {
      if (tries >= 25) {
        taken.push(port);
        break;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return {
    taken,
    close: async () => {
      for (const c of sockets) c.destroy();
      await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
    },
  };
}

/** The output after the first match of `re` (empty when there is none). */
const outputAfter = (stdout: string, re: RegExp) => {
  const m = re.exec(stdout);
  return m ? stdout.slice(m.index + m[0].length) : '';
};
const addresses = (list: Awaited<ReturnType<typeof instances>>) =>
  list
    .map((i) => `${i.name.replace(/^.*-/, '')}@${i.address?.replace(/^127\.0\.0\.1:/, '') ?? i.state}`)
    .sort()
    .join(' ');

type Load = ReturnType<typeof startLoad>;

const unreachable = /watch: cannot see the fleet: .*; looking again in 1 s, then less and less often \(every 30 s at most\) until it answers/;

/**
 * Stops the engine under a running watch and load, starts it again some
 * seconds after the watch said it cannot see the fleet (with `hold`, the
 * instances' ports are taken meanwhile), and waits for the fleet to be whole
 * again: the instances running and ready, nginx listing exactly their
 * addresses, and the watch saying so. Prints and checks what it took.
 */
async function restartUnder(
  t: { diagnostic(m: string): void },
  f: WrFleet,
  watch: RunningCli,
  load: Load,
  replicas: number,
  o: { hold?: boolean; held?: (h: { close(): Promise<void> }) => void } = {},
) {
  const before = await instances(f);
  await waitFor('requests through nginx before the stop', () => load.snapshot().length >= 40, 30_000);
  const stopAt = load.elapsed();
  await engine('stop');
  const stoppedAt = load.elapsed();
  await waitFor('the watch to say it cannot see the fleet', () => unreachable.test(watch.stdout()), 60_000);
  // The instances' ports go to something else meanwhile: they come back at new addresses (or not at all).
  if (o.hold) {
    const held = await holdPorts(before.map((i) => Number(i.address?.split(':')[1])));
    o.held?.(held);
    if (held.taken.length) t.diagnostic(`ports taken by something else already: ${held.taken.join(', ')}`);
  }
  await new Promise((r) => setTimeout(r, 5000));
  await engine('start');
  const backAt = load.elapsed();
  // The backoff (1 s doubling, at most 30 s) decides when the watch looks again: within 30 s and a look.
  const lookMs = await waitFor(
    'the watch to look at the fleet again',
    () => /watch: (found|whole|healing)/.test(outputAfter(watch.stdout(), unreachable)),
    90_000,
    100,
  );

  const nginxMs = await untilWhole(f, replicas, 'the fleet whole after the engine came back');
  const seen = /watch: (healed \(|whole at revision 1|whole again at revision 1)/;
  await waitFor('the watch to say the fleet is whole again', () => seen.test(outputAfter(watch.stdout(), unreachable)), 120_000);
  assert.equal(await notWhole(f, replicas), undefined, 'still whole once the watch said so');
  const wholeAt = load.elapsed();
  const back = await instances(f);
  const outage = outputAfter(watch.stdout(), unreachable);
  const heals = healsOf(outage);
  t.diagnostic(
    `engine stop took ${Math.round(stoppedAt - stopAt)} ms, down ${Math.round(backAt - stoppedAt)} ms; the watch looked again ${lookMs} ms after the engine answered, the fleet whole ${Math.round(wholeAt - backAt)} ms after it (nginx listing the instances after ${lookMs + nginxMs} ms)`,
  );
  t.diagnostic(
    `instances kept through the restart: ${back.filter((i) => before.some((b) => b.id === i.id)).length} of ${replicas}; name@port before ${addresses(before)}, after ${addresses(back)}`,
  );
  t.diagnostic(`heals after the outage: ${heals.map((h) => `${h.reasons} in ${h.seconds} s, ${h.writes} nginx reload(s)`).join('; ') || 'none'}`);
  assert.ok(heals.length <= 2, `one heal for the outage, maybe one more for what it healed too early:\n${watch.stdout()}`);
  // A heal that keeps the instances (moved, unready) makes one write for everything it found. One that replaces
  // instances makes two by design (docs/watch.md: the dead servers out at once, the replacements in once ready),
  // and one more for a replacement ready over two probe periods after the others it started with (a loaded machine).
  for (const h of heals)
    assert.ok(h.writes <= (/exited|missing/.test(h.reasons) ? 1 + replicas : 1), `nginx writes of one heal: ${JSON.stringify(h)}\n${watch.stdout()}`);
  assert.doesNotMatch(outage, /heal .* failed/, 'no heal failed once the engine answered');
  assert.equal(back.length, replicas, 'nothing left over: what did not come back was removed');
  return { before, back, stopAt, backAt, wholeAt, outage, heals };
}

describe('fleetroll watch, its engine restarted and itself killed', { timeout: guard(1_500_000) }, () => {
  it('the engine restarts under the watch (a VM reboot), the ports taken meanwhile: the watch backs off while it cannot see the fleet, then follows the instances Docker restarted to their new addresses with at most one nginx write per heal; no request fails once it is whole; events wake the watch again', async (t) => {
    const replicas = 3;
    const f = await deployedFleet('it-wr', replicas);
    // A look only every 300 s: what wakes the watch here is Docker's events, a stream that ended, and the backoff.
    const watch = await startCliUntil(['watch', '-f', f.file, '--interval', '300s', '--settle', '300ms'], /watch: whole at revision 1/);
    const load = startLoad(f.nginx.url, { getPerSecond: 20, postConcurrency: 1 });
    let held: { close(): Promise<void> } | undefined;
    try {
      const { before, back, stopAt, wholeAt } = await restartUnder(t, f, watch, load, replicas, { hold: true, held: (h) => (held = h) });
      assert.ok(
        back.some((i) => before.some((b) => b.id === i.id)),
        'Docker restarted the instances (restart: unless-stopped, the default)',
      );
      assert.ok(!back.some((i) => before.some((b) => b.address === i.address)), 'at new addresses: their ports were taken');

      // Load goes on: nothing may fail now that the fleet is whole.
      await waitFor('200 more requests through nginx', () => load.snapshot().filter((r) => r.t >= wholeAt).length >= 200, 120_000);

      // Events wake the watch again: its stream was opened anew after the outage.
      const killAt = load.elapsed();
      const killed = back[0]!;
      await rt!.docker.getContainer(killed.id).kill({ signal: 'SIGKILL' });
      const killMs = await untilWhole(f, replicas, `the fleet whole after SIGKILL of ${killed.name}, woken by the event`);
      // Exited, or (killed but not yet reaped when the event woke the watch) first seen unready: healed either way.
      const found = new RegExp(`watch: found: ${killed.name} (is exited|does not answer its readiness probe)`);
      await waitFor(
        'the watch to say it healed the killed instance',
        () => found.test(watch.stdout()) && /watch: healed \(/.test(outputAfter(watch.stdout(), found)),
        120_000,
      );
      const killHealed = load.elapsed();
      const records = await load.stop();

      const during = failedIn(records, stopAt, wholeAt);
      // Until the SIGKILL: requests sent once whole that had their answer before it. A request in flight at it counts with it.
      const afterWhole = failedIn(records, wholeAt).filter((r) => r.t + r.latencyMs < killAt);
      const atKill = failedOf(records).filter((r) => r.t + r.latencyMs >= killAt);
      t.diagnostic(`SIGKILL of an instance with the next look due in about 290 s: whole again after ${killMs} ms`);
      t.diagnostic(
        `requests through nginx: ${records.length}; failed from the engine's stop to whole: ${during.length} of ${records.filter((r) => r.t >= stopAt && r.t < wholeAt).length}; after whole until the SIGKILL: ${afterWhole.length} of ${records.filter((r) => r.t >= wholeAt && r.t + r.latencyMs < killAt).length}; in flight at the SIGKILL or after it: ${atKill.length} of ${records.filter((r) => r.t + r.latencyMs >= killAt).length} (${atKill.filter((r) => r.t < killAt).length} in flight at it)`,
      );
      assert.deepEqual(afterWhole, [], `no request fails once the fleet is whole again:\n  ${describeFailed(afterWhole)}\n${watch.stdout()}`);
      assert.ok(killMs < 200_000, `${killMs} ms: woken by Docker's event, not by the next look`);
      // A request the killed instance was serving fails with it; nginx takes it out at once and tries the others meanwhile.
      const late = atKill.filter((r) => r.t > killHealed);
      assert.deepEqual(late, [], `no request fails once the killed instance is replaced:\n  ${describeFailed(late)}`);
    } catch (err) {
      (err as Error).message += `\n--- watch:\n${watch.stdout()}`;
      throw err;
    } finally {
      await load.stop();
      await stopWatch(watch);
      await held?.close();
    }
  });

  it('an engine restart its containers do not survive (restart: "no"): the watch replaces every exited instance, nothing is left over, and no request fails once it is whole', async (t) => {
    const replicas = 2;
    const f = await deployedFleet('it-wn', replicas, {}, 'restart: "no"');
    const watch = await startCliUntil(['watch', '-f', f.file, '--interval', '2s', '--settle', '300ms'], /watch: whole at revision 1/);
    const load = startLoad(f.nginx.url, { getPerSecond: 20, postConcurrency: 1 });
    try {
      const { before, back, stopAt, wholeAt, outage } = await restartUnder(t, f, watch, load, replicas);
      assert.ok(!back.some((i) => before.some((b) => b.id === i.id)), 'every instance is a replacement');
      assert.match(outage, /watch: found: .* is exited/);
      assert.match(outage, /watch: healed \(exited/);
      await waitFor('200 more requests through nginx', () => load.snapshot().filter((r) => r.t >= wholeAt).length >= 200, 120_000);
      const records = await load.stop();
      const afterWhole = failedIn(records, wholeAt);
      t.diagnostic(
        `requests through nginx: ${records.length}; failed from the engine's stop to whole: ${failedIn(records, stopAt, wholeAt).length} of ${records.filter((r) => r.t >= stopAt && r.t < wholeAt).length}; after whole: ${afterWhole.length} of ${records.filter((r) => r.t >= wholeAt).length}`,
      );
      assert.deepEqual(afterWhole, [], `no request fails once the fleet is whole again:\n  ${describeFailed(afterWhole)}`);
    } catch (err) {
      (err as Error).message += `\n--- watch:\n${watch.stdout()}`;
      throw err;
    } finally {
      await load.stop();
      await stopWatch(watch);
    }
  });

  it('the watch SIGKILLed in the middle of a heal: the next watch recovers the heal, the fleet converges whole, nothing is left orphaned, and a deploy of the same revision works afterwards', async (t) => {
    const replicas = 3;
    // A replacement takes 5 s to be ready: the heal is killed with it started and not yet in nginx.
    const f = await deployedFleet('it-wk', replicas, { WARMUP_SECONDS: '5' });
    const args = ['watch', '-f', f.file, '--interval', '2s', '--settle', '300ms'];
    const first = await startCliUntil(args, /watch: whole at revision 1/);
    let second: RunningCli | undefined;
    const load = startLoad(f.nginx.url, { getPerSecond: 20, postConcurrency: 1 });
    try {
      const removed = (await instances(f))[0]!;
      await waitFor('requests through nginx before the fault', () => load.snapshot().length >= 40, 30_000);
      await rt!.docker.getContainer(removed.id).remove({ force: true });
      await waitFor('the watch to say it is healing', () => /watch: healing \(/.test(first.stdout()), 60_000);
      // Its replacement started (so the heal's journal has begun), not yet ready: the heal is in the middle.
      const started = /started (\S+) on wr at/;
      await waitFor('the heal to start a replacement', () => started.test(outputAfter(first.stdout(), /watch: healing \(/)), 60_000);
      first.child.kill('SIGKILL');
      const killedAt = load.elapsed();
      const end = await first.exited;
      assert.equal(end.code, null, 'killed');
      const orphan = started.exec(outputAfter(end.stdout, /watch: healing \(/))![1]!;
      const left = await instances(f);
      t.diagnostic(
        `watch SIGKILLed after: ${end.stdout.trim().split('\n').slice(-1)[0]}; left: ${addresses(left)}; upstream: ${parseUpstreamServers(
          readFileSync(f.nginx.upstreamFile, 'utf8'),
        )
          .map((x) => `${x.name.replace(/^.*-/, '')}${x.down ? ' down' : ''}`)
          .join(', ')}`,
      );

      const t0 = Date.now();
      second = await startCliUntil(args, /watch: watching /);
      await untilWhole(f, replicas, 'the fleet whole under the next watch');
      const convergeMs = Date.now() - t0;
      await waitFor('the next watch to heal, recovering the killed heal', () => /watch: healed \(/.test(second!.stdout()), 120_000);
      const healedMs = Date.now() - t0;
      assert.equal(await notWhole(f, replicas), undefined, second.stdout());
      assert.match(second.stdout(), /watch: took over from a watch that is gone \(.*pid \d+\)/, "the killed watch's lock is taken over, not waited for");
      assert.match(
        second.stdout(),
        /took over a stale lock of .*\(pid \d+, fleetroll watch\): its holder is gone/,
        "the killed heal's fleet lock is taken over, not waited for",
      );
      assert.match(second.stdout(), /recovering: the previous rollout \(\S+\) stopped without finishing/, second.stdout());
      assert.doesNotMatch(second.stdout(), /heal .* failed/, second.stdout());
      const now = await instances(f);
      assert.equal(now.length, replicas, `no container left orphaned: ${addresses(now)}`);
      t.diagnostic(
        `the replacement the killed heal had started (${orphan.replace(/^.*-/, '')}): ${now.some((i) => i.name === orphan) ? 'kept' : 'removed'}; now ${addresses(now)}`,
      );
      t.diagnostic(
        `after the SIGKILL a new watch: the fleet whole ${convergeMs} ms after the kill (nginx listing exactly the instances), its heal done ${healedMs} ms after it: ${second.stdout().match(/watch: healed \(.*/)?.[0]}`,
      );
      const stopped = await stopWatch(second);
      second = undefined;
      assert.equal(stopped?.code, 0, stopped && stopped.stdout + stopped.stderr);

      const once = await runCli(['watch', '-f', f.file, '--once', '--settle', '0s']);
      assert.equal(once.code, 0, once.stdout + once.stderr);
      assert.doesNotMatch(once.stdout, /watch: healing/, 'nothing left to heal');
      const deploy = await runCli(['deploy', '-f', f.file]);
      assert.equal(deploy.code, 0, deploy.stdout + deploy.stderr);
      assert.doesNotMatch(deploy.stdout, /recovering/, 'the journal was finished by the heal that recovered it');
      assert.equal(await notWhole(f, replicas), undefined);
      assert.equal((await instances(f)).length, replicas);
      const history = JSON.parse((await runCli(['history', '-f', f.file, '--json'])).stdout) as { number: number; outcome: string }[];
      assert.deepEqual(
        history.map((x) => [x.number, x.outcome]),
        [[1, 'complete']],
        'the same revision, still complete',
      );

      const records = await load.stop();
      const failed = failedOf(records);
      t.diagnostic(
        `requests through nginx: ${records.length}, failed: ${failed.length} (${failedIn(records, 0, killedAt).length} before the SIGKILL, ${failedIn(records, killedAt).length} after)`,
      );
      assert.deepEqual(
        failedIn(records, killedAt),
        [],
        `no request fails through the SIGKILL, the recovery and the deploy:\n  ${describeFailed(failedIn(records, killedAt))}`,
      );
    } catch (err) {
      (err as Error).message += `\n--- first watch:\n${first.stdout()}${second ? `\n--- next watch:\n${second.stdout()}` : ''}`;
      throw err;
    } finally {
      await load.stop();
      await stopWatch(first);
      await stopWatch(second);
    }
  });
});
