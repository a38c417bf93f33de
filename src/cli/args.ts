/**
 * Parsers for CLI flag values. Each names its flag and what is allowed, and
 * throws ValidationError (exit 2) before anything runs.
 */
import { fieldError } from '../errors.js';
import type { LogFormat } from './events.js';

export function parseCount(flag: string, min: number, max: number) {
  return (value: string): number => {
    if (!/^[0-9]+$/.test(value)) throw fieldError(flag, `must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
    const n = Number(value);
    if (n < min || n > max) throw fieldError(flag, `must be a whole number from ${min} to ${max}, got ${value}`);
    return n;
  };
}

export function parseSeconds(flag: string, max = 86400) {
  return (value: string): number => {
    if (!/^[0-9]+(\.[0-9]+)?$/.test(value)) throw fieldError(flag, `must be a number of seconds (e.g. 2 or 0.5), got ${JSON.stringify(value)}`);
    const n = Number(value);
    if (n > max) throw fieldError(flag, `must be at most ${max} seconds, got ${value}`);
    return n;
  };
}

export function parseFraction(flag: string) {
  return (value: string): number => {
    if (!/^[0-9]+(\.[0-9]+)?$/.test(value) || Number(value) > 1)
      throw fieldError(flag, `must be a fraction from 0 to 1 (e.g. 0.2 for ±20%), got ${JSON.stringify(value)}`);
    return Number(value);
  };
}

/** "90s", "5m", "1h", "1500ms" or plain seconds, to milliseconds. */
export function parseDuration(flag: string) {
  return (value: string): number => {
    const m = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)?$/.exec(value);
    if (!m) throw fieldError(flag, `must be a duration like 30s, 5m or 1h, got ${JSON.stringify(value)}`);
    const n = Number(m[1]);
    const unit = m[2] ?? 's';
    return Math.round(n * (unit === 'ms' ? 1 : unit === 's' ? 1000 : unit === 'm' ? 60_000 : 3_600_000));
  };
}

export function parseLogFormat(v: string): LogFormat {
  if (v !== 'text' && v !== 'json') throw fieldError('--log-format', `must be "text" or "json", got ${JSON.stringify(v)}`);
  return v;
}

export function parseNginxMode(v: string): 'reload' | 'dynamic' {
  if (v !== 'reload' && v !== 'dynamic')
    throw fieldError(
      '--nginx-mode',
      `must be "reload" (rewrite the upstream file and reload nginx) or "dynamic" (fleetroll's Lua balancer, no reload), got ${JSON.stringify(v)}`,
    );
  return v;
}

export type CostsSource = 'recorded' | 'nominal';

export function parseCostsSource(v: string): CostsSource {
  if (v !== 'recorded' && v !== 'nominal')
    throw fieldError(
      '--costs',
      `must be "recorded" (the fleet's measured step costs) or "nominal" (the timings given, Docker and nginx free), got ${JSON.stringify(v)}`,
    );
  return v;
}
