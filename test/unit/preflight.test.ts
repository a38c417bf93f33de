/**
 * Preflight's nginx check, on a fake router: what nginx -t says reaches the
 * user as it is, and the one failure a canary.force user meets on the way in
 * (nginx.conf naming the route variable before a deploy wrote its map) also
 * says how to get out of it.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Fleet } from '../../src/config/load.js';
import { RolloutFailedError } from '../../src/errors.js';
import { HostWork } from '../../src/engine/hostWork.js';
import { preflight } from '../../src/engine/preflight.js';
import type { LoadBalancer } from '../../src/engine/traffic.js';
import type { Clock } from '../../src/ports.js';

function failingCheck(message: string): LoadBalancer {
  return {
    upstream: 'api',
    template: '',
    router: {
      name: 'nginx lb-1',
      check: async () => {
        throw new Error(message);
      },
      read: async () => undefined,
      writeAndTest: async () => {},
      reload: async () => {},
    },
  };
}

async function preflightError(message: string): Promise<RolloutFailedError> {
  const clock = { now: () => 0 } as unknown as Clock;
  const err = await preflight({ image: 'api:1', hosts: [] } as unknown as Fleet, [failingCheck(message)], new HostWork(1), { runtimes: new Map(), clock, emit: () => {}, copyImages: false }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof RolloutFailedError, String(err));
  return err;
}

describe('preflight: nginx -t failures', () => {
  it('an nginx -t failure is listed as nginx said it, and nothing was changed', async () => {
    const err = await preflightError('nginx lb-1: nginx -t failed: [emerg] unexpected "}" in /etc/nginx/nginx.conf:12');
    assert.match(err.message, /^preflight failed, nothing was changed:\n {2}nginx lb-1: nginx -t failed: \[emerg\] unexpected "\}" in \/etc\/nginx\/nginx\.conf:12$/);
  });

  it('nginx.conf naming $fleetroll_<upstream>_route before the map exists: the way out is said', async () => {
    const err = await preflightError('nginx lb-1: nginx -t failed: [emerg] unknown "fleetroll_api_route" variable');
    assert.match(err.message, /unknown "fleetroll_api_route" variable\n {2}\(\$fleetroll_api_route is defined by the upstream file a deploy with strategy\.canary\.force writes: put proxy_pass back to http:\/\/<upstream> for this deploy, then proxy to http:\/\/\$fleetroll_api_route once it has run\)/);
  });
});
