/**
 * The catalogue of error codes and exit codes: the single source of truth
 * for every code in use, its exit code, what it means and what to do.
 * docs/errors.md is generated from it (scripts/errors-doc.ts) and checked
 * against it, and so is every 'E_*' literal in src/ (test/unit/errors.test.ts).
 * src/errors.ts re-exports all of it with the error classes that use it.
 */

export const ExitCode = {
  ok: 0,
  rolloutFailed: 1,
  invalidInput: 2,
  lockHeld: 3,
  /** The rollout stopped because someone ran `fleetroll pause`. */
  paused: 4,
  interrupted: 130,
} as const;

export type ExitCodeName = keyof typeof ExitCode;
export type ExitCodeValue = (typeof ExitCode)[ExitCodeName];

/** What each exit code means, for `--help` texts and docs/errors.md. */
export const EXIT_CODE_MEANINGS: Record<ExitCodeName, string> = {
  ok: 'success: the rollout completed and every instance was verified (or the command did what it was asked)',
  rolloutFailed: 'the rollout (or the command) failed; the message says what happened and what to do next',
  invalidInput: 'invalid input: the fleet file, a defaults file or a flag is wrong; nothing was changed',
  lockHeld: "another rollout holds the fleet's lock; nothing was changed",
  paused: 'the rollout stopped because someone ran `fleetroll pause`; the fleet is consistent',
  interrupted: 'interrupted by a signal (Ctrl-C, SIGTERM); the fleet was left consistent',
};

/** Every code a FleetrollError can carry. A CI script may rely on them: add codes, never rename one. */
export type ErrorCode =
  /** A field of the fleet file, a defaults file, an experiment spec or a flag is invalid. */
  | 'E_INVALID'
  /** A file that was named (fleet file, compose file, env file, template) cannot be read. */
  | 'E_NO_FILE'
  /** The command already printed why it failed (a rehearsal or experiment summary); only the exit code is set. */
  | 'E_REPORTED'
  /** The rollout did not reach its goal: progress deadline, failing hook, analysis, wrong versions, preflight. */
  | 'E_ROLLOUT_FAILED'
  /** The fleet is paused (`fleetroll pause`), or the rollout stopped at a pause. */
  | 'E_PAUSED'
  /** A signal stopped the command; the fleet was left consistent. */
  | 'E_INTERRUPTED'
  /** Another fleetroll holds the fleet's lock. */
  | 'E_LOCK_HELD'
  /** `fleetroll watch` did not heal: the fleet's latest revision changed (or is not complete) since it looked. */
  | 'E_HEAL_STALE'
  /** `status --watch` (or a similar wait) ran out of time. */
  | 'E_TIMEOUT'
  /** `undo` found no earlier completed revision to go back to. */
  | 'E_NO_PREVIOUS'
  /** An undo of a running blue-green rollout was not answered in time. */
  | 'E_SWITCH_BACK'
  /** `adopt` could not take over the running containers. */
  | 'E_ADOPT'
  /** The fleet's state (history, journal) on its first host is unreadable. */
  | 'E_STATE'
  | 'E_ETCD'
  /** The rehearsal (`fleetroll rehearse`, the demo) could not set up its nginx. */
  | 'E_REHEARSE'
  /** A Docker API call failed (after retries for transient failures). */
  | 'E_DOCKER'
  /** A Docker host does not answer. */
  | 'E_DOCKER_UNREACHABLE'
  /** A container fleetroll expected is not there. */
  | 'E_CONTAINER_MISSING'
  /** A container fleetroll needs running is stopped. */
  | 'E_CONTAINER_NOT_RUNNING'
  /** A new instance's container was created but would not start. */
  | 'E_CONTAINER_START'
  /** A container name fleetroll wants is taken by another container. */
  | 'E_NAME_CONFLICT'
  /** The Docker network an instance joins does not exist on its host. */
  | 'E_NETWORK_MISSING'
  /** The image is not on the host and could not be copied or pulled there. */
  | 'E_IMAGE_MISSING'
  /** A command run in a container (a readiness exec) did not finish in time. */
  | 'E_EXEC_TIMEOUT'
  /** A file could not be written into a container (its directory is missing). */
  | 'E_PUT_FILE'
  /** A file read from a container is not a regular file. */
  | 'E_GET_FILE'
  /** Registry credentials could not be found or a credential helper failed. */
  | 'E_REGISTRY_CREDENTIALS'
  /** The nginx container of a load balancer does not exist. */
  | 'E_NGINX_MISSING'
  /** The nginx container of a load balancer is not running. */
  | 'E_NGINX_NOT_RUNNING'
  /** `nginx -t` refused the configuration (the current one or the new upstream file). */
  | 'E_NGINX_TEST'
  /** `nginx -s reload` failed or nginx did not take the new configuration. */
  | 'E_NGINX_RELOAD'
  /** The upstream file could not be read or written. */
  | 'E_NGINX_FILE'
  /** An instance did not answer its version probe, or answered an error. */
  | 'E_VERSION_PROBE'
  /** The load balancer's access log (for the analysis and the health numbers) cannot be read. */
  | 'E_ACCESS_LOG'
  /** fleetroll refused to write a value into an nginx config or log format (it could break or inject into it). */
  | 'E_UNSAFE_VALUE'
  /** A fleetroll bug: a state that should not happen. */
  | 'E_INTERNAL';

