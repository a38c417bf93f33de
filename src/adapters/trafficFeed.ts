/**
 * The access logs as a feed of parsed records for the metrics server: the
 * same readers (./accessLog.ts) and parser (core/accessLog.ts) the deploy's
 * health numbers use, each opened at the log's current end and read every
 * `everyMs`. A second reader of the same log is independent of the deploy's
 * own (its own offset or stream), so neither disturbs the other.
 *
 * Like the health numbers, the feed never fails its command: a log that cannot
 * be opened or read is left out and its reason kept in `problems`.
 */
import { AccessLogParser, type AccessRecord } from '../core/accessLog.js';
import type { AccessLogSource } from '../ports.js';

/** The shape of engine/types.ts AccessLogOpener (adapters do not import the engine). */
export interface LogOpener {
  readonly name: string;
  open(): Promise<AccessLogSource>;
}

export class TrafficFeed {
  readonly problems: string[] = [];
  private readonly sources: { source: AccessLogSource; parser: AccessLogParser }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private reading: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(
    private readonly openers: readonly LogOpener[],
    private readonly onRecords: (records: AccessRecord[]) => void,
    private readonly everyMs = 1000,
  ) {}

  async start(): Promise<void> {
    await Promise.all(
      this.openers.map(async (o) => {
        try {
          const source = await o.open();
          if (this.closed) return void (await source.close().catch(() => {}));
          // The first read places a file reader at the end: only what comes from now on counts.
          await source.read();
          this.sources.push({ source, parser: new AccessLogParser() });
        } catch (err) {
          this.problems.push(`${o.name}: ${(err as Error).message.split('\n')[0]}`);
        }
      }),
    );
    if (this.sources.length > 0 && !this.closed) this.schedule();
  }

  private schedule(): void {
    this.timer = setTimeout(() => {
      this.reading = this.readAll().then(() => {
        if (!this.closed) this.schedule();
      });
    }, this.everyMs);
  }

  private async readAll(): Promise<void> {
    for (const s of [...this.sources]) {
      try {
        const records = s.parser.parse(await s.source.read());
        if (records.length > 0 && !this.closed) this.onRecords(records);
      } catch (err) {
        this.problems.push(`${s.source.name}: ${(err as Error).message.split('\n')[0]}`);
        this.sources.splice(this.sources.indexOf(s), 1);
        await s.source.close().catch(() => {});
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.reading;
    await Promise.all(this.sources.map((s) => s.source.close().catch(() => {})));
  }
}
