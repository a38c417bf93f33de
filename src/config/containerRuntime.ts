/**
 * How the container runs: resources, restart policy, logging, extra hosts,
 * ulimits, capabilities, devices and GPUs, networks, the healthcheck, labels
 * and sysctls, each checked into what core/container.ts hands to Docker.
 */
import * as z from './zod.js';
import { parseDurationSeconds } from './analysis.js';
import {
  ABS_CONTAINER_PATH_RE,
  ARG_RE,
  bytes,
  CAP_RE,
  DRIVER_RE,
  got,
  HOSTNAME_RE,
  IP_RE,
  issue,
  LABEL_KEY_RE,
  mapOrList,
  NETWORK_RE,
  SYSCTL_RE,
  ULIMIT_RE,
} from './containerValues.js';

const cpus = z.union([z.number(), z.string()], { error: (i) => `must be a number of CPUs like 0.5 or "1.5", ${got(i.input)}` }).transform((v, ctx) => {
  const n = typeof v === 'number' ? v : /^[0-9]+(?:\.[0-9]+)?$/.test(v.trim()) ? Number(v) : NaN;
  if (!Number.isFinite(n) || n <= 0 || n > 1024) return issue(ctx, `must be a number of CPUs above 0 and at most 1024 (like 0.5), ${got(v)}`);
  return Math.round(n * 1e9);
});

export const resources = z
  .object(
    {
      memory: bytes('a memory limit', 6 * 1024 * 1024).optional(),
      memoryReservation: bytes('a memory reservation').optional(),
      cpus: cpus.optional(),
      pidsLimit: z
        .number({ error: (i) => `must be an integer from -1 to 4194304 (-1: no limit), ${got(i.input)}` })
        .int()
        .min(-1)
        .max(4194304)
        .optional(),
    },
    { error: (i) => `must be a mapping { memory, memoryReservation, cpus, pidsLimit }, ${got(i.input)}` },
  )
  .strict();

export const restart = z
  .string({ error: (i) => `must be "no", "always", "on-failure", "on-failure:N" or "unless-stopped", ${got(i.input)}` })
  .transform((v, ctx) => {
    const m = /^(no|always|unless-stopped|on-failure)(?::([0-9]{1,4}))?$/.exec(v);
    if (!m || (m[2] !== undefined && m[1] !== 'on-failure'))
      return issue(ctx, `must be "no", "always", "on-failure", "on-failure:N" or "unless-stopped", ${got(v)}`);
    return { name: m[1] as 'no' | 'always' | 'unless-stopped' | 'on-failure', ...(m[2] !== undefined ? { maxRetries: Number(m[2]) } : {}) };
  });

