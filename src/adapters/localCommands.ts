/**
 * Commands on this machine for the registry-free images (./localImages.ts,
 * ./rootfs.ts): the docker CLI, ldd, tar and a binary's version, all through
 * execa with argument arrays (no shell) and an empty environment unless given.
 * One place, so that a failure always reads the same way: what was being done,
 * the command, its exit code and its stderr.
 */

/** Options shared by every image function (./localImages.ts, ./rootfs.ts). */
export interface DockerCliOptions {
  /** docker CLI binary (default `docker` on PATH). */
  dockerBin?: string;
  /** Engine to talk to, e.g. `unix:///var/run/docker.sock`, `tcp://h:2376`, `ssh://u@h` (default: the CLI's own). */
  dockerHost?: string;
  /** Progress lines ("building fleetroll/node-base:20.20.2 ..."). Default: silent. */
  log?: (line: string) => void;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

function dockerEnv(opts: DockerCliOptions, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = { ...extra };
  if (opts.dockerHost) env.DOCKER_HOST = opts.dockerHost;
  return env;
}

/** Run a command; throw an Error naming `what`, the command, the exit code and stderr when it fails. */
export async function run(
  what: string,
  file: string,
  args: readonly string[],
  options: { env?: Record<string, string>; allowFailure?: boolean; cwd?: string } = {},
): Promise<RunResult> {
  const { execa } = await import('execa');
  const result = await execa(file, args, {
    reject: false,
    stdin: 'ignore',
    env: options.env ?? {},
    cwd: options.cwd,
    maxBuffer: 64 * 1024 * 1024,
  });
  const stdout = String(result.stdout ?? '');
  const stderr = String(result.stderr ?? '');
  const exitCode = result.exitCode ?? -1;
  if ((result.failed || exitCode !== 0) && !options.allowFailure) {
    const detail = stderr.trim() || stdout.trim().split('\n').slice(-15).join('\n') || result.shortMessage || 'no output';
    const cmd = [file, ...args].map((a) => (/[\s"']/.test(a) ? JSON.stringify(a) : a)).join(' ');
    throw new Error(`${what}: \`${cmd}\` ${exitCode === -1 ? 'could not run' : `exited with ${exitCode}`}: ${detail}`, {
      cause: result,
    });
  }
  return { stdout, stderr, exitCode };
}

export function docker(opts: DockerCliOptions, what: string, args: readonly string[], env: Record<string, string> = {}, allowFailure = false) {
  return run(what, opts.dockerBin ?? 'docker', args, { env: dockerEnv(opts, env), allowFailure });
}

/** True when the engine has an image with this tag (or id). */
export async function imageExists(tag: string, opts: DockerCliOptions = {}): Promise<boolean> {
  const r = await docker(opts, `inspecting image ${tag}`, ['image', 'inspect', '--format', '{{.Id}}', tag], {}, true);
  if (r.exitCode === 0) return true;
  if (/no such image/i.test(r.stderr)) return false;
  throw new Error(`inspecting image ${tag}: docker exited with ${r.exitCode}: ${r.stderr.trim() || 'no output'}`);
}

/** The version a binary prints (`node --version`, `nginx -v`), matched by `re`. */
export async function binaryVersion(binary: string, args: string[], re: RegExp): Promise<string> {
  const r = await run(`reading the version of ${binary}`, binary, args, { env: {} });
  const m = re.exec(`${r.stdout}\n${r.stderr}`);
  if (!m?.[1]) throw new Error(`reading the version of ${binary}: unexpected output: ${(r.stdout + r.stderr).trim()}`);
  return m[1];
}
