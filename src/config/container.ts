/**
 * The container fields of a fleet file: compose-spec's meaning, camelCase
 * names (docs/fleet-file.md lists each with its compose equivalent). Each is
 * validated here, with its path, into core/container.ts's normalized
 * ContainerConfig; nothing that reaches Docker is taken unchecked, and every
 * field joins the revision hash (engine/revision.ts), so changing a limit or
 * a mount rolls the fleet.
 */
import type * as zod from 'zod';
import * as z from './zod.js';
import type { ContainerConfig, MountSpec } from '../core/container.js';
import { parseDurationSeconds } from './analysis.js';

const got = (v: unknown) => `got ${JSON.stringify(v)}`;

/** Absolute paths: no NUL, no "..", nothing Docker would read as options (":" and "," separate them in the short syntax). */
const ABS_CONTAINER_PATH_RE = /^\/[A-Za-z0-9._\-/@+=~ ]*$/;
const VOLUME_NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
const USER_RE = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,31}(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,31})?$/;
const LABEL_KEY_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/]{0,254}$/;
const CAP_RE = /^(?:ALL|(?:CAP_)?[A-Z][A-Z0-9_]{1,40})$/;
const SIGNAL_RE = /^(?:SIG)?[A-Z][A-Z0-9+-]{1,15}$|^[0-9]{1,2}$/;
const DRIVER_RE = /^[a-z0-9][a-z0-9_.\-/]{0,63}$/;
const HOSTNAME_RE = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?$/;
const IP_RE = /^(?:(?:25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})\.){3}(?:25[0-5]|2[0-4][0-9]|1?[0-9]{1,2})$|^[0-9A-Fa-f:]{2,39}$|^host-gateway$/;
const SYSCTL_RE = /^[a-z][a-z0-9_.\-/]{0,127}$/;
const NETWORK_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
const ULIMIT_RE = /^[a-z]{2,16}$/;
/** A value Docker takes as one argument: printable, no NUL or newline. */
const ARG_RE = /^[^\0\n\r]*$/;

function issue(ctx: zod.core.$RefinementCtx, message: string, path: (string | number)[] = []): never {
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

const bytes = (what: string, min = 0) =>
  z.union([z.number(), z.string()], { error: (i) => `must be ${what}: bytes or a size like "256m", "1g", ${got(i.input)}` }).transform((v, ctx) => {
    const b = parseBytes(v);
    if (b === undefined || b < min) return issue(ctx, `must be ${what}: bytes or a size like "256m", "1g"${min ? ` (at least ${min} bytes)` : ''}, ${got(v)}`);
    return b;
  });

const absPath = (what: string) =>
  z.string({ error: (i) => `must be ${what} (an absolute path), ${got(i.input)}` }).refine((s) => ABS_CONTAINER_PATH_RE.test(s) && !s.split('/').includes('..'), {
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

const argv = (what: string) =>
  z
    .union([z.string(), z.array(z.string({ error: (i) => `${what} arguments must be strings, ${got(i.input)}` }))], { error: (i) => `must be ${what}: a string or a list of arguments, ${got(i.input)}` })
    .transform((v, ctx) => {
      const list = typeof v === 'string' ? splitWords(v) : v;
      if (!Array.isArray(list)) return issue(ctx, `${list.error}`);
      list.forEach((a, i) => {
        if (!ARG_RE.test(a)) issue(ctx, 'must not contain a NUL byte or a line break', typeof v === 'string' ? [] : [i]);
      });
      return list;
    });

/** A list, or one string, as compose allows for tmpfs, env_file, dns and the like. */
const oneOrMany = <T extends zod.ZodType>(item: T, what: string) =>
  z.union([item, z.array(item)], { error: (i) => `must be ${what}, ${got(i.input)}` }).transform((v) => (Array.isArray(v) ? v : [v]) as zod.output<T>[]);

/** A map, or a list of "KEY=VALUE" (compose's two spellings of labels, sysctls and extra_hosts). */
const mapOrList = (what: string, sep = '=') =>
  z
    .union([z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])), z.array(z.string())], { error: (i) => `must be ${what}: a mapping or a list of "KEY${sep}VALUE", ${got(i.input)}` })
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

