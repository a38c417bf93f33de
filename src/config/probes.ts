/**
 * The fleet file's `probes:` block: how fleetroll knows an instance is ready,
 * and how it proves at the end that every instance runs the new revision.
 *
 *   probes:
 *     readiness: { path: /health/ready }       HTTP GET answering 2xx (the default)
 *     readiness: { healthcheck: true }         Docker reports the container "healthy"
 *     readiness: { tcp: true }                 a TCP connect to the app port
 *     readiness: { tcp: { port: 5432 } }       ... or to another port of the container
 *     readiness: { exec: [pg_isready, -q] }    exit code 0 inside the container (no shell)
 *     # periodMs (250) and timeoutMs (1000) apply to every kind
 *     version: { path: /api/version }         the body must equal the expected version (the default)
 *     version: false                           no endpoint: verify image ID, revision label and readiness
 *
 * The parsed readiness keeps the shape of its kind (an HTTP probe is still
 * `{ path, periodMs, timeoutMs }`), so `readinessKind` tells them apart.
 */
import type * as zod from 'zod';
import type { FieldIssue } from '../errors.js';
import * as z from './zod.js';

const HTTP_PATH_RE = /^\/[A-Za-z0-9._~\-/%?=&]*$/;

const got = (input: unknown) => `got ${JSON.stringify(input)}`;

const int = (min: number, max: number, what = 'an integer') => {
  const message = (i: { input: unknown }) => (i.input === undefined ? 'is required' : `must be ${what} from ${min} to ${max}, ${got(i.input)}`);
  return z.number({ error: message }).int({ error: message }).min(min, { error: message }).max(max, { error: message });
};

const httpPath = z
  .string({ error: (i) => `must be an HTTP path starting with "/", ${got(i.input)}` })
  .regex(HTTP_PATH_RE, { error: (i) => `must be an HTTP path starting with "/", ${got(i.input)}` });

export const READINESS_DEFAULTS = { path: '/health/ready', periodMs: 250, timeoutMs: 1000 } as const;
export const VERSION_DEFAULTS = { path: '/api/version' } as const;

const KINDS = ['path', 'healthcheck', 'tcp', 'exec'] as const;
const KINDS_TEXT = 'path (HTTP GET), healthcheck: true, tcp: true (or { port: N }) or exec: [program, args...]';

const readinessInput = z
  .object(
    {
      path: httpPath.optional(),
      healthcheck: z.boolean({ error: (i) => `must be true (ready when Docker reports the container healthy), ${got(i.input)}` }).optional(),
      tcp: z
        .union([z.boolean(), z.object({ port: int(1, 65535, 'a port') }).strict()], {
          error: (i) => `must be true (the app port) or { port: N }, ${got(i.input)}`,
        })
        .optional(),
      exec: z
        .array(z.string().min(1, { error: 'arguments must not be empty' }), {
          error: (i) => `must be an argument array like ["pg_isready", "-q"] (no shell string), ${got(i.input)}`,
        })
        .min(1, { error: 'must name a program to run' })
        .optional(),
      periodMs: int(10, 60000).default(READINESS_DEFAULTS.periodMs),
      timeoutMs: int(10, 60000).default(READINESS_DEFAULTS.timeoutMs),
    },
    {
      error: (i) =>
        `must be a mapping: { path }, { healthcheck: true }, { tcp: true }, { tcp: { port: N } } or { exec: [...] }, with periodMs and timeoutMs, ${got(i.input)}`,
    },
  )
  .strict()
  .superRefine((r, ctx) => {
    const set = KINDS.filter((k) => r[k] !== undefined);
    if (set.length > 1) ctx.addIssue({ code: 'custom', message: `set one of ${KINDS_TEXT}; got ${set.join(' and ')}` });
    if (r.healthcheck === false)
      ctx.addIssue({
        code: 'custom',
        path: ['healthcheck'],
        message: `must be true (ready when Docker reports the container healthy); for another probe set one of ${KINDS_TEXT}`,
      });
    if (r.tcp === false)
      ctx.addIssue({ code: 'custom', path: ['tcp'], message: `must be true (the app port) or { port: N }; for another probe set one of ${KINDS_TEXT}` });
  })
  .transform((r): ReadinessProbe => {
    const timing = { periodMs: r.periodMs, timeoutMs: r.timeoutMs };
    if (r.healthcheck) return { healthcheck: true, ...timing };
    if (r.tcp !== undefined && r.tcp !== false) return { tcp: r.tcp, ...timing };
    if (r.exec !== undefined) return { exec: r.exec, ...timing };
    return { path: r.path ?? READINESS_DEFAULTS.path, ...timing };
  });

export interface ProbeTiming {
  periodMs: number;
  timeoutMs: number;
}
// Each kind names the others' keys as absent, so `readiness.path` reads as string | undefined on any of them.
export type HttpReadiness = ProbeTiming & { path: string; healthcheck?: undefined; tcp?: undefined; exec?: undefined };
export type HealthcheckReadiness = ProbeTiming & { healthcheck: true; path?: undefined; tcp?: undefined; exec?: undefined };
export type TcpReadiness = ProbeTiming & { tcp: true | { port: number }; path?: undefined; healthcheck?: undefined; exec?: undefined };
export type ExecReadiness = ProbeTiming & { exec: string[]; path?: undefined; healthcheck?: undefined; tcp?: undefined };
export type ReadinessProbe = HttpReadiness | HealthcheckReadiness | TcpReadiness | ExecReadiness;
export type VersionProbe = { path: string } | false;
export type ReadinessKind = 'http' | 'healthcheck' | 'tcp' | 'exec';

