/**
 * How fleetroll reaches one Docker engine: the dockerode options for an
 * endpoint URL (`unix://`, `tcp://` with optional TLS, `ssh://` through
 * ./ssh.ts), and what the errors of a misconfigured or stopped engine mean. Apart from
 * the runtime (./docker.ts) because it is configuration and diagnosis, done
 * before and after any call to the engine.
 */
import { existsSync, readFileSync } from 'node:fs';
import type { Agent } from 'node:http';
import { userInfo } from 'node:os';
import { isAbsolute, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Dockerode from 'dockerode';
import { FleetrollError } from '../errors.js';
import { engineMessage, runtimeError } from './dockerRetry.js';
import { SshDockerAgent } from './ssh.js';

/** One Docker host as the fleet file describes it. */
export interface DockerHostConfig {
  name: string;
  /** `unix:///path`, `tcp://host:port` or `ssh://user@host[:port]`. */
  docker: string;
  /** Client TLS for `tcp://` (paths to PEM files). */
  tls?: { ca: string; cert: string; key: string } | undefined;
  /** For `ssh://`: the private key to log in with (default: the agent, else ~/.ssh/id_*). */
  ssh?: { identityFile: string } | undefined;
}

/** dockerode's options plus the docker-modem ones its types leave out. */
export type DockerConnectOptions = Dockerode.DockerOptions & { agent?: Agent | undefined; pathPrefix?: string | undefined };

/**
 * dockerode options for an endpoint URL. Every connection key is set so DOCKER_HOST & co
 * (DOCKER_CERT_PATH, DOCKER_PATH_PREFIX, DOCKER_CLIENT_TIMEOUT) cannot leak in.
 * `ssh://` goes through SshDockerAgent (one shared SSH connection, host key checked
 * against known_hosts), not docker-modem's ssh support: see ./ssh.ts for why.
 */
export function dockerOptions(host: DockerHostConfig): DockerConnectOptions {
  const endpoint = host.docker;
  const where = `hosts[${host.name}]/docker`;
  const invalid = (msg: string) => new FleetrollError('E_INVALID', `${where}: ${msg}`);
  const base: DockerConnectOptions = {
    socketPath: undefined,
    host: undefined,
    port: undefined,
    username: undefined,
    ca: undefined,
    cert: undefined,
    key: undefined,
    agent: undefined,
    pathPrefix: undefined,
    timeout: undefined,
  };
  if (endpoint.startsWith('unix://')) {
    const socketPath = endpoint.slice('unix://'.length);
    if (!socketPath.startsWith('/')) throw invalid(`${JSON.stringify(endpoint)}: expected unix:///absolute/path`);
    return { ...base, socketPath, protocol: 'http' };
  }
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw invalid(`${JSON.stringify(endpoint)} is not a URL (unix:///path, tcp://host:port or ssh://user@host)`);
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!hostname) throw invalid(`${JSON.stringify(endpoint)} has no host name`);
  if (url.protocol === 'tcp:') {
    if (host.tls) {
      const read = (what: string, file: string) => {
        try {
          return readFileSync(file);
        } catch (err) {
          throw new FleetrollError('E_INVALID', `hosts[${host.name}]/tls/${what}: cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`, {
            cause: err,
          });
        }
      };
      return {
        ...base,
        host: hostname,
        port: url.port || '2376',
        protocol: 'https',
        ca: read('ca', host.tls.ca),
        cert: read('cert', host.tls.cert),
        key: read('key', host.tls.key),
      };
    }
    return { ...base, host: hostname, port: url.port || '2375', protocol: 'http' };
  }
  if (url.protocol === 'ssh:') {
    const username = decodeURIComponent(url.username) || userInfo().username;
    const port = Number(url.port || '22');
    // Plain HTTP spoken over the agent's dial-stdio channels; host/port only name it in URLs.
    return {
      ...base,
      host: hostname,
      port,
      protocol: 'http',
      agent: new SshDockerAgent({ host: hostname, port, username, ...(host.ssh ? { identityFile: host.ssh.identityFile } : {}) }),
    };
  }
  throw invalid(`unsupported scheme ${JSON.stringify(url.protocol)} in ${JSON.stringify(endpoint)} (use unix://, tcp:// or ssh://)`);
}

