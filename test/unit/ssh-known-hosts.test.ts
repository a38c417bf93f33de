/** Host key checking for ssh:// Docker hosts: known_hosts as OpenSSH reads it. */
import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { checkHostKey, knownHostKeys, knownHostsName } from '../../src/adapters/sshAuth.js';

// Two ed25519 public key blobs (any bytes do: they are compared, not parsed).
const KEY_A = Buffer.concat([Buffer.from('\0\0\0\x0bssh-ed25519\0\0\0\x20'), randomBytes(32)]);
const KEY_B = Buffer.concat([Buffer.from('\0\0\0\x0bssh-ed25519\0\0\0\x20'), randomBytes(32)]);
const a = KEY_A.toString('base64');
const b = KEY_B.toString('base64');

function file(text: string): string {
  const f = join(mkdtempSync(join(tmpdir(), 'fleetroll-kh-')), 'known_hosts');
  writeFileSync(f, text);
  return f;
}

function hashed(name: string): string {
  const salt = randomBytes(20);
  return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
}

describe('known_hosts', () => {
  it('names a host as OpenSSH does: bare on port 22, [host]:port otherwise', () => {
    assert.equal(knownHostsName('vm1', 22), 'vm1');
    assert.equal(knownHostsName('10.0.0.11', 2222), '[10.0.0.11]:2222');
  });

  it('finds plain, listed, wildcard and hashed entries for the host and port, and only those', () => {
    const f = file(
      [
        '# comment',
        `vm1,10.0.0.11 ssh-ed25519 ${a} root@vm1`,
        `[vm1]:2222 ssh-ed25519 ${b}`,
        `*.example.com,!bad.example.com ssh-ed25519 ${b}`,
        `${hashed('[10.0.0.12]:2200')} ssh-ed25519 ${a}`,
        `@cert-authority *.example.com ssh-ed25519 ${a}`,
        '',
      ].join('\n'),
    );
    const keys = (h: string, p: number) => knownHostKeys(h, p, [f]).map((k) => k.key.toString('base64'));
    assert.deepEqual(keys('vm1', 22), [a]);
    assert.deepEqual(keys('10.0.0.11', 22), [a]);
    assert.deepEqual(keys('vm1', 2222), [b]);
    assert.deepEqual(keys('vm2', 22), []);
    assert.deepEqual(keys('web.example.com', 22), [b], 'wildcard; the @cert-authority line is not a host key');
    assert.deepEqual(keys('bad.example.com', 22), [], 'negated');
    assert.deepEqual(keys('10.0.0.12', 2200), [a], 'hashed');
    assert.deepEqual(keys('10.0.0.12', 22), []);
    assert.deepEqual(knownHostKeys('vm1', 22, ['/nonexistent/known_hosts']), []);
  });

  it('accepts the known key, refuses a different one (changed), a revoked one, and a host with no entry', () => {
    const known = knownHostKeys('vm1', 22, [file(`vm1 ssh-ed25519 ${a}\n`)]);
    assert.equal(checkHostKey(KEY_A, known, 'vm1'), undefined);
    assert.match(checkHostKey(KEY_B, known, 'vm1') ?? '', /host key of vm1 does not match/);
    assert.match(checkHostKey(KEY_A, [], 'vm1') ?? '', /vm1 is not in known_hosts/);
    const revoked = knownHostKeys('vm1', 22, [file(`@revoked * ssh-ed25519 ${a}\nvm1 ssh-ed25519 ${a}\n`)]);
    assert.match(checkHostKey(KEY_A, revoked, 'vm1') ?? '', /@revoked/);
  });
});
