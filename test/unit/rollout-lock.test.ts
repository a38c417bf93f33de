/**
 * The rollout lock as a deploy takes it (engine/session.ts acquireLock): two
 * deploys exclude each other, but a heal of `fleetroll watch` holds the lock
 * only for its duration, so a deploy waits for it rather than exit 3.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { acquireLock } from '../../src/engine/session.js';
import { FleetrollError } from '../../src/errors.js';
import type { FleetHandles } from '../../src/engine/types.js';
import type { RolloutEvent } from '../../src/engine/events.js';

/** A lock held by `holder` that comes free for a caller willing to wait at least `freeAfterMs`; with `asks`, the yield asks it records. */
function heldBy(holder: string, freeAfterMs: number, withAsks = false) {
  const calls: number[] = [];
  const asks: string[] = [];
  const yieldAsks = {
    async ask() {
      asks.push('ask');
    },
    async asked() {
      return asks.at(-1) === 'ask';
    },
    async withdraw() {
      asks.push('withdraw');
    },
    onAsk: () => () => {},
  };
  const lock = {
    onTakeover: undefined,
    async acquire(_image: string, _command: string, waitMs = 0) {
      calls.push(waitMs);
      if (waitMs < freeAfterMs)
        throw new FleetrollError('E_LOCK_HELD', `fleet api is locked by ci@runner (pid 7, since now): ${holder}`, { details: { command: holder } });
    },
    async release() {},
    async info() {
      return undefined;
    },
  };
  return { h: { lock, ...(withAsks ? { yieldAsks } : {}) } as unknown as FleetHandles, calls, asks };
}

describe('a deploy takes the rollout lock', () => {
  const rows: {
    name: string;
    holder: string;
    freeAfterMs: number;
    lockWaitMs?: number;
    heal?: string;
    calls: number[];
    fails: boolean;
    says?: RegExp;
    /** With the fleet's yield asks: what the deploy asked of them, in order. */
    asks?: string[];
  }[] = [
    {
      name: "a watch's heal holds it: waits up to 10 s for it, saying so",
      holder: 'fleetroll watch',
      freeAfterMs: 3000,
      calls: [0, 10_000],
      fails: false,
      says: /fleetroll watch is healing the fleet: waiting up to 10 s/,
    },
    {
      name: "a watch's heal holds it, the fleet has yield asks: asks the heal to stop, waits, and withdraws the ask once it holds the lock",
      holder: 'fleetroll watch',
      freeAfterMs: 3000,
      calls: [0, 10_000],
      fails: false,
      says: /fleetroll watch is healing the fleet: asked it to stop; waiting up to 10 s/,
      asks: ['ask', 'withdraw'],
    },
    {
      name: 'a heal that outlasts 10 s though asked: exit 3, the ask withdrawn',
      holder: 'fleetroll watch',
      freeAfterMs: 60_000,
      calls: [0, 10_000],
      fails: true,
      asks: ['ask', 'withdraw'],
    },
    { name: 'another deploy holds it: nothing asked', holder: 'fleetroll deploy', freeAfterMs: 3000, calls: [0], fails: true, asks: [] },
    { name: 'a heal that outlasts 10 s: exit 3 as before', holder: 'fleetroll watch', freeAfterMs: 60_000, calls: [0, 10_000], fails: true },
    { name: 'another deploy holds it: exit 3 at once', holder: 'fleetroll deploy', freeAfterMs: 3000, calls: [0], fails: true },
    {
      name: "--lock-wait longer than 10 s, a watch's heal holds it: asks it to stop all the same, and waits that long",
      holder: 'fleetroll watch',
      freeAfterMs: 3000,
      lockWaitMs: 30_000,
      calls: [0, 30_000],
      fails: false,
      says: /asked it to stop; waiting up to 30 s/,
      asks: ['ask', 'withdraw'],
    },
    {
      name: '--lock-wait, another deploy holds it: that wait, nothing asked',
      holder: 'fleetroll deploy',
      freeAfterMs: 3000,
      lockWaitMs: 30_000,
      calls: [0, 30_000],
      fails: false,
      asks: [],
    },
    { name: 'a heal itself does not wait for another', holder: 'fleetroll watch', freeAfterMs: 3000, heal: 'exited', calls: [0], fails: true },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const { h, calls, asks } = heldBy(r.holder, r.freeAfterMs, r.asks !== undefined);
      const said: RolloutEvent[] = [];
      const err = await acquireLock(h, 'img', { command: 'fleetroll deploy', lockWaitMs: r.lockWaitMs, heal: r.heal }, (e) => said.push(e)).then(
        () => undefined,
        (e: unknown) => e,
      );
      assert.deepEqual(calls, r.calls);
      if (r.asks) assert.deepEqual(asks, r.asks);
      if (r.fails) assert.ok(err instanceof FleetrollError && err.code === 'E_LOCK_HELD', String(err));
      else assert.equal(err, undefined);
      if (r.says)
        assert.ok(
          said.some((e) => e.type === 'info' && r.says!.test(e.message)),
          JSON.stringify(said),
        );
    });
  }
});
