/**
 * The `kubectl rollout` verbs for a fleet: history, undo, restart, status,
 * pause, resume, adopt, and the lock. Everything reads the fleet's state from
 * its first Docker host, so any machine pointed at the fleet sees the same.
 */
import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { loadFleet } from '../../config/load.js';
import { adoptFleet, findAdoptable, parseAdoptMatch } from '../../engine/adopt.js';
import { fleetForRecord } from '../../engine/records.js';
import { requestSwitchBack } from '../../engine/switchBack.js';
import { CRASH_LOOP_RESTARTS, publicRecord, statusReport, watchRollout, type StatusReport } from '../../engine/status.js';
import { FleetrollError, fieldError } from '../../errors.js';
import type { RevisionRecord } from '../../ports.js';
import { parseCount, parseDuration } from '../args.js';
import { fleetFileOption, jsonOption, withRolloutOptions } from '../options.js';
import { metricsLingerOption, metricsOption } from '../metrics.js';
import { healthRows } from '../health.js';
import { table, type Out } from '../output.js';
import { shortDigest } from '../../core/imageRef.js';
import { DockerRuntime } from '../../adapters/docker.js';
import { buildDeps, fleetHandles } from '../../wiring.js';

/** deploy.js (the whole engine) loads when a command rolls out, not for undo's switch-back or the read-only verbs. */
const executeRollout: typeof import('./deploy.js').executeRollout = async (...args) => (await import('./deploy.js')).executeRollout(...args);

async function context(file: string, loaded?: Awaited<ReturnType<typeof loadFleet>>) {
  const fleet = loaded ?? (await loadFleet(file));
  const deps = await buildDeps(fleet);
  const h = fleetHandles(fleet, deps);
  // The volume's state is on the first host: without it nothing can be read (with etcd, the hosts that answer are enough).
  const first = [...deps.runtimes.values()][0];
  if (first && !fleet.state?.etcd)
    await first.ping().catch((err: unknown) => {
      throw new FleetrollError(
        'E_DOCKER_UNREACHABLE',
        `${(err as Error).message}\n  it holds the fleet's state (the volume fleetroll-state-${fleet.service}): nothing can be read or deployed without it`,
        {
          hint: `bring ${fleet.hosts[0]?.name} back; then move the state to etcd (state.etcd, fleetroll state migrate --to etcd: docs/state.md) so that no host holds it`,
          cause: err,
        },
      );
    });
  return { fleet, deps, ...h };
}

const when = (iso: string | undefined) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '');

function describeRecord(r: RevisionRecord): string[][] {
  return [
    ['revision', String(r.number)],
    ['hash', r.hash],
    ['image', r.image],
    ['digest', r.digest ?? '(not pinned)'],
    ['version', r.version],
    ['port', r.port === undefined ? '(none)' : String(r.port)],
    ['env', [...Object.keys(r.env), ...Object.keys(r.envSecrets ?? {}).map((k) => `${k} (secret: ${r.envSecrets?.[k]?.source})`)].join(', ') || '(none)'],
    ...(r.secretFiles
      ? [
          [
            'secret files',
            Object.entries(r.secretFiles)
              .map(([k, f]) => `${k} (${f.path})`)
              .join(', '),
          ],
        ]
      : []),
    ...(r.restartedAt ? [['restarted at', r.restartedAt]] : []),
    ['change cause', r.changeCause],
    ['by', r.who],
    ['started', when(r.when)],
    ['outcome', r.outcome],
    ['finished', when(r.finishedAt)],
    ...switchRows(r),
    ['message', r.message ?? ''],
    ...(r.health ? healthRows(r.health) : []),
  ];
}

/** Blue-green's switch (and switch back) as in force, with how long after its issue that was. */
function switchRows(r: RevisionRecord): string[][] {
  const row = (label: string, inForce: string | undefined, issued: string | undefined): string[][] => {
    if (!inForce) return [];
    const lag = issued ? Date.parse(inForce) - Date.parse(issued) : NaN;
    return [[label, `${inForce.replace('T', ' ')}${Number.isFinite(lag) ? ` (in force; issued ${lag} ms before)` : ''}`]];
  };
  return [...row('switched at', r.switchedAt, r.switchIssuedAt), ...row('switched back at', r.switchedBackAt, r.switchBackIssuedAt)];
}

