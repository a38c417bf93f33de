/**
 * Preflight's nginx check, on a fake router: what nginx -t says reaches the
 * user as it is, and the one failure a canary.force user meets on the way in
 * (nginx.conf naming the route variable before a deploy wrote its map) also
 * says how to get out of it; a canary.force fleet whose nginx.conf does not
 * proxy to the route variable is warned about (testers would silently get
 * the split), without stopping the deploy.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Fleet } from '../../src/config/load.js';
import { RolloutFailedError } from '../../src/errors.js';
import { HostWork } from '../../src/engine/hostWork.js';
import { preflight } from '../../src/engine/preflight.js';
import type { LoadBalancer } from '../../src/engine/traffic.js';
import type { Clock, Router } from '../../src/ports.js';
import type { RolloutEvent } from '../../src/engine/events.js';

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
  const err = await preflight({ image: 'api:1', hosts: [] } as unknown as Fleet, [failingCheck(message)], new HostWork(1), {
    runtimes: new Map(),
    clock,
    emit: () => {},
    copyImages: false,
  }).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof RolloutFailedError, String(err));
  return err;
}

describe('preflight: nginx -t failures', () => {
  it('an nginx -t failure is listed as nginx said it, and nothing was changed', async () => {
    const err = await preflightError('nginx lb-1: nginx -t failed: [emerg] unexpected "}" in /etc/nginx/nginx.conf:12');
    assert.match(
      err.message,
      /^preflight failed, nothing was changed:\n {2}nginx lb-1: nginx -t failed: \[emerg\] unexpected "\}" in \/etc\/nginx\/nginx\.conf:12$/,
    );
  });

  it('nginx.conf naming $fleetroll_<upstream>_route before the map exists: the way out is said', async () => {
    const err = await preflightError('nginx lb-1: nginx -t failed: [emerg] unknown "fleetroll_api_route" variable');
    assert.match(
      err.message,
      /unknown "fleetroll_api_route" variable\n {2}\(\$fleetroll_api_route is defined by the upstream file a deploy with strategy\.canary\.force writes: put proxy_pass back to http:\/\/<upstream> for this deploy, then proxy to http:\/\/\$fleetroll_api_route once it has run\)/,
    );
  });
});

describe('preflight: canary.force and what nginx.conf proxies to', () => {
  const canary = (force?: string) => ({ image: 'api:1', hosts: [], strategy: { type: 'Canary', canary: { force, steps: [] } } }) as unknown as Fleet;
  async function notices(fleet: Fleet, config: string | undefined): Promise<string[]> {
    const router: Router = {
      name: 'nginx lb-1',
      check: async () => {},
      read: async () => undefined,
      writeAndTest: async () => {},
      reload: async () => {},
      ...(config !== undefined ? { config: async () => config } : {}),
    };
    const seen: string[] = [];
    const clock = { now: () => 0 } as unknown as Clock;
    await preflight(fleet, [{ upstream: 'api', template: '', router }], new HostWork(1), {
      runtimes: new Map(),
      clock,
      emit: (e: RolloutEvent) => {
        if (e.type === 'info') seen.push(e.message);
      },
      copyImages: false,
    });
    return seen;
  }
  const rows: { name: string; fleet: Fleet; config: string | undefined; warned: boolean }[] = [
    {
      name: 'force set, nginx.conf proxies to the main upstream: warned',
      fleet: canary('header:X-Canary'),
      config: 'location / { proxy_pass http://api; }',
      warned: true,
    },
    {
      name: 'force set, nginx.conf proxies to the route variable: quiet',
      fleet: canary('header:X-Canary'),
      config: 'map $http_x_canary $fleetroll_api_route { default api; }\nlocation / {\n    proxy_pass http://$fleetroll_api_route;\n}',
      warned: false,
    },
    {
      name: 'the map alone (in the upstream file) is not a proxy_pass: warned',
      fleet: canary('cookie:canary'),
      config: 'map $http_cookie $fleetroll_api_route { default api; }\nlocation / { proxy_pass http://api; }',
      warned: true,
    },
    {
      name: "another upstream's route variable is not this one: warned",
      fleet: canary('header:X-Canary'),
      config: 'location / { proxy_pass http://$fleetroll_api2_route; }',
      warned: true,
    },
    { name: 'no force: nothing read, quiet', fleet: canary(undefined), config: 'location / { proxy_pass http://api; }', warned: false },
    { name: 'a router that cannot show its config: quiet', fleet: canary('header:X-Canary'), config: undefined, warned: false },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      const seen = await notices(row.fleet, row.config);
      if (!row.warned) assert.deepEqual(seen, []);
      else {
        assert.equal(seen.length, 1, seen.join('\n'));
        assert.match(
          seen[0]!,
          /^warning: nginx lb-1: canary\.force is set, but no proxy_pass in its config uses \$fleetroll_api_route, so the (header X-Canary|cookie canary) is ignored \(testers get the weighted split\); once this deploy has written the map, change proxy_pass http:\/\/api to proxy_pass http:\/\/\$fleetroll_api_route and reload nginx$/,
        );
      }
    });
  }
});
