/**
 * A deploy through the library instead of the CLI: what
 * `fleetroll deploy -f <fleet.yaml> [--image <image>] --json` does, on the
 * same default wiring (Docker, nginx, the fleet's probes, its state and lock),
 * with this program's own progress lines on stderr and the result as JSON on
 * stdout. Ctrl-C stops the rollout with the fleet consistent.
 *
 *   npx tsx examples/library/deploy.ts examples/fleet.yaml fleetroll-example:1.1.0
 *
 * Exit status as the CLI's: 0 done and verified, else the error's exitCode
 * (1 failed, 2 invalid input, 3 lock held, 4 paused, 130 interrupted).
 */
import { deploy, FleetrollError, type RolloutEvent } from 'fleetroll';

function describe(e: RolloutEvent): string {
  switch (e.type) {
    case 'observed':
      return `found ${e.instances} instance(s); deploying revision ${e.revision}`;
    case 'wave':
      return `wave ${e.index}: start ${e.start}, stop ${e.stop.length ? e.stop.join(', ') : 'none'}`;
    case 'started':
      return `started ${e.name} on ${e.host}`;
    case 'available':
      return `${e.name} is available`;
    case 'stopped':
      return `stopped ${e.name} on ${e.host}`;
    case 'verified':
      return `verified ${e.name} at ${e.version}`;
    case 'complete':
      return `complete: version ${e.version}`;
    case 'failed':
      return `failed: ${e.reason}`;
    case 'info':
      return e.message;
    default:
      return e.type;
  }
}

const [file, image] = process.argv.slice(2);
if (file === undefined) {
  process.stderr.write('usage: deploy.ts <fleet.yaml> [image]\n');
  process.exit(2);
}

const stop = new AbortController();
process.once('SIGINT', () => stop.abort());
try {
  const result = await deploy(file, {
    overrides: { image },
    onEvent: (e) => process.stderr.write(`${describe(e)}\n`),
    signal: stop.signal,
    changeCause: `examples/library/deploy.ts ${image ?? "(the file's image)"}`,
  });
  process.stdout.write(`${JSON.stringify(result, null, 2)}\n`);
} catch (err) {
  if (!(err instanceof FleetrollError)) throw err;
  process.stderr.write(`error: ${err.message}\n${err.hint ? `hint: ${err.hint}\n` : ''}`);
  process.exitCode = err.exitCode;
}
