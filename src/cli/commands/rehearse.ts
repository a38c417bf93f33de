import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import type { RequestSummary } from '../../experiment/metrics.js';
import { DockerRuntime } from '../../adapters/docker.js';
import { removeFleetState } from '../../adapters/fleetState.js';
import { demoNames, rehearse, teardown, type RehearseResult } from '../../experiment/rehearse.js';
import { fieldError, ReportedFailure } from '../../errors.js';
import { SERVICE_RE, VERSION_RE } from '../../config/schema.js';
import { parseCount, parseSeconds } from '../args.js';
import { eventPrinter } from '../events.js';
import { dockerEndpointOption, jsonOption, logFormatOption, maxSurgeOption, maxUnavailableOption, nginxModeOption } from '../options.js';
import { table, type Out } from '../output.js';
import { buildDeps, readDefaultTemplate } from '../../wiring.js';

const matching = (flag: string, re: RegExp, what: string) => (v: string) => {
  if (!re.test(v)) throw fieldError(flag, `must be ${what}, got ${JSON.stringify(v)}`);
  return v;
};

function printRequests(r: RequestSummary, out: Out): void {
  const rows = Object.entries(r.byMethod).flatMap(([method, m]) =>
    Object.entries(m.byStatus)
      .sort()
      .map(([status, n]) => [method, status, String(n)]),
  );
  out.line(table(['method', 'status', 'requests'], rows, '  '));
  out.line(`  ${r.ok} ok, ${r.failed} failed of ${r.total}; latency p50 ${r.latencyMs.p50} ms, p99 ${r.latencyMs.p99} ms, max ${r.latencyMs.max} ms`);
}

function printRehearsal(r: RehearseResult, out: Out): void {
  out.line('');
  out.line('requests through nginx during the rollout:');
  printRequests(r.requests, out);
  out.line(`deploy duration: ${(r.durationMs / 1000).toFixed(1)} s${r.deploy ? ` (${r.deploy.waves} waves, ${r.deploy.reloads} nginx reloads)` : ''}`);
  out.line(`mixed-version window: ${(r.mixedVersionWindowMs / 1000).toFixed(1)} s (first answer from the new version to the last from the old)`);
  out.line(`versions (expected ${r.versions.expected}):`);
  for (const i of r.versions.instances) out.line(`  ${i.name}  ${i.version}${i.version === r.versions.expected ? '' : '  <-- not the expected version'}`);
  if (r.deployError) out.line(`deploy failed: ${r.deployError}`);
}

