/**
 * What `validate` says of a fleet beyond the schema: what fleetroll will write
 * into each nginx for a BlueGreen or Canary fleet, what a dynamic-mode nginx
 * needs, what a custom template must
 * change, and where the access logs are. Lines for people and warnings; the
 * CLI prints them, the library returns them (src/index.ts validate).
 */
import { dirname, resolve } from 'node:path';
import { readTextFile } from './document.js';
import { MAX_TEMPLATE_BYTES } from './checks.js';
import type { Fleet } from './load.js';
import { defaultPeersFile, forceRoute, stickyVariable } from '../core/upstream.js';

/** A load-balancing method of a template's own would clash with the `hash` line a canary writes. */
const BALANCING_RE = /^\s*(hash|ip_hash|least_conn|random)\b/m;

/**
 * What a BlueGreen or Canary fleet means for its nginx: what fleetroll will
 * write into each upstream file, that proxy_pass stays as it is, and what
 * (if anything) in a custom template must change.
 */
async function nginxNotes(fleet: Fleet): Promise<{ lines: string[]; warnings: string[] }> {
  const s = fleet.strategy;
  const lines: string[] = [];
  const warnings: string[] = [];
  for (const [i, { nginx: lb }] of fleet.loadBalancers.entries()) {
    if (lb.mode !== 'dynamic') continue;
    const peers = lb.peersFile ?? defaultPeersFile(lb.upstream);
    lines.push(
      `nginx (dynamic), loadBalancers/${i} (upstream ${lb.upstream}): membership goes to fleetroll's Lua balancer through ${peers} (answered in ${peers}.status), no reload; nginx needs the Lua module (Debian: libnginx-mod-http-lua) and templates/fleetroll.lua, with nginx.conf as in templates/nginx-dynamic.conf.example, upstream "${lb.upstream}" and peers "${peers}"; every deploy's preflight checks it`,
    );
  }
  if (s.type !== 'BlueGreen' && s.type !== 'Canary') return { lines, warnings };
  if (fleet.loadBalancers.length === 0) {
    lines.push(`nginx (${s.type}): no loadBalancers in the fleet file: nothing to switch or split`);
    return { lines, warnings };
  }
  for (const [i, { nginx: lb }] of fleet.loadBalancers.entries()) {
    const where = `loadBalancers/${i} (${lb.mode === 'dynamic' ? 'dynamic' : lb.upstreamFile}, upstream ${lb.upstream})`;
    if (lb.mode === 'dynamic') {
      lines.push(
        s.type === 'Canary'
          ? `nginx (Canary), ${where}: fleetroll's Lua splits users by ${s.canary.stickyKey === 'remote_addr' ? 'client address' : s.canary.stickyKey.replace(':', ' ')}: each user stays on one server, the canary's share of users is its weight; no reload`
          : `nginx (BlueGreen), ${where}: the switch is one membership change, no reload`,
      );
      if (s.type === 'Canary' && s.canary.force !== undefined) {
        lines.push(
          `  canary.force ${s.canary.force.replace(':', ' ')}: the Lua reads it itself ("always": the canary, "never": stable); nginx.conf needs no change for it`,
        );
      }
      if (s.type === 'BlueGreen' && s.blueGreen.previewUpstream !== undefined) {
        const p = s.blueGreen.previewUpstream;
        lines.push(
          `  the preview: nginx.conf needs \`upstream ${p} { server 0.0.0.1; balancer_by_lua_block { require("fleetroll").balance("${p}") } keepalive 32; }\` (fleetroll's Lua gives it the new set before the switch; docs/blue-green.md); every deploy's preflight checks it`,
        );
      }
      continue;
    }
    if (s.type === 'Canary') {
      const key = stickyVariable(s.canary.stickyKey, lb.upstream);
      lines.push(
        `nginx (Canary), ${where}: while the canary runs, the upstream gets \`hash ${key.variable} consistent;\` and a weight on every server (stable and canary), so each ${s.canary.stickyKey === 'remote_addr' ? 'client address' : s.canary.stickyKey.replace(':', ' ')} stays on one version while a weight holds`,
      );
      if (key.map)
        lines.push(
          `  the cookie name has "-", which no $cookie_ variable can spell: a \`map $http_cookie ${key.variable}\` is written into the same file (at http level, beside the upstream)`,
        );
      for (const [field, value] of [
        ['stickyKey', s.canary.stickyKey],
        ['force', s.canary.force],
      ] as const) {
        if (value?.startsWith('header:') && value.includes('_')) {
          warnings.push(
            `strategy/canary/${field}: header ${value.slice(7)} has "_": nginx drops such headers unless \`underscores_in_headers on;\` is set, so it would never be seen; prefer "-"`,
          );
        }
      }
      if (s.canary.force === undefined) lines.push(`  proxy_pass http://${lb.upstream} stays as it is: nothing to change in nginx.conf`);
      else {
        const r = forceRoute(lb.upstream);
        const [kind, name] = s.canary.force.split(':') as [string, string];
        lines.push(
          `  canary.force (${kind} ${name}): the same file gets \`map ... ${r.variable}\` and \`upstream ${r.canary}\` / \`upstream ${r.stable}\` (the servers in service of each side), on every deploy of this fleet`,
        );
        lines.push(
          `  change nginx.conf once: \`proxy_pass http://${lb.upstream};\` → \`proxy_pass http://${r.variable};\` (after the first deploy with force set has written the map: nginx -t refuses an unknown variable), then ${kind === 'header' ? `\`${name}: always\`` : `the cookie \`${name}=always\``} reaches the canary, \`never\` stable; without it, the weighted split`,
        );
      }
    } else {
      lines.push(
        `nginx (BlueGreen), ${where}: the switch rewrites the upstream with the new set and reloads once; proxy_pass http://${lb.upstream} stays as it is`,
      );
      const preview = s.blueGreen.previewUpstream;
      if (preview !== undefined) {
        lines.push(
          `  the same file also gets \`upstream ${preview} { ... }\`, the new set before the switch (empty outside a rollout); to test it, proxy to it from a server of your own, e.g. \`server { listen 127.0.0.1:8081; location / { proxy_pass http://${preview}; } }\``,
        );
      }
    }
    if (lb.template !== undefined) {
      const path = resolve(dirname(fleet.source.file), lb.template);
      const text = await readTextFile(path, 'upstream template', MAX_TEMPLATE_BYTES).catch((err: unknown) => {
        warnings.push(`loadBalancers/${i}/nginx/template: ${(err as Error).message}`);
        return undefined;
      });
      const own = text === undefined ? undefined : BALANCING_RE.exec(text)?.[1];
      if (s.type === 'Canary' && own !== undefined) {
        warnings.push(
          `loadBalancers/${i}/nginx/template: sets its own load-balancing method (${own}); remove it: the canary's \`hash ... consistent\` line goes into {{servers}}, and with two methods nginx only warns ("load balancing method redefined") and keeps the later one, so the weighted, sticky split could silently not happen`,
        );
      }
      if (
        text !== undefined &&
        !/\{\{\s*blocks\s*\}\}/.test(text) &&
        (s.type === 'BlueGreen'
          ? s.blueGreen.previewUpstream !== undefined
          : stickyVariable(s.canary.stickyKey, lb.upstream).map !== undefined || s.canary.force !== undefined)
      ) {
        lines.push(
          `  the template has no {{blocks}}: the ${s.type === 'BlueGreen' ? 'preview upstream' : s.canary.force !== undefined ? 'forced route' : 'cookie map'} is appended at its end`,
        );
      }
    }
  }
  return { lines, warnings };
}