/** Which kind a parsed (or hand-built: simulate, rehearse) readiness probe is. */
export function readinessKind(r: ReadinessProbe): ReadinessKind {
  if (r.healthcheck === true) return 'healthcheck';
  if (r.tcp !== undefined) return 'tcp';
  if (Array.isArray(r.exec)) return 'exec';
  return 'http';
}

const versionSchema = z
  .union([z.object({ path: httpPath.default(VERSION_DEFAULTS.path) }).strict(), z.boolean()], {
    error: (i) => `must be { path: /api/version } (an HTTP endpoint whose body is the version) or false (verify image and revision instead), ${got(i.input)}`,
  })
  .superRefine((v, ctx) => {
    if (v === true)
      ctx.addIssue({
        code: 'custom',
        message: 'must be { path: /api/version } (an HTTP endpoint whose body is the version) or false (verify image and revision instead), got true',
      });
  })
  .transform((v): VersionProbe => (typeof v === 'boolean' ? false : v));

export const probesSchema = z
  .object(
    {
      readiness: readinessInput.default({ ...READINESS_DEFAULTS }),
      version: versionSchema.default({ ...VERSION_DEFAULTS }),
    },
    { error: (i) => `must be a mapping: { readiness, version }, ${got(i.input)}` },
  )
  .strict()
  .default({ readiness: { ...READINESS_DEFAULTS }, version: { ...VERSION_DEFAULTS } });

export type ProbesParsed = zod.output<typeof probesSchema>;

/** True when verification asks an HTTP endpoint of every instance. */
export function versionOverHttp(v: VersionProbe): v is { path: string } {
  return v !== false;
}

/**
 * `port` is the app's port inside the container. It is needed when
 * something reaches the app over the network: load balancers send it
 * traffic, an HTTP or TCP-to-the-app-port readiness probe connects to it,
 * an HTTP version probe asks it. A worker (no load balancer, readiness from
 * its healthcheck or an exec, version: false) runs without one.
 */
export function portIssues(f: { port?: number | undefined; loadBalancers: readonly unknown[]; probes: ProbesParsed }): FieldIssue[] {
  if (f.port !== undefined) return [];
  const why: string[] = [];
  if (f.loadBalancers.length > 0) why.push(`the fleet has load balancers (loadBalancers: ${f.loadBalancers.length}) that send traffic to it`);
  const r = f.probes.readiness;
  const kind = readinessKind(r);
  if (kind === 'http') why.push(`probes/readiness is an HTTP GET of ${(r as HttpReadiness).path}`);
  if (kind === 'tcp')
    why.push(
      `probes/readiness is a TCP connect to ${(r as TcpReadiness).tcp === true ? 'the app port' : 'the container, whose address fleetroll finds through the app port'}`,
    );
  if (versionOverHttp(f.probes.version))
    why.push(`probes/version asks GET ${f.probes.version.path} (set version: false to verify the image and revision instead)`);
  if (why.length === 0) return [];
  return [{ path: 'port', message: `is required (the app's port inside the container, 1 to 65535): ${why.join('; ')}` }];
}

/**
 * Probe settings that contradict the rest of the fleet: a readiness that
 * trusts Docker's healthcheck cannot work with the fleet's healthcheck
 * switched off, and on a host that publishes the app port (publishAddress)
 * no other port of the container is reachable. (Whether the image has one is known only on a
 * host: engine/preflight.ts checks that.) `healthcheck` is the fleet's
 * container field (compose meaning), read loosely so this works before and
 * after that field exists in the schema.
 */
export function probeIssues(f: {
  probes: ProbesParsed;
  healthcheck?: unknown;
  hosts: readonly { name: string; publishAddress?: string | undefined }[];
}): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const r = f.probes.readiness;
  const kind = readinessKind(r);
  const h = f.healthcheck as { disable?: unknown } | undefined;
  if (kind === 'healthcheck' && h !== null && typeof h === 'object' && h.disable === true) {
    issues.push({
      path: 'probes/readiness/healthcheck',
      message:
        'needs a Docker healthcheck, but healthcheck: { disable: true } switches it off: remove disable, or choose another readiness (path, tcp or exec)',
    });
  }
  if (kind === 'tcp' && (r as TcpReadiness).tcp !== true) {
    const published = f.hosts.filter((x) => x.publishAddress !== undefined).map((x) => x.name);
    if (published.length > 0) {
      issues.push({
        path: 'probes/readiness/tcp/port',
        message: `cannot be reached on host(s) ${published.join(', ')}: with publishAddress only the app port is published; use tcp: true, or an exec probe for another port`,
      });
    }
  }
  return issues;
}

/** The fleet's own healthcheck (the container field), when it defines a test; undefined when it defers to the image's. */
export function fleetHealthcheckTest(f: object): unknown[] | string | undefined {
  const h = (f as { healthcheck?: unknown }).healthcheck as { test?: unknown; disable?: unknown } | undefined;
  if (h === null || typeof h !== 'object' || h.disable === true) return undefined;
  const t = h.test;
  if (typeof t === 'string' && t !== '') return t;
  if (Array.isArray(t) && t.length > 0 && t[0] !== 'NONE') return t;
  return undefined;
}
