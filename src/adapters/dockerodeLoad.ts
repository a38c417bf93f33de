/**
 * Loads dockerode without its BuildKit session support. dockerode requires
 * `./session` when it loads, and that pulls in gRPC and protobufjs (about
 * 90 ms of every command's start on this machine, more when it is busy) for
 * one thing only: `buildImage` with BuildKit (`version: "2"`), which
 * fleetroll never calls. The session module is put in the require cache as a
 * function that says so, before dockerode asks for it. Should dockerode
 * move that file, the cache entry is simply not made and dockerode loads as
 * it is.
 */
import { createRequire } from 'node:module';
import type Dockerode from 'dockerode';

const require = createRequire(import.meta.url);
let loaded: typeof Dockerode | undefined;

/** The session stub: dockerode calls it as withSession(docker, auth, handler). */
function noSession(_docker: unknown, _auth: unknown, handler: (err: Error) => void): void {
  handler(new Error('fleetroll loads dockerode without BuildKit sessions (buildImage with version "2")'));
}

export function dockerodeClass(): typeof Dockerode {
  if (loaded) return loaded;
  try {
    const file = require.resolve('dockerode/lib/session.js');
    if (!require.cache[file]) {
      const Module = require('node:module') as { new (id: string): NodeJS.Module };
      const stub = new Module(file);
      stub.filename = file;
      stub.loaded = true;
      stub.exports = noSession;
      require.cache[file] = stub;
    }
  } catch {
    // Not where it was: dockerode loads its own session module.
  }
  loaded = require('dockerode') as typeof Dockerode;
  return loaded;
}