/** Compose's short volume syntax: SRC:DST[:ro|rw], or DST alone (an anonymous volume). */
function shortVolume(s: string, ctx: zod.core.$RefinementCtx, i: number): MountSpec | undefined {
  const parts = s.split(':');
  if (parts.length === 1) {
    issue(ctx, `an anonymous volume (${JSON.stringify(s)}) is deleted with its instance on every deploy: name it (NAME:${s}) or use a bind mount`, [i]);
    return undefined;
  }
  if (parts.length > 3) {
    issue(ctx, `must be SOURCE:TARGET[:ro|rw] (paths may not contain ":"), ${got(s)}`, [i]);
    return undefined;
  }
  const [source, target, mode] = parts as [string, string, string | undefined];
  const opts = (mode ?? 'rw').split(',');
  if (!opts.every((o) => ['ro', 'rw', 'z', 'Z', 'nocopy'].includes(o))) {
    issue(ctx, `mode must be ro or rw (optionally with z, Z or nocopy), ${got(mode)}`, [i]);
    return undefined;
  }
  return { type: source.startsWith('/') ? 'bind' : 'volume', source, target, readOnly: opts.includes('ro'), ...(opts.includes('nocopy') ? { noCopy: true } : {}) };
}

const longVolume = z
  .object(
    {
      type: z.enum(['bind', 'volume', 'tmpfs'], { error: (i) => `must be "bind", "volume" or "tmpfs", ${got(i.input)}` }),
      source: z.string({ error: (i) => `must be a string, ${got(i.input)}` }).optional(),
      target: z.string({ error: (i) => (i.input === undefined ? 'is required' : `must be a string, ${got(i.input)}`) }),
      readOnly: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional(),
      volume: z.object({ nocopy: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional() }, { error: (i) => `must be a mapping { nocopy }, ${got(i.input)}` }).strict().optional(),
      tmpfs: z
        .object(
          {
            size: z.union([z.number(), z.string()], { error: (i) => `must be bytes or a size like "64m", ${got(i.input)}` }).optional(),
            mode: z.number({ error: (i) => `must be a file mode from 0 to 0o7777 (a number: 0o1777 is 1023), ${got(i.input)}` }).int().min(0).max(0o7777).optional(),
          },
          { error: (i) => `must be a mapping { size, mode }, ${got(i.input)}` },
        )
        .strict()
        .optional(),
      bind: z.object({ createHostPath: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional() }, { error: (i) => `must be a mapping { createHostPath }, ${got(i.input)}` }).strict().optional(),
    },
    { error: (i) => `must be "SOURCE:TARGET[:ro]" or a mapping { type, source, target, readOnly }, ${got(i.input)}` },
  )
  .strict();

