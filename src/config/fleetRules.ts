/**
 * The fleet file's rules between fields, which a per-field schema cannot
 * express: hosts and load balancers that must fit together, the progress
 * deadline against minReadySeconds, secrets against their files, the resolved
 * strategy against the load balancers and hooks, and a canary's analysis
 * steps merged with the top-level analysis settings. They run on the parsed
 * fleet file, after the schema.
 */
import type { ResolvedStrategy } from '../core/strategy.js';
import type { FieldIssue } from '../errors.js';
import { analysisSchema } from './analysis.js';
import { zodIssues } from './fields.js';
import { probeIssues, portIssues } from './probes.js';
import type { FleetFileParsed } from './schema.js';
import { defaultPeersFile } from '../core/upstream.js';

/** secrets/N must name a secretFiles entry; a secret file needs a path that exists. */
export function secretIssues(f: FleetFileParsed): FieldIssue[] {
  const defined = new Set(Object.keys(f.secretFiles ?? {}));
  return (f.secrets ?? []).flatMap((s, i) =>
    defined.has(s.name)
      ? []
      : [
          {
            path: `secrets/${i}`,
            message: `names no entry of secretFiles (${[...defined].join(', ') || 'none defined'}): define it as secretFiles: { ${s.name}: { file: ./path } }`,
          },
        ],
  );
}

/** Cross-field rules that a per-field schema cannot express. */
export function crossFieldIssues(f: FleetFileParsed, timings: { minReadySeconds: number; progressDeadlineSeconds: number }): FieldIssue[] {
  const issues: FieldIssue[] = [...portIssues(f), ...probeIssues(f)];
  const hostNames = new Set<string>();
  f.hosts.forEach((h, i) => {
    if (hostNames.has(h.name)) issues.push({ path: `hosts/${i}/name`, message: `duplicate host name ${JSON.stringify(h.name)}` });
    if (h.ssh && !h.docker.startsWith('ssh://'))
      issues.push({ path: `hosts/${i}/ssh`, message: `only applies to an ssh:// endpoint, got ${JSON.stringify(h.docker)}` });
    if (h.tls && !h.docker.startsWith('tcp://'))
      issues.push({ path: `hosts/${i}/tls`, message: `only applies to a tcp:// endpoint, got ${JSON.stringify(h.docker)}` });
    hostNames.add(h.name);
  });
  const files = new Map<string, number>();
  f.loadBalancers.forEach((lb, i) => {
    const p = `loadBalancers/${i}/nginx`;
    const n = lb.nginx;
    if (n.exec && n.container)
      issues.push({ path: p, message: 'set either container (nginx in a Docker container) or exec: true (nginx on this machine), not both' });
    if (!n.exec && !n.container) issues.push({ path: p, message: 'needs container (nginx in a Docker container) or exec: true (nginx on this machine)' });
    if (n.container) {
      const host = n.host ?? f.hosts[0]?.name;
      if (host !== undefined && !hostNames.has(host))
        issues.push({ path: `${p}/host`, message: `must name an entry in hosts (${[...hostNames].join(', ')}), got ${JSON.stringify(host)}` });
    } else if (n.host) {
      issues.push({ path: `${p}/host`, message: 'only applies with container; with exec: true nginx runs on this machine' });
    }
    if (n.accessLog === 'stdout' && n.exec) {
      issues.push({
        path: `${p}/accessLog`,
        message: '"stdout" is a container\'s log stream: with exec: true (nginx on this machine) give the absolute path of the file nginx logs to',
      });
    }
    if (n.accessLog !== undefined && /^\/dev\/(?:stdout|stderr)$|^\/proc\//.test(n.accessLog)) {
      issues.push({
        path: `${p}/accessLog`,
        message: `must be a regular file nginx writes to, got ${JSON.stringify(n.accessLog)}${n.container ? ': for nginx logging to its output write accessLog: stdout' : ''}`,
      });
    }
    if (n.config && !n.exec) issues.push({ path: `${p}/config`, message: 'only applies with exec: true (the nginx.conf of the nginx on this machine)' });
    if (n.mode === 'reload') {
      if (n.upstreamFile === undefined)
        issues.push({
          path: `${p}/upstreamFile`,
          message: 'is required in mode reload: the absolute path of the upstream file that nginx.conf includes (or set mode: dynamic)',
        });
      if (n.peersFile !== undefined) issues.push({ path: `${p}/peersFile`, message: 'only applies with mode: dynamic' });
    } else {
      if (n.upstreamFile !== undefined)
        issues.push({
          path: `${p}/upstreamFile`,
          message: 'does not apply with mode: dynamic (membership goes to the Lua balancer through peersFile, no upstream file is written)',
        });
      if (n.template !== undefined) issues.push({ path: `${p}/template`, message: 'does not apply with mode: dynamic (no upstream file is rendered)' });
    }
    const file = n.mode === 'reload' ? n.upstreamFile : (n.peersFile ?? defaultPeersFile(n.upstream));
    const key = `${n.exec ? 'exec' : `${n.host ?? ''}/${n.container ?? ''}`}:${file}`;
    if (files.has(key))
      issues.push({
        path: `${p}/${n.mode === 'reload' ? 'upstreamFile' : 'peersFile'}`,
        message: `the same file is already managed by loadBalancers/${files.get(key)}`,
      });
    files.set(key, i);
  });
  if (timings.progressDeadlineSeconds <= timings.minReadySeconds) {
    issues.push({
      path: 'progressDeadlineSeconds',
      message: `must be greater than minReadySeconds (${timings.minReadySeconds}), got ${timings.progressDeadlineSeconds}`,
    });
  }
  return issues;
}

