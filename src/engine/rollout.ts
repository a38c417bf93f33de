/**
 * One rollout, top to bottom: preflight → observe → preDeploy hook → the
 * controller (engine/controller.ts) until the fleet is complete → verify
 * every instance's version → postDeploy hook. On failure, onFailure decides:
 * leave the fleet as it is (pause, the default) or roll back (rollback.ts).
 *
 * The engine talks only to ports (src/ports.ts); deploy, rehearse,
 * experiments and simulate differ only in the ports they pass.
 */
import type { Fleet } from '../config/load.js';
import { PausedError, RolloutFailedError, type FailurePhase } from '../errors.js';
import { firstDeploySkips, stableRevisionRunning } from '../core/firstDeploy.js';
import { runGate, type GateDeps } from './analysis.js';
import { LABELS, systemClock, type Clock, type InstanceInfo, type Journal } from '../ports.js';
import { Controller, leftOut, hostFailure, type InService, type Instance } from './controller.js';
import type { DeployDeps, DeployOptions, DeployResult } from './types.js';
import type { EventSink } from './events.js';
import { followContainerEvents } from './followEvents.js';
import { hookContext, runHook, runOnFailure, type HookName } from './hooks.js';
import { HealthWatch, withHealth } from './health.js';
import { HostWork } from './hostWork.js';
import { randomSuffix } from './instances.js';
import { listFleet } from './observe.js';
import { pinImage } from './pin.js';
import { preflight } from './preflight.js';
import { revisionOf } from './revision.js';
import { previousFleet, rollBackIfAsked } from './rollback.js';
import { fixedCost, StepCostRecorder } from './stepCosts.js';
import { strategyTraits } from './strategies/index.js';
import { verify } from './verify.js';

export type { LoadBalancer } from './traffic.js';
export { instanceSpec, randomSuffix } from './instances.js';
export { InterruptedError, PausedError, RolloutFailedError } from '../errors.js';
export { healthOf } from './health.js';
export { systemClock } from '../ports.js';

export type { AccessLogOpener, DeployDeps, DeployOptions, DeployResult } from './types.js';

/**
 * A deploy, and with `deps.accessLogs` its health numbers (engine/health.ts),
 * measured over the whole of it, a rollback included: on the result, or on
 * the error it throws (`healthOf(err)`).
 */
export async function deploy(fleetIn: Fleet, deps: DeployDeps, options: DeployOptions = {}): Promise<DeployResult> {
  const clock = deps.clock ?? systemClock;
  if (options.startedAtMs === undefined && !deps.simulated) options = { ...options, startedAtMs: clock.now() };
  // The window opens before preflight and before the duration starts counting, so it covers all the deploy's duration reports.
  const watch = options.healthWatch ?? (deps.accessLogs ? await startHealthWatch(fleetIn, deps) : undefined);
  const t0 = clock.now();
  let fleet: Fleet;
  try {
    fleet = await prepare(fleetIn, deps, options);
  } catch (err) {
    throw watch ? withHealth(err, await watch.finish()) : err;
  }
  if (!options.prepared) options = { ...options, prepared: true, preparedMs: clock.now() - t0 };
  if (!watch) return deployOnce(fleet, deps, options);
  watch.retarget(revisionOf(fleet));
  let result: DeployResult;
  try {
    result = await deployOnce(
      fleet,
      { ...deps, accessLogs: undefined, events: watch.events(deps.events), trafficWindow: (from, to) => watch.window(from, to) },
      options,
    );
  } catch (err) {
    throw withHealth(err, await watch.finish());
  }
  // The health numbers are read after the last step: a cost of every deploy that reads access logs.
  const reportFrom = clock.now();
  const health = await watch.finish();
  return { ...result, health, costs: [...(result.costs ?? []), fixedCost('report', clock.now() - reportFrom)] };
}

/** A health watch over the fleet's access logs (deps.accessLogs must be set), started now. */
export function startHealthWatch(fleet: Fleet, deps: DeployDeps): Promise<HealthWatch> {
  return HealthWatch.start(fleet, revisionOf(fleet), deps.clock ?? systemClock, deps.accessLogs ?? [], () =>
    listFleet(fleet.service, deps.runtimes, fleet.hostParallelism, deps.adopted),
  );
}

/**
 * Preflight (engine/preflight.ts), then the image pinned to one build
 * (engine/pin.ts): the fleet a deploy runs, with `digest` and `pinnedImage`
 * set, and so the revision hash the deploy records. runManaged calls it
 * before it records the revision; deploy() calls it unless told it ran.
 */
