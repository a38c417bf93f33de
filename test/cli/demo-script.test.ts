/**
 * `npm run demo` sets the machine up before the rehearsal (on a machine
 * whose Docker engine is installed but not running, the demo failed with
 * "cannot reach Docker host local" where `npm test`, which runs
 * scripts/setup-host.sh first, worked). Read from package.json and the
 * script's text only: running either would start Docker.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';

const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
const setup = readFileSync(new URL('../../scripts/setup-host.sh', import.meta.url), 'utf8');

describe('npm run demo', () => {
  const steps = (pkg.scripts.demo ?? '').split('&&').map((s) => s.trim());

  it('runs scripts/setup-host.sh, then the rehearsal only if the set-up succeeded', () => {
    assert.equal(steps.length, 2, pkg.scripts.demo);
    assert.match(steps[0]!, /^bash scripts\/setup-host\.sh\b/);
    assert.equal(steps[1], 'node dist/cli/main.js rehearse');
  });

  it("asks the set-up for the demo's needs only (--demo), which the script knows", () => {
    assert.equal(steps[0], 'bash scripts/setup-host.sh --demo');
    assert.match(setup, /^\s*--demo\) demo=1 ;;$/m);
    // An engine that already answers is enough, for any user: nothing of the remote-host tests is required.
    assert.match(setup, /^if \[ -n "\$demo" \] && have docker && ping_daemon; then\n\s*log .*\n\s*exit 0$/m);
  });

  it('the set-up needs nothing the test command does not: npm test runs the same script', () => {
    assert.match(pkg.scripts.test ?? '', /&& bash scripts\/setup-host\.sh &&/);
  });
});
