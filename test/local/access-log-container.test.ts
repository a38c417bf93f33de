/**
 * The container file reader's exec path (src/adapters/containerFileAccessLog.ts)
 * without a Docker engine but with this machine's real `stat` and `tail`: the
 * stand-in container (test/support/fake-container.ts) runs the argument
 * arrays the reader sends and frames their output the way Docker multiplexes
 * it. So the commands and offsets, parsing stat's output, rotation by inode
 * and the refusal of what is not a regular file are checked against the real
 * tools. The rest of the container readers is in
 * test/unit/access-log-container.test.ts.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { appendFileSync, renameSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { line } from '../support/access-log-lines.js';
import { fakeContainers } from '../support/fake-container.js';

const { fileReader } = fakeContainers();

describe('container file reader through exec (stat / tail)', () => {
  it('reads new lines with tail -c +N from the offset, stat before and after, argument arrays only', async () => {
    const { path, fake, src } = fileReader('old\n', {}, { method: 'exec' });
    assert.deepEqual(await src.read(), []);
    appendFileSync(path, 'a\nb\n');
    assert.deepEqual(await src.read(), ['a', 'b']);
    assert.deepEqual(await src.read(), []);
    assert.ok(fake.execs.every((c) => Array.isArray(c) && (c[0] === 'stat' || c[0] === 'tail')));
    const tails = fake.execs.filter((c) => c[0] === 'tail');
    // Each tail starts at the offset minus the overlap bytes re-read to check the file is the same.
    assert.deepEqual(tails[tails.length - 1], ['tail', '-c', '+1', path]);
    assert.ok(fake.execs.some((c) => c.join(' ') === `stat -L -c %d:%i %s %F ${path}`));
    assert.equal(fake.archives, 0);
  });

  it('bytes, not characters: a multi-byte URI does not shift the offset', async () => {
    const { path, src } = fileReader('', {}, { method: 'exec', from: 'start' });
    await src.read();
    appendFileSync(path, '/é/ü\n');
    assert.deepEqual(await src.read(), ['/é/ü']);
    appendFileSync(path, 'next\n');
    assert.deepEqual(await src.read(), ['next']);
  });

  it('rotation by rename: the rest of the old file is read at FILE.1 (same inode), then the new file', async () => {
    const { path, src } = fileReader('', {}, { method: 'exec' });
    await src.read();
    appendFileSync(path, 'a\n');
    assert.deepEqual(await src.read(), ['a']);
    appendFileSync(path, 'b\n');
    renameSync(path, `${path}.1`);
    writeFileSync(path, 'c\n');
    assert.deepEqual(await src.read(), ['b', 'c']);
    assert.deepEqual(src.counters, { rotations: 1, truncations: 0, lostRotations: 0, skippedLines: 0 });
  });

  it('refuses what is not a regular file (access.log linked to the output): tail would never end', async () => {
    const { path, src } = fileReader(undefined, {}, { method: 'exec' });
    spawnSync('mkfifo', [path]);
    await assert.rejects(src.read(), /is not a regular file \(fifo\): if nginx logs to the container's output, read its log stream instead/);
  });

  it('the fleetroll_json lines parse (end to end through the fake exec)', async () => {
    const { path, src } = fileReader('', {}, { method: 'exec' });
    await src.read();
    appendFileSync(path, `${line()}\n${line({ status: '502' })}\n`);
    assert.deepEqual(await src.read(), [line(), line({ status: '502' })]);
  });
});
