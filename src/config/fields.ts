/**
 * The field builders the fleet file's schemas share (config/schema.ts,
 * config/strategy.ts), so that a value out of range reads the same wherever
 * it is written, and zodIssues, which turns any of fleetroll's zod errors
 * into field issues with slash paths.
 */
import type * as zod from 'zod';
import * as z from './zod.js';

export const pattern = (re: RegExp, what: string) =>
  z
    .string({ error: (i) => (i.input === undefined ? 'is required' : `must be a string (${what})`) })
    .regex(re, { error: (i) => `must be ${what}, got ${JSON.stringify(i.input)}` });

export const int = (min: number, max: number, what = 'an integer') =>
  z
    .number({ error: (i) => (i.input === undefined ? 'is required' : `must be ${what} from ${min} to ${max}, got ${JSON.stringify(i.input)}`) })
    .int({ error: (i) => `must be ${what} from ${min} to ${max}, got ${JSON.stringify(i.input)}` })
    .min(min, { error: (i) => `must be ${what} from ${min} to ${max}, got ${JSON.stringify(i.input)}` })
    .max(max, { error: (i) => `must be ${what} from ${min} to ${max}, got ${JSON.stringify(i.input)}` });

export const seconds = (min: number, max: number) =>
  z
    .number({ error: (i) => `must be a number of seconds from ${min} to ${max}, got ${JSON.stringify(i.input)}` })
    .min(min, { error: (i) => `must be a number of seconds from ${min} to ${max}, got ${JSON.stringify(i.input)}` })
    .max(max, { error: (i) => `must be a number of seconds from ${min} to ${max}, got ${JSON.stringify(i.input)}` });

/** zod issues as slash paths, e.g. `loadBalancers/0/nginx/upstream: must be ...`. */
export function zodIssues(error: zod.ZodError, prefix = ''): { path: string; message: string }[] {
  return error.issues.map((i) => {
    const path = [prefix, ...i.path.map(String)].filter((s) => s !== '').join('/');
    if (i.code === 'invalid_key') {
      // Other mappings' key schemas (secretFiles, ...) say what their keys must be.
      if (i.path[0] !== 'env' && i.issues[0] !== undefined) return { path, message: i.issues[0].message };
      return { path, message: 'env names must be letters, digits and "_", not starting with a digit' };
    }
    if (i.code === 'unrecognized_keys') {
      return { path, message: `unknown field${i.keys.length > 1 ? 's' : ''} ${i.keys.map((k) => JSON.stringify(k)).join(', ')}` };
    }
    return { path, message: i.message };
  });
}