const volumes = z.array(z.unknown(), { error: (i) => `must be a list of volumes ("SOURCE:TARGET[:ro]" or { type, source, target }), ${got(i.input)}` }).transform((list, ctx) => {
  const out: MountSpec[] = [];
  const targets = new Map<string, number>();
  list.forEach((item, i) => {
    let m: MountSpec | undefined;
    // Parsed one by one rather than as a union, so a long form's own field messages (readOnly, tmpfs/mode) reach the user.
    let v: string | zod.output<typeof longVolume>;
    if (typeof item === 'string') v = item;
    else {
      const r = longVolume.safeParse(item);
      if (!r.success) {
        for (const x of r.error.issues) ctx.addIssue({ ...x, path: [i, ...x.path] } as Parameters<typeof ctx.addIssue>[0]);
        return;
      }
      v = r.data;
    }
    if (typeof v === 'string') m = shortVolume(v, ctx, i);
    else {
      const size = v.tmpfs?.size === undefined ? undefined : parseBytes(v.tmpfs.size);
      if (v.tmpfs?.size !== undefined && size === undefined) issue(ctx, `must be bytes or a size like "64m", ${got(v.tmpfs.size)}`, [i, 'tmpfs', 'size']);
      if (v.type !== 'tmpfs' && v.source === undefined) issue(ctx, `is required for a ${v.type} mount`, [i, 'source']);
      if (v.type === 'tmpfs' && v.source !== undefined) issue(ctx, 'a tmpfs mount has no source', [i, 'source']);
      if (v.bind?.createHostPath) issue(ctx, 'fleetroll never creates host paths: create the source on each host (preflight checks it exists)', [i, 'bind', 'createHostPath']);
      m = { type: v.type, ...(v.source !== undefined ? { source: v.source } : {}), target: v.target, readOnly: v.readOnly ?? false, ...(v.volume?.nocopy ? { noCopy: true } : {}), ...(size !== undefined ? { sizeBytes: size } : {}), ...(v.tmpfs?.mode !== undefined ? { mode: v.tmpfs.mode } : {}) };
    }
    if (!m) return;
    const path = typeof v === 'string' ? [i] : [i, 'target'];
    if (!ABS_CONTAINER_PATH_RE.test(m.target) || m.target.split('/').includes('..')) issue(ctx, `target must be an absolute path in the container (letters, digits, ._-/@+=~, no ".."), ${got(m.target)}`, path);
    if (m.type === 'bind' && m.source !== undefined && (!ABS_CONTAINER_PATH_RE.test(m.source) || m.source.split('/').includes('..'))) {
      issue(ctx, `a bind source must be an absolute host path (one starting with ./ or ../ is resolved against the fleet file's directory), ${got(m.source)}`, typeof v === 'string' ? [i] : [i, 'source']);
    }
    if (m.type === 'volume' && m.source !== undefined && !VOLUME_NAME_RE.test(m.source)) issue(ctx, `a volume name must be letters, digits, "_", ".", "-" (starting with a letter or digit), ${got(m.source)}`, typeof v === 'string' ? [i] : [i, 'source']);
    const seen = targets.get(m.target);
    if (seen !== undefined) issue(ctx, `target ${m.target} is already mounted by volumes/${seen}`, path);
    targets.set(m.target, i);
    out.push(m);
  });
  return out;
});

const tmpfs = oneOrMany(z.string({ error: (i) => `must be a path or a list of paths ("/scratch" or "/scratch:size=64m"), ${got(i.input)}` }), 'a path or a list of paths ("/scratch" or "/scratch:size=64m")').transform((list, ctx) => {
  const out: Record<string, string> = {};
  list.forEach((entry, i) => {
    const colon = entry.indexOf(':');
    const path = colon < 0 ? entry : entry.slice(0, colon);
    const opts = colon < 0 ? '' : entry.slice(colon + 1);
    if (!ABS_CONTAINER_PATH_RE.test(path)) issue(ctx, `must be an absolute path in the container, ${got(path)}`, [i]);
    if (opts && !/^(?:(?:size=[0-9]+[kmg]?|mode=[0-7]{3,4}|uid=[0-9]+|gid=[0-9]+|noexec|nosuid|nodev|exec|suid|dev|ro|rw)(?:,|$))+$/.test(opts)) {
      issue(ctx, `options must be size=N[k|m|g], mode=OCTAL, uid=N, gid=N, noexec, nosuid, nodev, ro or rw, comma-separated, ${got(opts)}`, [i]);
    }
    out[path] = opts;
  });
  return out;
});

const cpus = z.union([z.number(), z.string()], { error: (i) => `must be a number of CPUs like 0.5 or "1.5", ${got(i.input)}` }).transform((v, ctx) => {
  const n = typeof v === 'number' ? v : /^[0-9]+(?:\.[0-9]+)?$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isFinite(n) || n <= 0 || n > 1024) return issue(ctx, `must be a number of CPUs above 0 and at most 1024 (like 0.5), ${got(v)}`);
  return Math.round(n * 1e9);
});