/** Where the access logs are, and what reads them: the health numbers every deploy prints, and the analysis gate. */
function accessLogNotes(fleet: Fleet): { lines: string[]; warnings: string[] } {
  const lines: string[] = [];
  const warnings: string[] = [];
  const logs = fleet.loadBalancers.flatMap((lb, i) => (lb.nginx.accessLog !== undefined ? [`loadBalancers/${i}: ${lb.nginx.accessLog}`] : []));
  lines.push(
    logs.length > 0
      ? `access logs (fleetroll_json; deploy health numbers${fleet.analysis ? ' and the analysis gate' : ''} read them): ${logs.join(', ')}`
      : 'access logs: none named (loadBalancers/N/nginx/accessLog): deploys report no health numbers',
  );
  const s = fleet.strategy;
  const analysisSteps = s.type === 'Canary' ? s.canary.steps.filter((x) => x.kind === 'analysis') : [];
  const a = fleet.analysis ?? analysisSteps.find((x) => x.kind === 'analysis' && x.spec)?.spec;
  const where =
    s.type === 'Canary'
      ? `at canary step${analysisSteps.length === 1 ? '' : 's'} ${analysisSteps.map((x) => Number(x.path.split('/').at(-1)) + 1).join(', ') || '(none)'}`
      : s.type === 'RollingUpdate'
        ? 'after the first wave (failing: roll back)'
        : s.type === 'BlueGreen'
          ? 'after the switch (failing: switch back)'
          : 'never (Recreate has no partial step)';
  if (a && (fleet.analysis || analysisSteps.length > 0)) {
    const thresholds = [
      a.maxErrorRate !== undefined ? `maxErrorRate ${+(a.maxErrorRate * 100).toFixed(3)}%` : '',
      a.maxErrorRateIncrease !== undefined ? `maxErrorRateIncrease ${+(a.maxErrorRateIncrease * 100).toFixed(3)}%` : '',
      a.maxLatencyRatio !== undefined ? `maxLatencyRatio ${a.maxLatencyRatio}` : '',
    ]
      .filter(Boolean)
      .join(', ');
    lines.push(`analysis: every ${a.interval} s, at least ${a.minRequests} requests a side, ${thresholds}, failureLimit ${a.failureLimit}; runs ${where}`);
    if (logs.length === 0)
      warnings.push(
        'analysis: no load balancer names its accessLog, so the gate cannot read any traffic: set loadBalancers/N/nginx/accessLog (e.g. /var/log/nginx/fleetroll.log)',
      );
  }
  return { lines, warnings };
}

/** Where the fleet's state and lock live (docs/state.md). */
function stateNote(fleet: Fleet): string {
  const e = fleet.state?.etcd;
  if (!e) return `state: a Docker volume fleetroll-state-${fleet.service} and the lock on the first host (${fleet.hosts[0]?.name ?? '?'})`;
  return `state: etcd at ${e.endpoints.join(', ')}, keys under ${e.prefix.replace(/\/+$/, '')}/${fleet.service}/${e.tls ? ' (TLS)' : ''}: no state volume or lock container on the Docker hosts`;
}

/** The notes of validate: nginx first, then the access logs, then the state; each list in that order. */
export async function fleetNotes(fleet: Fleet): Promise<{ lines: string[]; warnings: string[] }> {
  const nginx = await nginxNotes(fleet);
  const logs = accessLogNotes(fleet);
  return { lines: [...nginx.lines, ...logs.lines, stateNote(fleet)], warnings: [...nginx.warnings, ...logs.warnings] };
}
