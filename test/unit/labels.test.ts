/**
 * The Docker labels are a contract with what earlier versions of fleetroll
 * started: running containers, the state volume, the lock, built images carry
 * them. The code names each one only through LABELS (src/ports.ts); this test
 * is the one place that spells their values, so that renaming a label is a
 * deliberate change here and not a side effect.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { LABELS } from '../../src/ports.js';

describe('Docker labels', () => {
  it('keep the values running containers and built images carry', () => {
    assert.deepEqual(LABELS, {
      managed: 'fleetroll.managed',
      service: 'fleetroll.service',
      revision: 'fleetroll.revision',
      version: 'fleetroll.version',
      created: 'fleetroll.created',
      envKeys: 'fleetroll.env-keys',
      changeCause: 'fleetroll.change-cause',
      port: 'fleetroll.port',
      publishAddress: 'fleetroll.publish-address',
      state: 'fleetroll.state',
      lock: 'fleetroll.lock',
      switchBack: 'fleetroll.switchback',
      switchBackHolder: 'fleetroll.switchback.holder',
      switchBackAsk: 'fleetroll.switchback.ask',
      yieldAsk: 'fleetroll.yield.ask',
      demo: 'fleetroll.demo',
      image: 'fleetroll.image',
      contextHash: 'fleetroll.context-hash',
      volume: 'fleetroll.volume',
      imageRef: 'fleetroll.image-ref',
      digest: 'fleetroll.digest',
    });
  });

  it("are all distinct and in the fleetroll. namespace (the switch-back's nest under fleetroll.switchback)", () => {
    const values = Object.values(LABELS);
    assert.equal(new Set(values).size, values.length);
    for (const v of values) assert.match(v, /^fleetroll(\.[a-z][a-z-]*)+$/);
  });
});
