/**
 * Docker over `ssh://user@host[:port]`, as the docker CLI does it: an SSH session
 * runs `docker system dial-stdio` on the host, whose docker CLI connects its
 * stdin/stdout to the host's engine (its default socket, or DOCKER_HOST there).
 *
 * Why not docker-modem's own ssh support: it opens a new SSH connection (TCP,
 * key exchange, authentication) for every HTTP request, so a few requests at
 * once go past sshd's default `MaxStartups 10:30:100` and are dropped
 * (ECONNRESET), each request costs a handshake, and it accepts any host key.
 * Here one SSH connection per host carries every request, each on its own
 * channel (at most 8 at once, below sshd's default `MaxSessions 10`), and the
 * host key is checked against known_hosts the way OpenSSH does (./sshAuth.ts).
 *
 * Authentication: the ssh-agent at SSH_AUTH_SOCK; without one, the first of
 * ~/.ssh/id_ed25519, id_ecdsa, id_rsa that exists (unencrypted); see ./sshAuth.ts.
 *
 * The connection does not keep the process alive while no request is running.
 */
import { Agent, type ClientRequest } from 'node:http';
import { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { createRequire } from 'node:module';
import type { Client, ClientChannel } from 'ssh2';
import { checkHostKey, credentials, hostKeyAlgorithms, knownHostKeys, knownHostsName } from './sshAuth.js';

/** ssh2, loaded on the first SSH connection: commands that never use ssh do not pay for it. */
const ssh2 = () => createRequire(import.meta.url)('ssh2') as typeof import('ssh2');

export interface SshTarget {
  host: string;
  port: number;
  username: string;
  /** The key to log in with (the host's `ssh.identityFile`); otherwise the agent, else a default identity. */
  identityFile?: string | undefined;
}

/** Channels open at once on one connection: below sshd's default MaxSessions (10). */
const SSH_MAX_CHANNELS = 8;

/**
 * The socket http.Agent gets at once: the `docker system dial-stdio` channel it
 * stands for opens in the background (bytes written meanwhile wait). Handing out
 * a socket synchronously is what lets the Agent count it against maxSockets and
 * queue further requests for reuse, instead of opening a channel for each.
 */
class ChannelSocket extends Duplex {
  /** Idle in the Agent's pool, as opposed to serving a request (or handed over to one by an upgrade). */
  idle = false;
  /** Counted in the agent's `busy` (which keeps the process alive). */
  held = true;
  private channel: ClientChannel | undefined;
  private pending: { chunk: Buffer; cb: (err?: Error | null) => void }[] = [];
  private ended = false;
  private goneCalled = false;
  private inbox: (Buffer | null)[] = [];

  /** `onGone` runs once, when the channel closes or the socket does (whichever is first). */
  constructor(
    open: Promise<ClientChannel>,
    private readonly onGone: () => void,
  ) {
    super({ allowHalfOpen: true });
    this.once('close', () => this.gone());
    open.then(
      (ch) => {
        if (this.destroyed) {
          ch.close();
          return;
        }
        this.channel = ch;
        ch.on('data', (d: Buffer) => this.deliver(d));
        // EOF only once the channel closes: by then its exit status (and stderr) are in,
        // so a dial-stdio that failed has said why before the HTTP request fails.
        ch.on('close', () => {
          this.gone();
          this.deliver(null);
        });
        ch.on('error', (err: Error) => this.destroy(err));
        for (const { chunk, cb } of this.pending) ch.write(chunk, cb);
        this.pending = [];
        if (this.ended) ch.end();
      },
      // Nobody listening (its request already gone): just close, do not throw.
      (err: Error) => this.destroy(this.listenerCount('error') > 0 ? err : undefined),
    );
  }

  /**
   * Hands what the channel sent to the reader on a later turn of the event loop,
   * in order. ssh2 emits every packet of one TCP read in the same tick; pushed at
   * once, the bytes after an HTTP upgrade (exec attach) would flow out before
   * whoever takes the upgraded socket has attached a listener, and be lost.
   */
  private deliver(d: Buffer | null): void {
    this.inbox.push(d);
    if (this.inbox.length === 1) setImmediate(() => this.flush());
  }

  private flush(): void {
    const items = this.inbox;
    this.inbox = [];
    for (const d of items) {
      if (this.destroyed) return;
      if (d) {
        if (!this.push(d)) this.channel?.pause();
        continue;
      }
      this.push(null);
      // Idle in the pool: done now. Serving: once its reader has had everything (end).
      if (this.idle || this.readableEnded) this.destroy();
      else this.once('end', () => this.destroy());
    }
  }

  private gone(): void {
    if (this.goneCalled) return;
    this.goneCalled = true;
    this.onGone();
  }

  override _read(): void {
    this.channel?.resume();
  }

  override _write(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void): void {
    if (this.channel) this.channel.write(chunk, cb);
    else this.pending.push({ chunk, cb });
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.ended = true;
    this.channel?.end();
    cb();
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.channel?.close();
    for (const p of this.pending) p.cb(err ?? new Error('closed'));
    this.pending = [];
    cb(err);
  }

  // What http.Agent and http.ClientRequest call on a net.Socket; the SSH connection's socket is ref'd as a whole.
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  setKeepAlive(): this {
    return this;
  }
  setNoDelay(): this {
    return this;
  }
  setTimeout(): this {
    return this;
  }
}

/**
 * An http.Agent whose connections are `docker system dial-stdio` channels on one
 * shared SSH connection, kept alive between requests (opening one runs the docker
 * CLI on the host: ~100-200 ms). At most SSH_MAX_CHANNELS are open; further
 * requests wait for a free one, or for a slot (an idle channel is then closed to
 * make room). `lastProblem` says what went wrong last, in words.
 */
export class SshDockerAgent extends Agent {
  private conn: Promise<Client> | undefined;
  private sock: Socket | undefined;
  /** Channels in use by a request, or opening for one; the SSH socket is ref'd only while > 0. */
  private busy = 0;
  /** Channels open or opening (at most SSH_MAX_CHANNELS), and channel openings waiting for a slot. */
  private channels = 0;
  private readonly waiting: (() => void)[] = [];
  lastProblem: string | undefined;

  /** `env` for SSH_AUTH_SOCK and `knownHosts` files: the process's and OpenSSH's defaults unless given (tests). */
  constructor(
    readonly target: SshTarget,
    private readonly env: NodeJS.ProcessEnv = process.env,
    private readonly knownHosts?: string[],
  ) {
    super({ keepAlive: true, maxSockets: SSH_MAX_CHANNELS, maxTotalSockets: SSH_MAX_CHANNELS });
  }

  override createConnection(): Duplex {
    this.hold(+1);
    const socket: ChannelSocket = new ChannelSocket(this.openChannel(), () => {
      if (socket.held) {
        socket.held = false;
        this.hold(-1);
      }
    });
    return socket;
  }

  /** A request is done with a channel: keep it for the next one, unless a request waits for a slot (then close it). */
  override keepSocketAlive(socket: Duplex): boolean {
    const s = socket as ChannelSocket;
    s.idle = true;
    if (s.held) {
      s.held = false;
      this.hold(-1);
    }
    return this.waiting.length === 0;
  }

  override reuseSocket(socket: Duplex, req: ClientRequest): void {
    // Node's own removes its idle-socket error listener (and calls ref(), a no-op here).
    super.reuseSocket(socket as Socket, req);
    const s = socket as ChannelSocket;
    s.idle = false;
    if (!s.held) {
      s.held = true;
      this.hold(+1);
    }
  }

  /** Set by destroy(): no new connection (requests still waiting for a slot fail instead of reconnecting). */
  private gone = false;

  override destroy(): void {
    this.gone = true;
    super.destroy();
    void this.conn?.then((c) => c.end()).catch(() => {});
    this.conn = undefined;
  }

  private get where(): string {
    return `${this.target.username ? `${this.target.username}@` : ''}${knownHostsName(this.target.host, this.target.port)}`;
  }

  private hold(delta: number): void {
    this.busy += delta;
    if (this.busy > 0) this.sock?.ref();
    else this.sock?.unref();
  }

  /**
   * Waits for one of the SSH_MAX_CHANNELS slots; resolves with its release. The
   * Agent's own maxSockets is not enough: it stops counting a socket once a
   * request upgrades it (exec attach), though its channel stays open.
   */
  private slot(): Promise<() => void> {
    return new Promise((resolve) => {
      const take = () => {
        this.channels++;
        let back = false;
        resolve(() => {
          if (back) return;
          back = true;
          this.channels--;
          this.waiting.shift()?.();
        });
      };
      if (this.channels < SSH_MAX_CHANNELS) take();
      else this.waiting.push(take);
    });
  }

  private async openChannel(): Promise<ClientChannel> {
    const release = await this.slot();
    try {
      // sshd counts a session until it has handled the close we already saw,
      // so right after a close, with 8 open, a new session can still exceed its
      // MaxSessions: "open failed" then clears within moments. Tried again a few times.
      for (let attempt = 1; ; attempt++) {
        try {
          return await this.execDialStdio(release);
        } catch (err) {
          if (attempt >= 5 || !/Channel open failure/i.test((err as Error).message)) throw err;
          await new Promise((r) => setTimeout(r, 50 * 2 ** attempt));
        }
      }
    } catch (err) {
      release();
      throw err;
    }
  }

  /** One `docker system dial-stdio` session; `release` frees its slot when it closes. */
  private async execDialStdio(release: () => void): Promise<ClientChannel> {
    const client = await this.open();
    return new Promise<ClientChannel>((resolve, reject) => {
      try {
        client.exec('docker system dial-stdio', (err, channel) => {
          if (err) {
            this.lastProblem = `opening an SSH session on ${this.where}: ${err.message}`;
            reject(new Error(this.lastProblem, { cause: err }));
            return;
          }
          channel.once('close', release);
          this.watch(channel);
          resolve(channel);
        });
      } catch (err) {
        // "Not connected": the connection closed since; the next request reconnects.
        this.conn = undefined;
        reject(err as Error);
      }
    });
  }

  /** Keeps what the remote docker CLI says on stderr: when dial-stdio fails, that is the reason. */
  private watch(channel: ClientChannel): void {
    let stderr = '';
    channel.stderr.on('data', (d: Buffer) => {
      if (stderr.length < 2000) stderr += d.toString();
    });
    channel.on('exit', (code: number | null) => {
      if (code && code !== 0) {
        const said = stderr.trim().split('\n').slice(-3).join(' ');
        this.lastProblem = `\`docker system dial-stdio\` on ${this.where} exited with code ${code}${said ? `: ${said}` : ''}${code === 127 ? ' (is the docker CLI installed there, on the PATH of a non-interactive ssh session?)' : ''}`;
      }
    });
  }

  private open(): Promise<Client> {
    if (this.gone) return Promise.reject(new Error(`the SSH connection to ${this.where} was closed (agent destroyed)`));
    if (this.conn) return this.conn;
    const { host, port, username } = this.target;
    const name = knownHostsName(host, port);
    const known = knownHostKeys(host, port, this.knownHosts);
    const creds = credentials(this.env, this.target.identityFile);
    let verdict: string | undefined;
    const conn = new Promise<Client>((resolve, reject) => {
      const client = new (ssh2().Client)();
      const sock = new Socket();
      this.sock = sock;
      const fail = (err: Error & { level?: string }) => {
        if (this.conn === conn) this.conn = undefined;
        const why =
          verdict ??
          (err.level === 'client-authentication'
            ? `authentication as ${username || '(no user)'} failed with ${creds.source}`
            : ((err as NodeJS.ErrnoException).code ?? err.message));
        this.lastProblem = `ssh to ${this.where}: ${why}`;
        const e = new Error(this.lastProblem, { cause: err }) as NodeJS.ErrnoException;
        if ((err as NodeJS.ErrnoException).code) e.code = (err as NodeJS.ErrnoException).code;
        reject(e);
      };
      client.once('ready', () => {
        client.removeListener('error', fail);
        client.on('error', () => {
          if (this.conn === conn) this.conn = undefined;
        });
        resolve(client);
      });
      client.once('error', fail);
      client.on('close', () => {
        if (this.conn === conn) this.conn = undefined;
      });
      sock.setNoDelay(true);
      sock.connect(port, host);
      // After connect(): before it, (un)ref only takes effect on 'connect', out of order with later calls.
      if (this.busy <= 0) sock.unref();
      try {
        client.connect({
          sock,
          username,
          ...(creds.agent ? { agent: creds.agent } : {}),
          ...(creds.privateKey ? { privateKey: creds.privateKey } : {}),
          readyTimeout: 15_000,
          ...(known.some((k) => !k.revoked)
            ? { algorithms: { serverHostKey: hostKeyAlgorithms(known.filter((k) => !k.revoked).map((k) => k.type)) as never } }
            : {}),
          hostVerifier: (key: Buffer) => {
            verdict = checkHostKey(key, known, name, this.knownHosts);
            return verdict === undefined;
          },
        });
      } catch (err) {
        // ssh2 throws at once on an unusable key (e.g. encrypted without a passphrase).
        sock.destroy();
        const msg = (err as Error).message;
        verdict = `cannot use ${creds.source}: ${msg}${/encrypted/i.test(msg) ? ' (load it into an ssh-agent: ssh-add)' : ''}`;
        fail(err as Error);
      }
    });
    this.conn = conn;
    return conn;
  }
}
