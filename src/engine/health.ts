/**
 * The deploy's health numbers (core/deployHealth.ts) measured around a
 * rollout: the load balancers' access logs are opened when the deploy starts
 * (each read from its current end: only the deploy window matters), read
 * every few seconds while it runs (so a rotation or a log stream's buffer
 * never holds much), and read once more when it ends; the lines are parsed
 * (core/accessLog.ts) and the figures computed over [start, end].
 *
 * Which address was which instance comes from the fleet as observed when the
 * deploy starts (the old instances) and from the rollout's own `started`
 * events (each new instance, with the time it took its address; the
 * revision is the one of the rollout that started it, from its `observed`
 * event, so a rollback's instances count as old).
 *
 * Measuring never fails a deploy: an access log that cannot be opened or
 * read makes the numbers "unavailable: <reason>" (or, when other logs were
 * read, lists it under `incomplete`), and the rollout goes on as if there
 * were no log at all.
 */
import type { Fleet } from '../config/load.js';
import { AccessLogParser, type AccessRecord } from '../core/accessLog.js';
import { ACCESS_LOG_HINT, healthReport, revisionWindow, type AddressOwner, type DeployHealthReport } from '../core/deployHealth.js';
import type { WindowStats } from '../core/logStats.js';
import { LABELS, type AccessLogSource, type Clock, type InstanceInfo } from '../ports.js';
import type { EventSink } from './events.js';
import type { AccessLogOpener } from './types.js';

/** How often the logs are read while the rollout runs. */
const POLL_MS = 5000;
/** Waited before the last read: a log stream delivers a line a few ms after nginx wrote it. */
const SETTLE_MS = 250;
/** Records kept at most (about 300 bytes each); past it the numbers say they are incomplete. */
const MAX_RECORDS = 2_000_000;

interface OpenLog {
  source: AccessLogSource;
  parser: AccessLogParser;
  records: AccessRecord[];
  /** Set when a read failed: the log's records are then left out of the numbers. */
  failed?: string;
}

const why = (err: unknown) => (err instanceof Error ? err.message : String(err)).split('\n')[0] ?? '';

/** Errors a deploy threw, with the numbers measured until then (for the CLI and the revision history). */
const healthOfError = new WeakMap<object, DeployHealthReport>();

/** The health numbers a failed (paused, interrupted) deploy measured, if any. */
export function healthOf(err: unknown): DeployHealthReport | undefined {
  return typeof err === 'object' && err !== null ? healthOfError.get(err) : undefined;
}

export function withHealth<E>(err: E, health: DeployHealthReport | undefined): E {
  if (health && typeof err === 'object' && err !== null) healthOfError.set(err, health);
  return err;
}

export class HealthWatch {
  private readonly owners: AddressOwner[] = [];
  /** The revision of the rollout running now (its `observed` event), for the instances it starts. */
  private current: string;
  private readonly logs: OpenLog[] = [];
  private readonly openFailures: string[] = [];
  private startMs = 0;
  private timer: { cancel(): void } | undefined;
  private reading: Promise<void> = Promise.resolve();
  private kept = 0;
  private overflow = false;
  private finished = false;
  /** Why the fleet could not be listed when the deploy started, if it could not. */
  private unobserved: string | undefined;

  private constructor(
    private readonly fleet: Fleet,
    private newRevision: string,
    private readonly clock: Clock,
    private readonly openers: readonly AccessLogOpener[],
  ) {
    this.current = newRevision;
  }

  /**
   * The revision the deploy rolls to, once known: a watch started before
   * preflight (so the window covers the whole deploy) learns it after the
   * image is pinned, since the digest is part of the hash.
   */
  retarget(revision: string): void {
    if (this.current === this.newRevision) this.current = revision;
    this.newRevision = revision;
  }

  /**
   * Opens every access log and notes the instances running now. Never
   * throws: what fails is reported in the numbers. `observe` lists the fleet
   * (its failure only costs the old instances' names).
   */
  static async start(
    fleet: Fleet,
    newRevision: string,
    clock: Clock,
    openers: readonly AccessLogOpener[],
    observe: () => Promise<InstanceInfo[]>,
  ): Promise<HealthWatch> {
    const w = new HealthWatch(fleet, newRevision, clock, openers);
    if (openers.length === 0) return w;
    const [infos] = await Promise.all([
      observe().catch((err: unknown) => {
        w.unobserved = why(err);
        return [] as InstanceInfo[];
      }),
      Promise.all(
        openers.map(async (o) => {
          try {
            const source = await o.open();
            const log: OpenLog = { source, parser: new AccessLogParser(), records: [] };
            w.logs.push(log);
            // The first read places a file reader at the file's end; a log stream returns what came since it opened.
            w.keep(log, await source.read());
          } catch (err) {
            w.openFailures.push(`${o.name}: ${why(err)}`);
          }
        }),
      ),
    ]);
    for (const i of infos) {
      if (i.address)
        w.owners.push({ address: i.address, name: i.name, revision: i.labels[LABELS.revision] ?? 'unknown', sinceMs: -Infinity, startedInDeploy: false });
    }
    w.startMs = clock.now();
    if (w.logs.length > 0) w.schedule();
    return w;
  }

