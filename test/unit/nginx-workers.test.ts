import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { nextLook, waitForNewWorkers, workerSnapshot } from '../../src/adapters/nginxWorkers.js';

describe('nginx workers: what a process listing says about a reload', () => {
  const TITLES = ['PID', 'COMMAND'];
  const rows: { name: string; processes: string[][]; workers: string[]; master: string | undefined }[] = [
    {
      name: 'a master and two workers of one generation',
      processes: [
        ['10', 'nginx: master process nginx -g daemon off;'],
        ['11', 'nginx: worker process'],
        ['12', 'nginx: worker process'],
      ],
      workers: ['11', '12'],
      master: '10',
    },
    {
      name: 'mid-reload: the old workers shutting down are not serving',
      processes: [
        ['10', 'nginx: master process nginx'],
        ['11', 'nginx: worker process is shutting down'],
        ['13', 'nginx: worker process'],
      ],
      workers: ['13'],
      master: '10',
    },
    { name: 'no master listed: none named', processes: [['11', 'nginx: worker process']], workers: ['11'], master: undefined },
    {
      name: 'two masters (two nginx in one listing): none named, so nobody signals the wrong one',
      processes: [
        ['10', 'nginx: master process a'],
        ['20', 'nginx: master process b'],
      ],
      workers: [],
      master: undefined,
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const s = workerSnapshot(TITLES, r.processes);
      assert.deepEqual([...s.workers].sort(), r.workers);
      assert.equal(s.master, r.master);
    });
  }

  it('a parent filter keeps only the children of the master asked about', () => {
    const s = workerSnapshot(
      ['PID', 'PPID', 'ARGS'],
      [
        ['11', '10', 'nginx: worker process'],
        ['21', '20', 'nginx: worker process'],
      ],
      (p) => p[1] === '20',
    );
    assert.deepEqual([...s.workers], ['21']);
  });
});

describe('nginx workers: waiting for a reload to be in force', () => {
  /** A `now` that answers the listings in turn, the last one for ever. */
  const listings = (...sets: string[][]) => {
    let i = 0;
    return async () => new Set(sets[Math.min(i++, sets.length - 1)]);
  };

  it('ends when no old worker is left, and times the hand-over from the first new one seen', async () => {
    const done = await waitForNewWorkers('lb', new Set(['1', '2']), listings(['1', '2'], ['1', '2', '3', '4'], ['1', '3', '4'], ['3', '4']));
    assert.ok(done.handover !== undefined && done.handover > 0, `handover: ${done.handover}`);
    assert.ok(done.confirm >= done.handover);
  });

  it('no hand-over when the first look already finds only new workers', async () => {
    const done = await waitForNewWorkers('lb', new Set(['1']), listings(['2']));
    assert.equal(done.handover, undefined);
  });

  it('no workers to compare: a fixed settle, no hand-over', async () => {
    const done = await waitForNewWorkers('lb', undefined, listings([]));
    assert.ok(done.confirm >= 450, `confirm ${done.confirm}`);
    assert.equal(done.handover, undefined);
  });
});

describe('nginx workers: when to look again', () => {
  const rows: { name: string; sinceStart: number; sinceFirstNew: number | undefined; pause: number }[] = [
    { name: 'right after the signal, no new worker yet: 10 ms', sinceStart: 0, sinceFirstNew: undefined, pause: 10 },
    { name: 'a reload still not started after 1 s: a longer pause', sinceStart: 1_000, sinceFirstNew: undefined, pause: 60 },
    { name: 'a reload that hangs: never more than 100 ms', sinceStart: 20_000, sinceFirstNew: undefined, pause: 100 },
    { name: "a new worker just seen: wait out most of nginx's 100 ms hold", sinceStart: 50, sinceFirstNew: 0, pause: 80 },
    { name: 'half the hold gone: look near its end', sinceStart: 100, sinceFirstNew: 50, pause: 30 },
    { name: 'the hold should be over: every 10 ms', sinceStart: 200, sinceFirstNew: 95, pause: 10 },
    { name: 'long after the hold: still every 10 ms', sinceStart: 5_000, sinceFirstNew: 4_000, pause: 10 },
  ];
  for (const r of rows) it(r.name, () => assert.equal(nextLook(r.sinceStart, r.sinceFirstNew), r.pause));
});
