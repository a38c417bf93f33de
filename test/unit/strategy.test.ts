import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ValidationError } from '../../src/errors.js';
import {
  canaryInstancesFor,
  finalRollingUpdate,
  parseIntOrPercent,
  parsePauseDuration,
  resolveStrategy,
  type CanaryStepInput,
  type ResolvedStrategy,
  type StrategyLayers,
} from '../../src/core/strategy.js';
import { loadStrategy } from '../../src/config/strategy.js';

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
    {
      name: 'both rounding to 0 raises unavailable to 1',
      layers: { replicas: 3, cli: { maxSurge: '0%', maxUnavailable: '10%' } },
      surge: 0,
      unav: 1,
      mode: 'resource-aware',
      note: /raised to 1/,
    },
    {
      name: 'unavailable above replicas is clamped',
      layers: { replicas: 3, cli: { maxSurge: 0, maxUnavailable: 5 } },
      surge: 0,
      unav: 3,
      note: /more than replicas/,
    },
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

// Strategy input is checked by config/strategy.ts (the schema and the rules across layers) before resolveStrategy sees it.
describe('loadStrategy: invalid values name the field and what is allowed', () => {
  const rows: { name: string; layers: StrategyLayers; path: string; message: RegExp }[] = [
    {
      name: 'both zero integers',
      layers: { replicas: 4, cli: { maxSurge: 0, maxUnavailable: 0 } },
      path: '--max-surge and --max-unavailable',
      message: /may not both be 0/,
    },
    {
      name: 'both zero percent',
      layers: { replicas: 4, strategy: { rollingUpdate: { maxSurge: '0%', maxUnavailable: '0' } } },
      path: 'strategy/rollingUpdate/maxSurge and strategy/rollingUpdate/maxUnavailable',
      message: /may not both be 0/,
    },
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
    {
      name: 'invalid value in the strategy',
      layers: { replicas: 4, strategy: { rollingUpdate: { maxUnavailable: '150%' } } },
      path: 'strategy/rollingUpdate/maxUnavailable',
      message: /100%/,
    },
    {
      name: 'invalid value in shadowed defaults is still reported',
      layers: { replicas: 4, strategy: {}, defaults: { rollingUpdate: { maxSurge: 'x' } } },
      path: 'defaults/strategy/rollingUpdate/maxSurge',
      message: /got "x"/,
    },
    {
      name: 'rollingUpdate with Recreate',
      layers: { replicas: 4, strategy: { type: 'Recreate', rollingUpdate: { maxSurge: 1 } } },
      path: 'strategy/rollingUpdate',
      message: /must not be set when type is Recreate/,
    },
    {
      name: 'CLI flag with Recreate',
      layers: { replicas: 4, cli: { maxSurge: '1' }, strategy: { type: 'Recreate' } },
      path: '--max-surge',
      message: /cannot be used with strategy type Recreate/,
    },
    { name: 'negative replicas', layers: { replicas: -1 }, path: 'replicas', message: /non-negative integer/ },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const issues = issuesOf(() => loadStrategy(r.layers));
      const hit = issues.find((i) => i.path === r.path);
      assert.ok(hit, `no issue at ${r.path}: ${JSON.stringify(issues)}`);
      assert.match(hit.message, r.message);
    });
  }

  it('reports every problem at once', () => {
    const issues = issuesOf(() => loadStrategy({ replicas: 4, cli: { maxSurge: 'abc', maxUnavailable: '200%' } }));
    assert.deepEqual(
      issues.map((i) => i.path),
      ['--max-surge', '--max-unavailable'],
    );
  });

  it('resolveStrategy itself trusts its layers: an unchecked value is a programming error, not a ValidationError', () => {
    assert.throws(
      () => resolveStrategy({ replicas: 4, cli: { maxSurge: 'abc' } }),
      (err: unknown) => err instanceof Error && !(err instanceof ValidationError) && /loadStrategy/.test(err.message),
    );
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

function blueGreenOf(s: ResolvedStrategy) {
  assert.equal(s.type, 'BlueGreen');
  assert.ok(s.type === 'BlueGreen');
  return s.blueGreen;
}

function canaryOf(s: ResolvedStrategy) {
  assert.equal(s.type, 'Canary');
  assert.ok(s.type === 'Canary');
  return s.canary;
}

const STEPS: CanaryStepInput[] = [{ setWeight: 10 }, { pause: { duration: '30s' } }, { analysis: {} }, { setWeight: 50 }, { pause: {} }];

describe('resolveStrategy: BlueGreen', () => {
  it('built-in settings: delay 30 s, no preview, promote on its own; the whole new set beside the old one', () => {
    const s = resolveStrategy({ replicas: 3, strategy: { type: 'BlueGreen' } });
    assert.deepEqual(blueGreenOf(s), {
      scaleDownDelaySeconds: 30,
      previewUpstream: undefined,
      autoPromote: true,
      sources: { scaleDownDelaySeconds: 'builtin', previewUpstream: 'builtin', autoPromote: 'builtin' },
    });
    assert.deepEqual([s.maxSurge, s.maxUnavailable, s.minAvailable, s.maxTotal, s.mode, s.sources.type], [3, 0, 3, 6, 'blue-green', 'strategy']);
    assert.deepEqual(s.notes, []);
  });

  const rows: { name: string; layers: StrategyLayers; want: [number, string | undefined, boolean]; sources: [string, string, string] }[] = [
    {
      name: "the service's own settings",
      layers: { replicas: 3, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 120, previewUpstream: 'api_preview', autoPromote: false } } },
      want: [120, 'api_preview', false],
      sources: ['strategy', 'strategy', 'strategy'],
    },
    {
      name: 'shared defaults apply without a service strategy',
      layers: { replicas: 3, defaults: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 0 } } },
      want: [0, undefined, true],
      sources: ['defaults', 'builtin', 'builtin'],
    },
    {
      name: 'a service strategy replaces the defaults as a whole; what it leaves out is built in',
      layers: {
        replicas: 3,
        defaults: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 60, previewUpstream: 'p' } },
        strategy: { type: 'BlueGreen', blueGreen: { autoPromote: false } },
      },
      want: [30, undefined, false],
      sources: ['builtin', 'builtin', 'strategy'],
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const bg = blueGreenOf(resolveStrategy(r.layers));
      assert.deepEqual([bg.scaleDownDelaySeconds, bg.previewUpstream, bg.autoPromote], r.want);
      assert.deepEqual([bg.sources.scaleDownDelaySeconds, bg.sources.previewUpstream, bg.sources.autoPromote], r.sources);
    });
  }

  it('group: true turns BlueGreen into a rolling update and says so', () => {
    const s = resolveStrategy({ replicas: 3, group: true, strategy: { type: 'BlueGreen' } });
    assert.equal(s.type, 'RollingUpdate');
    assert.equal(s.blueGreen, undefined);
    assert.match(s.notes.join('\n'), /forces a RollingUpdate; ignoring type BlueGreen from service's strategy \(strategy\/type\)/);
  });
});

