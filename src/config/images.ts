/**
 * Where the fleet's image comes from: `registry:` (the credentials for a
 * private registry) and `pull:` (compose's pull_policy). The lead spreads
 * `imageFields` (or the two schemas) into fleetSchema.
 *
 * The password is a secret: no message here ever quotes it (zod's default
 * messages would), and a value that fails validation is described, not shown.
 */
import type * as zod from 'zod';
import * as z from './zod.js';

/** A registry host as Docker names it: host[:port] (no scheme, no path); "docker.io" for Docker Hub. */
const SERVER_RE = /^[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9])?(?::[0-9]{1,5})?$/;
/** Registry user names: printable, no whitespace or ":" (the basic-auth separator). */
const USERNAME_RE = /^[^\s:]{1,255}$/;

export const registrySchema = z
  .object(
    {
      server: z
        .string({ error: (i) => (i.input === undefined ? 'is required' : 'must be a string: the registry host[:port], e.g. registry.example:5000') })
        .regex(SERVER_RE, {
          error: (i) => `must be the registry host[:port] with no scheme or path (e.g. registry.example:5000 or docker.io), got ${JSON.stringify(i.input)}`,
        }),
      username: z
        .string({ error: (i) => (i.input === undefined ? 'is required' : 'must be a string') })
        .regex(USERNAME_RE, { error: 'must be a user name without spaces or ":"' }),
      // Never echo the input: it is the password (or what it was interpolated from).
      password: z
        .string({
          error: (i) =>
            i.input === undefined ? 'is required (normally "${REGISTRY_PASSWORD}", from the environment)' : `must be a string, got a ${typeof i.input}`,
        })
        .min(1, { error: 'must not be empty (is the environment variable it names set?)' }),
    },
    { error: 'must be a mapping: { server, username, password }' },
  )
  .strict();

/** compose's pull_policy: always pull, pull (or copy) only what is missing, never fetch. */
export const pullSchema = z.enum(['always', 'missing', 'never'], { error: (i) => `must be "always", "missing" or "never", got ${JSON.stringify(i.input)}` });

export type RegistryConfig = zod.output<typeof registrySchema>;
export type PullPolicy = zod.output<typeof pullSchema>;

/** The fleet-file fields this module owns, for fleetSchema. `pull` defaults to missing, what fleetroll always did. */
export const imageFields = {
  registry: registrySchema.optional(),
  pull: pullSchema.default('missing'),
};
