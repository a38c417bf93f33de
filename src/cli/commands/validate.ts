import type { CommandUnknownOpts } from '@commander-js/extra-typings';
import { loadFleet, type Fleet } from '../../config/load.js';
import { fleetNotes } from '../../config/notes.js';
import { notifyLines, publicNotify } from '../../config/notify.js';
import { composeServiceOption, fleetFileOption, jsonOption } from '../options.js';
import type { Out } from '../output.js';
import { explainStrategy } from '../strategy.js';

/**
 * The fleet as `validate --json` prints it: env by name (values may be
 * secrets; the secret ones with where they come from), no digest of a
 * secret, no password.
 */
export function publicFleet(fleet: Fleet): Record<string, unknown> {
  const { secretDigests: _d, revisionKey: _k, notify, ...rest } = fleet;
  const registry = (rest as { registry?: Record<string, unknown> }).registry;
  return {
    ...rest,
    env: Object.keys(fleet.env ?? {}),
    ...(registry && 'password' in registry ? { registry: { ...registry, password: '(secret)' } } : {}),
    // Webhook URLs and header values are secrets: hosts and header names only.
    ...(notify ? { notify: publicNotify(notify.webhooks) } : {}),
  };
}

/** What validate says of the container beyond image and port: env by kind, then each container field set. */
function containerLines(fleet: Fleet): string[] {
  const keys = Object.keys(fleet.env ?? {}).sort();
  const literal = keys.filter((k) => fleet.envSources[k] === undefined);
  const secret = keys.filter((k) => fleet.envSources[k] !== undefined).map((k) => `${k} (${fleet.envSources[k]})`);
  const lines: string[] = [];
  if (keys.length) lines.push(`env: ${[...literal, ...secret.map((s) => `secret ${s}`)].join(', ')}`);
  const c = fleet.container;
  const set = Object.entries(c).map(([k, v]) => `${k} ${JSON.stringify(v)}`);
  if (set.length) lines.push(`container: ${set.join('; ')}`);
  if (Object.keys(fleet.secretSources).length)
    lines.push(
      `secret files: ${Object.entries(fleet.secretSources)
        .map(([k, p]) => `${k} (${p})`)
        .join(', ')}`,
    );
  return lines;
}

export function registerValidate(program: CommandUnknownOpts, out: Out): void {
  program
    .command('validate')
    .description('check a fleet file (and its shared defaults) without touching anything')
    .addOption(fleetFileOption())
    .addOption(composeServiceOption())
    .addOption(jsonOption('print the effective fleet as JSON'))
    .addHelpText(
      'after',
      '\nExit status: 0 valid, 2 invalid (every problem is listed with its field path).\n\nExample:\n  $ fleetroll validate -f examples/fleet.yaml',
    )
    .action(async (o) => {
      const fleet = await loadFleet(o.file, { service: o.service });
      const notes = await fleetNotes(fleet);
      if (o.json) {
        for (const w of notes.warnings) out.warn(w);
        out.json(publicFleet(fleet));
        return;
      }
      out.line(`${o.file}: valid`);
      out.line(
        `service ${fleet.service}: ${fleet.replicas} × ${fleet.image} (version ${fleet.version}) on ${fleet.hosts.length} host(s), ${fleet.loadBalancers.length} load balancer(s)`,
      );
      explainStrategy(fleet.strategy, out);
      const t = fleet.timingSources;
      out.line(
        `timings: minReadySeconds ${fleet.minReadySeconds} (${t.minReadySeconds}), progressDeadlineSeconds ${fleet.progressDeadlineSeconds} (${t.progressDeadlineSeconds}), drainSeconds ${fleet.drainSeconds} (${t.drainSeconds}), terminationGracePeriodSeconds ${fleet.terminationGracePeriodSeconds} (${t.terminationGracePeriodSeconds}), hostParallelism ${fleet.hostParallelism} (${t.hostParallelism})`,
      );
      for (const l of containerLines(fleet)) out.line(l);
      for (const l of notifyLines(fleet.notify?.webhooks ?? [])) out.line(l);
      if (fleet.hooks?.onFailure) out.line(`hooks.onFailure: ${fleet.hooks.onFailure.join(' ')}`);
      for (const l of notes.lines) out.line(l);
      for (const w of notes.warnings) out.warn(w);
    });
}
