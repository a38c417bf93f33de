/**
 * The fleet file schema. Everything that later reaches Docker or an nginx
 * config file is constrained here to a safe character set, so that no input
 * can inject nginx directives or shell syntax (we never build shell strings,
 * but nginx config is text).
 */
import type * as zod from 'zod';
import * as z from './zod.js';
import { int, pattern, seconds } from './fields.js';
import { analysisSchema } from './analysis.js';
import { containerFields } from './container.js';
import { MAX_REPLICAS } from '../core/strategy.js';
import { probesSchema } from './probes.js';
import { imageFields } from './images.js';
import { notifySchema } from './notify.js';

export const SERVICE_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
const HOST_NAME_RE = /^[a-z0-9][a-z0-9-]{0,62}$/;
/** Docker object names (containers, networks): Docker's own rule. */
const DOCKER_NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
/** nginx upstream names: an identifier, nothing nginx could read as syntax. */
const UPSTREAM_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** An image reference: [registry/]name[:tag][@digest], no whitespace or quotes. */
export const IMAGE_RE = /^[A-Za-z0-9][A-Za-z0-9._\-/:@]{0,254}$/;
/** Absolute file paths for upstream files. */
const ABS_PATH_RE = /^\/[A-Za-z0-9._\-/]+$/;
/** loadBalancers[].nginx.accessLog: an absolute file path, or "stdout" (the container's log stream). */
const ACCESS_LOG_RE = /^(?:stdout|\/[A-Za-z0-9._\-/]+)$/;
const ENV_KEY_RE = /^[A-Za-z_][A-Za-z0-9_]*$/;
export const VERSION_RE = /^[A-Za-z0-9][A-Za-z0-9._+\-]{0,127}$/;
const DOCKER_ENDPOINT_RE = /^(unix:\/\/\/[A-Za-z0-9._\-/]+|tcp:\/\/[A-Za-z0-9.\-]+:[0-9]{1,5}|ssh:\/\/([A-Za-z0-9._\-]+@)?[A-Za-z0-9.\-]+(:[0-9]{1,5})?)$/;

/** An etcd client URL: http(s)://host:port. */
const ETCD_ENDPOINT_RE = /^https?:\/\/[A-Za-z0-9.\-]+:[0-9]{1,5}$/;
/** An etcd key prefix: "/" then path characters; the fleet's keys live under prefix/service/. */
const ETCD_PREFIX_RE = /^\/[A-Za-z0-9._\-/]{0,200}$/;

/**
 * Where the fleet's state and lock live. Absent: a Docker volume and a lock
 * container on the first host. `etcd`: an etcd v3 cluster (adapters/etcdState.ts);
 * its user name and password come from FLEETROLL_ETCD_USERNAME / _PASSWORD, never the file.
 */
const stateSchema = z
  .object(
    {
      etcd: z
        .object(
          {
            endpoints: z
              .array(pattern(ETCD_ENDPOINT_RE, 'an etcd client URL: http://host:port or https://host:port'))
              .min(1, { error: 'must list at least one etcd endpoint' }),
            prefix: pattern(ETCD_PREFIX_RE, 'a key prefix starting with "/" (letters, digits, ".", "_", "-", "/")').default('/fleetroll'),
            tls: z
              .object({
                ca: pattern(ABS_PATH_RE, 'an absolute path'),
                cert: pattern(ABS_PATH_RE, 'an absolute path').optional(),
                key: pattern(ABS_PATH_RE, 'an absolute path').optional(),
              })
              .strict()
              .optional(),
          },
          { error: 'must be { endpoints: [http://10.0.0.5:2379, ...], prefix: /fleetroll, tls: { ca, cert, key } }' },
        )
        .strict(),
    },
    { error: 'must be { etcd: { endpoints: [...] } } (leave state out to keep it in a Docker volume on the first host)' },
  )
  .strict();

/** The rollout settings a fleet may set itself or take from shared defaults. */
const rolloutFields = {
  state: stateSchema.optional(),
  // strategy and replacementPolicy are layers of the strategy: config/strategy.ts checks
  // them (with the shared defaults', the flags' and replicas) and names a defaults file's
  // problems by that file, so the schema only carries them.
  strategy: z.unknown().optional(),
  minReadySeconds: seconds(0, 86400).optional(),
  progressDeadlineSeconds: seconds(1, 86400).optional(),
  drainSeconds: seconds(0, 3600).optional(),
  terminationGracePeriodSeconds: seconds(0, 3600).optional(),
  revisionHistoryLimit: int(0, 1000).optional(),
  /** How many hosts may have Docker work in flight at once (work on one host is always in order). */
  hostParallelism: int(1, 1000).optional(),
  /** TerminationStarted | TerminationComplete: checked by config/strategy.ts with the other strategy layers. */
  replacementPolicy: z.unknown().optional(),
};