export function registerDay2(program: CommandUnknownOpts, out: Out): void {
  program
    .command('history')
    .description("list the fleet's revisions, newest last")
    .addOption(fleetFileOption())
    .option('--revision <n>', 'show one revision in full', parseCount('--revision', 1, 1_000_000))
    .addOption(jsonOption('print as JSON'))
    .addHelpText('after', '\nExamples:\n  $ fleetroll history -f fleet.yaml\n  $ fleetroll history -f fleet.yaml --revision 3')
    .action(async (o) => {
      const { store, fleet } = await context(o.file);
      const state = await store.read();
      const revisions = state?.revisions ?? [];
      if (o.revision !== undefined) {
        const r = revisions.find((x) => x.number === o.revision);
        if (!r)
          throw fieldError(
            '--revision',
            `no revision ${o.revision} in the history of ${fleet.service} (kept: ${revisions.map((x) => x.number).join(', ') || 'none'})`,
          );
        if (o.json) out.json(publicRecord(r));
        else out.line(table(['field', 'value'], describeRecord(r)));
        return;
      }
      if (o.json) {
        out.json(revisions.map(publicRecord));
        return;
      }
      if (revisions.length === 0) {
        out.line(`no revisions recorded for ${fleet.service} yet: run fleetroll deploy -f ${o.file}`);
        return;
      }
      out.line(
        table(
          ['REVISION', 'IMAGE', 'DIGEST', 'VERSION', 'OUTCOME', 'WHEN', 'BY', 'CHANGE-CAUSE'],
          revisions.map((r) => [String(r.number), r.image, r.digest ? shortDigest(r.digest) : '-', r.version, r.outcome, when(r.when), r.who, r.changeCause]),
        ),
      );
    });

  withRolloutOptions(
    program
      .command('undo')
      .description('roll back to the previous revision (or --to-revision N), as a new revision')
      .addOption(fleetFileOption('fleet file (strategy, hosts and load balancers come from it)'))
      .option('--to-revision <n>', 'the revision to go back to (default: the one before the current)', parseCount('--to-revision', 1, 1_000_000))
      .addHelpText(
        'after',
        '\nAn undo is itself a revision, so an undo can be undone.\n\nExamples:\n  $ fleetroll undo -f fleet.yaml\n  $ fleetroll undo -f fleet.yaml --to-revision 2',
      ),
  )
    .addOption(metricsOption())
    .addOption(metricsLingerOption())
    .action(async (o) => {
      const loaded = await loadFleet(o.file);
      if (o.toRevision === undefined) {
        // A blue-green rollout still keeping the old set: switching back is one reload, not a new
        // rollout. Users wait on this path, so it reaches only the state on the first host (no
        // routers, probes or ping); on an error the full context below says what is wrong.
        const first = loaded.hosts[0];
        const quick = first ? fleetHandles(loaded, { runtimes: new Map([[first.name, new DockerRuntime(first)]]) }) : undefined;
        const back = quick
          ? await requestSwitchBack(quick.store, { sleep: (ms) => new Promise((r) => setTimeout(r, ms)), timeoutMs: 60_000, asks: quick.asks }).catch(
              async (err: unknown) => {
                await context(o.file, loaded);
                throw err;
              },
            )
          : undefined;
        if (back?.outcome === 'switched back') {
          out.line(
            `switched back: the old set of ${loaded.service} serves again, ${back.ms} ms after this request (one reload per nginx); the running deploy removes the new set and ends as rolled back`,
          );
          return;
        }
        if (back?.outcome === 'too late') out.line('the blue-green rollout had already finished: undoing with a new rollout');
      }
      const { store, fleet } = await context(o.file, loaded);
      const stateNow = await store.read();
      const revisions = stateNow?.revisions ?? [];
      const current = revisions[revisions.length - 1];
      let target: RevisionRecord | undefined;
      if (o.toRevision !== undefined) {
        target = revisions.find((r) => r.number === o.toRevision);
        if (!target)
          throw fieldError(
            '--to-revision',
            `no revision ${o.toRevision} in the history of ${fleet.service} (kept: ${revisions.map((r) => r.number).join(', ') || 'none'})`,
          );
      } else {
        target = [...revisions].reverse().find((r) => r.hash !== current?.hash && r.outcome === 'complete');
        if (!target)
          throw new FleetrollError('E_NO_PREVIOUS', `nothing to undo: ${fleet.service} has no earlier completed revision`, { hint: 'see fleetroll history' });
      }
      await executeRollout(fleetForRecord(fleet, target, { state: stateNow }), out, o, {
        verb: `undo to revision ${target.number}:`,
        kind: 'undo',
        changeCause: `undo to revision ${target.number}`,
      });
    });

  withRolloutOptions(
    program
      .command('restart')
      .description('replace every instance with the same spec (e.g. to re-read a rotated secret), honouring the strategy')
      .addOption(fleetFileOption())
      .addHelpText('after', '\nExample:\n  $ fleetroll restart -f fleet.yaml'),
  )
    .addOption(metricsOption())
    .addOption(metricsLingerOption())
    .action(async (o) => {
      const { store, fleet } = await context(o.file);
      const restartedAt = new Date().toISOString();
      const state = await store.update((await store.image()) ?? fleet.image, (s) => {
        s.restartedAt = restartedAt;
      });
      // Restart what runs now: the latest revision's spec (deploy --image or undo may differ from the file).
      const latest = state.revisions[state.revisions.length - 1];
      const current = latest ? fleetForRecord(fleet, latest, { state }) : fleet;
      await executeRollout({ ...current, restartedAt }, out, o, { verb: 'restarting', kind: 'restart', changeCause: `restart at ${restartedAt}` });
    });

  program
    .command('pause')
    .description('stop a running rollout after its current wave, with the fleet consistent')
    .addOption(fleetFileOption())
    .action(async (o) => {
      const { store, fleet } = await context(o.file);
      await store.update((await store.image()) ?? fleet.image, (s) => {
        s.paused = true;
      });
      out.line(`paused ${fleet.service}: a running rollout stops after its current wave (exit 4); continue with fleetroll resume -f ${o.file}`);
    });

  program
    .command('promote')
    .description('let a blue-green rollout waiting for it (autoPromote: false) switch traffic to the new set')
    .addOption(fleetFileOption())
    .addHelpText(
      'after',
      '\nThe running deploy switches within a fraction of a second; it runs hooks.prePromotion first.\n\nExample:\n  $ fleetroll promote -f fleet.yaml',
    )
    .action(async (o) => {
      const { store, fleet } = await context(o.file);
      await store.update((await store.image()) ?? fleet.image, (s) => {
        s.promote = true;
      });
      out.line(`promoted ${fleet.service}: a rollout waiting for promotion switches traffic to the new set now`);
    });

  program
    .command('abort')
    .description('stop a running canary: all traffic back to the stable revision in one reload, the canary removed (exit 1 for the deploy)')
    .addOption(fleetFileOption())
    .addHelpText('after', '\nExample:\n  $ fleetroll abort -f fleet.yaml')
    .action(async (o) => {
      const { store, fleet } = await context(o.file);
      await store.update((await store.image()) ?? fleet.image, (s) => {
        s.abort = true;
      });
      out.line(`abort requested for ${fleet.service}: a running canary sends all traffic back to stable and removes its instances`);
    });

  withRolloutOptions(
    program.command('resume').description('continue a paused (or interrupted, or failed) rollout, from any machine').addOption(fleetFileOption()),
  )
    .addOption(metricsOption())
    .addOption(metricsLingerOption())
    .action(async (o) => {
      const { store, fleet } = await context(o.file);
      const state = await store.update((await store.image()) ?? fleet.image, (s) => {
        s.paused = false;
      });
      const latest = state.revisions[state.revisions.length - 1];
      if (!latest || latest.outcome === 'complete' || latest.outcome === 'rolled back') {
        out.line(`resumed ${fleet.service}: nothing in progress to continue${latest ? ` (revision ${latest.number} is ${latest.outcome})` : ''}`);
        return;
      }
      await executeRollout(fleetForRecord(fleet, latest, { state }), out, o, {
        verb: `resuming revision ${latest.number}:`,
        kind: 'resume',
        continueRevision: latest.number,
      });
    });

  program
    .command('status')
    .description('desired vs observed: instances per revision, readiness, upstreams, the last rollout')
    .addOption(fleetFileOption())
    .option('--watch', 'wait until the current rollout completes (exit 0) or fails (exit 1)')
    .option('--timeout <duration>', 'with --watch: give up after this long (exit 1)', parseDuration('--timeout'), 300_000)
    .addOption(jsonOption('print as JSON'))
    .addHelpText(
      'after',
      '\nExamples:\n  $ fleetroll status -f fleet.yaml\n  $ fleetroll status -f fleet.yaml --watch --timeout 5m   # in CI, after starting a deploy elsewhere',
    )
    .action(async (o) => {
      const ctx = await context(o.file);
      if (o.watch) {
        await watchRollout(ctx.store, o.timeout, (line) => out.line(line));
        return;
      }
      const report = await statusReport(ctx.fleet, ctx.deps, ctx, { hostsDown: 'name' });
      if (o.json) out.json(report);
      else printStatus(report, out);
    });

  program
    .command('adopt')
    .description('take running containers that fleetroll did not start under management, without restarting them')
    .addOption(fleetFileOption('fleet file (port, hosts, load balancers)'))
    .requiredOption('--match <label=value|name-pattern>', 'which running containers: a label (app=bookstore) or a name pattern (bookstore-api-*)')
    .addOption(jsonOption('print the result as JSON'))
    .addHelpText(
      'after',
      `
Docker cannot relabel a running container, so the adopted containers are
recorded in the fleet's state as revision 1 and the nginx upstream is written
from those that pass readiness. From then on \`fleetroll deploy\` replaces them
like any old revision.

Example (the compose demo):
  $ docker compose up -d
  $ fleetroll adopt -f examples/compose/fleet.yaml --match bookstore.role=api
  $ fleetroll deploy -f examples/compose/fleet.yaml --image fleetroll-example:1.1.0`,
    )
    .action(async (o) => {
      const match = parseAdoptMatch(o.match);
      const { fleet, deps, store, lock: l, who } = await context(o.file);
      const nginx = new Set(fleet.loadBalancers.map((lb) => lb.nginx.container).filter((c): c is string => Boolean(c)));
      const found = await findAdoptable(deps.runtimes, match, nginx);
      const r = await adoptFleet(fleet, deps, { store, lock: l, who }, found, { command: `fleetroll ${process.argv.slice(2).join(' ')}`, match: o.match });
      if (o.json) {
        out.json({ revision: r.revision.number, version: r.revision.version, instances: r.instances, reloads: r.reloads });
        return;
      }
      out.line(`adopted ${r.instances.length} container(s) as revision ${r.revision.number} of ${fleet.service} (version ${r.revision.version}):`);
      out.line(
        table(
          ['NAME', 'HOST', 'ADDRESS', 'VERSION', 'READY'],
          r.instances.map((i) => [i.name, i.host, i.address, i.version, i.ready ? 'yes (in the upstream)' : 'no']),
        ),
      );
      out.line(`next: fleetroll deploy -f ${o.file} replaces them with the fleet file's spec`);
    });

  const lock = program.command('lock').description('the per-fleet rollout lock');
  lock
    .command('status')
    .description('who holds the lock, since when, and whether its lease is still renewed')
    .addOption(fleetFileOption())
    .addOption(jsonOption('print as JSON'))
    .action(async (o) => {
      const { lock: l, fleet } = await context(o.file);
      const info = await l.info();
      if (o.json) out.json(info ?? null);
      else if (!info) out.line(`${fleet.service}: not locked`);
      else
        out.line(
          `${fleet.service}: locked by ${info.holder} (pid ${info.pid}) since ${info.started}: ${info.command}; lease renewed ${info.lease}${info.stale ? ' — STALE: the holder looks gone' : ''}`,
        );
    });
  lock
    .command('release')
    .description('remove the lock: only a stale one, unless --force')
    .addOption(fleetFileOption())
    .option('--force', 'remove it even though its holder still renews it')
    .action(async (o) => {
      const { lock: l, fleet } = await context(o.file);
      const info = await l.breakLock(o.force === true);
      out.line(info ? `released the lock of ${fleet.service} held by ${info.holder} (pid ${info.pid})` : `${fleet.service}: not locked`);
    });
}

