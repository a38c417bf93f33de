/**
 * The part of zod that the fleet file's and the experiment spec's schemas use.
 * They import zod from here, never from 'zod' directly, so that `npm run build`
 * can replace this module in dist/ with a bundle of just these functions and
 * what they need (esbuild, tree-shaken: about 190 kB in one module instead of
 * zod's 94 modules and 750 kB, which include every locale's messages and the
 * JSON Schema converters). That keeps `fleetroll validate` within its start-up
 * target (bench/startup.ts: about 4 MB less peak memory). Run from src/ (tsx,
 * the tests) this is plain zod.
 *
 * A schema that needs another zod function adds it to this list.
 */
export { array, boolean, enum, literal, NEVER, number, object, record, string, union, unknown, ZodError } from 'zod';
