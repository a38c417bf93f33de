/**
 * What the container fields' schemas share: the character sets of names
 * and paths, sizes and argument lists, compose's "one or many" and "map or
 * list" spellings, and how a transform reports a problem at its path.
 */
import type * as zod from 'zod';
import * as z from './zod.js';

export const got = (v: unknown) => `got ${JSON.stringify(v)}`;

/** Absolute paths: no NUL, no "..", nothing Docker would read as options (":" and "," separate them in the short syntax). */
export const ABS_CONTAINER_PATH_RE = /^\/[A-Za-z0-9._\-/@+=~ ]*$/;
export const VOLUME_NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
export const USER_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$/;
export const LABEL_KEY_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/]{0,254}$/;
export const CAP_RE = /^(?:ALL|(?:CAP_)?[A-Z][A-Z0-9_]{1,40})$/;
export const SIGNAL_RE = /^(?:SIG)?[A-Z][A-Z0-9+-]{1,15}$|^[0-9]{1,2}$/;
export const DRIVER_RE = /^[a-z0-9][a-z0-9_.\-/]{0,63}$/;
export const HOSTNAME_RE = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?$/;
export const IP_RE = /^(?:(?:25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})\.){3}(?:25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})$|^[0-9A-Fa-f:]{2,39}$|^host-gateway$/;
export const SYSCTL_RE = /^[a-z][a-z0-9_.\-/]{0,127}$/;
export const NETWORK_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
export const ULIMIT_RE = /^[a-z]{2,16}$/;
/** A value Docker takes as one argument: printable, no NUL or newline. */
export const ARG_RE = /^[^\0\n\r]*$/;

export function issue(ctx: zod.core.$RefinementCtx, message: string, path: (string | number)[] = []): never {
  ctx.addIssue({ code: 'custom', message, path });
  return z.NEVER as never;
}

/** "256m", "1g", "512k", "100b" or a number of bytes, as compose reads sizes. */
export function parseBytes(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isInteger(v) && v >= 0 ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*([bkmg]?)b?$/i.exec(v.trim());
  if (!m) return undefined;
  const unit = { '': 1, b: 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 }[m[2]!.toLowerCase() as '' | 'b' | 'k' | 'm' | 'g'];
  return Math.round(Number(m[1]) * unit);
}

export const bytes = (what: string, min = 0) =>
  z.union([z.number(), z.string()], { error: (i) => `must be ${what}: bytes or a size like "256m", "1g", ${got(i.input)}` }).transform((v, ctx) => {
    const b = parseBytes(v);
    if (b === undefined || b < min) return issue(ctx, `must be ${what}: bytes or a size like "256m", "1g"${min ? ` (at least ${min} bytes)` : ''}, ${got(v)}`);
    return b;
  });

export const absPath = (what: string) =>
  z
    .string({ error: (i) => `must be ${what} (an absolute path), ${got(i.input)}` })
    .refine((s) => ABS_CONTAINER_PATH_RE.test(s) && !s.split('/').includes('..'), {
      error: (i) => `must be ${what}: an absolute path of letters, digits and ._-/@+=~ (no ".." and no ":" or ","), ${got(i.input)}`,
    });

/** Compose's string form of command / entrypoint: split like a shell would split words, without a shell. */
export function splitWords(s: string): string[] | { error: string } {
  const out: string[] = [];
  let cur = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < s.length; i++) {
    const ch = s[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
      else if (ch === '\\' && quote === '"' && (s[i + 1] === '"' || s[i + 1] === '\\')) cur += s[++i];
      else cur += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === '\\' && i + 1 < s.length) {
      cur += s[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) out.push(cur);
      cur = '';
      inWord = false;
    } else {
      cur += ch;
      inWord = true;
    }
  }
  if (quote) return { error: `has an unclosed ${quote} quote` };
  if (inWord) out.push(cur);
  return out;
}

export const argv = (what: string) =>
  z
    .union([z.string(), z.array(z.string({ error: (i) => `${what} arguments must be strings, ${got(i.input)}` }))], {
      error: (i) => `must be ${what}: a string or a list of arguments, ${got(i.input)}`,
    })
    .transform((v, ctx) => {
      const list = typeof v === 'string' ? splitWords(v) : v;
      if (!Array.isArray(list)) return issue(ctx, `${list.error}`);
      list.forEach((a, i) => {
        if (!ARG_RE.test(a)) issue(ctx, 'must not contain a NUL byte or a line break', typeof v === 'string' ? [] : [i]);
      });
      return list;
    });

/** A list, or one string, as compose allows for tmpfs, env_file, dns and the like. */
export const oneOrMany = <T extends zod.ZodType>(item: T, what: string) =>
  z.union([item, z.array(item)], { error: (i) => `must be ${what}, ${got(i.input)}` }).transform((v) => (Array.isArray(v) ? v : [v]) as zod.output<T>[]);

/** A map, or a list of "KEY=VALUE" (compose's two spellings of labels, sysctls and extra_hosts). */
export const mapOrList = (what: string, sep = '=') =>
  z
    .union([z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])), z.array(z.string())], {
      error: (i) => `must be ${what}: a mapping or a list of "KEY${sep}VALUE", ${got(i.input)}`,
    })
    .transform((v, ctx) => {
      if (!Array.isArray(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, String(x)]));
      const out: Record<string, string> = {};
      v.forEach((entry, i) => {
        const at = entry.indexOf(sep);
        if (at <= 0) issue(ctx, `must be "KEY${sep}VALUE", ${got(entry)}`, [i]);
        else out[entry.slice(0, at)] = entry.slice(at + 1);
      });
      return out;
    });
