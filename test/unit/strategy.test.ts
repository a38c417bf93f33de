import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ValidationError } from '../../src/errors.js';
import { parseIntOrPercent, resolveStrategy, type StrategyLayers } from '../../src/core/strategy.js';

function issuesOf(fn: () => unknown): { path: string; message: string }[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ValidationError, `expected ValidationError, got ${String(err)}`);
    assert.equal(err.exitCode, 2);
    return [...err.issues];
  }
  assert.fail('expected a ValidationError');
}

describe('resolveStrategy: Kubernetes rounding (surge rounds up, unavailable down)', () => {
  // [name, replicas, value for both fields, expected surge, expected unavailable]
  const rows: [string, number, string, number, number][] = [
    ['1 replica at 25%', 1, '25%', 1, 0],
    ['1 replica at 50%', 1, '50%', 1, 0],
    ['1 replica at 100%', 1, '100%', 1, 1],
    ['2 replicas at 25%', 2, '25%', 1, 0],
    ['2 replicas at 50%', 2, '50%', 1, 1],
    ['2 replicas at 100%', 2, '100%', 2, 2],
    ['3 replicas at 25%', 3, '25%', 1, 0],
    ['3 replicas at 50%', 3, '50%', 2, 1],
    ['3 replicas at 100%', 3, '100%', 3, 3],
    ['4 replicas at 25%', 4, '25%', 1, 1],
    ['4 replicas at 50%', 4, '50%', 2, 2],
    ['4 replicas at 100%', 4, '100%', 4, 4],
    ['10 replicas at 25%', 10, '25%', 3, 2],
    ['0 replicas at 25%', 0, '25%', 0, 0],
  ];
  for (const [name, replicas, v, surge, unav] of rows) {
    it(name, () => {
      const s = resolveStrategy({ replicas, cli: { maxSurge: v, maxUnavailable: v } });
      assert.deepEqual([s.maxSurge, s.maxUnavailable], [surge, unav]);
      assert.equal(s.minAvailable, replicas - unav);
      assert.equal(s.maxTotal, replicas + surge);
    });
  }
});

describe('resolveStrategy: accepted values and fenceposts', () => {
  const rows: { name: string; layers: StrategyLayers; surge: number; unav: number; mode?: string; note?: RegExp }[] = [
    { name: 'built-in defaults are 25%/25%', layers: { replicas: 4 }, surge: 1, unav: 1, mode: 'balanced' },
    { name: 'integer numbers', layers: { replicas: 4, cli: { maxSurge: 2, maxUnavailable: 0 } }, surge: 2, unav: 0, mode: 'availability' },
    { name: 'integer strings', layers: { replicas: 4, cli: { maxSurge: '2', maxUnavailable: '1' } }, surge: 2, unav: 1 },
    { name: 'surge over 100% is valid', layers: { replicas: 4, cli: { maxSurge: '150%', maxUnavailable: 0 } }, surge: 6, unav: 0 },
    { name: 'both rounding to 0 raises unavailable to 1', layers: { replicas: 3, cli: { maxSurge: '0%', maxUnavailable: '10%' } }, surge: 0, unav: 1, mode: 'resource-aware', note: /raised to 1/ },
    { name: 'unavailable above replicas is clamped', layers: { replicas: 3, cli: { maxSurge: 0, maxUnavailable: 5 } }, surge: 0, unav: 3, note: /more than replicas/ },
    { name: 'surge 0 is resource-aware mode', layers: { replicas: 4, cli: { maxSurge: 0, maxUnavailable: 1 } }, surge: 0, unav: 1, mode: 'resource-aware' },
    { name: 'leading zeros are a plain integer', layers: { replicas: 4, cli: { maxSurge: '01', maxUnavailable: 0 } }, surge: 1, unav: 0 },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const s = resolveStrategy(r.layers);
      assert.deepEqual([s.maxSurge, s.maxUnavailable], [r.surge, r.unav]);
      if (r.mode) assert.equal(s.mode, r.mode);
      if (r.note) assert.match(s.notes.join('\n'), r.note);
      else assert.deepEqual(s.notes, []);
    });
  }
});

