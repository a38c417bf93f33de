/**
 * What a user is told when a Docker engine does not answer
 * (src/adapters/dockerConnect.ts), without an engine or a socket: the error
 * is built from a failed ping's error as the runtime gets it. A stopped local
 * engine gets a command that starts it: the repository's set-up script when
 * fleetroll runs from a checkout, dockerd itself from the published package
 * (which has no scripts/).
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { repoSetupScript, unreachableError, unreachableHint } from '../../src/adapters/dockerConnect.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const LOCAL = 'unix:///var/run/docker.sock';
const refused = Object.assign(new Error('connect ENOENT /var/run/docker.sock'), { code: 'ENOENT' });

describe('a Docker engine that does not answer', () => {
  it('the local engine, from the repository: the set-up script, relative to the working directory', () => {
    assert.ok(existsSync(join(root, 'scripts/setup-host.sh')), 'this checkout has the script');
    assert.equal(repoSetupScript(root), 'scripts/setup-host.sh');
    assert.equal(repoSetupScript(join(root, '..', 'not-the-checkout')), join(root, 'scripts/setup-host.sh'), 'outside the checkout: the absolute path');
    assert.equal(
      unreachableHint(LOCAL, { setupScript: 'scripts/setup-host.sh', asRoot: true }),
      'is dockerd running? start it (installing it if missing) with: bash scripts/setup-host.sh',
    );
    assert.match(unreachableHint(LOCAL, { setupScript: 'scripts/setup-host.sh', asRoot: false }), /with: sudo bash scripts\/setup-host\.sh$/);
  });

  it('the local engine, from the published package: how to start dockerd, no script named', () => {
    const hint = unreachableHint(LOCAL, { setupScript: undefined, asRoot: false });
    assert.equal(hint, 'is dockerd running? start it with: sudo systemctl start docker (without systemd: sudo dockerd &; Docker Desktop: start the app)');
    assert.doesNotMatch(hint, /setup-host/);
    assert.doesNotMatch(unreachableHint(LOCAL, { setupScript: undefined, asRoot: true }), /sudo/, 'root needs no sudo');
  });

  it('a socket of its own: dockerd on that socket (the set-up script starts the default one only)', () => {
    const hint = unreachableHint('unix:///tmp/fleetroll-no-such.sock', { setupScript: 'scripts/setup-host.sh', asRoot: true });
    assert.equal(hint, 'is dockerd running on that socket? start it with: dockerd -H unix:///tmp/fleetroll-no-such.sock &');
  });

  it('ssh:// and tcp:// hosts keep their own hints', () => {
    assert.match(unreachableHint('ssh://deploy@vm1:2222'), /`ssh -p 2222 deploy@vm1 docker version` works without a prompt/);
    assert.equal(unreachableHint('tcp://vm1:2376'), 'is dockerd listening on that address (and TLS configured to match)?');
  });

  it('the error names the host and what happened, and carries the hint for the CLI to print', () => {
    const err = unreachableError('Docker host local (unix:///var/run/docker.sock)', LOCAL, false, refused, 5000, undefined);
    assert.equal(err.code, 'E_DOCKER_UNREACHABLE');
    assert.equal(err.exitCode, 1);
    assert.ok(err.hint);
    assert.equal(err.message, `cannot reach Docker host local (unix:///var/run/docker.sock): ENOENT; ${err.hint}`);
    const timedOut = unreachableError(
      'Docker host local (unix:///var/run/docker.sock)',
      LOCAL,
      false,
      Object.assign(new Error('aborted'), { name: 'TimeoutError' }),
      5000,
      undefined,
    );
    assert.match(timedOut.message, /: no answer within 5000 ms; /);
  });
});
