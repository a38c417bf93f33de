/**
 * What every access log reader (./accessLog.ts lists them) shares: the
 * options of a follower, its counters, and the "overlap" check, the bytes
 * before the offset that are read again to tell that the file is still the
 * one being read. One copy, so the readers cannot drift apart on it.
 */
import type { AccessLogCounters } from '../ports.js';

/** Bytes before the offset that are read again to check the file is the same. */
export const OVERLAP = 64;
export const CHUNK = 256 * 1024;

export interface FileFollowOptions {
  /** 'end' (default): only lines written after the first read; 'start': the whole file. */
  from?: 'start' | 'end';
  /** Longest line kept (default 64 KiB); longer ones are dropped and counted. */
  maxLineBytes?: number;
  /** Unchanged reads after which a rotated-away file is closed (default 2). */
  quietReadsBeforeClose?: number;
  /** Most bytes one read() takes from one file (default 16 MiB); the rest waits for the next read. */
  maxBytesPerRead?: number;
}

export const newCounters = (): AccessLogCounters => ({ rotations: 0, truncations: 0, lostRotations: 0, skippedLines: 0 });

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The last up to OVERLAP bytes of `prev` followed by `next`. */
export function tailBytes(prev: Uint8Array, next: Uint8Array): Uint8Array {
  if (next.length >= OVERLAP) return next.slice(next.length - OVERLAP);
  const keep = Math.min(prev.length, OVERLAP - next.length);
  const out = new Uint8Array(keep + next.length);
  out.set(prev.subarray(prev.length - keep), 0);
  out.set(next, keep);
  return out;
}