describe('resolveStrategy: invalid values name the field and what is allowed', () => {
  const rows: { name: string; layers: StrategyLayers; path: string; message: RegExp }[] = [
    { name: 'both zero integers', layers: { replicas: 4, cli: { maxSurge: 0, maxUnavailable: 0 } }, path: '--max-surge and --max-unavailable', message: /may not both be 0/ },
    { name: 'both zero percent', layers: { replicas: 4, strategy: { rollingUpdate: { maxSurge: '0%', maxUnavailable: '0' } } }, path: 'strategy/rollingUpdate/maxSurge and strategy/rollingUpdate/maxUnavailable', message: /may not both be 0/ },
    { name: 'negative integer', layers: { replicas: 4, cli: { maxSurge: -1 } }, path: '--max-surge', message: /must not be negative/ },
    { name: 'negative integer string', layers: { replicas: 4, cli: { maxUnavailable: '-1' } }, path: '--max-unavailable', message: /must not be negative/ },
    { name: 'negative percent', layers: { replicas: 4, cli: { maxSurge: '-5%' } }, path: '--max-surge', message: /must not be negative/ },
    { name: 'non-integer number', layers: { replicas: 4, cli: { maxSurge: 1.5 } }, path: '--max-surge', message: /whole number/ },
    { name: 'non-integer string', layers: { replicas: 4, cli: { maxSurge: '1.5' } }, path: '--max-surge', message: /whole number/ },
    { name: 'non-integer percent', layers: { replicas: 4, cli: { maxSurge: '2.5%' } }, path: '--max-surge', message: /whole number/ },
    { name: 'letters', layers: { replicas: 4, cli: { maxSurge: 'abc' } }, path: '--max-surge', message: /non-negative integer .* percentage/ },
    { name: 'space before %', layers: { replicas: 4, cli: { maxSurge: '25 %' } }, path: '--max-surge', message: /got "25 %"/ },
    { name: 'bare %', layers: { replicas: 4, cli: { maxSurge: '%' } }, path: '--max-surge', message: /got "%"/ },
    { name: 'empty string', layers: { replicas: 4, cli: { maxSurge: '' } }, path: '--max-surge', message: /got ""/ },
    { name: 'unavailable over 100%', layers: { replicas: 4, cli: { maxUnavailable: '101%' } }, path: '--max-unavailable', message: /not be greater than 100%/ },
    { name: 'invalid value in the strategy', layers: { replicas: 4, strategy: { rollingUpdate: { maxUnavailable: '150%' } } }, path: 'strategy/rollingUpdate/maxUnavailable', message: /100%/ },
    { name: 'invalid value in shadowed defaults is still reported', layers: { replicas: 4, strategy: {}, defaults: { rollingUpdate: { maxSurge: 'x' } } }, path: 'defaults/strategy/rollingUpdate/maxSurge', message: /got "x"/ },
    { name: 'rollingUpdate with Recreate', layers: { replicas: 4, strategy: { type: 'Recreate', rollingUpdate: { maxSurge: 1 } } }, path: 'strategy/rollingUpdate', message: /must not be set when type is Recreate/ },
    { name: 'CLI flag with Recreate', layers: { replicas: 4, cli: { maxSurge: '1' }, strategy: { type: 'Recreate' } }, path: '--max-surge', message: /cannot be used with strategy type Recreate/ },
    { name: 'negative replicas', layers: { replicas: -1 }, path: 'replicas', message: /non-negative integer/ },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const issues = issuesOf(() => resolveStrategy(r.layers));
      const hit = issues.find((i) => i.path === r.path);
      assert.ok(hit, `no issue at ${r.path}: ${JSON.stringify(issues)}`);
      assert.match(hit.message, r.message);
    });
  }

  it('reports every problem at once', () => {
    const issues = issuesOf(() => resolveStrategy({ replicas: 4, cli: { maxSurge: 'abc', maxUnavailable: '200%' } }));
    assert.deepEqual(issues.map((i) => i.path), ['--max-surge', '--max-unavailable']);
  });

  it('parseIntOrPercent keeps the raw value for messages', () => {
    assert.deepEqual(parseIntOrPercent('25%'), { kind: 'percent', value: 25, raw: '25%' });
    assert.deepEqual(parseIntOrPercent(3), { kind: 'int', value: 3, raw: 3 });
    assert.ok('error' in parseIntOrPercent(null));
  });
});