const resources = z
  .object(
    {
      memory: bytes('a memory limit', 6 * 1024 * 1024).optional(),
      memoryReservation: bytes('a memory reservation').optional(),
      cpus: cpus.optional(),
      pidsLimit: z.number({ error: (i) => `must be an integer from -1 to 4194304 (-1: no limit), ${got(i.input)}` }).int().min(-1).max(4194304).optional(),
    },
    { error: (i) => `must be a mapping { memory, memoryReservation, cpus, pidsLimit }, ${got(i.input)}` },
  )
  .strict();

const restart = z.string({ error: (i) => `must be "no", "always", "on-failure", "on-failure:N" or "unless-stopped", ${got(i.input)}` }).transform((v, ctx) => {
  const m = /^(no|always|unless-stopped|on-failure)(?::([0-9]{1,4}))?$/.exec(v);
  if (!m || (m[2] !== undefined && m[1] !== 'on-failure')) return issue(ctx, `must be "no", "always", "on-failure", "on-failure:N" or "unless-stopped", ${got(v)}`);
  return { name: m[1] as 'no' | 'always' | 'unless-stopped' | 'on-failure', ...(m[2] !== undefined ? { maxRetries: Number(m[2]) } : {}) };
});

const logging = z
  .object(
    {
      driver: z.string({ error: (i) => `must be a log driver name like "json-file" or "local", ${got(i.input)}` }).regex(DRIVER_RE, { error: (i) => `must be a log driver name like "json-file" or "local", ${got(i.input)}` }).default('json-file'),
      options: z.record(z.string(), z.union([z.string(), z.number()], { error: (i) => `must be a string or a number, ${got(i.input)}` }), { error: (i) => `must be a mapping of option names to values, ${got(i.input)}` }).optional(),
    },
    { error: (i) => `must be a mapping { driver, options }, ${got(i.input)}` },
  )
  .strict()
  .transform((v, ctx) => {
    const options = Object.fromEntries(Object.entries(v.options ?? {}).map(([k, x]) => [k, String(x)]));
    for (const [k, x] of Object.entries(options)) {
      if (!/^[a-z0-9][a-z0-9_.-]{0,63}$/.test(k)) issue(ctx, `option names are lowercase letters, digits, "_", ".", "-", ${got(k)}`, ['options', k]);
      if (!ARG_RE.test(x)) issue(ctx, 'must not contain a NUL byte or a line break', ['options', k]);
    }
    // Naming the driver alone keeps the size cap: without options a json-file or local log grows until the disk is full.
    const capped = (v.driver === 'json-file' || v.driver === 'local') && Object.keys(options).length === 0 ? { 'max-size': '10m', 'max-file': '3' } : options;
    return { driver: v.driver, options: capped };
  });

const extraHosts = z
  .union([z.record(z.string(), z.union([z.string(), z.array(z.string())])), z.array(z.string())], { error: (i) => `must be a list of "HOST:IP" or a mapping of host names to addresses, ${got(i.input)}` })
  .transform((v, ctx) => {
    const pairs: [string, string, (string | number)[]][] = Array.isArray(v)
      ? v.map((e, i) => {
          const at = e.search(/[=:]/);
          return [at > 0 ? e.slice(0, at) : e, at > 0 ? e.slice(at + 1) : '', [i]];
        })
      : Object.entries(v).flatMap(([h, ips]) => (Array.isArray(ips) ? ips : [ips]).map((ip) => [h, ip, [h]] as [string, string, (string | number)[]]));
    return pairs.map(([h, ip, path]) => {
      if (!HOSTNAME_RE.test(h)) issue(ctx, `must be a host name, ${got(h)}`, path);
      if (!IP_RE.test(ip)) issue(ctx, `must be an IP address (or host-gateway) for ${h}, ${got(ip)}`, path);
      return `${h}:${ip}`;
    });
  });

