/**
 * `fleetroll adopt --match`: which containers it takes. The matching is pure;
 * findAdoptable is shown against fake runtimes.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findAdoptable, isAdoptable, parseAdoptMatch } from '../../src/engine/adopt.js';
import { ValidationError } from '../../src/errors.js';
import { LABELS, type InstanceInfo, type Runtime } from '../../src/ports.js';

type C = Pick<InstanceInfo, 'name' | 'labels' | 'state'>;
const c = (name: string, labels: Record<string, string> = {}, state = 'running'): C => ({ name, labels, state });
const nginx = new Set(['bookstore-nginx']);

describe('adopt --match', () => {
  const rows: [string, string, C, boolean][] = [
    ['label key=value matches', 'app=bookstore', c('whatever', { app: 'bookstore' }), true],
    ['label with another value does not', 'app=bookstore', c('whatever', { app: 'orders' }), false],
    ['label missing does not', 'app=bookstore', c('whatever'), false],
    ['label value may contain "=" (split at the first)', 'opts=a=b', c('x', { opts: 'a=b' }), true],
    ['label with an empty value matches an empty label', 'flag=', c('x', { flag: '' }), true],
    ['name pattern with *', 'bookstore-api-*', c('bookstore-api-1'), true],
    ['* may match nothing', 'bookstore-api-*', c('bookstore-api-'), true],
    ['? matches exactly one character', 'api-?', c('api-12'), false],
    ['? matches one character', 'api-?', c('api-1'), true],
    ['the pattern is anchored at both ends', 'api', c('my-api-1'), false],
    ['"." is a dot, not any character', 'api.1', c('apiX1'), false],
    ['"." matches a dot', 'api.1', c('api.1'), true],
    ["the fleet's nginx is never taken", 'bookstore-*', c('bookstore-nginx'), false],
    ['a container fleetroll manages is not taken', 'bookstore-*', c('bookstore-api-ab12', { [LABELS.managed]: 'true', [LABELS.service]: 'bookstore' }), false],
    ['the fleet state container is not taken', 'fleetroll-*', c('fleetroll-state-bookstore', { [LABELS.state]: 'bookstore' }), false],
    [
      'the lock container is not taken (its sub-label counts too)',
      'fleetroll-*',
      c('fleetroll-lock-bookstore', { [`${LABELS.lock}.service`]: 'bookstore' }),
      false,
    ],
    ['an image label such as fleetroll.image does not count as managed', 'legacy-*', c('legacy-1', { [LABELS.image]: 'app' }), true],
    ['a label that only starts like one of ours does not count', 'legacy-*', c('legacy-1', { [`${LABELS.managed}by`]: 'x' }), true],
    ['a stopped container is not taken', 'legacy-*', c('legacy-1', {}, 'exited'), false],
    ['a created, never started container is not taken', 'legacy-*', c('legacy-1', {}, 'created'), false],
    ['a paused container is listed like docker ps lists it', 'legacy-*', c('legacy-1', {}, 'paused'), true],
  ];
  for (const [name, match, container, want] of rows) {
    it(`${name}: ${match} ${want ? 'takes' : 'skips'} ${container.name}`, () => assert.equal(isAdoptable(container, parseAdoptMatch(match), nginx), want));
  }

  const invalid: [string, string][] = [
    ['a slash', 'api/1'],
    ['a space', 'api 1'],
    ['regex syntax', 'api-(1|2)'],
    ['empty', ''],
  ];
  for (const [name, match] of invalid) {
    it(`a name pattern with ${name} is invalid input naming --match`, () =>
      assert.throws(
        () => parseAdoptMatch(match),
        (e: unknown) => e instanceof ValidationError && e.message.startsWith('--match: must be key=value or a name pattern'),
      ));
  }
});

describe('findAdoptable', () => {
  function fakeRuntime(host: string, containers: (C & { id: string; image: string })[]): Runtime {
    const asked: Record<string, string>[] = [];
    return {
      host,
      asked,
      list: async (labels: Record<string, string>) => {
        asked.push(labels);
        return containers
          .filter((x) => Object.entries(labels).every(([k, v]) => x.labels[k] === v))
          .map((x) => ({ id: x.id, name: x.name, host, labels: x.labels, state: x.state, running: x.state === 'running' }));
      },
      specOf: async (id: string) => {
        const x = containers.find((y) => y.id === id);
        return x ? { image: x.image, env: {} } : undefined;
      },
    } as unknown as Runtime;
  }

  it('asks each host, by label on the engine side, and reports id, name, host and image in host order', async () => {
    const vm1 = fakeRuntime('vm1', [
      { id: 'a1', name: 'legacy-a', labels: { role: 'api' }, state: 'running', image: 'legacy:1' },
      { id: 'a2', name: 'legacy-db', labels: { role: 'db' }, state: 'running', image: 'postgres:16' },
    ]);
    const vm2 = fakeRuntime('vm2', [{ id: 'b1', name: 'legacy-b', labels: { role: 'api' }, state: 'running', image: 'legacy:1' }]);
    const found = await findAdoptable(
      new Map([
        ['vm1', vm1],
        ['vm2', vm2],
      ]),
      parseAdoptMatch('role=api'),
      new Set(),
    );
    assert.deepEqual(found, [
      { id: 'a1', name: 'legacy-a', host: 'vm1', image: 'legacy:1' },
      { id: 'b1', name: 'legacy-b', host: 'vm2', image: 'legacy:1' },
    ]);
    assert.deepEqual((vm1 as unknown as { asked: unknown[] }).asked, [{ role: 'api' }]);
  });

  it('a name pattern lists everything and matches names here', async () => {
    const vm1 = fakeRuntime('vm1', [
      { id: 'a1', name: 'legacy-a', labels: {}, state: 'running', image: 'legacy:1' },
      { id: 'a2', name: 'other', labels: {}, state: 'running', image: 'legacy:1' },
      { id: 'a3', name: 'legacy-nginx', labels: {}, state: 'running', image: 'nginx' },
    ]);
    const found = await findAdoptable(new Map([['vm1', vm1]]), parseAdoptMatch('legacy-*'), new Set(['legacy-nginx']));
    assert.deepEqual(
      found.map((f) => f.name),
      ['legacy-a'],
    );
    assert.deepEqual((vm1 as unknown as { asked: unknown[] }).asked, [{}]);
  });
});