describe('resolveStrategy: Canary', () => {
  it('steps resolve to kinds with seconds; the built-in sticky key is the client address', () => {
    const s = resolveStrategy({
      replicas: 10,
      strategy: {
        type: 'Canary',
        canary: { steps: [...STEPS, { pause: { duration: 90 } }, { pause: { duration: '5m' } }, { analysis: { maxErrorRate: '1%' } }] },
      },
    });
    const c = canaryOf(s);
    assert.deepEqual(c.steps, [
      { kind: 'setWeight', weight: 10, path: 'strategy/canary/steps/0' },
      { kind: 'pause', seconds: 30, path: 'strategy/canary/steps/1' },
      { kind: 'analysis', overrides: {}, path: 'strategy/canary/steps/2' },
      { kind: 'setWeight', weight: 50, path: 'strategy/canary/steps/3' },
      { kind: 'pause', seconds: undefined, path: 'strategy/canary/steps/4' },
      { kind: 'pause', seconds: 90, path: 'strategy/canary/steps/5' },
      { kind: 'pause', seconds: 300, path: 'strategy/canary/steps/6' },
      { kind: 'analysis', overrides: { maxErrorRate: '1%' }, path: 'strategy/canary/steps/7' },
    ]);
    assert.deepEqual(
      [c.stickyKey, c.force, c.canaryReplicas, c.sources],
      ['remote_addr', undefined, undefined, { canaryReplicas: 'builtin', stickyKey: 'builtin', force: 'builtin', steps: 'strategy' }],
    );
    // The rolling update after the last step: built-in 25%/25% of 10.
    assert.deepEqual([s.maxSurge, s.maxUnavailable, s.mode, c.rollingMode], [3, 2, 'canary', 'balanced']);
    assert.deepEqual(s.notes, []);
  });

  it("the final rolling update takes rollingUpdate and the flags like a RollingUpdate does (flag > service's > defaults > built-in)", () => {
    const s = resolveStrategy({
      replicas: 4,
      cli: { maxUnavailable: '0' },
      strategy: { type: 'Canary', rollingUpdate: { maxSurge: 2, maxUnavailable: 1 }, canary: { steps: [{ setWeight: 25 }], stickyKey: 'header:X-User' } },
      defaults: { rollingUpdate: { maxSurge: 3 } },
    });
    assert.deepEqual([s.maxSurge, s.maxUnavailable, s.sources.maxSurge, s.sources.maxUnavailable], [2, 0, 'strategy', 'cli']);
    assert.deepEqual([canaryOf(s).rollingMode, canaryOf(s).stickyKey, canaryOf(s).sources.stickyKey], ['availability', 'header:X-User', 'strategy']);
    const r = finalRollingUpdate(s as Extract<ResolvedStrategy, { type: 'Canary' }>);
    assert.deepEqual(
      [r.type, r.maxSurge, r.maxUnavailable, r.maxTotal, r.minAvailable, r.mode, 'canary' in r && r.canary !== undefined],
      ['RollingUpdate', 2, 0, 6, 4, 'availability', false],
    );
  });

  it('from shared defaults, with the defaults as the source', () => {
    const s = resolveStrategy({
      replicas: 4,
      defaults: { type: 'Canary', canary: { steps: [{ setWeight: 50 }], canaryReplicas: 2, stickyKey: 'cookie:sid', force: 'header:X-Canary' } },
    });
    const c = canaryOf(s);
    assert.deepEqual([c.canaryReplicas, c.stickyKey, c.force, c.steps[0]?.path], [2, 'cookie:sid', 'header:X-Canary', 'defaults/strategy/canary/steps/0']);
    assert.deepEqual(c.sources, { canaryReplicas: 'defaults', stickyKey: 'defaults', force: 'defaults', steps: 'defaults' });
  });

  const notes: { name: string; layers: StrategyLayers; note: RegExp }[] = [
    {
      name: 'a fixed canaryReplicas below what a weight needs',
      layers: { replicas: 10, strategy: { type: 'Canary', canary: { canaryReplicas: 1, steps: [{ setWeight: 10 }, { setWeight: 50 }] } } },
      note: /strategy\/canary\/steps\/1: setWeight 50 sends 50% of requests to 1 canary instance\(s\) \(canaryReplicas\), where 5 would carry that share of 10 replicas/,
    },
    {
      name: 'no step sends traffic to the canary',
      layers: { replicas: 3, strategy: { type: 'Canary', canary: { steps: [{ pause: {} }, { setWeight: 0 }] } } },
      note: /no canary step sets a weight above 0/,
    },
    {
      name: 'a split nginx weights cannot make',
      layers: { replicas: 5000, strategy: { type: 'Canary', canary: { canaryReplicas: 1, steps: [{ setWeight: 60 }] } } },
      note: /steps\/0: with 1 canary and 5000 stable instance\(s\), nginx weights \(1 to 1000\) can give the canary 16\.7% of requests, not 60%/,
    },
  ];
  for (const r of notes) {
    it(`says so: ${r.name}`, () => assert.match(resolveStrategy(r.layers).notes.join('\n'), r.note));
  }

  it('group: true turns a Canary into a rolling update and says so', () => {
    const s = resolveStrategy({ replicas: 3, group: true, strategy: { type: 'Canary', canary: { steps: STEPS } } });
    assert.equal(s.type, 'RollingUpdate');
    assert.match(s.notes.join('\n'), /ignoring type Canary/);
  });
});