/** What the TLS errors a misconfigured tcp:// host gives mean, in words (Node's codes; the ALERT ones are the engine refusing). */
const TLS_CODES: Record<string, string> = {
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "the engine's certificate is not signed by tls.ca",
  SELF_SIGNED_CERT_IN_CHAIN: "the engine's certificate is not signed by tls.ca",
  DEPTH_ZERO_SELF_SIGNED_CERT: "the engine's certificate is self-signed and not tls.ca",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "the engine's certificate is not signed by tls.ca",
  ERR_TLS_CERT_ALTNAME_INVALID: "the engine's certificate does not name this host (subjectAltName)",
  CERT_HAS_EXPIRED: "the engine's certificate has expired",
  ERR_SSL_TLSV1_ALERT_UNKNOWN_CA: 'the engine does not accept tls.cert (not signed by the CA it trusts)',
  ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE: 'the engine does not accept tls.cert',
  ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED: 'the engine wants a client certificate',
  ERR_SSL_WRONG_VERSION_NUMBER: 'the engine does not speak TLS there (drop tls, or use its TLS port)',
  EPROTO: 'TLS handshake failed',
  ECONNRESET: 'the engine closed the connection (does it listen with TLS there?)',
};

/** The `ssh` command line that reaches an ssh:// endpoint, for hints. */
function sshCommand(endpoint: string): string {
  try {
    const u = new URL(endpoint);
    return `ssh ${u.port ? `-p ${u.port} ` : ''}${u.username ? `${decodeURIComponent(u.username)}@` : ''}${u.hostname}`;
  } catch {
    return 'ssh';
  }
}

/** The socket dockerd listens on unless told otherwise (and the one scripts/setup-host.sh starts it on). */
const DEFAULT_SOCKET = '/var/run/docker.sock';

/**
 * scripts/setup-host.sh as the user would type it, when fleetroll runs from
 * its repository (the script is not in the published package): relative to
 * the working directory when it is inside it. src/ and dist/ are both two
 * levels below the root.
 */
export function repoSetupScript(cwd = process.cwd()): string | undefined {
  const script = fileURLToPath(new URL('../../scripts/setup-host.sh', import.meta.url));
  if (!existsSync(script)) return undefined;
  const rel = relative(cwd, script);
  return rel.startsWith('..') || isAbsolute(rel) ? script : rel;
}

/** How to start the local engine listening on `socketPath`: the repository's set-up script where there is one, else dockerd itself. */
function localEngineHint(socketPath: string, setupScript: string | undefined, asRoot: boolean): string {
  const sudo = asRoot ? '' : 'sudo ';
  if (socketPath !== DEFAULT_SOCKET) return `is dockerd running on that socket? start it with: ${sudo}dockerd -H unix://${socketPath} &`;
  if (setupScript !== undefined) return `is dockerd running? start it (installing it if missing) with: ${sudo}bash ${setupScript}`;
  return `is dockerd running? start it with: ${sudo}systemctl start docker (without systemd: ${sudo}dockerd &; Docker Desktop: start the app)`;
}

/** What to try when the engine at `endpoint` does not answer; the local-engine facts are parameters for the tests. */
export function unreachableHint(
  endpoint: string,
  local: { setupScript?: string | undefined; asRoot?: boolean } = { setupScript: repoSetupScript(), asRoot: process.getuid?.() === 0 },
): string {
  return endpoint.startsWith('unix://')
    ? localEngineHint(endpoint.slice('unix://'.length), local.setupScript, local.asRoot === true)
    : endpoint.startsWith('ssh://')
      ? `check that \`${sshCommand(endpoint)} docker version\` works without a prompt (key in an ssh-agent, host in ~/.ssh/known_hosts) and that dockerd runs there`
      : 'is dockerd listening on that address (and TLS configured to match)?';
}

/**
 * The error for a ping of `where` that failed with `err`: what happened in
 * words (a timeout, the ssh agent's own reason, a socket or TLS code), then
 * what to try.
 */
export function unreachableError(
  where: string,
  endpoint: string,
  tls: boolean,
  err: unknown,
  timeoutMs: number,
  sshProblem: string | undefined,
): FleetrollError {
  const e = err as NodeJS.ErrnoException;
  const detail =
    e?.name === 'AbortError' || e?.name === 'TimeoutError'
      ? `no answer within ${timeoutMs} ms${sshProblem ? ` (${sshProblem})` : ''}`
      : sshProblem
        ? sshProblem
        : e?.code
          ? `${e.code}${tls && TLS_CODES[e.code] ? ` (${TLS_CODES[e.code]})` : ''}`
          : engineMessage(err);
  const hint = unreachableHint(endpoint);
  return runtimeError('E_DOCKER_UNREACHABLE', `cannot reach ${where}: ${detail}; ${hint}`, err, hint);
}