export async function prepare(fleet: Fleet, deps: DeployDeps, options: DeployOptions = {}): Promise<Fleet> {
  if (deps.simulated || options.prepared) return fleet;
  const work = new HostWork(fleet.hostParallelism);
  const s = {
    runtimes: deps.runtimes,
    imageSource: deps.imageSource,
    clock: deps.clock ?? systemClock,
    emit: deps.events ?? (() => {}),
    copyImages: options.copyImages !== false,
    credentials: deps.credentials,
  };
  await preflight(fleet, deps.routers, work, s);
  return pinImage(fleet, work, s);
}

async function deployOnce(fleet: Fleet, deps: DeployDeps, options: DeployOptions): Promise<DeployResult> {
  const rollout = new Rollout(fleet, deps, options);
  try {
    return await rollout.run();
  } catch (err) {
    // A heal fails as it is: it keeps the revision it heals (no rollback), and hooks.onFailure is a deploy's.
    if (options.heal) throw err;
    // hooks.onFailure hears the outcome after the rollback, if there is one: rolled back or failed twice.
    // The rollback's target is a revision that ran before: its own preflight, its own build (from the instances' labels).
    const final = await rollBackIfAsked(err, rollout.fleet, rollout.previous, deps, options, (target, backDeps, cause) =>
      new Rollout(target, backDeps, { ...options, prepared: false, startedAtMs: undefined, changeCause: cause }).run(),
    ).catch((e: unknown) => e);
    await rollout.onFailure(final);
    throw final;
  }
}

class Rollout {
  private readonly clock: Clock;
  private readonly emit: EventSink;
  /** What this rollout's steps cost, for the fleet's state (engine/stepCosts.ts). */
  private readonly costs: StepCostRecorder;
  private readonly journal: Journal;
  private readonly revision: string;
  /** Every Docker call that changes a host goes through here: parallel between hosts, ordered on each. */
  private readonly work: HostWork;
  /** The fleet as it was before this rollout (its most common old revision), for a rollback. */
  previous: Fleet | undefined;

  constructor(
    readonly fleet: Fleet,
    private readonly deps: DeployDeps,
    private readonly options: DeployOptions = {},
  ) {
    this.clock = deps.clock ?? systemClock;
    this.costs = new StepCostRecorder(this.clock);
    const sink = this.costs.sink(deps.events);
    this.emit = (e) => {
      if (e.type === 'wave') this.waves = e.index;
      sink(e);
    };
    this.journal = deps.journal ?? (() => {});
    this.revision = revisionOf(fleet);
    this.work = new HostWork(fleet.hostParallelism);
  }

