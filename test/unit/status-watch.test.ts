/**
 * `status --watch` (engine/status.ts watchRollout) on a scripted state store:
 * what each sequence of revision records ends as.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { watchRollout } from '../../src/engine/status.js';
import { ExitCode, FleetrollError } from '../../src/errors.js';
import type { FleetState, RolloutOutcome } from '../../src/ports.js';

/** The state the n-th read returns: the last revision's outcome and the pause flag (the last one repeats). */
type Read = { outcome: RolloutOutcome; paused?: boolean; number?: number };

function store(reads: Read[]) {
  let n = 0;
  return {
    reads: () => n,
    read: async (): Promise<FleetState> => {
      const r = reads[Math.min(n++, reads.length - 1)]!;
      return {
        service: 'api',
        nextRevision: 3,
        paused: r.paused,
        revisions: [
          {
            number: r.number ?? 2,
            image: 'api:2',
            outcome: r.outcome,
            message: r.outcome === 'failed' ? 'made no progress' : undefined,
          } as FleetState['revisions'][number],
        ],
      };
    },
  };
}

describe('status --watch', () => {
  const rows: { name: string; reads: Read[]; ends: 'ok' | RegExp; lines?: string[] }[] = [
    {
      name: 'a rollout in progress that completes',
      reads: [{ outcome: 'in progress' }, { outcome: 'complete' }],
      ends: 'ok',
      lines: ['revision 2 (api:2): in progress', 'revision 2 (api:2): complete'],
    },
    { name: 'a rollout that fails', reads: [{ outcome: 'in progress' }, { outcome: 'failed' }], ends: /rollout of revision 2 failed: made no progress/ },
    { name: 'a paused rollout, the pause flag still set', reads: [{ outcome: 'paused', paused: true }], ends: /rollout of revision 2 paused/ },
    {
      name: 'a paused rollout being resumed (flag cleared, record not yet taken up): waits for the resumed rollout',
      reads: [{ outcome: 'paused', paused: false }, { outcome: 'paused', paused: false }, { outcome: 'in progress' }, { outcome: 'complete' }],
      ends: 'ok',
      lines: ['revision 2 (api:2): paused', 'revision 2 (api:2): in progress', 'revision 2 (api:2): complete'],
    },
    { name: 'a resumed rollout that then fails', reads: [{ outcome: 'paused' }, { outcome: 'in progress' }, { outcome: 'failed' }], ends: /failed/ },
  ];
  for (const r of rows) {
    it(r.name, async () => {
      const s = store(r.reads);
      const lines: string[] = [];
      const run = watchRollout(s, 60_000, (l) => lines.push(l), 1);
      if (r.ends === 'ok') await run;
      else {
        const err = await run.then(
          () => undefined,
          (e: unknown) => e,
        );
        assert.ok(err instanceof FleetrollError, String(err));
        assert.equal(err.exitCode, ExitCode.rolloutFailed);
        assert.match(err.message, r.ends);
      }
      if (r.lines) assert.deepEqual(lines, r.lines);
    });
  }

  it('a resume that never takes the record up ends at the timeout, naming what it waited for', async () => {
    const err = await watchRollout(store([{ outcome: 'paused', paused: false }]), 30, () => {}, 5).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(err instanceof FleetrollError, String(err));
    assert.match(err.message, /timed out after 0\.03 s waiting for revision 2 \(api:2\): paused/);
  });
});
