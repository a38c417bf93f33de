/**
 * Both ends of ssh:// authentication as OpenSSH does them, for the Docker
 * agent (./ssh.ts): the server's host key against known_hosts (plain,
 * wildcard, negated and hashed entries, @revoked) and the client's identity
 * (identityFile, the ssh-agent, a default key). Apart from the agent because
 * it reads and matches files with no connection in it, and is tested on its
 * own (test/unit/ssh-known-hosts.test.ts).
 */
import { createHmac } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { ConnectConfig } from 'ssh2';

/** The known_hosts files OpenSSH reads by default, user's first. */
export function defaultKnownHostsFiles(home = homedir()): string[] {
  return [join(home, '.ssh/known_hosts'), join(home, '.ssh/known_hosts2'), '/etc/ssh/ssh_known_hosts', '/etc/ssh/ssh_known_hosts2'];
}

export interface KnownHostKey {
  /** Key type as written, e.g. ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa. */
  type: string;
  /** The public key blob (SSH wire format), as the server presents it. */
  key: Buffer;
  revoked: boolean;
  file: string;
}

/** How OpenSSH names a host in known_hosts: `host` on port 22, else `[host]:port`. */
export function knownHostsName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

function globMatch(pattern: string, name: string): boolean {
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`, 'i').test(name);
}

/** Does a known_hosts host field (patterns, or one hashed `|1|salt|hash`) name `name`? */
function hostFieldMatches(field: string, name: string): boolean {
  if (field.startsWith('|1|')) {
    const [, , salt, hash] = field.split('|');
    if (!salt || !hash) return false;
    return createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64') === hash;
  }
  let matched = false;
  for (const p of field.split(',')) {
    if (p.startsWith('!')) {
      if (globMatch(p.slice(1), name)) return false;
    } else if (globMatch(p, name)) {
      matched = true;
    }
  }
  return matched;
}

/** The keys known_hosts files list for host:port (plain, wildcard and hashed entries; @revoked marked; @cert-authority skipped). */
export function knownHostKeys(host: string, port: number, files = defaultKnownHostsFiles()): KnownHostKey[] {
  const name = knownHostsName(host, port);
  const out: KnownHostKey[] = [];
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const raw of text.split('\n')) {
      const line = raw.trim();
      if (!line || line.startsWith('#')) continue;
      const parts = line.split(/\s+/);
      const marker = parts[0]?.startsWith('@') ? parts.shift() : undefined;
      if (marker === '@cert-authority') continue;
      const [field, type, b64] = parts;
      if (!field || !type || !b64 || !hostFieldMatches(field, name)) continue;
      out.push({ type, key: Buffer.from(b64, 'base64'), revoked: marker === '@revoked', file });
    }
  }
  return out;
}

/** Host key algorithms for the key types known_hosts has, so the server offers a key that can be checked. */
export function hostKeyAlgorithms(types: string[]): string[] {
  const algos = types.flatMap((t) => (t === 'ssh-rsa' ? ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'] : [t]));
  return [...new Set(algos)];
}

/** The verdict on a host key the server presented; undefined when accepted. */
export function checkHostKey(presented: Buffer, known: KnownHostKey[], name: string, files = defaultKnownHostsFiles()): string | undefined {
  if (known.some((k) => k.revoked && k.key.equals(presented))) return `the host key of ${name} is marked @revoked in known_hosts`;
  if (known.some((k) => !k.revoked && k.key.equals(presented))) return undefined;
  if (known.some((k) => !k.revoked)) {
    return `the host key of ${name} does not match the one in ${known.find((k) => !k.revoked)?.file} (it changed, or something is in between): not connecting`;
  }
  return `${name} is not in known_hosts (${files[0]}): host key unknown, not connecting`;
}

/** What to authenticate with: the host's identityFile, else the agent, else a default identity file. */
export function credentials(env: NodeJS.ProcessEnv, identityFile?: string): Pick<ConnectConfig, 'agent' | 'privateKey'> & { source: string } {
  if (identityFile) {
    // As `ssh -i` with IdentitiesOnly: the named key and nothing else.
    try {
      return { privateKey: readFileSync(identityFile), source: `ssh.identityFile ${identityFile}` };
    } catch (err) {
      return { source: `ssh.identityFile ${identityFile}, which cannot be read (${(err as NodeJS.ErrnoException).code ?? String(err)})` };
    }
  }
  if (env.SSH_AUTH_SOCK) return { agent: env.SSH_AUTH_SOCK, source: `the ssh-agent at SSH_AUTH_SOCK` };
  for (const f of ['id_ed25519', 'id_ecdsa', 'id_rsa'].map((n) => join(homedir(), '.ssh', n))) {
    if (existsSync(f)) return { privateKey: readFileSync(f), source: f };
  }
  return { source: 'nothing (no SSH_AUTH_SOCK and no ~/.ssh/id_ed25519, id_ecdsa or id_rsa)' };
}