  async run(): Promise<DeployResult> {
    const t0 = this.clock.now();
    if (!this.deps.simulated && !this.options.prepared) {
      await preflight(this.fleet, this.deps.routers, this.work, {
        runtimes: this.deps.runtimes,
        imageSource: this.deps.imageSource,
        clock: this.clock,
        emit: this.emit,
        copyImages: this.options.copyImages !== false,
        credentials: this.deps.credentials,
      });
    }
    let infos = await this.list().catch((err: unknown) => {
      throw hostFailure(this.fleet, err);
    });
    const byRevision: Record<string, number> = {};
    for (const i of infos) byRevision[i.labels[LABELS.revision] ?? 'unknown'] = (byRevision[i.labels[LABELS.revision] ?? 'unknown'] ?? 0) + 1;
    this.emit({ type: 'observed', instances: infos.length, byRevision, revision: this.revision });
    this.ended = this.contextOf(infos, 0);
    this.previous = await previousFleet(this.fleet, this.revision, infos, this.deps);
    await this.hook('preDeploy', this.contextOf(infos, 0), 'preDeploy');
    if (await this.removeOrphans(infos)) infos = await this.list();
    // Found ready: it has been serving, so it counts as available (Kubernetes does the same for a pod it finds ready).
    const found = await Promise.all(
      infos.map(async (info) => ({
        info,
        ready: info.running && (await this.deps.prober.ready({ id: info.id, host: info.host, address: info.address }).catch(() => false)),
      })),
    );
    // A heal keeps a revision its deploy took through the strategy's steps: no gate, canary step or operator's answer (promote, undo, abort) again.
    this.skipsSteps = this.options.heal === true || this.skipsOnFirstDeploy(infos);
    const asked = this.options.heal ? {} : { switchBack: this.deps.switchBack, promoted: this.deps.promoted, aborted: this.deps.aborted };

    const controller = new Controller({
      fleet: this.fleet,
      revision: this.revision,
      runtimes: this.deps.runtimes,
      balancers: this.deps.routers,
      prober: this.deps.prober,
      clock: this.clock,
      emit: this.emit,
      journal: this.journal,
      work: this.work,
      nameSuffix: this.deps.nameSuffix ?? randomSuffix,
      changeCause: this.options.changeCause,
      signal: this.options.signal,
      paused: this.deps.paused,
      stateWrites: this.deps.stateWrites,
      containerEvents: (listener) =>
        followContainerEvents({
          runtimes: this.deps.runtimes,
          labels: { [LABELS.service]: this.fleet.service, [LABELS.managed]: 'true' },
          onEvent: listener,
          unfollowed: (host) =>
            this.emit({ type: 'info', message: `cannot follow Docker's events on ${host}: its containers are looked at every second instead` }),
        }),
      list: () => this.list(),
      postWave:
        this.fleet.hooks?.postWave || this.rollingGate() ? (boundary, instances, inService) => this.afterWave(boundary, instances, inService) : undefined,
      afterSwitch:
        this.deps.trafficWindow && this.fleet.analysis && strategyTraits(this.fleet.strategy).analysisGate === 'afterSwitch' && !this.skipsSteps
          ? (inService) => runGate(this.fleet.analysis!, this.gateDeps(), 'analysis after the switch', inService)
          : undefined,
      analyze: this.deps.trafficWindow
        ? (step, inService) => runGate(step.spec ?? this.fleet.analysis!, this.gateDeps(), `canary analysis (${step.path})`, inService)
        : undefined,
      skipCanarySteps: this.skipsSteps,
      prePromotion: this.fleet.hooks?.prePromotion ? (instances) => this.hook('prePromotion', this.contextOfInstances(instances, 1)) : undefined,
      ...asked,
      // Simulated with nobody to promote: an open pause costs nothing.
      skipOpenPauses: this.deps.simulated === true && !asked.promoted && !asked.aborted,
      recovering: this.deps.recovering,
      heal: this.options.heal,
      replace: this.options.heal ? this.options.replace : undefined,
      leftAlone: () => this.others,
      timing: this.deps.timing,
      inspect: this.deps.inspect,
    });
    this.ended = (name) => this.contextOfInstances(controller.instances(), this.waves)(name);
    // Everything before the first decision is the step cost `prepare` (DeployOptions.startedAtMs).
    const decidingAt = this.clock.now();
    let result;
    try {
      result = await controller.run(found);
    } catch (err) {
      this.controllerEnded = true;
      if (err instanceof RolloutFailedError && Array.isArray(err.details.stuck)) throw await this.withLogs(err, controller.instances());
      throw err;
    }
    this.controllerEnded = true;
    // The controller's end is the last progress: the final check may take what remains of the deadline from it.
    const instances = this.deps.simulated
      ? result.instances.map((i) => ({ name: i.id, host: i.host, address: i.address, version: this.fleet.version }))
      : await this.costs.timed('verify', () =>
          verify(this.fleet, this.revision, this.options.heal ? result.instances.filter((i) => !leftOut(i)) : result.instances, this.deps, this.emit, {
            clock: this.clock,
            budgetMs: this.fleet.progressDeadlineSeconds * 1000,
            signal: this.options.signal,
          }),
        );
    if (!this.deps.simulated || this.options.startedAtMs !== undefined)
      this.costs.fixed('prepare', decidingAt - (this.options.startedAtMs ?? t0 - (this.options.preparedMs ?? 0)));
    await this.hook('postDeploy', this.contextOfInstances(result.instances, result.waves));
    this.emit({ type: 'complete', revision: this.revision, version: this.fleet.version });
    this.journal('complete', 'end', { waves: result.waves, reloads: result.reloads });
    return {
      service: this.fleet.service,
      revision: this.revision,
      version: this.fleet.version,
      ...(this.fleet.digest ? { digest: this.fleet.digest } : {}),
      durationMs: this.clock.now() - t0 + (this.options.prepared ? (this.options.preparedMs ?? 0) : 0),
      waves: result.waves,
      reloads: result.reloads,
      instances,
      costs: this.costs.samples,
      ...(result.switchedAtMs !== undefined
        ? { switchedAt: new Date(result.switchedAtMs).toISOString(), switchIssuedAt: new Date(result.switchIssuedAtMs ?? result.switchedAtMs).toISOString() }
        : {}),
    };
  }

  /** The waves begun so far, and the fleet as the rollout last saw it: hooks.onFailure's context. */
  private waves = 0;
  private ended: (name: HookName) => Record<string, string> = (name) =>
    hookContext(this.fleet, this.revision, name, 0, { fresh: 0, freshAvailable: 0, old: 0 });

