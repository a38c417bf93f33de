/**
 * Which Docker events take an instance out of service, and the text edit
 * that takes it out of an upstream file (fleetroll watch, on the event).
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { markServersDown, takesOutOfService } from '../../src/core/faultEvents.js';
import { parseUpstreamServers } from '../../src/core/upstream.js';

describe('takesOutOfService', () => {
  const rows: { name: string; e: { action: string; signal?: string }; out: boolean }[] = [
    { name: 'an exit', e: { action: 'die' }, out: true },
    { name: 'docker stop', e: { action: 'stop' }, out: true },
    { name: 'removed', e: { action: 'destroy' }, out: true },
    { name: 'out of memory', e: { action: 'oom' }, out: true },
    { name: 'frozen (docker pause)', e: { action: 'pause' }, out: true },
    { name: 'left a network', e: { action: 'disconnect' }, out: true },
    { name: 'its healthcheck failed', e: { action: 'health_status: unhealthy' }, out: true },
    { name: 'SIGKILL by number', e: { action: 'kill', signal: '9' }, out: true },
    { name: 'SIGTERM by name', e: { action: 'kill', signal: 'SIGTERM' }, out: true },
    { name: 'SIGHUP asks for a reload: stays', e: { action: 'kill', signal: 'HUP' }, out: false },
    { name: 'SIGUSR1: stays', e: { action: 'kill', signal: '10' }, out: false },
    { name: 'a start', e: { action: 'start' }, out: false },
    { name: 'unpaused', e: { action: 'unpause' }, out: false },
    { name: 'healthy again', e: { action: 'health_status: healthy' }, out: false },
    { name: 'joined a network', e: { action: 'connect' }, out: false },
  ];
  for (const r of rows) it(r.name, () => assert.equal(takesOutOfService(r.e), r.out));
});

describe('markServersDown', () => {
  const reload = [
    '# Managed by fleetroll',
    'upstream api {',
    '    server 10.0.0.2:8080; # api-a',
    '    server 10.0.0.3:8080 down; # api-b',
    '    server 10.0.0.4:8080 weight=3; # api-c',
    '}',
    '# Preview of the new set (blue-green), before the switch.',
    'upstream api_preview {',
    '    server 10.0.0.4:8080 weight=3; # api-c',
    '}',
    '',
  ].join('\n');
  const dynamic = [
    '# fleetroll dynamic mode',
    'upstream api {',
    '    server 10.0.0.2:8080; # api-a',
    '    server 10.0.0.4:8080 down weight=2; # api-c',
    '}',
    '',
  ].join('\n');
  const rows: { name: string; text: string; names: string[]; marked: string[]; down: string[] }[] = [
    { name: 'one in service: marked, the rest as it was', text: reload, names: ['api-a'], marked: ['api-a'], down: ['api-a', 'api-b'] },
    { name: 'already down: nothing changes', text: reload, names: ['api-b'], marked: [], down: ['api-b'] },
    { name: 'weighted, in every block it is in', text: reload, names: ['api-c'], marked: ['api-c'], down: ['api-b', 'api-c'] },
    { name: 'a name not listed: nothing changes', text: reload, names: ['api-z'], marked: [], down: ['api-b'] },
    { name: 'a name that is a prefix of one listed: nothing changes', text: reload, names: ['api'], marked: [], down: ['api-b'] },
    { name: 'dynamic mode spelling (down before weight)', text: dynamic, names: ['api-a', 'api-c'], marked: ['api-a'], down: ['api-a', 'api-c'] },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const got = markServersDown(r.text, new Set(r.names));
      assert.deepEqual(got.marked, r.marked);
      if (r.marked.length === 0) assert.equal(got.text, r.text);
      const servers = parseUpstreamServers(got.text);
      assert.deepEqual(
        servers.filter((s) => s.down).map((s) => s.name),
        r.down,
      );
      // Addresses and weights stay as they were.
      assert.deepEqual(
        servers.map((s) => [s.address, s.weight]),
        parseUpstreamServers(r.text).map((s) => [s.address, s.weight]),
      );
    });
  }
  it('every block: the preview block is marked too', () => {
    const { text } = markServersDown(reload, new Set(['api-c']));
    assert.ok(parseUpstreamServers(text, 'api_preview').every((s) => s.down));
  });
});
