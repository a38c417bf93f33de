/**
 * Writes docs/errors.md from ERROR_CODES (src/errorCodes.ts, re-exported by
 * src/errors.ts), the one source of truth for codes and exit codes;
 * test/unit/errors.test.ts fails when the page and the catalogue differ. Run
 * after changing a code:
 *
 *   npx tsx scripts/errors-doc.ts
 *
 * The CI examples are kept here, one per code (a Record, so a new code
 * without an example does not compile).
 */
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ERROR_CODES, EXIT_CODE_MEANINGS, ExitCode, type ErrorCode, type ExitCodeName } from '../src/errors.js';

/** A CI example: its text, or for one of the common shapes below, its text for the code. */
type Example = string | ((code: ErrorCode) => string);

/**
 * After a command that runs a rollout (by default a plain deploy): the job
 * fails, and first does `then` when the code, read where the rollout puts a
 * host's or nginx's failure (`.details.code // .code`, see "Failures during a
 * rollout"), is this one.
 */
function afterRollout(then: string, o: { command?: string; comment?: string } = {}): Example {
  return (code) => `${o.comment ? `# ${o.comment}\n` : ''}out=$(${o.command ?? 'fleetroll deploy -f fleet.yaml'} --json) && exit 0
[ "$(printf '%s' "$out" | jq -r '.details.code // .code')" = ${code} ] && ${then}
exit 1`;
}

/** After any command: when it fails with this code (read by `jq`), `then`; the job fails either way. */
function onCode(command: string, then: string, jq = '.code'): Example {
  return (code) => `out=$(${command} --json) || {
  [ "$(printf '%s' "$out" | jq -r ${jq})" = ${code} ] && ${then}
  exit 1
}`;
}

/** How a CI script reacts to each code. Shell, `jq` for the JSON; `$out` is the command's stdout. */
const CI_EXAMPLES: Record<ErrorCode, Example> = {
  E_INVALID: `# Fail the job with every problem, one per line, before anything is deployed.
if ! out=$(fleetroll validate -f fleet.yaml --json); then
  printf '%s' "$out" | jq -r '.details.issues[] | "\\(.path): \\(.message)"'
  exit 1
fi`,
  E_NO_FILE: onCode('fleetroll deploy -f "$FLEET"', `echo "no fleet file at $FLEET: check the job's checkout" >&2`),
  E_REPORTED: `# The summary is the JSON itself: read the figures, not an error object.
fleetroll rehearse --json > rehearsal.json || echo "rehearsal failed: see rehearsal.json" >&2`,
  E_ROLLOUT_FAILED: `out=$(fleetroll deploy -f fleet.yaml --image "api:$TAG" --json) && exit 0
if [ "$(printf '%s' "$out" | jq -r .code)" = E_ROLLOUT_FAILED ]; then
  case "$(printf '%s' "$out" | jq -r '.stoppedBy // .phase')" in
    analysis)  echo "the analysis rejected api:$TAG (it is out of traffic)" ;;
    preflight) echo "nothing was changed: fix the problems and run again" ;;
    *)         echo "rollout failed: $(printf '%s' "$out" | jq -r .message)" ;;
  esac
fi
exit 1`,
  E_HEAL_STALE: `# Never an exit code: fleetroll watch logs it and looks again. In its JSON log, count them:
fleetroll watch -f fleet.yaml --log-format json | jq -r 'select(.code == "E_HEAL_STALE") | .msg'`,
  E_PAUSED: `fleetroll deploy -f fleet.yaml --json > result.json
if [ $? -eq 4 ]; then   # E_PAUSED: someone paused the fleet; not a failure of this build
  echo "fleet paused: run 'fleetroll resume -f fleet.yaml' when ready"
  exit 0
fi`,
  E_INTERRUPTED: `fleetroll deploy -f fleet.yaml --json > result.json
[ $? -eq 130 ] && echo "deploy interrupted: rerun this job to continue where it stopped" >&2`,
  E_LOCK_HELD: `# Another job is deploying the same fleet: wait for it up to 10 minutes, then report who holds it.
out=$(fleetroll deploy -f fleet.yaml --lock-wait 10m --json)
if [ $? -eq 3 ]; then
  printf '%s' "$out" | jq -r '"fleet locked by \\(.details.holder) since \\(.details.started): \\(.details.command)"'
  exit 1