/** What shared defaults may hold: a default rollout and its timings. */
export const defaultsSchema = z.object(rolloutFields).strict();

const hostSchema = z
  .object({
    name: pattern(HOST_NAME_RE, 'lowercase letters, digits and dashes, starting with a letter or digit (max 63)'),
    docker: pattern(DOCKER_ENDPOINT_RE, 'a Docker endpoint: unix:///path, tcp://host:port or ssh://user@host').default('unix:///var/run/docker.sock'),
    network: pattern(DOCKER_NAME_RE, 'a Docker network name (letters, digits, "_", ".", "-")').optional(),
    tls: z
      .object({ ca: pattern(ABS_PATH_RE, 'an absolute path'), cert: pattern(ABS_PATH_RE, 'an absolute path'), key: pattern(ABS_PATH_RE, 'an absolute path') })
      .strict()
      .optional(),
    /** ssh:// only: the private key to log in with, instead of the agent or ~/.ssh/id_*. */
    ssh: z
      .object({ identityFile: pattern(ABS_PATH_RE, 'an absolute path') })
      .strict()
      .optional(),
    maxInstances: int(1, 10000).optional(),
    /** The host's address as nginx reaches it: instances publish their port there. */
    publishAddress: pattern(/^(?:[0-9]{1,3}\.){3}[0-9]{1,3}$/, 'an IPv4 address of the host, as the load balancers reach it').optional(),
  })
  .strict();

const nginxSchema = z
  .object({
    container: pattern(DOCKER_NAME_RE, 'a Docker container name').optional(),
    host: pattern(HOST_NAME_RE, 'the name of an entry in hosts').optional(),
    exec: z.boolean().optional(),
    /** With exec: the nginx.conf of that nginx when not the default (passed as -c). */
    config: pattern(ABS_PATH_RE, 'an absolute path of letters, digits, ".", "_", "-" and "/"').optional(),
    /**
     * reload: membership goes into the upstream file, `nginx -t`, reload.
     * dynamic: into fleetroll's Lua balancer through a peers file, no reload
     * (adapters/nginxDynamic.ts, templates/nginx-dynamic.conf.example).
     */
    mode: z
      .enum(['reload', 'dynamic'], {
        error: (i) =>
          `must be reload (rewrite the upstream file and reload nginx) or dynamic (fleetroll's Lua balancer, no reload), got ${JSON.stringify(i.input)}`,
      })
      .default('reload'),
    /** reload mode: the file fleetroll owns, which the nginx config includes. */
    upstreamFile: pattern(ABS_PATH_RE, 'an absolute path of letters, digits, ".", "_", "-" and "/"').optional(),
    /** dynamic mode: where the peers file goes (default /tmp/fleetroll-<upstream>.peers); the status file is beside it. */
    peersFile: pattern(ABS_PATH_RE, 'an absolute path of letters, digits, ".", "_", "-" and "/"').optional(),
    upstream: pattern(UPSTREAM_RE, 'an nginx upstream name: letters, digits and "_", starting with a letter or "_"'),
    /** Own upstream template (path relative to the fleet file); default templates/upstream.conf.tmpl. */
    template: z.string().min(1).optional(),
    /**
     * Where this nginx writes its fleetroll_json access log, for the deploy's
     * health numbers: an absolute path (inside the container with `container`,
     * on this machine with `exec: true`) or "stdout" (the container's log stream).
     */
    accessLog: pattern(
      ACCESS_LOG_RE,
      'the absolute path of the access log this nginx writes with the fleetroll_json format (e.g. /var/log/nginx/fleetroll.log: inside the container, or on this machine with exec: true) or "stdout" (the nginx container\'s own log stream)',
    ).optional(),
  })
  .strict();

/** A hook is an argument array, never a shell string: ["./check-errors.sh", "--max", "0.1"]. */
const hookCommand = z
  .array(z.string().min(1, { error: 'hook arguments must not be empty' }), {
    error: 'must be an argument array like ["./check.sh", "--max-errors", "0"] (no shell string)',
  })
  .min(1, { error: 'must name a program to run' });