describe('canaryInstancesFor: as many as the weight needs, at least one', () => {
  // [name, weight %, replicas, fixed canaryReplicas, expected]
  const rows: [string, number, number, number | undefined, number][] = [
    ['5% of 10 rounds up to 1', 5, 10, undefined, 1],
    ['10% of 10', 10, 10, undefined, 1],
    ['11% of 10 rounds up to 2', 11, 10, undefined, 2],
    ['50% of 10', 50, 10, undefined, 5],
    ['34% of 3 rounds up to 2', 34, 3, undefined, 2],
    ['0% still keeps one canary', 0, 10, undefined, 1],
    ['100% of 4 is all 4', 100, 4, undefined, 4],
    ['a fixed count whatever the weight below 100%', 90, 10, 2, 2],
    ['100% is the whole set even with a fixed count (it takes every request)', 100, 10, 2, 10],
    ['0 replicas: no canary', 50, 0, undefined, 0],
  ];
  for (const [name, weight, replicas, fixed, want] of rows) it(name, () => assert.equal(canaryInstancesFor(weight, replicas, fixed), want));
});

describe('parsePauseDuration', () => {
  const rows: [string, unknown, number | RegExp][] = [
    ['seconds as a number', 45, 45],
    ['a fraction of a second', 0.5, 0.5],
    ['"30s"', '30s', 30],
    ['"5m"', '5m', 300],
    ['"1h"', '1h', 3600],
    ['"24h" is the longest', '24h', 86400],
    ['"25h" is too long', '25h', /at most 86400 s/],
    ['0 is no pause', 0, /more than 0/],
    ['a space before the unit', '5 m', /got "5 m"/],
    ['a unit it does not know', '2d', /"30s", "5m" or "1h"/],
    ['a bare number string', '30', /got "30"/],
  ];
  for (const [name, raw, want] of rows) {
    it(name, () => {
      const r = parsePauseDuration(raw);
      if (typeof want === 'number') assert.equal(r, want);
      else assert.ok(typeof r === 'object' && want.test(r.error), JSON.stringify(r));
    });
  }
});

