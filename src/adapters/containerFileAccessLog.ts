/**
 * The access log reader for a file inside the nginx container: a PathFollower
 * (./pathFollower.ts) over FileOps that run in the container, through docker
 * exec (`stat`, `tail`) or, in an image without them, Docker's archive API
 * (the shared rules: ./accessLog.ts). Its own file: all of its Docker calls.
 */
import type Dockerode from 'dockerode';
import { FleetrollError } from '../errors.js';
import type { AccessLogCounters, AccessLogSource } from '../ports.js';
import { demux, getFileEntry, startExec } from './dockerFiles.js';
import { engineMessage } from './dockerRetry.js';
import { PathFollower, type FileOps, type PathFollowOptions } from './pathFollower.js';

/** A LocalFileAccessLog-like source over a PathFollower (the container's file, or a path followed without a handle). */
class FollowerSource implements AccessLogSource {
  private closed = false;
  constructor(
    readonly name: string,
    private readonly follower: PathFollower,
  ) {}
  get counters(): AccessLogCounters {
    return this.follower.counters;
  }
  async read(): Promise<string[]> {
    if (this.closed) return [];
    try {
      return await this.follower.read();
    } catch (err) {
      if (err instanceof FleetrollError) throw err;
      throw new FleetrollError('E_ACCESS_LOG', `reading the ${this.name}: ${engineMessage(err)}`, { cause: err });
    }
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

/**
 * Thrown by the exec FileOps when the image has no `stat` or `tail`; the archive API is used then.
 * Internal on purpose, and not a FleetrollError: autoFileOps catches it to fall back, and where it
 * is rethrown (method 'exec', or a second miss) FollowerSource.read wraps every error that is not
 * a FleetrollError into E_ACCESS_LOG naming the log. A FleetrollError would pass through unwrapped.
 */
class ToolMissing extends Error {}

const EMPTY = new Uint8Array(0);

/** Runs an argument array in the container; stdout as bytes (log lines can hold any byte), stderr as text. */
async function execRaw(docker: Dockerode, container: string, cmd: string[]): Promise<{ exitCode: number; stdout: Buffer; stderr: string }> {
  const { exec, stream } = await startExec(docker, container, cmd).catch((err: unknown) => {
    if (/executable file not found|no such file or directory/i.test(engineMessage(err))) throw new ToolMissing(engineMessage(err));
    throw new FleetrollError('E_ACCESS_LOG', `running \`${cmd.join(' ')}\` in container ${container}: ${engineMessage(err)}`, { cause: err });
  });
  const out: Buffer[] = [];
  const errs: Buffer[] = [];
  await demux(docker, stream, out, errs);
  // The stream can end a moment before the engine records the exit code.
  let exitCode = -1;
  for (let i = 0; i < 50; i++) {
    const info = await exec.inspect();
    if (!info.Running && typeof info.ExitCode === 'number') {
      exitCode = info.ExitCode;
      break;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const stdout = Buffer.concat(out);
  const stderr = Buffer.concat(errs).toString('utf8');
  // runc reports a missing binary on the stream with 126/127 rather than failing the start.
  if (exitCode === 126 || exitCode === 127 || /executable file not found/.test(stdout.subarray(0, 512).toString('utf8')))
    throw new ToolMissing(`${cmd[0]}: ${stderr || stdout.toString('utf8')}`.trim());
  return { exitCode, stdout, stderr };
}

/**
 * FileOps through docker exec: `stat -L -c '%d:%i %s %F' FILE` for identity,
 * size and type (a link to /dev/stdout is refused, tail would never end), `tail -c +N FILE` for the bytes (busybox and coreutils both have
 * them). stat runs again after tail; a different inode means the file rotated
 * between the two, and the read is retried.
 */
export function execFileOps(docker: Dockerode, container: string): FileOps {
  const statOf = async (path: string) => {
    const r = await execRaw(docker, container, ['stat', '-L', '-c', '%d:%i %s %F', path]);
    if (r.exitCode !== 0) {
      if (/no such file/i.test(r.stderr)) return undefined;
      throw new FleetrollError('E_ACCESS_LOG', `stat ${path} in container ${container}: ${r.stderr.trim() || `exit ${r.exitCode}`}`);
    }
    const m = /^(\S+) ([0-9]+) (.+?)\s*$/.exec(r.stdout.toString('utf8'));
    if (!m) throw new FleetrollError('E_ACCESS_LOG', `stat ${path} in container ${container}: unexpected output ${JSON.stringify(r.stdout.toString('utf8'))}`);
    // The images' access.log is often a link to /dev/stdout: tail would wait on it for ever.
    if (m[3] !== 'regular file' && m[3] !== 'regular empty file') {
      throw new FleetrollError(
        'E_ACCESS_LOG',
        `${path} in container ${container} is not a regular file (${m[3]}): if nginx logs to the container's output, read its log stream instead`,
      );
    }
    return { id: m[1]!, size: Number(m[2]) };
  };
  return {
    async read(path, from) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = await statOf(path);
        if (!before) return undefined;
        if (from >= before.size) return { id: before.id, size: before.size, data: EMPTY };
        const t = await execRaw(docker, container, ['tail', '-c', `+${from + 1}`, path]);
        const after = await statOf(path);
        if (t.exitCode === 0 && after && after.id === before.id) return { id: before.id, size: after.size, data: t.stdout };
      }
      throw new FleetrollError('E_ACCESS_LOG', `reading ${path} in container ${container}: the file kept changing identity (rotating?) across three tries`);
    },
  };
}

/**
 * FileOps through Docker's archive API, for images without stat/tail: the
 * whole file comes every time (fine for a deploy's worth of log; a long-lived
 * access log should be rotated or read with exec), and there is no inode,
 * so rotation is told by content (the overlap bytes).
 */
export function archiveFileOps(docker: Dockerode, container: string): FileOps {
  return {
    async read(path, from) {
      const entry = await getFileEntry(docker, container, path);
      if (!entry) return undefined;
      return { id: undefined, size: entry.content.length, data: entry.content.subarray(Math.min(from, entry.content.length)) };
    },
  };
}

/** exec FileOps that switch to the archive API for good the first time a tool is missing. */
function autoFileOps(docker: Dockerode, container: string): FileOps {
  let ops = execFileOps(docker, container);
  let fellBack = false;
  return {
    async read(path, from) {
      try {
        return await ops.read(path, from);
      } catch (err) {
        if (!(err instanceof ToolMissing) || fellBack) throw err;
        fellBack = true;
        ops = archiveFileOps(docker, container);
        return ops.read(path, from);
      }
    },
  };
}

export interface ContainerFileOptions extends PathFollowOptions {
  /** 'auto' (default): exec, falling back to the archive API when the image has no stat/tail. */
  method?: 'auto' | 'exec' | 'archive';
}

/** The access log file inside an nginx container (see the module comment). */
export function containerFileAccessLog(docker: Dockerode, container: string, path: string, opts: ContainerFileOptions = {}): AccessLogSource {
  const { method = 'auto', ...follow } = opts;
  const ops = method === 'exec' ? execFileOps(docker, container) : method === 'archive' ? archiveFileOps(docker, container) : autoFileOps(docker, container);
  return new FollowerSource(`access log ${path} in container ${container}`, new PathFollower(ops, path, follow));
}