export const fleetSchema = z
  .object({
    service: pattern(SERVICE_RE, 'lowercase letters, digits and dashes, starting with a letter or digit (max 63)'),
    image: pattern(IMAGE_RE, 'a Docker image reference like "name:tag"'),
    replicas: int(0, MAX_REPLICAS),
    /** Required only where something reaches the app over the network (config/probes.ts portIssues). */
    port: int(1, 65535, 'a port').optional(),
    env: z
      .record(z.string().regex(ENV_KEY_RE), z.union([z.string(), z.number(), z.boolean()], { error: 'env values must be strings, numbers or booleans' }))
      .optional(),
    /** dotenv files (relative to the fleet file) whose values join env; env's own entries win. Values are secrets. */
    envFile: z
      .union([z.string().min(1), z.array(z.string().min(1))], {
        error: (i) => `must be a path or a list of paths to dotenv files, got ${JSON.stringify(i.input)}`,
      })
      .transform((v) => (Array.isArray(v) ? v : [v]))
      .optional(),
    /** Take the container from a service of the team's compose file; the fleet file's own fields win. */
    compose: z
      .object(
        {
          file: z.string().min(1),
          service: z.string().regex(/^[a-zA-Z0-9._-]{1,63}$/, { error: (i) => `must be a compose service name, got ${JSON.stringify(i.input)}` }),
          /** Compose fields to leave out by name: only build, container_name and depends_on (how compose itself starts the service). */
          ignore: z
            .array(
              z.enum(['build', 'container_name', 'depends_on'], {
                error: (i) => `may name build, container_name or depends_on (what compose itself uses to start the service), got ${JSON.stringify(i.input)}`,
              }),
            )
            .optional(),
        },
        { error: 'must be { file: ./docker-compose.yml, service: NAME, ignore: [...] }' },
      )
      .strict()
      .optional(),
    ...containerFields,
    hosts: z
      .array(hostSchema)
      .min(1, { error: 'must list at least one Docker host' })
      .default([{ name: 'local', docker: 'unix:///var/run/docker.sock' }]),
    probes: probesSchema,
    version: pattern(VERSION_RE, 'a version string of letters, digits, ".", "_", "+", "-"').optional(),
    group: z.boolean().default(false),
    defaults: z.union([z.string().min(1), defaultsSchema], { error: 'must be a path to a defaults file or an inline mapping' }).optional(),
    ...rolloutFields,
    hooks: z
      .object({
        preDeploy: hookCommand.optional(),
        postWave: hookCommand.optional(),
        postDeploy: hookCommand.optional(),
        /** BlueGreen: runs once the new set is available (and in the preview upstream), before the switch; a failure keeps traffic on the old set. */
        prePromotion: hookCommand.optional(),
        /** Once a rollout has failed (after its rollback, if any), with FLEETROLL_ERROR_CODE and FLEETROLL_ERROR_REASON; its own failure is only logged. */
        onFailure: hookCommand.optional(),
        timeoutSeconds: seconds(1, 3600).default(60),
      })
      .strict()
      .optional(),
    /**
     * A new instance that exits within this long of first becoming ready has
     * crashed (Docker Swarm's update monitor). Default: minReadySeconds, at least 5.
     */
    monitorSeconds: seconds(0, 86400).optional(),
    /** How many new instances may crash in their monitor window, each replaced, before the rollout fails. Default 0. */
    maxFailures: int(0, MAX_REPLICAS).optional(),
    onFailure: z.enum(['pause', 'rollback'], { error: (i) => `must be "pause" or "rollback", got ${JSON.stringify(i.input)}` }).optional(),
    /** Webhooks told of rollouts (config/notify.ts); their URLs and header values are secrets. */
    notify: notifySchema.optional(),
    /** The analysis gate (core/gate.ts): a canary's analysis steps, and RollingUpdate after its first wave. */
    analysis: analysisSchema.optional(),
    loadBalancers: z.array(z.object({ nginx: nginxSchema }).strict()).default([]),
    // registry, pull (config/images.ts).
    ...imageFields,
  })
  .strict();

export type FleetFileParsed = zod.output<typeof fleetSchema>;
export type DefaultsParsed = zod.output<typeof defaultsSchema>;