describe('loadStrategy: BlueGreen and Canary settings that do not fit name the field and what is allowed', () => {
  const canary = (c: object, extra: object = {}): StrategyLayers => ({ replicas: 4, strategy: { type: 'Canary', canary: c as never, ...extra } });
  const rows: { name: string; layers: StrategyLayers; path: string; message: RegExp }[] = [
    {
      name: 'an unknown type',
      layers: { replicas: 4, strategy: { type: 'Linear' as never } },
      path: 'strategy/type',
      message: /must be "RollingUpdate", "Recreate", "BlueGreen" or "Canary", got "Linear"/,
    },
    {
      name: 'canary with type BlueGreen',
      layers: { replicas: 4, strategy: { type: 'BlueGreen', canary: { steps: STEPS } } },
      path: 'strategy/canary',
      message: /applies only to type Canary, but type is BlueGreen; with BlueGreen, allowed: blueGreen/,
    },
    {
      name: 'rollingUpdate with type BlueGreen',
      layers: { replicas: 4, strategy: { type: 'BlueGreen', rollingUpdate: { maxSurge: 1 } } },
      path: 'strategy/rollingUpdate',
      message: /must not be set when type is BlueGreen .*set blueGreen instead/,
    },
    {
      name: 'blueGreen with type Canary',
      layers: { replicas: 4, strategy: { type: 'Canary', blueGreen: {}, canary: { steps: STEPS } } },
      path: 'strategy/blueGreen',
      message: /applies only to type BlueGreen, but type is Canary; with Canary, allowed: canary and rollingUpdate/,
    },
    {
      name: 'blueGreen without a type',
      layers: { replicas: 4, strategy: { blueGreen: { autoPromote: false } } },
      path: 'strategy/blueGreen',
      message: /this strategy has no type, so it is a RollingUpdate \(add type: BlueGreen\)/,
    },
    {
      name: 'canary with type Recreate, in the shared defaults',
      layers: { replicas: 4, defaults: { type: 'Recreate', canary: { steps: STEPS } } },
      path: 'defaults/strategy/canary',
      message: /applies only to type Canary, but type is Recreate; with Recreate, allowed: no block/,
    },
    {
      name: 'a shadowed defaults layer is checked too',
      layers: { replicas: 4, strategy: { type: 'RollingUpdate' }, defaults: { type: 'Canary', canary: { steps: [{ setWeight: 200 }] } } },
      path: 'defaults/strategy/canary/steps/0/setWeight',
      message: /whole percent from 0 to 100, got 200/,
    },
    {
      name: 'Canary without steps',
      layers: { replicas: 4, strategy: { type: 'Canary' } },
      path: 'strategy/canary/steps',
      message: /is required with type Canary: a list of steps such as/,
    },
    { name: 'Canary with an empty list of steps', layers: canary({ steps: [] }), path: 'strategy/canary/steps', message: /must be a non-empty list of steps/ },
    {
      name: 'a step with two kinds',
      layers: canary({ steps: [{ setWeight: 5 }, { setWeight: 10, pause: {} }] }),
      path: 'strategy/canary/steps/1',
      message: /exactly one of setWeight, pause or analysis .*got "setWeight" and "pause"/,
    },
    { name: 'an empty step', layers: canary({ steps: [{}] }), path: 'strategy/canary/steps/0', message: /got an empty mapping/ },
    { name: 'a step that is a string', layers: canary({ steps: ['pause'] }), path: 'strategy/canary/steps/0', message: /got "pause"/ },
    {
      name: 'setWeight above 100',
      layers: canary({ steps: [{ setWeight: 101 }] }),
      path: 'strategy/canary/steps/0/setWeight',
      message: /whole percent from 0 to 100, got 101/,
    },
    { name: 'a fractional setWeight', layers: canary({ steps: [{ setWeight: 12.5 }] }), path: 'strategy/canary/steps/0/setWeight', message: /got 12.5/ },
    {
      name: 'a pause duration with a space',
      layers: canary({ steps: [{ pause: { duration: '5 min' } }] }),
      path: 'strategy/canary/steps/0/pause/duration',
      message: /"30s", "5m" or "1h".*got "5 min"/,
    },
    {
      name: 'a pause of 0',
      layers: canary({ steps: [{ pause: { duration: 0 } }] }),
      path: 'strategy/canary/steps/0/pause/duration',
      message: /more than 0 .*leave duration out to wait for `fleetroll promote` or `abort`/,
    },
    {
      name: 'a pause that is not a mapping',
      layers: canary({ steps: [{ pause: null }] }),
      path: 'strategy/canary/steps/0/pause',
      message: /must be a mapping: \{ duration: 30s \} or \{\}/,
    },
    {
      name: 'a pause with an unknown field',
      layers: canary({ steps: [{ pause: { seconds: 5 } }] }),
      path: 'strategy/canary/steps/0/pause',
      message: /unknown field "seconds"/,
    },
    {
      name: 'an analysis that is not a mapping',
      layers: canary({ steps: [{ analysis: 'strict' }] }),
      path: 'strategy/canary/steps/0/analysis',
      message: /must be a mapping of analysis settings \(may be empty: \{\}\), got "strict"/,
    },
    {
      name: 'a sticky cookie without a name',
      layers: canary({ steps: STEPS, stickyKey: 'cookie:' }),
      path: 'strategy/canary/stickyKey',
      message: /"remote_addr", "cookie:NAME" or "header:NAME" .*got "cookie:"/,
    },
    {
      name: 'a sticky key of another kind',
      layers: canary({ steps: STEPS, stickyKey: 'query:user' }),
      path: 'strategy/canary/stickyKey',
      message: /got "query:user"/,
    },
    {
      name: 'a sticky name nginx could read as syntax',
      layers: canary({ steps: STEPS, stickyKey: 'header:X;include' }),
      path: 'strategy/canary/stickyKey',
      message: /NAME: letters, digits, "_" and "-"/,
    },
    {
      name: 'force by the client address (only a header or cookie can force)',
      layers: canary({ steps: STEPS, force: 'remote_addr' }),
      path: 'strategy/canary/force',
      message: /"header:NAME" or "cookie:NAME" .*got "remote_addr"/,
    },
    {
      name: 'force naming nginx syntax',
      layers: canary({ steps: STEPS, force: 'cookie:a"; } include x; #' }),
      path: 'strategy/canary/force',
      message: /NAME: letters, digits, "_" and "-"/,
    },
    {
      name: 'force that is not a string',
      layers: canary({ steps: STEPS, force: true as unknown as string }),
      path: 'strategy/canary/force',
      message: /got true/,
    },
    {
      name: 'canaryReplicas above replicas',
      layers: canary({ steps: STEPS, canaryReplicas: 5 }),
      path: 'strategy/canary/canaryReplicas',
      message: /must be at most replicas \(4\), got 5/,
    },
    {
      name: 'canaryReplicas of 0',
      layers: canary({ steps: STEPS, canaryReplicas: 0 }),
      path: 'strategy/canary/canaryReplicas',
      message: /integer from 1 to 10000, got 0/,
    },
    {
      name: 'the final rolling update with both limits 0',
      layers: canary({ steps: STEPS }, { rollingUpdate: { maxSurge: 0, maxUnavailable: 0 } }),
      path: 'strategy/rollingUpdate/maxSurge and strategy/rollingUpdate/maxUnavailable',
      message: /may not both be 0/,
    },
    {
      name: 'a negative scaleDownDelaySeconds',
      layers: { replicas: 4, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: -1 } } },
      path: 'strategy/blueGreen/scaleDownDelaySeconds',
      message: /seconds from 0 to 86400, got -1/,
    },
    {
      name: 'a scaleDownDelaySeconds over a day',
      layers: { replicas: 4, strategy: { type: 'BlueGreen', blueGreen: { scaleDownDelaySeconds: 86401 } } },
      path: 'strategy/blueGreen/scaleDownDelaySeconds',
      message: /got 86401/,
    },
    {
      name: 'a previewUpstream nginx could read as syntax',
      layers: { replicas: 4, strategy: { type: 'BlueGreen', blueGreen: { previewUpstream: 'p { }' } } },
      path: 'strategy/blueGreen/previewUpstream',
      message: /nginx upstream name/,
    },
    {
      name: 'autoPromote as a string',
      layers: { replicas: 4, strategy: { type: 'BlueGreen', blueGreen: { autoPromote: 'yes' as never } } },
      path: 'strategy/blueGreen/autoPromote',
      message: /true or false, got "yes"/,
    },
    {
      name: '--max-surge with BlueGreen',
      layers: { replicas: 4, cli: { maxSurge: '1' }, strategy: { type: 'BlueGreen' } },
      path: '--max-surge',
      message: /cannot be used with strategy type BlueGreen .*surge 100%/,
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const issues = issuesOf(() => loadStrategy(r.layers));
      const hit = issues.find((i) => i.path === r.path);
      assert.ok(hit, `no issue at ${r.path}: ${JSON.stringify(issues)}`);
      assert.match(hit.message, r.message);
    });
  }

  it('every bad step is reported at once', () => {
    const issues = issuesOf(() => loadStrategy(canary({ steps: [{ setWeight: 101 }, { pause: { duration: 'soon' } }, {}], stickyKey: 'x' })));
    assert.deepEqual(
      issues.map((i) => i.path),
      ['strategy/canary/stickyKey', 'strategy/canary/steps/0/setWeight', 'strategy/canary/steps/1/pause/duration', 'strategy/canary/steps/2'],
    );
  });

  it('--max-surge with a Canary sets the final rolling update', () => {
    const s = resolveStrategy({ replicas: 4, cli: { maxSurge: '2' }, strategy: { type: 'Canary', canary: { steps: STEPS } } });
    assert.deepEqual([s.maxSurge, s.sources.maxSurge], [2, 'cli']);
  });
});