export interface ErrorCodeInfo {
  /** The exit code the CLI ends with for this code. */
  exitCode: ExitCodeValue;
  /** Other exit codes the code can end with, where the caller decides (see FleetrollErrorOptions.exitCode). */
  otherExitCodes?: readonly ExitCodeValue[];
  meaning: string;
  whatToDo: string;
}

const { rolloutFailed, invalidInput } = ExitCode;

export const ERROR_CODES: Readonly<Record<ErrorCode, ErrorCodeInfo>> = {
  E_INVALID: {
    exitCode: invalidInput,
    meaning:
      'Invalid input: a field of the fleet file, a defaults file or an experiment spec, or a flag. Every problem is listed, each with its path (`strategy/rollingUpdate/maxSurge: ...`). Nothing was changed.',
    whatToDo: 'Fix each field the message names; `fleetroll validate -f <fleet>` checks the file without touching the fleet.',
  },
  E_NO_FILE: {
    exitCode: invalidInput,
    meaning:
      'A file that was named (fleet file, compose file, env file, upstream template, experiment spec) does not exist, is a directory or cannot be opened. Nothing was changed.',
    whatToDo: 'Check the path (relative paths inside a fleet file are relative to that file) and its permissions.',
  },
  E_REPORTED: {
    exitCode: rolloutFailed,
    otherExitCodes: [ExitCode.interrupted],
    meaning:
      'The command already printed why it failed in its own output (the rehearsal or experiment summary, e.g. failed requests); no `error:` line follows. Exit code 130 when it was interrupted.',
    whatToDo: 'Read the summary the command printed (with `--json`, the JSON on stdout).',
  },
  E_ROLLOUT_FAILED: {
    exitCode: rolloutFailed,
    meaning:
      'The rollout did not reach its goal: the progress deadline passed, a hook failed, the analysis took the new revision out of traffic (`details.stoppedBy: "analysis"`), a canary was aborted, instances do not serve the new version, or preflight found problems (nothing changed then). With `onFailure: rollback` the fleet was rolled back and the message says how that went.',
    whatToDo:
      'Follow the hint. `fleetroll status -f <fleet>` shows the fleet; deploying again continues from where it stopped, deploying the previous image goes back.',
  },
  E_PAUSED: {
    exitCode: ExitCode.paused,
    meaning: 'The fleet is paused (`fleetroll pause`): a running rollout stopped with the fleet consistent, or a new one was refused.',
    whatToDo: 'Continue with `fleetroll resume -f <fleet>` (from any machine).',
  },
  E_INTERRUPTED: {
    exitCode: ExitCode.interrupted,
    meaning: 'A signal (Ctrl-C, SIGTERM) stopped the rollout after the step in progress; no ready instance is left marked down.',
    whatToDo: 'Run the same deploy again to continue from where it stopped, or deploy the previous image to go back.',
  },
  E_HEAL_STALE: {
    exitCode: rolloutFailed,
    meaning:
      '`fleetroll watch` looked at the fleet, then found under the lock that its latest revision is another one, or not complete (a deploy ran in between, or failed). It changed nothing; the watch never exits on it.',
    whatToDo:
      'Nothing: the watch looks again and heals the new revision once a deploy completes it. `fleetroll status -f <fleet>` shows where the fleet stands.',
  },
  E_LOCK_HELD: {
    exitCode: ExitCode.lockHeld,
    meaning:
      "Another fleetroll (another CI job, another machine) holds the fleet's lock; the message names the holder, its command and since when. Nothing was changed.",
    whatToDo:
      'Wait for it (`deploy --lock-wait 5m`), check `fleetroll status`; if you are sure the holder is gone: `fleetroll lock release --force -f <fleet>`.',
  },
  E_TIMEOUT: {
    exitCode: rolloutFailed,
    meaning: '`fleetroll status --watch` waited longer than its timeout for the rollout to end.',
    whatToDo: 'Raise the timeout, or look at `fleetroll status` to see why the rollout takes so long.',
  },
  E_NO_PREVIOUS: {
    exitCode: rolloutFailed,
    meaning: '`fleetroll undo` found no earlier completed revision to go back to.',
    whatToDo: 'See `fleetroll history`; deploy a known-good image instead.',
  },
  E_SWITCH_BACK: {
    exitCode: rolloutFailed,
    meaning: 'An undo of a running blue-green rollout asked it to switch back, and it did not do so within the time allowed.',
    whatToDo: 'See `fleetroll status`; the rollout may already be removing the old set.',
  },
  E_ADOPT: {
    exitCode: rolloutFailed,
    otherExitCodes: [invalidInput],
    meaning:
      '`fleetroll adopt` could not take over the running containers: none matches, they report different versions or no reachable address (exit 1); or the request itself is invalid: no `port`, or the fleet is already managed (exit 2).',
    whatToDo: 'Narrow or fix `--match` so it selects the containers of one version, set `port:`, and adopt only fleets fleetroll has never deployed.',
  },
  E_STATE: {
    exitCode: rolloutFailed,
    meaning: "The fleet's state (revision history, journal), kept in a container on its first host, is not valid JSON.",
    whatToDo: 'Inspect the state container the message names; restore or remove the damaged file.',
  },
  E_ETCD: {
    exitCode: rolloutFailed,
    meaning:
      "The fleet keeps its state in etcd (`state.etcd`) and etcd did not answer in time, refused the credentials, or lost its quorum; the message names the endpoints tried and what was being done. Before a rollout's first change nothing was changed.",
    whatToDo:
      'Check that the cluster runs and has a quorum and that this machine reaches its endpoints; check FLEETROLL_ETCD_USERNAME / FLEETROLL_ETCD_PASSWORD; then run the command again (`fleetroll resume` continues a rollout it stopped).',
  },
  E_REHEARSE: {
    exitCode: rolloutFailed,
    meaning: 'The rehearsal (`fleetroll rehearse`, `npm run demo`) could not bring up its own nginx (no published port, no answer).',
    whatToDo: 'Check that the Docker engine runs and can publish ports on 127.0.0.1; run again with `--verbose`.',
  },
  E_DOCKER: {
    exitCode: rolloutFailed,
    meaning:
      'A Docker API call (create, start, stop, remove, inspect, logs, image copy) failed; transient failures were retried first, and the message names the operation, the host and the last cause.',
    whatToDo: 'Look at the Docker engine on that host (`docker info`, its logs); deploy again once it is healthy: the rollout continues.',
  },
  E_DOCKER_UNREACHABLE: {
    exitCode: rolloutFailed,
    meaning: 'A Docker host of the fleet does not answer (engine stopped, wrong address, TLS or ssh problem).',
    whatToDo: 'Start the engine or fix `hosts[].docker` (and its TLS / ssh settings); the hint says which.',
  },
  E_CONTAINER_MISSING: {
    exitCode: rolloutFailed,
    meaning: 'A container fleetroll expected (an instance, nginx, the state container) does not exist.',
    whatToDo: 'Check `docker ps -a` on that host; deploy again to replace what is missing.',
  },
  E_CONTAINER_NOT_RUNNING: {
    exitCode: rolloutFailed,
    meaning: 'A container fleetroll needs to run a command in is not running.',
    whatToDo: 'Start it (or let the rollout replace it) and try again.',
  },
  E_CONTAINER_START: {
    exitCode: rolloutFailed,
    meaning: "A new instance's container was created but Docker would not start it (bad command, port taken, missing bind source); it was removed again.",
    whatToDo: "Read the engine's message in the error; fix the fleet file's container fields or the image.",
  },
  E_NAME_CONFLICT: {
    exitCode: rolloutFailed,
    meaning: 'A container name fleetroll wants to create is already in use by another container.',
    whatToDo: 'Remove the old container (`docker rm <name>`) and deploy again.',
  },
  E_NETWORK_MISSING: {
    exitCode: rolloutFailed,
    meaning: 'The Docker network an instance joins (`hosts[].network`, `networks`) does not exist on its host.',
    whatToDo: 'Create it on that host (`docker network create <name>`) or fix the fleet file.',
  },
  E_IMAGE_MISSING: {
    exitCode: rolloutFailed,
    meaning: 'The image is not on the host that needs it, and it could not be copied or pulled there.',
    whatToDo: 'Build, load or pull the image on that host, or let fleetroll copy it (do not pass `--no-image-copy`).',
  },
  E_EXEC_TIMEOUT: {
    exitCode: rolloutFailed,
    meaning: 'A command run inside a container (an exec readiness probe) did not finish within its timeout.',
    whatToDo: 'Make the probe command faster or raise `probes.readiness.timeoutMs`.',
  },
  E_PUT_FILE: {
    exitCode: rolloutFailed,
    meaning:
      "A file could not be written into a container because its directory does not exist there (for example the upstream file's directory in the nginx container).",
    whatToDo: 'Fix the path (`loadBalancers[].nginx.upstreamFile`) or create the directory in the image.',
  },
  E_GET_FILE: {
    exitCode: rolloutFailed,
    meaning: 'A file read from a container is not a regular file (a directory, a device).',
    whatToDo: 'Point the setting the message names at a regular file.',
  },
  E_REGISTRY_CREDENTIALS: {
    exitCode: rolloutFailed,
    meaning: "The credentials for the image's registry could not be read (Docker config, credential helper).",
    whatToDo: 'Log in (`docker login <registry>`), install the credential helper the Docker config names, or set `registry:` in the fleet file.',
  },
  E_NGINX_MISSING: {
    exitCode: rolloutFailed,
    meaning: 'The nginx container a load balancer names (`loadBalancers[].nginx.container`) does not exist on its host.',
    whatToDo: 'Start nginx, or fix `container` / `host` in the fleet file.',
  },
  E_NGINX_NOT_RUNNING: {
    exitCode: rolloutFailed,
    meaning: 'The nginx container of a load balancer exists but is not running.',
    whatToDo: 'Start it (`docker start <container>`) and deploy again.',
  },
  E_NGINX_TEST: {
    exitCode: rolloutFailed,
    meaning:
      '`nginx -t` refused the configuration: either the current one (before anything changed) or the new upstream file (every upstream file was then restored and nothing reloaded).',
    whatToDo: "Read nginx's lines in the message; fix nginx.conf or the upstream template, then deploy again.",
  },
  E_NGINX_RELOAD: {
    exitCode: rolloutFailed,
    meaning: '`nginx -s reload` failed, or nginx did not start new worker processes after it.',
    whatToDo: "Check that the nginx master runs (its pid file exists) and read nginx's error log.",
  },
  E_NGINX_FILE: {
    exitCode: rolloutFailed,
    meaning: 'The upstream file of a load balancer could not be read or written.',
    whatToDo: "Check `upstreamFile` and that fleetroll may write it (for `exec: true`, the file's permissions on this machine).",
  },
  E_VERSION_PROBE: {
    exitCode: rolloutFailed,
    meaning: 'An instance did not answer its version probe (`probes.version`), answered an HTTP error, or the fleet has no version endpoint to ask.',
    whatToDo: 'Check `probes.version.path` and that the app answers it; use `probes.version: false` when the app has no version endpoint.',
  },
  E_ACCESS_LOG: {
    exitCode: rolloutFailed,
    meaning: "The load balancer's access log (`loadBalancers[].nginx.accessLog`), which the analysis and the health numbers read, cannot be read or followed.",
    whatToDo: 'Check that nginx writes the `fleetroll_json` format to that path (templates/nginx.conf.example) and that fleetroll can reach it.',
  },
  E_UNSAFE_VALUE: {
    exitCode: rolloutFailed,
    meaning:
      'fleetroll refused to write a value (an upstream or sticky key name, an address, a weight) into an nginx config or log format, because it could break or inject into it. Validation refuses such input first, so this points at a value that came from elsewhere.',
    whatToDo: 'Fix the value the message quotes; if it came from a valid fleet file, report it as a bug.',
  },
  E_INTERNAL: {
    exitCode: rolloutFailed,
    meaning: 'A fleetroll bug: a state that should not happen (no runtime for a host, a simulation with nothing left to do that has not ended).',
    whatToDo: 'Run again with `--verbose` and report the message and stack.',
  },
};

/** The exit codes a code may end with: the catalogue's, then the ones a caller may choose. */
export function exitCodesOf(code: ErrorCode): readonly ExitCodeValue[] {
  const info = ERROR_CODES[code];
  return [info.exitCode, ...(info.otherExitCodes ?? [])];
}