const ulimits = z
  .record(z.string(), z.union([z.number(), z.object({ soft: z.number().int(), hard: z.number().int() }).strict()], { error: (i) => `must be a number or { soft, hard }, ${got(i.input)}` }), { error: (i) => `must be a mapping like { nofile: { soft: 1024, hard: 2048 }, nproc: 512 }, ${got(i.input)}` })
  .transform((v, ctx) =>
    Object.entries(v).map(([name, l]) => {
      if (!ULIMIT_RE.test(name)) issue(ctx, `must be a ulimit name like nofile or nproc, ${got(name)}`, [name]);
      const soft = typeof l === 'number' ? l : l.soft;
      const hard = typeof l === 'number' ? l : l.hard;
      if (!Number.isInteger(soft) || !Number.isInteger(hard) || soft < -1 || hard < -1 || (hard !== -1 && (soft === -1 || soft > hard))) issue(ctx, `soft and hard must be integers (-1: unlimited) with soft at most hard, ${got(l)}`, [name]);
      return { name, soft, hard };
    }),
  );

const caps = z.array(z.string().regex(CAP_RE, { error: (i) => `must be a capability name like NET_ADMIN or ALL, ${got(i.input)}` }), { error: (i) => `must be a list of capability names, ${got(i.input)}` });

const devices = z.array(z.string(), { error: (i) => `must be a list of "HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]", ${got(i.input)}` }).transform((list, ctx) =>
  list.map((d, i) => {
    const [host = '', container = host, permissions = 'rwm', ...more] = d.split(':');
    if (more.length || !ABS_CONTAINER_PATH_RE.test(host) || !ABS_CONTAINER_PATH_RE.test(container) || !/^[rwm]{1,3}$/.test(permissions)) {
      issue(ctx, `must be "HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]" with absolute paths and permissions of r, w, m, ${got(d)}`, [i]);
    }
    return { host, container, permissions };
  }),
);

const GPUS_MESSAGE = (i: { input: unknown }) => `must be "all" or a number of GPUs from 1 to 64, ${got(i.input)}`;
const gpus = z.union([z.literal('all'), z.number({ error: GPUS_MESSAGE }).int().min(1).max(64)], { error: GPUS_MESSAGE });

const networks = z
  .array(
    z.union([z.string(), z.object({ name: z.string(), aliases: z.array(z.string()).optional() }).strict()], { error: (i) => `must be a network name or { name, aliases }, ${got(i.input)}` }),
    { error: (i) => `must be a list of Docker networks to join besides hosts[].network, ${got(i.input)}` },
  )
  .transform((list, ctx) =>
    list.map((n, i) => {
      const name = typeof n === 'string' ? n : n.name;
      const aliases = typeof n === 'string' ? [] : (n.aliases ?? []);
      if (!NETWORK_RE.test(name)) issue(ctx, `must be a Docker network name (letters, digits, "_", ".", "-"), ${got(name)}`, typeof n === 'string' ? [i] : [i, 'name']);
      aliases.forEach((a, j) => {
        if (!HOSTNAME_RE.test(a)) issue(ctx, `must be a DNS name, ${got(a)}`, [i, 'aliases', j]);
      });
      return { name, aliases };
    }),
  );

const duration = (what: string) =>
  z.union([z.number(), z.string()], { error: (i) => `must be ${what}: seconds or a duration like "10s", "500ms", "1m", ${got(i.input)}` }).transform((v, ctx) => {
    const s = typeof v === 'string' ? composeDurationSeconds(v) : parseDurationSeconds(v);
    if (s === undefined || s < 0 || s > 86400) return issue(ctx, `must be ${what}: seconds or a duration like "10s", "500ms", "1m30s" (at most a day), ${got(v)}`);
    return s * 1000;
  });