  /** hooks.onFailure, when the rollout has failed for good: never throws, never changes the outcome. */
  onFailure(err: unknown): Promise<void> {
    return runOnFailure(this.fleet.hooks, this.ended('onFailure'), err, this.emit);
  }

  /** The controller has ended (a gate still measuring stops). */
  private controllerEnded = false;
  /** The canary steps and analysis gates are skipped: a heal, or no stable revision was running when the rollout began (skipsOnFirstDeploy). */
  private skipsSteps = false;

  /** A strategy whose `analysis:` block gates the first wave (RollingUpdate): its new instances are the free canary. */
  private rollingGate(): boolean {
    return this.fleet.analysis !== undefined && strategyTraits(this.fleet.strategy).analysisGate === 'firstWave' && !this.skipsSteps;
  }

  /**
   * A first deploy (core/firstDeploy.ts): no instance of another revision
   * running, so nothing for a canary to share traffic with or for a gate to
   * compare with. True when that skips the canary steps or a gate; the
   * rollout then says what it skips, and journals it.
   */
  private skipsOnFirstDeploy(infos: readonly InstanceInfo[]): boolean {
    if (
      stableRevisionRunning(
        infos.map((i) => ({ revision: i.labels[LABELS.revision] ?? 'unknown', running: i.running })),
        this.revision,
      )
    )
      return false;
    const skips = firstDeploySkips(this.fleet.strategy, { analysis: this.fleet.analysis !== undefined, postWave: this.fleet.hooks?.postWave !== undefined });
    if (skips === undefined) return false;
    this.emit({ type: 'info', message: skips });
    this.journal('first-deploy', 'end', { strategy: this.fleet.strategy.type, replicas: this.fleet.replicas });
    return true;
  }

  private gateDeps(): GateDeps {
    const window = this.deps.trafficWindow;
    return {
      clock: this.clock,
      emit: this.emit,
      window: window ?? (async () => undefined),
      revision: this.revision,
      version: this.fleet.version,
      stopped: () => this.controllerEnded,
    };
  }

  /**
   * After a wave: the analysis gate after the first one (RollingUpdate with
   * `analysis:`; a failure rolls back, an inconclusive one pauses), then the
   * postWave hook.
   */
  private async afterWave(boundary: number, instances: readonly Instance[], inService: InService): Promise<void> {
    if (boundary === 1 && this.rollingGate()) {
      if (!this.deps.trafficWindow) {
        throw new RolloutFailedError(
          'analysis after the first wave: no load balancer names an access log that can be read (loadBalancers/N/nginx/accessLog)',
          'name the access log of each load balancer so the analysis can read it, or remove analysis: from the fleet file',
          { analysisFailed: false },
        );
      }
      const outcome = await runGate(this.fleet.analysis!, this.gateDeps(), 'analysis after the first wave', inService);
      if (outcome === 'inconclusive')
        throw new PausedError(
          'analysis after the first wave was inconclusive (onInconclusive: pause): paused with the first wave in service; `fleetroll resume` continues, a deploy of the previous image goes back',
        );
    }
    if (this.fleet.hooks?.postWave) await this.hook('postWave', this.contextOfInstances(instances, boundary));
  }

  /** A heal: the running containers of revisions the fleet's history does not know, at the last listing (the controller leaves them alone). */
  private others: InstanceInfo[] = [];

  /** The fleet's instances; a heal's, of the revisions it knows alone. */
  private async list(): Promise<InstanceInfo[]> {
    const all = await listFleet(this.fleet.service, this.deps.runtimes, this.fleet.hostParallelism, this.deps.adopted);
    const known = this.options.knownRevisions;
    if (!known) return all;
    const mine = (i: InstanceInfo) => known.includes(i.labels[LABELS.revision] ?? '');
    this.others = all.filter((i) => i.running && !mine(i));
    return all.filter(mine);
  }

