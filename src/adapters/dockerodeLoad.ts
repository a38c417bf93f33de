/**
 * Loads dockerode without two modules that it and docker-modem require when
 * they load, for features fleetroll never uses:
 * - dockerode's `./session`, which pulls in gRPC and protobufjs, for
 *   `buildImage` with BuildKit (`version: "2"`) only;
 * - docker-modem's `./ssh`, which pulls in ssh2, for its own `protocol: 'ssh'`:
 *   fleetroll speaks plain HTTP to every engine and reaches ssh:// hosts
 *   through its own agent (./ssh.ts), which loads ssh2 itself when a host
 *   needs it.
 * Together about 120 ms of every command's start on this machine, more when it
 * is busy. Each is put in the require cache as a function that says it is not
 * there, before the module that asks for it loads. Should a package move its
 * file, that entry is simply not made and the package loads as it is.
 */
import { createRequire } from 'node:module';
import type Dockerode from 'dockerode';

const require = createRequire(import.meta.url);
let loaded: typeof Dockerode | undefined;

const notLoaded = (what: string) =>
  function unavailable(...args: unknown[]): void {
    const err = new Error(`fleetroll loads dockerode without ${what}`);
    const callback = args.findLast((a) => typeof a === 'function') as ((e: Error) => void) | undefined;
    if (callback) callback(err);
    else throw err;
  };

/** Puts `exports` in the require cache as the module `file` resolves to, as seen from `from`. */
function stub(from: string, file: string, exports: unknown): void {
  try {
    const path = createRequire(from).resolve(file);
    if (require.cache[path]) return;
    const Module = require('node:module') as { new (id: string): NodeJS.Module };
    const m = new Module(path);
    m.filename = path;
    m.loaded = true;
    m.exports = exports;
    require.cache[path] = m;
  } catch {
    // Not where it was: the package loads its own module.
  }
}

export function dockerodeClass(): typeof Dockerode {
  if (loaded) return loaded;
  try {
    const dockerode = require.resolve('dockerode');
    stub(dockerode, './session.js', notLoaded('BuildKit sessions (buildImage with version "2")'));
    stub(
      createRequire(dockerode).resolve('docker-modem'),
      './ssh.js',
      notLoaded("docker-modem's ssh protocol (ssh:// hosts go through fleetroll's own agent)"),
    );
  } catch {
    // dockerode itself is missing: the require below says so.
  }
  loaded = require('dockerode') as typeof Dockerode;
  return loaded;
}