describe('resolveStrategy: layering (group > CLI > strategy > defaults > built-in)', () => {
  const defaults = { rollingUpdate: { maxSurge: '50%', maxUnavailable: 0 } };
  const rows: { name: string; layers: StrategyLayers; surge: [string | number, string]; unav: [string | number, string]; type?: string; note?: RegExp }[] = [
    { name: 'built-in only', layers: { replicas: 4 }, surge: ['25%', 'builtin'], unav: ['25%', 'builtin'] },
    { name: 'shared defaults apply without a strategy', layers: { replicas: 4, defaults }, surge: ['50%', 'defaults'], unav: [0, 'defaults'] },
    {
      name: 'a service strategy replaces the defaults as a whole; its missing fields are built-in',
      layers: { replicas: 4, defaults, strategy: { rollingUpdate: { maxSurge: 2 } } },
      surge: [2, 'strategy'],
      unav: ['25%', 'builtin'],
    },
    {
      name: 'an empty service strategy still replaces the defaults',
      layers: { replicas: 4, defaults, strategy: {} },
      surge: ['25%', 'builtin'],
      unav: ['25%', 'builtin'],
    },
    {
      name: 'CLI flags beat the service strategy, field by field',
      layers: { replicas: 4, cli: { maxUnavailable: '1' }, strategy: { rollingUpdate: { maxSurge: 2, maxUnavailable: 0 } } },
      surge: [2, 'strategy'],
      unav: ['1', 'cli'],
    },
    {
      name: 'CLI flags beat shared defaults',
      layers: { replicas: 4, cli: { maxSurge: '3' }, defaults },
      surge: ['3', 'cli'],
      unav: [0, 'defaults'],
    },
    {
      name: 'group overrides everything and says so',
      layers: { replicas: 4, group: true, cli: { maxSurge: '1' }, strategy: { rollingUpdate: { maxUnavailable: 1 } } },
      surge: ['100%', 'group'],
      unav: ['0%', 'group'],
      note: /forces maxSurge 100%; ignoring "1" from command-line flag[\s\S]*forces maxUnavailable 0%; ignoring 1 from service's strategy/,
    },
    {
      name: 'group turns Recreate into a rolling update and says so',
      layers: { replicas: 2, group: true, strategy: { type: 'Recreate' } },
      surge: ['100%', 'group'],
      unav: ['0%', 'group'],
      type: 'RollingUpdate',
      note: /forces a RollingUpdate; ignoring type Recreate/,
    },
    {
      name: 'group with only built-in values has nothing to report',
      layers: { replicas: 2, group: true },
      surge: ['100%', 'group'],
      unav: ['0%', 'group'],
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const s = resolveStrategy(r.layers);
      assert.deepEqual([s.spec.maxSurge, s.sources.maxSurge], r.surge);
      assert.deepEqual([s.spec.maxUnavailable, s.sources.maxUnavailable], r.unav);
      if (r.type) assert.equal(s.type, r.type);
      if (r.note) assert.match(s.notes.join('\n'), r.note);
      else assert.deepEqual(s.notes, []);
    });
  }

  it('Recreate from shared defaults', () => {
    const s = resolveStrategy({ replicas: 3, defaults: { type: 'Recreate' } });
    assert.equal(s.type, 'Recreate');
    assert.equal(s.sources.type, 'defaults');
    assert.deepEqual([s.maxSurge, s.maxUnavailable, s.minAvailable, s.maxTotal, s.mode], [0, 3, 0, 3, 'recreate']);
  });

  it('group: 3 replicas roll with 3 surge and 0 unavailable', () => {
    const s = resolveStrategy({ replicas: 3, group: true });
    assert.deepEqual([s.maxSurge, s.maxUnavailable, s.mode], [3, 0, 'availability']);
  });
});