  /** Wraps the deploy's event sink: `observed` and `started` events teach the watch who has which address. */
  events(sink: EventSink | undefined): EventSink {
    return (e) => {
      if (e.type === 'observed') this.current = e.revision;
      if (e.type === 'started' && e.address)
        this.owners.push({ address: e.address, name: e.name, revision: this.current, sinceMs: this.clock.now(), startedInDeploy: true });
      sink?.(e);
    };
  }

  /**
   * Per-revision figures for [fromMs, toMs), read fresh from the logs: what
   * the analysis gate compares. Undefined when no log can be read.
   */
  async window(fromMs: number, toMs: number): Promise<WindowStats | undefined> {
    await this.read();
    const usable = this.logs.filter((l) => l.failed === undefined);
    if (usable.length === 0) return undefined;
    return revisionWindow(
      usable.flatMap((l) => l.records),
      this.owners,
      fromMs,
      toMs,
    );
  }

  /** Whether any access log is open and readable (an analysis needs one). */
  get readable(): boolean {
    return this.logs.some((l) => l.failed === undefined);
  }

  /** Stops reading (after a last read), closes the logs and returns the numbers over [start, now]. Never throws. */
  /** Stops reading and closes the logs, if finish() never ran (the deploy did not start after all). */
  async abandon(): Promise<void> {
    if (this.finished) return;
    this.finished = true;
    this.timer?.cancel();
    await Promise.all(this.logs.map((l) => l.source.close().catch(() => undefined)));
  }

  async finish(): Promise<DeployHealthReport> {
    const endMs = this.clock.now();
    if (this.openers.length === 0) return { unavailable: 'no load balancer names its access log', hint: ACCESS_LOG_HINT };
    this.finished = true;
    this.timer?.cancel();
    if (this.logs.length > 0) {
      await this.clock.sleep(SETTLE_MS);
      await this.read();
    }
    await Promise.all(this.logs.map((l) => l.source.close().catch(() => undefined)));
    const usable = this.logs.filter((l) => l.failed === undefined);
    const failures = [...this.openFailures, ...this.logs.filter((l) => l.failed !== undefined).map((l) => `${l.source.name}: ${l.failed}`)];
    if (usable.length === 0) return { unavailable: failures.join('; ') || 'no access log could be read' };
    const incomplete = [
      ...failures.map((f) => `${f} (its requests are not counted)`),
      ...this.fleet.loadBalancers.flatMap((lb, i) =>
        lb.nginx.accessLog === undefined ? [`loadBalancers/${i}/nginx has no accessLog: its requests are not counted`] : [],
      ),
      ...usable
        .filter((l) => l.source.counters.lostRotations > 0)
        .map((l) => `${l.source.name}: ${l.source.counters.lostRotations} rotation(s) whose rest could not be read: requests may be missing`),
      ...(this.unobserved !== undefined
        ? [`the fleet could not be listed when the deploy started (${this.unobserved}): the old instances' requests count as unattributed`]
        : []),
      ...(this.overflow ? [`more than ${MAX_RECORDS} requests: only the first ${MAX_RECORDS} are counted`] : []),
    ];
    return healthReport({
      records: usable.flatMap((l) => l.records),
      startMs: this.startMs,
      endMs,
      owners: this.owners,
      newRevision: this.newRevision,
      sources: usable.map((l) => l.source.name),
      garbage: usable.reduce((n, l) => n + l.parser.counts.garbage, 0),
      incomplete,
    });
  }

  private schedule(): void {
    this.timer = this.clock.timer(POLL_MS, () => {
      if (this.finished) return;
      void this.read().then(() => {
        if (!this.finished) this.schedule();
      });
    });
  }

  /** One read of every log still good; reads never overlap. */
  private read(): Promise<void> {
    this.reading = this.reading.then(() =>
      Promise.all(
        this.logs.map(async (l) => {
          if (l.failed !== undefined) return;
          try {
            this.keep(l, await l.source.read());
          } catch (err) {
            l.failed = why(err);
          }
        }),
      ).then(() => undefined),
    );
    return this.reading;
  }

  private keep(l: OpenLog, lines: string[]): void {
    for (const r of l.parser.parse(lines)) {
      if (this.kept >= MAX_RECORDS) {
        this.overflow = true;
        return;
      }
      l.records.push(r);
      this.kept++;
    }
  }
}
