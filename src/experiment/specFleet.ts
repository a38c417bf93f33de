/**
 * What a strategy of the experiment becomes in the fleet file of its runs:
 * its strategy block (checked and resolved as any fleet file's, by
 * config/strategy.ts) and its `analysis:` block, merged from the spec's,
 * the strategy's and a canary step's settings and checked with the fleet
 * file's analysis schema.
 */
import { analysisSchema } from '../config/analysis.js';
import { zodIssues } from '../config/fields.js';
import { loadStrategy } from '../config/strategy.js';
import type { ResolvedStrategy, StrategyInput } from '../core/strategy.js';
import type { FieldIssue } from '../errors.js';
import { USER_HEADER } from './probes.js';
import { gateOf, isMapping } from './specNames.js';
import type { ExperimentSpec, StrategySpec } from './specSchema.js';

/**
 * What a canary sticks on in an experiment: the probes send a rotating user
 * id in USER_HEADER, and every probe comes from the same client address, so
 * the fleet file's default key (remote_addr) would send all traffic to one side.
 */
export const EXPERIMENT_STICKY_KEY = `header:${USER_HEADER}`;

/** In an experiment an inconclusive analysis fails: nobody is there to resume. */
const EXPERIMENT_ANALYSIS_DEFAULTS = { onInconclusive: 'fail' } as const;

interface AnalysisLayer {
  /** Where it is written, e.g. "analysis", "strategies/2/analysis", "strategies/3/canary/steps/1/analysis". */
  path: string;
  block: Record<string, unknown>;
}

/**
 * The analysis settings of these layers merged (later ones win field by
 * field) over the experiment defaults, checked with the fleet file's
 * analysis schema; each problem is named at the layer that wrote the field
 * (a missing threshold at the innermost layer).
 */
function mergedAnalysis(layers: readonly AnalysisLayer[]): { block: Record<string, unknown>; issues: FieldIssue[] } {
  const block: Record<string, unknown> = { ...EXPERIMENT_ANALYSIS_DEFAULTS };
  for (const l of layers) Object.assign(block, l.block);
  const issues: FieldIssue[] = [];
  for (const l of layers) {
    if (l.block.onInconclusive === 'pause') {
      issues.push({
        path: `${l.path}/onInconclusive`,
        message: 'must be "fail" (the default) in an experiment: nobody runs fleetroll resume, promote or abort during a run',
      });
    }
  }
  const r = analysisSchema.safeParse(block);
  if (!r.success) {
    for (const issue of zodIssues(r.error)) {
      const field = issue.path.split('/')[0] ?? '';
      const owner = [...layers].reverse().find((l) => field !== '' && field in l.block) ?? layers[layers.length - 1];
      if (field === 'onInconclusive' && block.onInconclusive === 'pause') continue;
      issues.push({ path: [owner?.path ?? 'analysis', issue.path].filter((x) => x !== '').join('/'), message: issue.message });
    }
  }
  return { block, issues };
}

/** The spec's and the strategy's analysis layers (those that exist). */
function analysisLayers(spec: ExperimentSpec, s: StrategySpec, i: number): AnalysisLayer[] {
  const layers: AnalysisLayer[] = [];
  if (spec.analysis) layers.push({ path: 'analysis', block: spec.analysis });
  if (isMapping(s.analysis)) layers.push({ path: `strategies/${i}/analysis`, block: s.analysis });
  return layers;
}

/**
 * What a BlueGreen or Canary strategy becomes in the fleet file, and the
 * fleet file's `analysis:` block of any gated strategy. A canary's analysis
 * steps get the spec's and the strategy's settings merged into their own
 * overrides (so each step stands on its own, and the experiment default
 * onInconclusive: fail reaches it).
 */
export function fleetSettings(
  spec: ExperimentSpec,
  s: StrategySpec,
  i: number,
): { strategy?: StrategyInput; analysis?: Record<string, unknown>; issues: FieldIssue[] } {
  const issues: FieldIssue[] = [];
  const layers = analysisLayers(spec, s, i);
  if (s.type === 'Canary') {
    const steps = (s.canary?.steps ?? []).map((raw, k) => {
      if (!isMapping(raw) || Object.keys(raw).length !== 1 || !isMapping(raw.analysis)) return raw;
      const path = `strategies/${i}/canary/steps/${k}/analysis`;
      if (s.analysis === false) {
        issues.push({ path, message: `this strategy turns the analysis gate off (strategies/${i}/analysis: false); remove the step or the false` });
        return raw;
      }
      const merged = mergedAnalysis([...layers, { path, block: raw.analysis }]);
      issues.push(...merged.issues);
      return { analysis: merged.block };
    });
    const canary = {
      ...(s.canary?.canaryReplicas !== undefined ? { canaryReplicas: s.canary.canaryReplicas } : {}),
      stickyKey: EXPERIMENT_STICKY_KEY,
      ...(s.canary?.steps !== undefined ? { steps } : {}),
    };
    return { strategy: { type: 'Canary', canary: canary as StrategyInput['canary'] }, issues };
  }
  const gated = gateOf(s, spec.analysis) !== undefined;
  let analysis: Record<string, unknown> | undefined;
  if (gated && layers.length > 0) {
    const merged = mergedAnalysis(layers);
    issues.push(...merged.issues);
    analysis = merged.block;
  }
  if (s.type === 'BlueGreen') {
    const delay = s.blueGreen?.scaleDownDelaySeconds;
    return {
      strategy: { type: 'BlueGreen', blueGreen: delay !== undefined ? { scaleDownDelaySeconds: delay } : {} },
      ...(analysis ? { analysis } : {}),
      issues,
    };
  }
  return { ...(analysis ? { analysis } : {}), issues };
}

/** One strategy of the spec at `replicas`, checked and resolved as a fleet file's, with paths into the spec. */
export function resolveFor(s: StrategySpec, i: number, replicas: number, fleetStrategy: StrategyInput | undefined): ResolvedStrategy | undefined {
  if (s.type === 'naive' || s.type === 'script') return undefined;
  if (s.type === 'Recreate') return loadStrategy({ replicas, strategy: { type: 'Recreate' } });
  const p = `strategies/${i}`;
  return loadStrategy({
    replicas,
    // BlueGreen takes no maxSurge / maxUnavailable (strategyIssues says so once).
    ...(s.type === 'BlueGreen' ? {} : { cli: { maxSurge: s.maxSurge, maxUnavailable: s.maxUnavailable } }),
    ...(fleetStrategy ? { strategy: fleetStrategy } : {}),
    paths: { strategy: p, cliMaxSurge: `${p}/maxSurge`, cliMaxUnavailable: `${p}/maxUnavailable` },
  });
}
