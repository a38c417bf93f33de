/**
 * `--verbose` prints an error's chain of causes, each with its stack
 * (causeChain in src/cli/program.ts); test/cli/cli.test.ts runs it end to end.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { causeChain } from '../../src/cli/program.js';
import { FleetrollError } from '../../src/errors.js';

/** The "Name: message" lines of a chain (stack frames left out). */
const heads = (text: string) => text.split('\n').filter((l) => !/^\s+at /.test(l));

describe('causeChain', () => {
  it('an error without a cause: its message and its stack', () => {
    const text = causeChain(new Error('boom'));
    assert.deepEqual(heads(text), ['Error: boom']);
    assert.match(text, /^\s+at /m, 'with stack frames');
  });

  it('causes, recursively, each with its message and stack', () => {
    const socket = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const docker = new Error('(HTTP code 500) server error', { cause: socket });
    const err = new FleetrollError('E_DOCKER', 1, 'stopping container web-1 on vm1: gave up after 4 attempts', { cause: docker });
    const text = causeChain(err);
    assert.deepEqual(heads(text), [
      'FleetrollError: stopping container web-1 on vm1: gave up after 4 attempts',
      'caused by: Error: (HTTP code 500) server error',
      'caused by: Error: socket hang up',
    ]);
    assert.equal(text.split('\n').filter((l) => /^\s+at /.test(l)).length >= 3, true, 'every level has its stack');
  });

  const rows: [string, () => unknown, string[]][] = [
    [
      'a cause that is not an Error (a JSON message)',
      () => new Error('load failed', { cause: { error: 'no space left on device' } }),
      ['Error: load failed', 'caused by: {"error":"no space left on device"}'],
    ],
    ['a string cause', () => new Error('outer', { cause: 'inner reason' }), ['Error: outer', 'caused by: inner reason']],
    [
      'an AggregateError (e.g. every address of a host refused)',
      () =>
        new Error('cannot reach vm1', {
          cause: new AggregateError([new Error('connect ECONNREFUSED ::1:2375'), new Error('connect ECONNREFUSED 127.0.0.1:2375')], 'all failed'),
        }),
      [
        'Error: cannot reach vm1',
        'caused by: AggregateError: all failed',
        'caused by (1 of 2): Error: connect ECONNREFUSED ::1:2375',
        'caused by (2 of 2): Error: connect ECONNREFUSED 127.0.0.1:2375',
      ],
    ],
    [
      'a cycle is printed once',
      () => {
        const a = new Error('a');
        const b = new Error('b', { cause: a });
        (a as { cause?: unknown }).cause = b;
        return a;
      },
      ['Error: a', 'caused by: Error: b'],
    ],
    ['something thrown that is not an error', () => 42, ['42']],
  ];
  for (const [name, make, want] of rows) it(name, () => assert.deepEqual(heads(causeChain(make())), want));
});