function printStatus(r: StatusReport, out: Out): void {
  out.line(`service ${r.service}: desired ${r.desired.replicas} × ${r.desired.image} (version ${r.desired.version}, revision ${r.desired.revision})`);
  if (r.desired.digest) out.line(`image pinned to ${r.desired.digest}`);
  out.line(
    `observed: ${r.observed.instances} instance(s), ${r.observed.current} of the desired revision, ${r.observed.ready} ready${r.upToDate ? ' — up to date' : ''}`,
  );
  if (r.instances.length > 0) {
    const lbs = Object.keys(r.instances[0]?.upstreams ?? {});
    out.line(
      table(
        ['NAME', 'HOST', 'REVISION', 'VERSION', 'STATE', 'READY', 'RESTARTS', ...lbs.map((_, i) => `LB${i + 1}`)],
        r.instances.map((i) => [
          i.name,
          i.host,
          `${i.revision}${i.revision === r.desired.revision ? '*' : ''}`,
          i.version,
          i.state,
          i.ready ? 'yes' : 'no',
          `${i.restarts}${i.restarts >= CRASH_LOOP_RESTARTS ? ' (crash loop?)' : ''}`,
          ...lbs.map((l) => i.upstreams[l] ?? ''),
        ]),
        '  ',
      ),
    );
    lbs.forEach((l, i) => out.line(`  LB${i + 1}: ${l}`));
  }
  const l = r.lastRollout;
  out.line(
    l
      ? `last rollout: revision ${l.number} (${l.image}) ${l.outcome}, started ${when(l.when)} by ${l.who}${l.message ? `: ${l.message}` : ''}`
      : 'last rollout: none recorded',
  );
  const looping = r.instances.filter((i) => i.restarts >= CRASH_LOOP_RESTARTS);
  if (looping.length > 0)
    out.line(
      `crash loop: ${looping.map((i) => `${i.name} (${i.restarts} restarts)`).join(', ')} keep${looping.length === 1 ? 's' : ''} being restarted by Docker; see docker logs ${looping[0]!.name}`,
    );
  if (r.paused) out.line('PAUSED: a rollout stops before its next wave; fleetroll resume continues it');
  if (r.lock) out.line(`locked by ${r.lock.holder} (pid ${r.lock.pid}) since ${r.lock.started}${r.lock.stale ? ' (stale)' : ''}`);
  for (const [lb, strays] of Object.entries(r.strays))
    if (strays.length > 0)
      out.line(`${lb} sends users to ${strays.join(', ')}: no running instance has that address (fleetroll watch, or the next deploy, takes it out)`);
  for (const u of r.unreachable ?? []) out.line(`host ${u.host} does not answer (${u.error}): its instances are not shown`);
  const w = r.watch;
  if (w?.running)
    out.line(
      `watch: running (${w.holder}, pid ${w.pid}) since ${w.since}${w.lastAction ? `; last action ${when(w.lastAction.at)}: ${w.lastAction.what}` : '; no action yet'}`,
    );
  else
    out.line(
      `watch: not running${w ? ` (a watch of ${w.holder}, pid ${w.pid}, stopped without releasing its lock)` : ' (fleetroll watch -f <fleet> keeps the fleet whole between deploys)'}`,
    );
}