  /**
   * Before the first step, remove what no rollout step would: containers
   * created but never started (only a crash between create and start leaves
   * them), and instances of the target revision that had already exited
   * when this rollout began (a host that restarted stops its containers).
   * Counted as new instances, the exited ones would block the rollout until
   * its deadline; removed, they are replaced under the strategy's limits.
   * Instances that exit during this rollout stay, as evidence for the
   * deadline report.
   */
  private async removeOrphans(infos: InstanceInfo[]): Promise<boolean> {
    const orphans = infos.filter((i) => i.state === 'created' || (!i.running && i.labels[LABELS.revision] === this.revision));
    const results = await Promise.allSettled(
      orphans.map((o) =>
        this.work.run(o.host, async () => {
          await this.deps.runtimes.get(o.host)?.remove(o.id);
          const why =
            o.state === 'created'
              ? 'created but never started (left by an interrupted rollout)'
              : `already ${o.state} when this rollout began (its host restarted, or it crashed); a new one replaces it`;
          this.emit({ type: 'info', message: `removed ${o.name} on ${o.host}: ${why}` });
          this.journal('orphan-removed', 'end', { name: o.name });
        }),
      ),
    );
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw hostFailure(this.fleet, failed.reason);
    return orphans.length > 0;
  }

  /**
   * The deadline report with each stuck instance's last log lines, and how
   * often Docker restarted it: with a restart policy a crashing instance
   * comes back again and again, never ready, like a pod in CrashLoopBackOff.
   */
  private async withLogs(err: RolloutFailedError, instances: readonly Instance[]): Promise<RolloutFailedError> {
    const stuck = new Set(err.details.stuck as string[]);
    let message = err.message;
    for (const i of instances) {
      if (!stuck.has(i.id) || !i.dockerId) continue;
      const rt = this.deps.runtimes.get(i.host);
      const restarts = (await rt?.inspect(i.dockerId).catch(() => undefined))?.restartCount ?? 0;
      const logs = (await rt?.logs(i.dockerId, 5).catch(() => ''))?.trim() ?? '';
      if (!logs && restarts === 0) continue;
      // The instance's line as the report wrote it: its probe may have said something else since.
      const line = new RegExp(`^(    ${escapeRegExp(`${i.id} on ${i.host}: `)}.*)$`, 'm');
      const looped = restarts > 0 ? ` (restarted ${restarts} time${restarts === 1 ? '' : 's'} by Docker: a crash loop)` : '';
      message = message.replace(
        line,
        (whole) => `${whole}${looped}${logs ? `\n      last log lines:\n        ${logs.split('\n').slice(-5).join('\n        ')}` : ''}`,
      );
    }
    return new RolloutFailedError(message, err.hint ?? '', err.details, err.phase);
  }

  private contextOf(infos: InstanceInfo[], wave: number): (name: HookName) => Record<string, string> {
    const fresh = infos.filter((i) => i.labels[LABELS.revision] === this.revision);
    return (name) => hookContext(this.fleet, this.revision, name, wave, { fresh: fresh.length, freshAvailable: 0, old: infos.length - fresh.length });
  }

  private contextOfInstances(instances: readonly Instance[], wave: number): (name: HookName) => Record<string, string> {
    const live = instances.filter((i) => i.phase !== 'draining' && i.phase !== 'stopping');
    const fresh = live.filter((i) => i.revision === this.revision);
    return (name) =>
      hookContext(this.fleet, this.revision, name, wave, {
        fresh: fresh.length,
        freshAvailable: fresh.filter((i) => i.phase === 'available').length,
        old: live.length - fresh.length,
      });
  }

  private async hook(name: HookName, context: (name: HookName) => Record<string, string>, phase: FailurePhase = 'rollout'): Promise<void> {
    const argv = this.fleet.hooks?.[name];
    if (!argv || this.options.heal === true) return; // the user's deploy steps; a heal keeps the revision they ran for
    const timeoutMs = (this.fleet.hooks?.timeoutSeconds ?? 60) * 1000;
    const ctx = context(name);
    const r = await runHook(name, argv, ctx, timeoutMs, this.emit);
    if (r.ok) return;
    this.emit({ type: 'failed', reason: `hook ${name} ${r.outcome}` });
    const changed =
      phase === 'preDeploy'
        ? 'nothing was changed'
        : name === 'prePromotion'
          ? 'no switch: all traffic stays on the old set'
          : `the rollout stopped after wave ${ctx.FLEETROLL_WAVE}`;
    const hint =
      phase === 'preDeploy'
        ? 'fix what the hook reports, then deploy again'
        : name === 'prePromotion'
          ? 'the new set is left running out of traffic (in the preview upstream, if any); deploy again to try again, or deploy the previous image to remove it'
          : 'the fleet is left as it is (unready instances are out of nginx); deploy again to continue, or deploy the previous image to go back';
    throw new RolloutFailedError(
      `hooks.${name} (${argv.join(' ')}) ${r.outcome}: ${changed}${r.output ? `\n  its last output:\n    ${r.output.split('\n').join('\n    ')}` : ''}`,
      hint,
      { hook: name },
      phase,
    );
  }
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