export function registerRehearse(program: CommandUnknownOpts, out: Out): void {
  program
    .command('rehearse')
    .description('rehearse a rollout on a local fleet under load and measure what users would see (the demo)')
    .option(
      '--name <service>',
      'service name; prefixes the demo network and nginx container',
      matching('--name', SERVICE_RE, 'lowercase letters, digits and dashes'),
      'bookstore-api',
    )
    .addOption(dockerEndpointOption())
    .option('--replicas <n>', 'instances in the fleet', parseCount('--replicas', 1, 50), 3)
    .addOption(maxSurgeOption('maxSurge (default: built-in 25%)'))
    .addOption(maxUnavailableOption('maxUnavailable (default: built-in 25%)'))
    .option('--recreate', 'use the Recreate strategy (stop all, start all)')
    .option('--naive', 'control: replace instances like a naive script (kill, start, no drain) to show what the probes catch')
    .option('--from <version>', 'version the fleet starts at', matching('--from', VERSION_RE, 'a version like 1.0.0'), '1.0.0')
    .option('--to <version>', 'version to roll to', matching('--to', VERSION_RE, 'a version like 1.1.0'), '1.1.0')
    .option('--get-rate <n>', 'GET requests per second through nginx', parseCount('--get-rate', 0, 1000), 10)
    .option('--post-concurrency <n>', 'back-to-back POST streams (each POST takes ~200 ms)', parseCount('--post-concurrency', 0, 50), 1)
    .option('--drain <s>', 'drainSeconds', parseSeconds('--drain', 60), 2)
    .option('--warmup <s>', 'seconds each new instance takes to become ready', parseSeconds('--warmup', 60), 1)
    .option('--min-ready <s>', 'minReadySeconds', parseSeconds('--min-ready', 60), 0)
    .option('--port <port>', 'publish nginx on 127.0.0.1:<port> (0: any free port)', parseCount('--port', 0, 65535), 18600)
    .addOption(nginxModeOption())
    .option('--keep-alive', 'probes on keep-alive connections')
    .option('--strict', 'with --keep-alive: a strict client (an API client): a reset on a reused connection is a failure, never resent')
    .option('--keep', 'leave the fleet running afterwards (nginx on 127.0.0.1:<port>)')
    .option('--down', 'remove a fleet left by --keep, and exit')
    .addOption(jsonOption('print the result as JSON'))
    .addOption(logFormatOption('progress lines as text or JSON log lines'))
    .addHelpText(
      'after',
      `
Needs a Docker engine. Images are built locally (official node/nginx images
when present, otherwise assembled from this machine's node and nginx), so no
registry is needed.

Exit status: 0 when the rollout completed, every instance serves --to and no
request failed; 1 otherwise.

Examples:
  $ fleetroll rehearse
  $ fleetroll rehearse --replicas 4 --max-surge 0 --max-unavailable 1 --json
  $ fleetroll rehearse --naive          # the control: see the failures a naive script causes
  $ fleetroll rehearse --nginx-mode dynamic --keep-alive --strict --get-rate 200   # no reload, no reset
  $ fleetroll rehearse --keep && curl -s 127.0.0.1:18600/api/version && fleetroll rehearse --down`,
    )
    .action(async (o) => {
      const progress = o.json ? process.stderr : process.stdout;
      const names = demoNames(o.name);
      if (o.down) {
        const rt = new DockerRuntime({ name: 'local', docker: o.docker });
        await rt.ping();
        const n = await teardown(rt.docker, names);
        await removeFleetState(rt.docker, names.service);
        out.line(`removed ${n} container(s) and the network of rehearsal ${names.service}`);
        return;
      }
      const events = eventPrinter(o.logFormat, progress);
      const result = await rehearse(
        {
          name: o.name,
          docker: o.docker,
          replicas: o.replicas,
          maxSurge: o.maxSurge,
          maxUnavailable: o.maxUnavailable,
          recreate: o.recreate ?? false,
          naive: o.naive ?? false,
          from: o.from,
          to: o.to,
          getPerSecond: o.getRate,
          postConcurrency: o.postConcurrency,
          drainSeconds: o.drain,
          warmupSeconds: o.warmup,
          minReadySeconds: o.minReady,
          port: o.port,
          nginxMode: o.nginxMode,
          keepAlive: o.keepAlive ?? false,
          resend: !o.strict,
          keep: o.keep ?? false,
          events,
          log: (line) => events({ type: 'info', message: line }),
        },
        (fleet) => buildDeps(fleet),
        await readDefaultTemplate(),
      );
      const wrong = result.versions.instances.filter((i) => i.version !== result.versions.expected);
      const ok = !result.deployError && result.requests.failed === 0 && wrong.length === 0;
      if (o.json) {
        const { records: _records, deploy: _deploy, ...rest } = result;
        out.json({ ...rest, ok });
      } else {
        printRehearsal(result, out);
        if (o.keep)
          out.line(
            `\nthe fleet is still running: curl ${result.nginxUrl}/api/version; remove it with: fleetroll rehearse --down${o.name === 'bookstore-api' ? '' : ` --name ${o.name}`}`,
          );
        out.line(ok ? '\nresult: zero failed requests, every instance verified' : '\nresult: FAILED (see above)');
      }
      if (!ok) throw new ReportedFailure();
    });
}
