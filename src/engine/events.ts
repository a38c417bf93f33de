/**
 * What a rollout reports while it runs. The engine emits these; the CLI turns
 * them into lines for people, JSON logs, or a live view.
 */
export type RolloutEvent =
  | { type: 'observed'; instances: number; byRevision: Record<string, number>; revision: string }
  | { type: 'wave'; index: number; start: number; stop: string[] }
  | { type: 'upstream'; action: 'drain' | 'enable' | 'final' | 'restore'; down: string[]; up: string[]; reloads: number }
  | { type: 'draining'; names: string[]; seconds: number }
  | { type: 'stopped'; name: string; host: string }
  | { type: 'started'; name: string; host: string; address?: string | undefined }
  | { type: 'ready'; name: string }
  | { type: 'available'; name: string }
  /** `tries` and `elapsedMs`: how many probes the final check needed and how long they took (absent in logs from before it retried). */
  | { type: 'verified'; name: string; version: string; tries?: number | undefined; elapsedMs?: number | undefined }
  | { type: 'complete'; revision: string; version: string }
  | { type: 'failed'; reason: string }
  | { type: 'info'; message: string };

export type EventSink = (e: RolloutEvent) => void;