fi`,
  E_TIMEOUT: `# A deploy started elsewhere: wait for it, fail the job when it neither completes nor fails in 15 minutes.
fleetroll status -f fleet.yaml --watch --timeout 15m || { echo "rollout did not end in time (E_TIMEOUT) or failed" >&2; exit 1; }`,
  E_NO_PREVIOUS: onCode('fleetroll undo -f fleet.yaml', 'echo "nothing to go back to: deploy a known-good image" >&2'),
  E_SWITCH_BACK: onCode('fleetroll undo -f fleet.yaml', 'fleetroll status -f fleet.yaml'),
  E_ADOPT: `out=$(fleetroll adopt -f fleet.yaml --match app=bookstore --json)
case $? in
  0) ;;
  2) echo "adopt refused the request: $(printf '%s' "$out" | jq -r .message)" >&2; exit 1 ;;
  *) echo "could not adopt: $(printf '%s' "$out" | jq -r .message)" >&2; exit 1 ;;
esac`,
  E_STATE: onCode('fleetroll history -f fleet.yaml', `echo "the fleet's state is damaged: page the owner, do not deploy" >&2`),
  E_ETCD: onCode('fleetroll deploy -f fleet.yaml', `echo "etcd (the fleet's state) does not answer: check the cluster, then run the deploy again" >&2`),
  E_REHEARSE: onCode('fleetroll rehearse', `echo "the runner cannot host the rehearsal's nginx (ports?)" >&2`, `'.code // empty'`),
  E_DOCKER: afterRollout('echo "Docker failed on a host: deploy again once it is healthy (the rollout continues)" >&2', { comment: 'A Docker call failed mid-rollout: the rollout ends as E_ROLLOUT_FAILED with the cause in details.code.' }),
  E_DOCKER_UNREACHABLE: `# Retry once after a pause when a host did not answer; any other failure fails at once.
for attempt in 1 2; do
  out=$(fleetroll deploy -f fleet.yaml --json) && exit 0
  [ "$(printf '%s' "$out" | jq -r '.details.code // .code')" = E_DOCKER_UNREACHABLE ] || break
  sleep 60
