/**
 * The final check of a rollout (engine/verify.ts) with the real HTTP prober
 * against a server on 127.0.0.1 and the real clock: the status an instance
 * answers decides whether it is asked again (a busy 503) or not (a definite
 * 404). The rest of verify runs on a virtual clock in test/unit/verify.test.ts.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { HttpProber } from '../../src/adapters/http.js';
import { fleetFromObject, type Fleet } from '../../src/config/load.js';
import { verify } from '../../src/engine/verify.js';
import { systemClock } from '../../src/ports.js';

function apiFleet(): Promise<Fleet> {
  return fleetFromObject({ service: 'api', image: 'api:1.1.0', replicas: 3, port: 8080, hosts: [{ name: 'h1' }], progressDeadlineSeconds: 30 }, 'api.yaml');
}

describe('the HTTP version probe says what it was answered', () => {
  const rows: { name: string; status: number; retried: boolean }[] = [
    { name: '404: a definite answer, asked once', status: 404, retried: false },
    { name: '503: a busy instance, asked again', status: 503, retried: true },
  ];
  for (const row of rows) {
    it(row.name, async () => {
      let asked = 0;
      const server = http.createServer((_req, res) => {
        asked++;
        res.writeHead(asked === 1 ? row.status : 200).end(asked === 1 ? 'nope' : '1.1.0');
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
        const prober = new HttpProber({ readinessPath: '/health/ready', versionPath: '/api/version', timeoutMs: 2000 });
        await assert.rejects(prober.version(address), (err: unknown) => (err as { status?: number }).status === row.status);
        asked = 0;
        // The real clock: the one backoff here is at most 250 ms.
        const run = verify(await apiFleet(), 'rev1', [{ id: 'api-1', host: 'h1', address }], { prober, runtimes: new Map() }, () => {}, {
          clock: systemClock,
          budgetMs: 5000,
        });
        const got = await run.then(
          () => 'verified',
          (err: unknown) => (err as Error).message,
        );
        assert.equal(asked, row.retried ? 2 : 1);
        if (row.retried) assert.equal(got, 'verified');
        else assert.match(got, /answered HTTP 404: nope/);
      } finally {
        server.close();
      }
    });
  }
});
