/**
 * The access log reader for nginx logging to the container's output: the
 * container's log stream, fleetroll_json lines only, reopened after nginx
 * restarts without returning a line twice (./accessLog.ts describes every
 * reader). Its own file: a stream, not a file, so none of the overlap rules
 * apply, only the counters.
 */
import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { parseAccessLine } from '../core/accessLog.js';
import { LineSplitter } from '../core/lineSplitter.js';
import { FleetrollError } from '../errors.js';
import type { AccessLogSource } from '../ports.js';
import { newCounters } from './accessLogShared.js';
import { engineMessage, statusOf } from './dockerRetry.js';

export interface LogStreamOptions {
  /** Lines logged from this time on (ms since the epoch); default: now. */
  sinceMs?: number;
  /** Lines kept between two reads at most (default 500 000); more are dropped and counted. */
  maxBufferedLines?: number;
  maxLineBytes?: number;
}

/** Docker's RFC 3339 timestamp (nanoseconds, trailing zeros trimmed) → a key that sorts as text. */
function timestampKey(ts: string): string | undefined {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(ts);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(9, '0')}` : undefined;
}

/** "2024-04-05T12:34:56.123456789" → "1712320496.123456789", Docker's `since` with nanoseconds. */
function sinceOf(key: string): string {
  const [date, nanos] = key.split('.') as [string, string];
  return `${Math.floor(Date.parse(`${date}Z`) / 1000)}.${nanos}`;
}

/**
 * The container's log stream, fleetroll_json lines only. Open it with
 * `ContainerLogStreamAccessLog.open(docker, container)` when the rollout
 * starts; read() then returns what arrived since the last read.
 */
export class ContainerLogStreamAccessLog implements AccessLogSource {
  readonly name: string;
  readonly counters = newCounters();
  private buffered: string[] = [];
  private stream: NodeJS.ReadableStream | undefined;
  private ended = false;
  private closed = false;
  private failure: Error | undefined;
  /**
   * Per output stream (stdout, stderr: their timestamps interleave out of
   * order), the last timestamp seen and the lines seen at it: what a reopened
   * stream repeats.
   */
  private readonly seen = { stdout: { lastKey: '', atLastKey: new Set<string>() }, stderr: { lastKey: '', atLastKey: new Set<string>() } };
  private readonly maxBuffered: number;

  private constructor(
    private readonly docker: Dockerode,
    readonly container: string,
    private readonly tty: boolean,
    private readonly opts: LogStreamOptions,
  ) {
    this.name = `log stream of container ${container}`;
    this.maxBuffered = opts.maxBufferedLines ?? 500_000;
  }

  static async open(docker: Dockerode, container: string, opts: LogStreamOptions = {}): Promise<ContainerLogStreamAccessLog> {
    let tty: boolean;
    try {
      tty = Boolean((await docker.getContainer(container).inspect()).Config?.Tty);
    } catch (err) {
      const what = statusOf(err) === 404 ? 'it does not exist' : engineMessage(err);
      throw new FleetrollError('E_ACCESS_LOG', `following the log stream of container ${container}: ${what}`, { cause: err });
    }
    const source = new ContainerLogStreamAccessLog(docker, container, tty, opts);
    await source.connect(String((opts.sinceMs ?? Date.now()) / 1000));
    return source;
  }

  async read(): Promise<string[]> {
    if (this.closed) return [];
    if (this.ended) {
      // nginx restarted (or the engine dropped the stream): pick up where the earliest last line was.
      this.ended = false;
      const keys = [this.seen.stdout.lastKey, this.seen.stderr.lastKey].filter((k) => k !== '').sort();
      await this.connect(keys[0] ? sinceOf(keys[0]) : String((this.opts.sinceMs ?? Date.now()) / 1000));
    }
    const out = this.buffered;
    this.buffered = [];
    if (out.length === 0 && this.failure) {
      const err = this.failure;
      this.failure = undefined;
      throw new FleetrollError('E_ACCESS_LOG', `following the ${this.name}: ${engineMessage(err)}`, { cause: err });
    }
    return out;
  }

  async close(): Promise<void> {
    this.closed = true;
    const s = this.stream as (NodeJS.ReadableStream & { destroy?: () => void }) | undefined;
    s?.destroy?.();
    this.stream = undefined;
    this.buffered = [];
  }

  private async connect(since: string): Promise<void> {
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.docker.getContainer(this.container).logs({ follow: true, stdout: true, stderr: true, timestamps: true, since });
    } catch (err) {
      throw new FleetrollError('E_ACCESS_LOG', `following the ${this.name}: ${engineMessage(err)}`, { cause: err });
    }
    this.stream = stream;
    // stdout and stderr frames interleave: one splitter each, or a line could be cut by the other stream.
    const sink = (from: 'stdout' | 'stderr') => {
      const splitter = new LineSplitter(this.opts.maxLineBytes);
      return {
        write: (c: Buffer) => {
          for (const l of splitter.push(c)) this.line(l, from);
          this.counters.skippedLines += splitter.oversized;
          splitter.oversized = 0;
          return true;
        },
      } as unknown as NodeJS.WritableStream;
    };
    const stop = (err?: Error) => {
      if (this.stream !== stream) return;
      this.ended = true;
      if (err && !this.closed) this.failure = err;
    };
    stream.on('end', () => stop());
    stream.on('close', () => stop());
    stream.on('error', (e: Error) => stop(e));
    if (this.tty) {
      const out = sink('stdout');
      stream.on('data', (c: Buffer) => out.write(c));
    } else this.docker.modem.demuxStream(stream as Readable, sink('stdout'), sink('stderr'));
  }

  /** One "<timestamp> <text>" line from Docker. */
  private line(raw: string, from: 'stdout' | 'stderr'): void {
    const space = raw.indexOf(' ');
    const key = space > 0 ? timestampKey(raw.slice(0, space)) : undefined;
    const text = key === undefined ? raw : raw.slice(space + 1);
    if (key !== undefined) {
      // A reopened stream starts at the last timestamp seen: drop what came already.
      const seen = this.seen[from];
      if (key < seen.lastKey || (key === seen.lastKey && seen.atLastKey.has(text))) return;
      if (key !== seen.lastKey) {
        seen.lastKey = key;
        seen.atLastKey = new Set();
      }
      seen.atLastKey.add(text);
    }
    if (!parseAccessLine(text).ok) {
      this.counters.skippedLines++;
      return;
    }
    if (this.buffered.length >= this.maxBuffered) {
      this.counters.skippedLines++;
      return;
    }
    this.buffered.push(text);
  }
}