export const logging = z
  .object(
    {
      driver: z
        .string({ error: (i) => `must be a log driver name like "json-file" or "local", ${got(i.input)}` })
        .regex(DRIVER_RE, { error: (i) => `must be a log driver name like "json-file" or "local", ${got(i.input)}` })
        .default('json-file'),
      options: z
        .record(z.string(), z.union([z.string(), z.number()], { error: (i) => `must be a string or a number, ${got(i.input)}` }), {
          error: (i) => `must be a mapping of option names to values, ${got(i.input)}`,
        })
        .optional(),
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

export const extraHosts = z
  .union([z.record(z.string(), z.union([z.string(), z.array(z.string())])), z.array(z.string())], {
    error: (i) => `must be a list of "HOST:IP" or a mapping of host names to addresses, ${got(i.input)}`,
  })
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

export const ulimits = z
  .record(
    z.string(),
    z.union([z.number(), z.object({ soft: z.number().int(), hard: z.number().int() }).strict()], {
      error: (i) => `must be a number or { soft, hard }, ${got(i.input)}`,
    }),
    { error: (i) => `must be a mapping like { nofile: { soft: 1024, hard: 2048 }, nproc: 512 }, ${got(i.input)}` },
  )
  .transform((v, ctx) =>
    Object.entries(v).map(([name, l]) => {
      if (!ULIMIT_RE.test(name)) issue(ctx, `must be a ulimit name like nofile or nproc, ${got(name)}`, [name]);
      const soft = typeof l === 'number' ? l : l.soft;
      const hard = typeof l === 'number' ? l : l.hard;
      if (!Number.isInteger(soft) || !Number.isInteger(hard) || soft < -1 || hard < -1 || (hard !== -1 && (soft === -1 || soft > hard)))
        issue(ctx, `soft and hard must be integers (-1: unlimited) with soft at most hard, ${got(l)}`, [name]);
      return { name, soft, hard };
    }),
  );

export const caps = z.array(z.string().regex(CAP_RE, { error: (i) => `must be a capability name like NET_ADMIN or ALL, ${got(i.input)}` }), {
  error: (i) => `must be a list of capability names, ${got(i.input)}`,
});

export const devices = z
  .array(z.string(), { error: (i) => `must be a list of "HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]", ${got(i.input)}` })
  .transform((list, ctx) =>
    list.map((d, i) => {
      const [host = '', container = host, permissions = 'rwm', ...more] = d.split(':');
      if (more.length || !ABS_CONTAINER_PATH_RE.test(host) || !ABS_CONTAINER_PATH_RE.test(container) || !/^[rwm]{1,3}$/.test(permissions)) {
        issue(ctx, `must be "HOST_PATH[:CONTAINER_PATH[:PERMISSIONS]]" with absolute paths and permissions of r, w, m, ${got(d)}`, [i]);
      }
      return { host, container, permissions };
    }),
  );

const GPUS_MESSAGE = (i: { input: unknown }) => `must be "all" or a number of GPUs from 1 to 64, ${got(i.input)}`;
export const gpus = z.union([z.literal('all'), z.number({ error: GPUS_MESSAGE }).int().min(1).max(64)], { error: GPUS_MESSAGE });

export const networks = z
  .array(
    z.union([z.string(), z.object({ name: z.string(), aliases: z.array(z.string()).optional() }).strict()], {
      error: (i) => `must be a network name or { name, aliases }, ${got(i.input)}`,
    }),
    { error: (i) => `must be a list of Docker networks to join besides hosts[].network, ${got(i.input)}` },
  )
  .transform((list, ctx) =>
    list.map((n, i) => {
      const name = typeof n === 'string' ? n : n.name;
      const aliases = typeof n === 'string' ? [] : (n.aliases ?? []);
      if (!NETWORK_RE.test(name))
        issue(ctx, `must be a Docker network name (letters, digits, "_", ".", "-"), ${got(name)}`, typeof n === 'string' ? [i] : [i, 'name']);
      aliases.forEach((a, j) => {
        if (!HOSTNAME_RE.test(a)) issue(ctx, `must be a DNS name, ${got(a)}`, [i, 'aliases', j]);
      });
      return { name, aliases };
    }),
  );

const duration = (what: string) =>
  z
    .union([z.number(), z.string()], { error: (i) => `must be ${what}: seconds or a duration like "10s", "500ms", "1m", ${got(i.input)}` })
    .transform((v, ctx) => {
      const s = typeof v === 'string' ? composeDurationSeconds(v) : parseDurationSeconds(v);
      if (s === undefined || s < 0 || s > 86400)
        return issue(ctx, `must be ${what}: seconds or a duration like "10s", "500ms", "1m30s" (at most a day), ${got(v)}`);
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

export const healthcheck = z
  .object(
    {
      test: z
        .union([z.string(), z.array(z.string())], {
          error: (i) =>
            `must be a command: ["CMD", "curl", "-f", "http://localhost/"], ["CMD-SHELL", "..."] or a string (run by the image's shell), ${got(i.input)}`,
        })
        .optional(),
      interval: duration('an interval').optional(),
      timeout: duration('a timeout').optional(),
      retries: z
        .number({ error: (i) => `must be a number of retries from 0 to 1000, ${got(i.input)}` })
        .int()
        .min(0)
        .max(1000)
        .optional(),
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

export const labels = mapOrList('labels').transform((v, ctx) => {
  for (const [k, x] of Object.entries(v)) {
    if (k.startsWith('fleetroll.')) issue(ctx, 'labels starting with "fleetroll." are fleetroll\'s own (the fleet\'s state is read back from them)', [k]);
    else if (!LABEL_KEY_RE.test(k)) issue(ctx, `must be a label key of letters, digits, ".", "_", "-", "/", ${got(k)}`, [k]);
    if (!ARG_RE.test(x) || x.length > 4096) issue(ctx, 'must be at most 4096 characters with no NUL byte or line break', [k]);
  }
  return v;
});

export const sysctls = mapOrList('sysctls').transform((v, ctx) => {
  for (const [k, x] of Object.entries(v)) {
    if (!SYSCTL_RE.test(k)) issue(ctx, `must be a sysctl name like net.core.somaxconn, ${got(k)}`, [k]);
    if (!/^[A-Za-z0-9 ._\-/:,]{0,256}$/.test(x)) issue(ctx, `must be a plain value, ${got(x)}`, [k]);
  }
  return v;
});