/** Compose's durations: "1m30s", "10s", "500ms", "2h". */
export function composeDurationSeconds(v: string): number | undefined {
  const s = v.trim();
  if (/^[0-9]+(?:\.[0-9]+)?$/.test(s)) return Number(s);
  if (!/^(?:[0-9]+(?:\.[0-9]+)?(?:h|ms|m|s|us))+$/.test(s)) return undefined;
  let total = 0;
  for (const m of s.matchAll(/([0-9]+(?:\.[0-9]+)?)(h|ms|m|s|us)/g)) total += Number(m[1]) * { h: 3600, m: 60, s: 1, ms: 0.001, us: 0.000001 }[m[2] as 'h']!;
  return total;
}

const healthcheck = z
  .object(
    {
      test: z.union([z.string(), z.array(z.string())], { error: (i) => `must be a command: ["CMD", "curl", "-f", "http://localhost/"], ["CMD-SHELL", "..."] or a string (run by the image's shell), ${got(i.input)}` }).optional(),
      interval: duration('an interval').optional(),
      timeout: duration('a timeout').optional(),
      retries: z.number({ error: (i) => `must be a number of retries from 0 to 1000, ${got(i.input)}` }).int().min(0).max(1000).optional(),
      startPeriod: duration('a start period').optional(),
      startInterval: duration('a start interval').optional(),
      disable: z.boolean().optional(),
    },
    { error: (i) => `must be a mapping { test, interval, timeout, retries, startPeriod } or { disable: true }, ${got(i.input)}` },
  )
  .strict()
  .transform((v, ctx) => {
    if (v.disable) return { disable: true as const };
    if (v.test === undefined) return issue(ctx, 'is required (or disable: true)', ['test']);
    const test = typeof v.test === 'string' ? ['CMD-SHELL', v.test] : v.test;
    if (!['CMD', 'CMD-SHELL', 'NONE'].includes(test[0] ?? '') || (test[0] !== 'NONE' && test.length < 2)) {
      issue(ctx, `must start with "CMD" (then the program and its arguments), "CMD-SHELL" (then one command line) or be ["NONE"], ${got(v.test)}`, ['test']);
    }
    test.forEach((a, i) => {
      if (!ARG_RE.test(a)) issue(ctx, 'must not contain a NUL byte or a line break', ['test', i]);
    });
    return {
      test,
      ...(v.interval !== undefined ? { intervalMs: v.interval } : {}),
      ...(v.timeout !== undefined ? { timeoutMs: v.timeout } : {}),
      ...(v.retries !== undefined ? { retries: v.retries } : {}),
      ...(v.startPeriod !== undefined ? { startPeriodMs: v.startPeriod } : {}),
      ...(v.startInterval !== undefined ? { startIntervalMs: v.startInterval } : {}),
    };
  });

const SECRET_NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;

const secretsList = z
  .array(z.union([z.string(), z.object({ source: z.string(), target: z.string().optional() }).strict()], { error: (i) => `must be a secret name or { source, target }, ${got(i.input)}` }), {
    error: (i) => `must be a list of secret names (defined under secretFiles), ${got(i.input)}`,
  })
  .transform((list, ctx) => {
    const targets = new Map<string, number>();
    return list.map((s, i) => {
      const name = typeof s === 'string' ? s : s.source;
      const target = typeof s === 'string' ? s : (s.target ?? s.source);
      if (!SECRET_NAME_RE.test(name)) issue(ctx, `must be a secret name (letters, digits, "_", ".", "-"), ${got(name)}`, [i]);
      if (!SECRET_NAME_RE.test(target)) issue(ctx, `target must be a file name under /run/secrets (letters, digits, "_", ".", "-"), ${got(target)}`, [i, 'target']);
      // Docker refuses two mounts at one path only when the container is created, on the host: say it here.
      const seen = targets.get(target);
      if (seen !== undefined) issue(ctx, `target /run/secrets/${target} is already mounted by secrets/${seen}`, typeof s === 'string' ? [i] : [i, 'target']);
      targets.set(target, i);
      return { name, target };
    });
  });

