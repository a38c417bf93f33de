/**
 * Turns rollout events into what a person reads: one plain line per event,
 * stamped with the seconds since the rollout began. The same lines work on a
 * terminal and in a CI log; `--log-format json` gives pino JSON lines instead.
 */
import { createRequire } from 'node:module';
import type { pino as Pino } from 'pino';
import type { EventSink, RolloutEvent } from '../engine/events.js';

export type LogFormat = 'text' | 'json';

/**
 * ` in 0.42 s (file 40 ms, nginx -t 120 ms, ...)`: how long the change took
 * from its write to in force, and where the slowest load balancer's time
 * went, the waits and polls named beside the raw operations.
 */
function changeTime(e: Extract<RolloutEvent, { type: 'upstream' }>): string {
  if (e.ms === undefined) return '';
  const slowest = Object.entries(e.balancers ?? {}).sort((a, b) => b[1] - a[1])[0];
  const parts = slowest && e.parts?.[slowest[0]];
  const confirm =
    parts?.confirm === undefined
      ? undefined
      : `${parts.confirm} ms${parts.handover !== undefined ? ` (nginx's hand-over from old workers to new ${parts.handover} ms)` : ''}`;
  const named: [string, number | string | undefined][] = parts
    ? [
        ['file', parts.file],
        ['nginx -t', parts['nginx -t']],
        ["waiting for the old workers' list", parts.workers],
        ['nginx -s reload', parts['nginx -s reload']],
        ['SIGHUP', parts.SIGHUP],
        [e.reloadFree ? 'confirming the peers in force' : 'confirming new workers', confirm],
        ['in force in nginx after', parts.inForce],
      ]
    : [];
  const text = named.filter((x): x is [string, number | string] => x[1] !== undefined).map(([k, v]) => `${k} ${typeof v === 'number' ? `${v} ms` : v}`);
  const who = Object.keys(e.balancers ?? {}).length > 1 && slowest ? `; slowest ${slowest[0]}` : '';
  return ` in ${(e.ms / 1000).toFixed(2)} s${text.length ? ` (${text.join(', ')}${who})` : who ? ` (${who.slice(2)})` : ''}`;
}

export function describeEvent(e: RolloutEvent): string {
  switch (e.type) {
    case 'observed': {
      const revs = Object.entries(e.byRevision).map(([r, n]) => `${n} × ${r}${r === e.revision ? ' (target)' : ''}`);
      return `observed ${e.instances} instance(s)${revs.length ? `: ${revs.join(', ')}` : ''}; target revision ${e.revision}`;
    }
    case 'wave':
      return `wave ${e.index}: start ${e.start}, drain and stop ${e.stop.length}${e.stop.length ? ` (${e.stop.join(', ')})` : ''}`;
    case 'upstream': {
      if (e.action === 'restore') return 'upstream: nginx -t failed; files restored, nothing reloaded';
      const parts = [...(e.up.length ? [`in: ${e.up.join(', ')}`] : []), ...(e.down.length ? [`down: ${e.down.join(', ')}`] : [])];
      if (e.reloadFree) return `upstream: peers set, no reload (${parts.join('; ') || 'tidied'}) [${e.reloads} reloads]${changeTime(e)}`;
      return `upstream: nginx -t ok, reloaded (${parts.join('; ') || 'tidied'}) [${e.reloads} reloads]${changeTime(e)}`;
    }
    case 'draining':
      return `draining ${e.names.join(', ')} for ${e.seconds} s`;
    case 'drained':
      return e.reason === 'idle'
        ? `drained ${e.name}: no request left in flight after ${(e.ms / 1000).toFixed(2)} s, stopping it before drainSeconds`
        : `drained ${e.name}: drainSeconds over (${(e.ms / 1000).toFixed(2)} s) before every load balancer counted no request in flight`;
    case 'stopped':
      return `stopped and removed ${e.name} on ${e.host}`;
    case 'started':
      return `started ${e.name} on ${e.host}${e.address ? ` at ${e.address}` : ''}`;
    case 'ready':
      return `ready ${e.name}`;
    case 'available':
      return `available ${e.name} (ready for minReadySeconds)`;
    case 'verified':
      return `verified ${e.name} serves ${e.version}${e.tries !== undefined && e.tries > 1 ? ` (after ${e.tries} tries${e.elapsedMs !== undefined ? `, ${(e.elapsedMs / 1000).toFixed(1)} s` : ''})` : ''}`;
    case 'complete':
      return `complete: every instance runs revision ${e.revision} (version ${e.version})`;
    case 'failed':
      return `FAILED: ${e.reason}`;
    case 'notifyFailed':
      return `warning: ${e.webhook}: ${e.event} not delivered after ${e.tries} tr${e.tries === 1 ? 'y' : 'ies'} (${e.reason}); the rollout is not affected`;
    case 'awaitingPromote':
      return `the new set (${e.instances}) is available and out of traffic; waiting for \`fleetroll promote\` (autoPromote: false)`;
    case 'promoted':
      return `promoted (fleetroll promote)${e.skipsSteps ? ': the remaining canary steps are skipped' : ''}`;
    case 'switch':
      return `switch: ${e.instances} new instance(s) available${e.prePromotion ? ' and prePromotion passed' : ''}; every nginx gets the new set in one write and one reload`;
    case 'switched':
      return `switched: the old set (${e.kept}) is out of traffic and kept running ${e.seconds} s (scaleDownDelaySeconds); \`fleetroll undo\` switches back with one reload until then`;
    case 'switchingBack':
      return `switching back (${e.cause === 'analysis' ? 'the analysis failed' : 'fleetroll undo'}): the old set in, the new set down, in one reload`;
    case 'switchedBack':
      return `switched back: the old set serves again, ${e.ms} ms after the request (one reload)`;
    case 'canaryStep':
      if (e.kind === 'setWeight') return `canary step ${e.index}: setWeight ${e.weight} (${e.instances ?? 0} canary instance(s))`;
      if (e.kind === 'analysis') return `canary step ${e.index}: analysis at ${e.weight}%`;
      return e.seconds === undefined
        ? `canary step ${e.index}: paused at ${e.weight}% until \`fleetroll promote\` (or \`fleetroll abort\`)`
        : `canary step ${e.index}: pause ${e.seconds} s at ${e.weight}%`;
    case 'canaryHeld':
      return `canary step ${e.index}: analysis inconclusive; holding ${e.weight}% until \`fleetroll promote\` or \`fleetroll abort\``;
    case 'canaryDone':
      return `canary steps done${e.promoted ? ' (promoted)' : ''}: a rolling update replaces the stable set; traffic follows the instances in service`;
    case 'canaryAborted':
      return `aborting the canary (${e.reason}): all traffic back to stable in one reload; the canary instances are removed`;
    case 'rollingBack':
      return `rolling back to revision ${e.revision} (${e.image}, version ${e.version})`;
    case 'info':
      return e.message;
  }
}

/** A sink printing to the given stream (stderr when stdout carries --json). */
export function eventPrinter(format: LogFormat, stream: NodeJS.WritableStream, now: () => number = Date.now): EventSink {
  if (format === 'json') {
    // pino is loaded only for --log-format json, not whenever a command that may log starts.
    const { pino } = createRequire(import.meta.url)('pino') as { pino: typeof Pino };
    const log = pino({ base: undefined, messageKey: 'msg' }, stream as unknown as Pino.DestinationStream);
    return (e) => log.info({ event: e }, describeEvent(e));
  }
  const t0 = now();
  const line = (e: RolloutEvent) => `[${((now() - t0) / 1000).toFixed(1).padStart(6)}s] ${describeEvent(e)}`;
  if (!(stream as NodeJS.WriteStream).isTTY) return (e) => stream.write(`${line(e)}\n`);
  // On a terminal: the same lines scroll by, and one status line under them
  // shows the fleet at a glance, redrawn after every event.
  const status = new FleetStatus();
  let shown = false;
  return (e) => {
    status.apply(e);
    stream.write(`${shown ? '\r\x1b[K' : ''}${line(e)}\n`);
    // The status line only exists while a rollout is under way.
    shown = status.active && e.type !== 'complete' && e.type !== 'failed';
    if (e.type === 'complete' || e.type === 'failed') status.active = false;
    if (shown) stream.write(`\x1b[7m ${status.render()} \x1b[0m`);
  };
}

/** What the live view knows of the fleet, rebuilt from events alone. */
export class FleetStatus {
  private target = '';
  private old = 0;
  private fresh = 0;
  private ready = 0;
  private draining = 0;
  private wave = 0;
  private reloads = 0;
  /** Between `observed` and `complete`/`failed`. */
  active = false;

  apply(e: RolloutEvent): void {
    switch (e.type) {
      case 'observed':
        this.active = true;
        this.target = e.revision;
        this.fresh = e.byRevision[e.revision] ?? 0;
        this.ready = this.fresh;
        this.old = e.instances - this.fresh;
        break;
      case 'wave':
        this.wave = e.index;
        break;
      case 'started':
        this.fresh++;
        break;
      case 'ready':
        this.ready++;
        break;
      case 'draining':
        this.draining += e.names.length;
        break;
      case 'stopped':
        if (e.name.includes(`-${this.target.slice(0, 7)}-`)) {
          this.fresh--;
          this.ready--;
        } else {
          this.old--;
          this.draining = Math.max(0, this.draining - 1);
        }
        break;
      case 'upstream':
        this.reloads = e.reloads;
        break;
      default:
        break;
    }
  }

  render(): string {
    return `wave ${this.wave} | old ${this.old}${this.draining ? ` (${this.draining} draining)` : ''} | new ${this.fresh} (${this.ready} ready) | ${this.reloads} reloads`;
  }
}
