/**
 * The TCP readiness probe (adapters/probes.ts) against real sockets on
 * 127.0.0.1: a listening port is ready, a closed one is not. The probes'
 * other rules, and the workers that use them, are in test/unit/worker.test.ts.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import { buildProber, tcpConnects } from '../../src/adapters/probes.js';
import type { ProbeTarget, Runtime } from '../../src/ports.js';

describe('the TCP and HTTP probes on 127.0.0.1', () => {
  let server: net.Server;
  let port = 0;
  let closed = 0;
  before(async () => {
    server = net.createServer((s) => s.end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as net.AddressInfo).port;
    // A port nothing listens on: bind one, then close it.
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    closed = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const none = new Map<string, Runtime>();
  const t = (address?: string): ProbeTarget => ({ id: 'c1', host: 'local', address });

  it('tcp: true connects to the app address', async () => {
    const p = buildProber({ readiness: { tcp: true, periodMs: 100, timeoutMs: 500 }, version: false }, none);
    assert.equal(await p.ready(t(`127.0.0.1:${port}`)), true);
    assert.equal(await p.ready(t(`127.0.0.1:${closed}`)), false);
    assert.equal(await p.ready(t(undefined)), false, 'no address: not ready');
  });

  it('tcp: { port } connects to that port of the same address', async () => {
    const p = buildProber({ readiness: { tcp: { port }, periodMs: 100, timeoutMs: 500 }, version: false }, none);
    assert.equal(await p.ready(t(`127.0.0.1:${closed}`)), true);
    assert.equal(await tcpConnects('127.0.0.1', closed, 500), false);
  });
});
