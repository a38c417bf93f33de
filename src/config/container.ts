/**
 * The container fields of a fleet file: compose-spec's meaning, camelCase
 * names (docs/fleet-file.md lists each with its compose equivalent). Each is
 * validated here, with its path, into core/container.ts's normalized
 * ContainerConfig; nothing that reaches Docker is taken unchecked, and every
 * field joins the revision hash (engine/revision.ts), so changing a limit or
 * a mount rolls the fleet.
 *
 * The fields' schemas: containerMounts.ts, containerRuntime.ts,
 * containerCreate.ts, on containerValues.ts.
 */
import type * as zod from 'zod';
import * as z from './zod.js';
import type { ContainerConfig } from '../core/container.js';
import { createOptions } from './containerCreate.js';
import { secretFiles, secretsList, tmpfs, volumes } from './containerMounts.js';
import { caps, devices, extraHosts, gpus, healthcheck, labels, logging, networks, resources, restart, sysctls, ulimits } from './containerRuntime.js';
import { absPath, argv, bytes, got, SIGNAL_RE, USER_RE } from './containerValues.js';

/** The container fields, spread into the fleet file's schema. */
export const containerFields = {
  command: argv('a command').optional(),
  entrypoint: argv('an entrypoint').optional(),
  workingDir: absPath('a working directory').optional(),
  user: z
    .string({ error: (i) => `must be a user: NAME, UID or UID:GID, ${got(i.input)}` })
    .regex(USER_RE, { error: (i) => `must be a user: NAME, UID or UID:GID, ${got(i.input)}` })
    .optional(),
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
  stopSignal: z
    .string({ error: (i) => `must be a signal name like SIGINT, ${got(i.input)}` })
    .regex(SIGNAL_RE, { error: (i) => `must be a signal name like SIGINT or SIGQUIT, ${got(i.input)}` })
    .optional(),
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