/** compose's top-level `secrets:` definitions: a file on this machine (absolute after loading). */
const secretFiles = z.record(
  z.string().regex(SECRET_NAME_RE, { error: (i) => `secret names are letters, digits, "_", ".", "-", ${got(i.input)}` }),
  z.object({ file: z.string({ error: (i) => (i.input === undefined ? 'is required: the path of a file on this machine (only { file: PATH } is supported)' : `must be a path, ${got(i.input)}`) }).min(1, { error: 'must be a path' }) }, { error: (i) => `must be { file: PATH } (a file on every host, mounted read-only under /run/secrets), ${got(i.input)}` }).strict(),
);

/** Keys of the escape hatch fleetroll owns: setting them there would break the engine's own bookkeeping. */
const OWNED_CREATE_KEYS = ['name', 'Image', 'Env', 'Labels', 'ExposedPorts', 'StopTimeout', 'Cmd', 'Entrypoint', 'HostConfig.NetworkMode', 'HostConfig.PortBindings', 'HostConfig.Mounts', 'HostConfig.Binds', 'HostConfig.AutoRemove', 'NetworkingConfig'];
const PASCAL_RE = /^[A-Z][A-Za-z0-9]{0,63}$/;

/**
 * `dockerCreateOptions`: Docker Engine API create options for what no field
 * covers (e.g. { HostConfig: { OomScoreAdj: 100 } }). Keys must be the API's
 * PascalCase names; the ones fleetroll sets itself are refused, saying which
 * field to use instead. The engine rejects unknown keys' values itself.
 */
const createOptions = z.record(z.string(), z.unknown(), { error: (i) => `must be a mapping of Docker Engine API create options, ${got(i.input)}` }).transform((v, ctx) => {
  for (const [k, x] of Object.entries(v)) {
    if (!PASCAL_RE.test(k)) issue(ctx, `must be a Docker Engine API create option name (PascalCase, like HostConfig or Hostname), ${got(k)}`, [k]);
    else if (OWNED_CREATE_KEYS.includes(k)) issue(ctx, `is set by fleetroll (use the fleet file's own fields: image, env, labels, port, command, entrypoint, volumes)`, [k]);
    if (k === 'HostConfig') {
      if (x === null || typeof x !== 'object' || Array.isArray(x)) issue(ctx, 'must be a mapping', [k]);
      else
        for (const hk of Object.keys(x)) {
          if (!PASCAL_RE.test(hk)) issue(ctx, `must be a HostConfig option name (PascalCase), ${got(hk)}`, [k, hk]);
          else if (OWNED_CREATE_KEYS.includes(`HostConfig.${hk}`)) issue(ctx, 'is set by fleetroll (use hosts[].network, volumes or networks)', [k, hk]);
        }
    }
  }
  return v;
});

const labels = mapOrList('labels').transform((v, ctx) => {
  for (const [k, x] of Object.entries(v)) {
    if (k.startsWith('fleetroll.')) issue(ctx, 'labels starting with "fleetroll." are fleetroll\'s own (the fleet\'s state is read back from them)', [k]);
    else if (!LABEL_KEY_RE.test(k)) issue(ctx, `must be a label key of letters, digits, ".", "_", "-", "/", ${got(k)}`, [k]);
    if (!ARG_RE.test(x) || x.length > 4096) issue(ctx, 'must be at most 4096 characters with no NUL byte or line break', [k]);
  }
  return v;
});

const sysctls = mapOrList('sysctls').transform((v, ctx) => {
  for (const [k, x] of Object.entries(v)) {
    if (!SYSCTL_RE.test(k)) issue(ctx, `must be a sysctl name like net.core.somaxconn, ${got(k)}`, [k]);
    if (!/^[A-Za-z0-9 ._\-/:,]{0,256}$/.test(x)) issue(ctx, `must be a plain value, ${got(x)}`, [k]);
  }
  return v;
});

