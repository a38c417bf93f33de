/**
 * Bytes to complete lines, for every access log reader (a file read, docker
 * exec output, a log stream's frames): kept apart from the log format and
 * its parser (./accessLog.ts) because it knows nothing of what a line holds,
 * only where lines end.
 *
 * PURE: no I/O, no clock. Bytes are Uint8Array (a Node Buffer is one), decoded
 * with the global TextDecoder.
 */
const NEWLINE = 0x0a;
const CR = 0x0d;

/**
 * Turns chunks into complete lines. A chunk may end inside a line (a read
 * that caught nginx mid-write, a stream frame boundary) or inside a UTF-8
 * character: the rest is held until the next chunk, so a line is only ever
 * returned whole. Lines are returned without "\n" (and without a "\r" before it).
 *
 *   const s = new LineSplitter();
 *   s.push('{"a":1}\n{"b"')  → ['{"a":1}']
 *   s.push(':2}\n')          → ['{"b":2}']
 *
 * A line longer than maxLineBytes (default 64 KiB: nginx's largest request
 * line with default buffers is 8 KiB) is dropped up to its newline and
 * counted in `oversized`, so a stream without newlines cannot grow memory
 * without bound.
 */
export class LineSplitter {
  private held: Uint8Array[] = [];
  private heldBytes = 0;
  private skipping = false;
  private readonly decoder = new TextDecoder('utf-8');
  private readonly encoder = new TextEncoder();
  /** Lines dropped for exceeding maxLineBytes. */
  oversized = 0;

  constructor(private readonly maxLineBytes = 64 * 1024) {}

  /** Bytes of the partial line held for the next chunk. */
  get pendingBytes(): number {
    return this.heldBytes;
  }

  push(chunk: string | Uint8Array): string[] {
    const bytes = typeof chunk === 'string' ? this.encoder.encode(chunk) : chunk;
    const lines: string[] = [];
    let start = 0;
    for (let i = bytes.indexOf(NEWLINE); i !== -1; i = bytes.indexOf(NEWLINE, start)) {
      const piece = bytes.subarray(start, i);
      start = i + 1;
      if (this.skipping) {
        this.skipping = false;
        this.clear();
        continue;
      }
      if (this.heldBytes + piece.length > this.maxLineBytes) {
        this.oversized++;
        this.clear();
        continue;
      }
      lines.push(this.decode(piece));
    }
    const rest = bytes.subarray(start);
    if (rest.length > 0 && !this.skipping) {
      if (this.heldBytes + rest.length > this.maxLineBytes) {
        this.oversized++;
        this.skipping = true;
        this.clear();
      } else {
        // Copy (Buffer#slice would not): the caller may reuse its buffer.
        this.held.push(new Uint8Array(rest));
        this.heldBytes += rest.length;
      }
    }
    return lines;
  }

  /**
   * The held partial line as a last line, for a source that will never grow
   * again (a rotated file being closed). [] when nothing is held.
   */
  flush(): string[] {
    if (this.skipping) {
      this.skipping = false;
      return [];
    }
    if (this.heldBytes === 0) return [];
    return [this.decode(new Uint8Array(0))];
  }

  /** Forget the held partial line (its file was truncated under it). Returns the bytes dropped. */
  reset(): number {
    const n = this.heldBytes;
    this.skipping = false;
    this.clear();
    return n;
  }

  private clear(): void {
    this.held = [];
    this.heldBytes = 0;
  }

  private decode(tail: Uint8Array): string {
    let whole = tail;
    if (this.heldBytes > 0) {
      whole = new Uint8Array(this.heldBytes + tail.length);
      let at = 0;
      for (const h of this.held) {
        whole.set(h, at);
        at += h.length;
      }
      whole.set(tail, at);
      this.clear();
    }
    const end = whole.length > 0 && whole[whole.length - 1] === CR ? whole.length - 1 : whole.length;
    return this.decoder.decode(whole.subarray(0, end));
  }
}