done
exit 1`,
  E_CONTAINER_MISSING: afterRollout('fleetroll status -f fleet.yaml'),
  E_CONTAINER_NOT_RUNNING: afterRollout('fleetroll status -f fleet.yaml'),
  E_CONTAINER_START: afterRollout(`echo "api:$TAG does not start: $(printf '%s' "$out" | jq -r .message)" >&2`, { command: 'fleetroll deploy -f fleet.yaml --image "api:$TAG"' }),
  E_NAME_CONFLICT: afterRollout('echo "a container left by hand is in the way: see the hint" >&2'),
  E_NETWORK_MISSING: afterRollout('echo "create the network on the host first (see the hint)" >&2'),
  E_IMAGE_MISSING: afterRollout('echo "push api:$TAG to the registry the hosts pull from" >&2', { command: 'fleetroll deploy -f fleet.yaml --image "api:$TAG"' }),
  E_EXEC_TIMEOUT: afterRollout('echo "the exec readiness probe is too slow: raise probes.readiness.timeoutMs" >&2'),
  E_PUT_FILE: afterRollout(`echo "upstreamFile's directory is missing in the nginx container" >&2`),
  E_GET_FILE: afterRollout('echo "a path in the fleet file names something that is not a file" >&2'),
  E_REGISTRY_CREDENTIALS: afterRollout('echo "log the runner in: docker login registry.example:5000" >&2'),
  E_NGINX_MISSING: afterRollout(`echo "the load balancer's nginx container is gone" >&2`),
  E_NGINX_NOT_RUNNING: afterRollout(`echo "start the load balancer's nginx, then run the job again" >&2`),
  E_NGINX_TEST: afterRollout(`printf '%s' "$out" | jq -r .message >&2`, { comment: 'nginx refused the config: nothing was reloaded, nginx serves as before. A human must fix nginx.conf or the template.' }),
  E_NGINX_RELOAD: afterRollout('echo "nginx did not reload: check its error log" >&2'),
  E_NGINX_FILE: afterRollout('echo "fleetroll cannot write the upstream file: check its path and permissions" >&2'),
  E_VERSION_PROBE: afterRollout('echo "the app does not answer probes.version.path" >&2'),
  E_ACCESS_LOG: afterRollout('echo "check loadBalancers[].nginx.accessLog" >&2', { comment: 'Without a readable access log the analysis cannot judge the canary; the deploy reports it.' }),
  E_UNSAFE_VALUE: afterRollout(`printf '%s' "$out" | jq -r .message >&2`),
  E_INTERNAL: onCode('fleetroll simulate -f fleet.yaml', 'echo "a fleetroll bug: attach the output of the same command with --verbose to a report" >&2'),
};

const EXIT_ORDER: ExitCodeName[] = ['ok', 'rolloutFailed', 'invalidInput', 'lockHeld', 'paused', 'interrupted'];

function exampleFor(c: ErrorCode): string {
  const e = CI_EXAMPLES[c];
  return typeof e === 'string' ? e : e(c);
}

export function renderErrorsDoc(): string {
  const codes = Object.keys(ERROR_CODES) as ErrorCode[];
  const byExit = (name: ExitCodeName) => codes.filter((c) => ERROR_CODES[c].exitCode === ExitCode[name] || ERROR_CODES[c].otherExitCodes?.includes(ExitCode[name]));
  const link = (c: ErrorCode) => `[${c}](#${c.toLowerCase()})`;
  const out: string[] = [];
  out.push(
    '# Errors and exit codes',
    '',
    '<!-- Generated from ERROR_CODES in src/errors.ts by `npx tsx scripts/errors-doc.ts`; test/unit/errors.test.ts checks it. Edit those, not this page. -->',
    '',
    'Every failure fleetroll reports has a stable **code** (`E_LOCK_HELD`, `E_ROLLOUT_FAILED`, ...) and an **exit code**.',
    'A CI script branches on them, not on the wording of a message: messages may be improved, codes are never renamed.',
    'The library throws the same `FleetrollError` with the same `code`, `exitCode` and `details`',
    '([library.md](library.md)).',
    '',
    '## Contents',
    '',
    '- [Exit codes](#exit-codes)',
    '- [What a failing command prints](#what-a-failing-command-prints)',
    '- [Failures during a rollout](#failures-during-a-rollout)',
    '- [Details](#details)',
    '- [A CI job that reacts to the code](#a-ci-job-that-reacts-to-the-code)',
    `- [Every code](#every-code): ${codes.map(link).join(' · ')}`,
    '',
    '## Exit codes',
    '',
    '| exit code | `ExitCode` | meaning | codes |',
    '| --- | --- | --- | --- |',
    ...EXIT_ORDER.map((name) => `| ${ExitCode[name]} | \`${name}\` | ${EXIT_CODE_MEANINGS[name]} | ${byExit(name).map(link).join(', ') || '—'} |`),
    '',
    'An error that is not a `FleetrollError` (a bug) also ends with 1 and asks for `--verbose`; with `--json` it is',
    'printed as `E_INTERNAL`. A usage error the argument parser finds (an unknown option, a missing `-f`) ends with 2.',
    '',
    '## What a failing command prints',
    '',
    'On stderr, always: `error: <message>` and, when there is one, `hint: <what to do>`; with `--verbose` also the',
    'stack and the chain of causes (the socket error under the Docker error under the rollout failure).',
    '',
    'With `--json`, the failing command\'s last line on stdout is one JSON object:',
    '',
    '| field | |',
    '| --- | --- |',
    '| `outcome` | `"failed"`, or `"paused"` for `E_PAUSED` |',
    '| `code` | the code, one of the list below |',
    '| `exitCode` | the exit code the command ends with |',
    '| `message` | what happened (the same text as the `error:` line) |',
    '| `hint` | what to do next, when there is a hint |',
    '| `details` | machine-readable facts, when the error has any ([Details](#details)) |',
    '| `phase` | deploy, undo, restart and resume, for `E_ROLLOUT_FAILED`: `"preflight"` (nothing was changed), `"preDeploy"` (a preDeploy hook failed, nothing was changed) or `"rollout"` |',
    '| `stoppedBy` | the same commands: `"analysis"` when the analysis took the new revision out of traffic |',
    '| `health` | the same commands: the deploy\'s health numbers, when the access log was readable |',
    '',
    'For example, a fleet file that is not there:',
    '',
    '```console runnable exit=2',
    '$ fleetroll validate -f no-such-fleet.yaml --json',
    '{"outcome":"failed","code":"E_NO_FILE","exitCode":2,"message":"cannot read fleet file no-such-fleet.yaml: no such file"}',
    '```',
    '',
    'Two exceptions: a usage error from the argument parser prints no JSON (the exit code, 2, says it), and',
    '`E_REPORTED` (`rehearse`, `experiment`) prints the command\'s own JSON summary, which already says what failed.',
    '',
    '## Failures during a rollout',
    '',
    'A Docker host or an nginx that fails while a rollout runs (or while preflight reaches the first host) ends the',
    'rollout like a missed progress deadline does, so `onFailure: rollback` applies: the code is then',
    '`E_ROLLOUT_FAILED`, and `details.code` names the failure underneath (`E_DOCKER_UNREACHABLE`, `E_NGINX_TEST`, ...).',
    'A script that cares about the cause reads `.details.code // .code`.',
    '',
    '## Details',
    '',
    '`E_ROLLOUT_FAILED` (`RolloutFailedError.details`, the type `RolloutFailureDetails`); each key is there only when it applies:',
    '',
    '| key | type | when |',
    '| --- | --- | --- |',
    '| `code` | code | a host or nginx failure stopped the rollout: its code |',
    '| `stoppedBy` | `"analysis"` | the analysis took the new revision out of traffic |',
    '| `analysisFailed` | boolean | `true`: the analysis judged (or could not read any access log), a rollback follows; `false`: it could not start |',
    '| `measurements` | number | how many analysis measurements were taken |',
    '| `aborted` | string | a canary was aborted: why (`"the analysis failed"`, `"fleetroll abort"`, ...) |',
    '| `switchedBack` | boolean | a blue-green rollout switched traffic back to the old set |',
    '| `switchedAt`, `switchIssuedAt`, `switchedBackAt`, `switchBackIssuedAt` | ISO time | blue-green: when the switch (and the switch back) was issued and in force |',
    '| `stuck` | string[] | the progress deadline passed: the new instances that never became available |',
    '| `hook` | string | a hook failed: its name |',
    '| `nginxTestFailed` | boolean | the new upstream failed `nginx -t`: every upstream file was restored, nothing reloaded |',
    '| `instances` | object[] | verification failed: each instance with `name`, `host`, `tries`, and `version` / `address` / `error` / `problem` |',
    '| `rolledBackTo` | string | `onFailure: rollback` ran: the revision (spec hash) the fleet went back to |',
    '',
    '`E_INVALID` from a `ValidationError`: `details.issues`, every problem as `{ "path", "message" }`.',
    '',
    '`E_LOCK_HELD`: `details` names the holder: `holder` (user@machine), `pid`, `command`, `started` and `lease` (ISO times), `stale`.',
    '',
    '## A CI job that reacts to the code',
    '',
    '```sh',
    'out=$(fleetroll deploy -f fleet.yaml --image "api:$TAG" --json) && exit 0',
    'status=$?',
    'code=$(printf \'%s\' "$out" | jq -r \'.details.code // .code // empty\')',
    'case "$status" in',
    '  2)   echo "invalid fleet file or flags: nothing was deployed" >&2 ;;',
    '  3)   echo "another deploy holds the fleet: retry this job later" >&2; exit 75 ;;',
    '  4)   echo "the fleet is paused: not this build\'s fault" >&2; exit 0 ;;',
    '  130) echo "interrupted: rerun to continue" >&2 ;;',
    '  1)',
    '    case "$code" in',
    '      E_DOCKER_UNREACHABLE) echo "a host is down: page the on-call" >&2 ;;',
    '      E_ROLLOUT_FAILED) [ "$(printf \'%s\' "$out" | jq -r .stoppedBy)" = analysis ] && echo "the analysis rejected api:$TAG" >&2 ;;',
    '    esac ;;',
    'esac',
    'exit 1',
    '```',
    '',
    '## Every code',
    '',
  );
  for (const c of codes) {
    const info = ERROR_CODES[c];
    const also = info.otherExitCodes?.length ? ` (or ${info.otherExitCodes.join(', ')}, see below)` : '';
    out.push(
      `### ${c}`,
      '',
      `Exit code: ${info.exitCode}${also}`,
      '',
      `**Meaning.** ${info.meaning}`,
      '',
      `**What to do.** ${info.whatToDo}`,
      '',
      '```sh',
      exampleFor(c),
      '```',
      '',
    );
  }
  return out.join('\n');
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  writeFileSync(new URL('../docs/errors.md', import.meta.url), renderErrorsDoc());
}
