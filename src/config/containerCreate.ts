/**
 * `dockerCreateOptions`, the escape hatch: Docker Engine API create options
 * for what no field covers, minus the keys fleetroll owns or a field sets.
 */
import * as z from './zod.js';
import { got, issue } from './containerValues.js';

/** Keys of the escape hatch fleetroll owns: setting them there would break the engine's own bookkeeping. */
const OWNED_CREATE_KEYS = [
  'name',
  'Image',
  'Env',
  'Labels',
  'ExposedPorts',
  'StopTimeout',
  'Cmd',
  'Entrypoint',
  'HostConfig.NetworkMode',
  'HostConfig.PortBindings',
  'HostConfig.Mounts',
  'HostConfig.Binds',
  'HostConfig.AutoRemove',
  'NetworkingConfig',
];
/**
 * Keys a fleet field already sets: the field is the one place for them, so
 * the escape hatch cannot silently override it (the value would also escape
 * the diff `plan` prints). Named with the field to use.
 */
const FIELD_CREATE_KEYS: Record<string, string> = {
  User: 'user',
  WorkingDir: 'workingDir',
  Healthcheck: 'healthcheck',
  StopSignal: 'stopSignal',
  'HostConfig.RestartPolicy': 'restart',
  'HostConfig.Memory': 'resources.memory',
  'HostConfig.MemoryReservation': 'resources.memoryReservation',
  'HostConfig.NanoCpus': 'resources.cpus',
  'HostConfig.PidsLimit': 'resources.pidsLimit',
  'HostConfig.LogConfig': 'logging',
  'HostConfig.Tmpfs': 'tmpfs',
  'HostConfig.ReadonlyRootfs': 'readOnly',
  'HostConfig.ExtraHosts': 'extraHosts',
  'HostConfig.Ulimits': 'ulimits',
  'HostConfig.CapAdd': 'capAdd',
  'HostConfig.CapDrop': 'capDrop',
  'HostConfig.ShmSize': 'shmSize',
  'HostConfig.Sysctls': 'sysctls',
  'HostConfig.Devices': 'devices',
  'HostConfig.DeviceRequests': 'gpus',
};
const PASCAL_RE = /^[A-Z][A-Za-z0-9]{0,63}$/;

/**
 * `dockerCreateOptions`: Docker Engine API create options for what no field
 * covers (e.g. { HostConfig: { OomScoreAdj: 100 } }). Keys must be the API's
 * PascalCase names; the ones fleetroll sets itself are refused, saying which
 * field to use instead. The engine rejects unknown keys' values itself.
 */
export const createOptions = z
  .record(z.string(), z.unknown(), { error: (i) => `must be a mapping of Docker Engine API create options, ${got(i.input)}` })
  .transform((v, ctx) => {
    for (const [k, x] of Object.entries(v)) {
      if (!PASCAL_RE.test(k)) issue(ctx, `must be a Docker Engine API create option name (PascalCase, like HostConfig or Hostname), ${got(k)}`, [k]);
      else if (OWNED_CREATE_KEYS.includes(k))
        issue(ctx, `is set by fleetroll (use the fleet file's own fields: image, env, labels, port, command, entrypoint, volumes)`, [k]);
      else if (FIELD_CREATE_KEYS[k]) issue(ctx, `is the fleet file's ${FIELD_CREATE_KEYS[k]} field: set it there`, [k]);
      if (k === 'HostConfig') {
        if (x === null || typeof x !== 'object' || Array.isArray(x)) issue(ctx, 'must be a mapping', [k]);
        else
          for (const hk of Object.keys(x)) {
            if (!PASCAL_RE.test(hk)) issue(ctx, `must be a HostConfig option name (PascalCase), ${got(hk)}`, [k, hk]);
            else if (OWNED_CREATE_KEYS.includes(`HostConfig.${hk}`)) issue(ctx, 'is set by fleetroll (use hosts[].network, volumes or networks)', [k, hk]);
            else if (FIELD_CREATE_KEYS[`HostConfig.${hk}`])
              issue(ctx, `is the fleet file's ${FIELD_CREATE_KEYS[`HostConfig.${hk}`]} field: set it there`, [k, hk]);
          }
      }
    }
    return v;
  });