/** Rules between the resolved strategy and the rest of the fleet; notes go into the strategy's notes. */
export function strategyFleetIssues(f: FleetFileParsed, s: ResolvedStrategy, defaultsStrategyPath: string): FieldIssue[] {
  const issues: FieldIssue[] = [];
  if (s.type === 'BlueGreen' && s.blueGreen.previewUpstream !== undefined) {
    const preview = s.blueGreen.previewUpstream;
    const path = `${s.blueGreen.sources.previewUpstream === 'defaults' ? defaultsStrategyPath : 'strategy'}/blueGreen/previewUpstream`;
    f.loadBalancers.forEach((lb, i) => {
      // nginx compares upstream names ignoring case: API and api are the same upstream to it.
      if (lb.nginx.upstream.toLowerCase() === preview.toLowerCase()) {
        issues.push({
          path,
          message: `must differ from loadBalancers/${i}/nginx/upstream (${JSON.stringify(preview)}): the preview upstream holds the new set before the switch, out of the users' traffic`,
        });
      }
    });
  }
  if (f.hooks?.prePromotion !== undefined && s.type !== 'BlueGreen') {
    s.notes.push(`hooks.prePromotion runs only with strategy type BlueGreen (before the switch); with ${s.type} it never runs`);
  }
  return issues;
}

/**
 * A canary's analysis steps: the top-level `analysis:` with each step's
 * overrides, validated as one block (so a step may supply what the top level
 * leaves out, and a threshold is required somewhere); the result is kept on
 * the step for the engine.
 */
export function analysisStepIssues(s: Extract<ResolvedStrategy, { type: 'Canary' }>, top: unknown): { path: string; message: string }[] {
  const issues: { path: string; message: string }[] = [];
  const base = top !== null && typeof top === 'object' && !Array.isArray(top) ? (top as Record<string, unknown>) : {};
  for (const step of s.canary.steps) {
    if (step.kind !== 'analysis') continue;
    const r = analysisSchema.safeParse({ ...base, ...step.overrides });
    if (r.success) step.spec = r.data;
    else issues.push(...zodIssues(r.error, `${step.path}/analysis`));
  }
  return issues;
}