/** The container fields, spread into the fleet file's schema. */
export const containerFields = {
  command: argv('a command').optional(),
  entrypoint: argv('an entrypoint').optional(),
  workingDir: absPath('a working directory').optional(),
  user: z.string({ error: (i) => `must be a user: NAME, UID or UID:GID, ${got(i.input)}` }).regex(USER_RE, { error: (i) => `must be a user: NAME, UID or UID:GID, ${got(i.input)}` }).optional(),
  volumes: volumes.optional(),
  tmpfs: tmpfs.optional(),
  readOnly: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional(),
  resources: resources.optional(),
  restart: restart.optional(),
  labels: labels.optional(),
  logging: logging.optional(),
  extraHosts: extraHosts.optional(),
  ulimits: ulimits.optional(),
  capAdd: caps.optional(),
  capDrop: caps.optional(),
  stopSignal: z.string({ error: (i) => `must be a signal name like SIGINT, ${got(i.input)}` }).regex(SIGNAL_RE, { error: (i) => `must be a signal name like SIGINT or SIGQUIT, ${got(i.input)}` }).optional(),
  shmSize: bytes('a size').optional(),
  sysctls: sysctls.optional(),
  devices: devices.optional(),
  gpus: gpus.optional(),
  networks: networks.optional(),
  healthcheck: healthcheck.optional(),
  secrets: secretsList.optional(),
  secretFiles: secretFiles.optional(),
  dockerCreateOptions: createOptions.optional(),
};

type Parsed = { [K in keyof typeof containerFields]?: zod.output<(typeof containerFields)[K]> };

/** The fleet file's container fields → core's ContainerConfig (only what is set). */
export function containerConfigOf(f: Parsed): ContainerConfig {
  const c: ContainerConfig = {};
  if (f.command) c.command = f.command;
  if (f.entrypoint) c.entrypoint = f.entrypoint;
  if (f.workingDir) c.workingDir = f.workingDir;
  if (f.user) c.user = f.user;
  if (f.volumes?.length) c.mounts = f.volumes;
  if (f.tmpfs && Object.keys(f.tmpfs).length) c.tmpfs = f.tmpfs;
  if (f.readOnly !== undefined) c.readOnly = f.readOnly;
  if (f.resources?.memory !== undefined) c.memoryBytes = f.resources.memory;
  if (f.resources?.memoryReservation !== undefined) c.memoryReservationBytes = f.resources.memoryReservation;
  if (f.resources?.cpus !== undefined) c.nanoCpus = f.resources.cpus;
  if (f.resources?.pidsLimit !== undefined) c.pidsLimit = f.resources.pidsLimit;
  if (f.restart) c.restart = f.restart;
  if (f.labels && Object.keys(f.labels).length) c.labels = f.labels;
  if (f.logging) c.logging = f.logging;
  if (f.extraHosts?.length) c.extraHosts = f.extraHosts;
  if (f.ulimits?.length) c.ulimits = f.ulimits;
  if (f.capAdd?.length) c.capAdd = f.capAdd;
  if (f.capDrop?.length) c.capDrop = f.capDrop;
  if (f.stopSignal) c.stopSignal = f.stopSignal;
  if (f.shmSize !== undefined) c.shmSizeBytes = f.shmSize;
  if (f.sysctls && Object.keys(f.sysctls).length) c.sysctls = f.sysctls;
  if (f.devices?.length) c.devices = f.devices;
  if (f.gpus !== undefined) c.gpus = f.gpus;
  if (f.networks?.length) c.networks = f.networks;
  if (f.healthcheck) c.healthcheck = f.healthcheck;
  if (f.secrets?.length) c.secrets = f.secrets;
  if (f.dockerCreateOptions && Object.keys(f.dockerCreateOptions).length) c.createOptions = f.dockerCreateOptions;
  return c;
}
