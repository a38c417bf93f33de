/**
 * Fleet file snippets and a loader that returns a file's validation issues
 * instead of throwing, shared by the validate checks' pure tests
 * (test/unit/validate-checks.test.ts) and the ones proved on the real nginx
 * (test/local/validate-checks.test.ts), so both load the very same files.
 */
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadFleet } from '../../src/config/load.js';
import { ValidationError } from '../../src/errors.js';

export const BASE = 'service: api\nimage: api:1\nreplicas: 4\nport: 8080\n';
export const u = (length: number) => 'u'.repeat(length);
export const lb = (upstream: string, extra = '') =>
  `loadBalancers:\n  - nginx: { exec: true, upstreamFile: /etc/nginx/conf.d/u.conf, upstream: ${upstream}${extra} }\n`;
export const canary = (canaryBlock: string) => `strategy:\n  type: Canary\n  canary: { ${canaryBlock}, steps: [{ setWeight: 25 }] }\n`;

/** Fleet files written into `dir`: `file` writes one, `issuesOf` loads one and returns its issues ([] when accepted). */
export function fleetFilesIn(dir: string): {
  file: (text: string, name?: string) => string;
  issuesOf: (text: string, cli?: Record<string, unknown>) => Promise<{ path: string; message: string }[]>;
} {
  let n = 0;
  const file = (text: string, name = `fleet-${n++}.yaml`) => {
    const p = join(dir, name);
    writeFileSync(p, text);
    return p;
  };
  const issuesOf = async (text: string, cli = {}) => {
    try {
      await loadFleet(file(text), cli);
      return [];
    } catch (err) {
      assert.ok(err instanceof ValidationError, String(err));
      assert.equal(err.exitCode, 2);
      return [...err.issues];
    }
  };
  return { file, issuesOf };
}
