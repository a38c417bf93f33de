/**
 * The experiment spec's rules between fields, run once the schema
 * (specSchema.ts) has passed: what fits which strategy type, what an
 * experiment cannot run (nobody promotes, resumes or aborts during a run),
 * distinct names, the analysis gate, badVersion, and the fleet file's own
 * strategy rules for each strategy at every replicas listed. Also the
 * schema's own messages, made specific where zod's are vague.
 */
import type * as zod from 'zod';
import { parseDurationSeconds } from '../config/analysis.js';
import { zodIssues } from '../config/fields.js';
import * as z from '../config/zod.js';
import { BUILTIN_DEFAULTS } from '../core/strategy.js';
import { ValidationError, type FieldIssue } from '../errors.js';
import { EXPERIMENT_STICKY_KEY, fleetSettings, resolveFor } from './specFleet.js';
import { gateOf, isMapping, percentText, stepsOf, strategyName } from './specNames.js';
import { list, type ExperimentSpec } from './specSchema.js';

/** Cross-field rules: strategy fields that only fit one type, duplicate names, the gate, and the fleet file's strategy rules (resolveFor). */
export function strategyIssues(spec: ExperimentSpec): FieldIssue[] {
  const issues: FieldIssue[] = [];
  const add = (issue: FieldIssue) => {
    if (!issues.some((x) => x.path === issue.path && x.message === issue.message)) issues.push(issue);
  };
  const names = new Map<string, number>();
  let specAnalysisUsed = false;
  spec.strategies.forEach((s, i) => {
    const p = `strategies/${i}`;
    if (s.type !== 'RollingUpdate' && s.type !== 'Canary') {
      for (const f of ['maxSurge', 'maxUnavailable', 'replacementPolicy'] as const) {
        if (s[f] !== undefined) add({ path: `${p}/${f}`, message: `only applies to types RollingUpdate and Canary (its final rolling update), not ${s.type}` });
      }
    }
    if (s.type !== 'naive' && s.intervalSeconds !== undefined) add({ path: `${p}/intervalSeconds`, message: 'only applies to type naive' });
    if (s.type === 'script' && s.batch === undefined)
      add({ path: `${p}/batch`, message: 'is required for type script: how many instances the script replaces at once (1 to 20)' });
    for (const f of ['batch', 'pollSeconds'] as const) {
      if (s.type !== 'script' && s[f] !== undefined) add({ path: `${p}/${f}`, message: `only applies to type script, not ${s.type}` });
    }
    if (s.blueGreen !== undefined && s.type !== 'BlueGreen') add({ path: `${p}/blueGreen`, message: `only applies to type BlueGreen, not ${s.type}` });
    if (s.canary !== undefined && s.type !== 'Canary') add({ path: `${p}/canary`, message: `only applies to type Canary, not ${s.type}` });
    if (s.blueGreen) {
      for (const f of ['preview', 'previewUpstream'] as const) {
        if (s.blueGreen[f] !== undefined)
          add({
            path: `${p}/blueGreen/${f}`,
            message: 'is not available in an experiment: the nginx of a run serves one upstream, and no prePromotion hook runs',
          });
      }
      if (s.blueGreen.autoPromote !== undefined && s.blueGreen.autoPromote !== true) {
        add({
          path: `${p}/blueGreen/autoPromote`,
          message: `must be true (the default) in an experiment: nobody runs fleetroll promote during a run, got ${JSON.stringify(s.blueGreen.autoPromote)}`,
        });
      }
    }
    if (s.canary?.stickyKey !== undefined) {
      add({
        path: `${p}/canary/stickyKey`,
        message: `is set by the experiment: ${EXPERIMENT_STICKY_KEY} (the probes send one of load.users ids per request; they all come from one client address), remove it`,
      });
    }
    if (s.type === 'Canary') {
      for (const { k, kind, value } of stepsOf(s)) {
        if (kind === 'pause' && isMapping(value) && value.duration === undefined) {
          add({
            path: `${p}/canary/steps/${k}/pause`,
            message: 'needs a duration in an experiment (e.g. { duration: 5s }): nobody runs fleetroll promote or abort during a run',
          });
        }
      }
    }

    const gate = gateOf(s, spec.analysis);
    if (s.analysis === true && spec.analysis === undefined) {
      add({
        path: `${p}/analysis`,
        message:
          'true takes the spec\'s analysis settings, but the spec has no analysis: give the settings here (e.g. { interval: 4s, maxErrorRate: "5%" }) or in the spec',
      });
    }
    if (s.analysis !== undefined && s.analysis !== false) {
      if (s.type === 'Canary' && gate === undefined) {
        add({ path: `${p}/analysis`, message: 'a canary is judged only at its analysis steps: add { analysis: {} } to canary/steps' });
      } else if (s.type !== 'RollingUpdate' && s.type !== 'BlueGreen' && s.type !== 'Canary') {
        add({
          path: `${p}/analysis`,
          message: `only applies to types RollingUpdate (after the first wave), BlueGreen (after the switch) and Canary (its analysis steps), not ${s.type}`,
        });
      }
    }
    if (gate !== undefined && spec.analysis !== undefined && s.analysis !== false) specAnalysisUsed = true;
    if (s.expectStopped !== undefined) {
      if (s.type === 'naive' || s.type === 'script')
        add({ path: `${p}/expectStopped`, message: `only applies to fleetroll's strategies (the analysis gate), not ${s.type}` });
      else if (s.expectStopped && gate === undefined)
        add({
          path: `${p}/expectStopped`,
          message:
            "this strategy has no analysis gate, so nothing can stop its deploy: give it analysis settings (here or in the spec's analysis) or an analysis step",
        });
    }

    const fleet = fleetSettings(spec, s, i);
    for (const issue of fleet.issues) add(issue);
    if (s.type === 'BlueGreen' && fleet.analysis) {
      // The gate can only switch back while the old set waits out scaleDownDelaySeconds.
      const interval = parseDurationSeconds(fleet.analysis.interval ?? 10);
      const limit = typeof fleet.analysis.failureLimit === 'number' ? fleet.analysis.failureLimit : 0;
      const delay = s.blueGreen?.scaleDownDelaySeconds ?? BUILTIN_DEFAULTS.scaleDownDelaySeconds;
      if (interval !== undefined && delay <= interval * (limit + 1)) {
        add({
          path: `${p}/blueGreen/scaleDownDelaySeconds`,
          message: `must be longer than the analysis takes to fail (interval ${interval} s × (failureLimit ${limit} + 1) = ${interval * (limit + 1)} s): the gate switches back only while the old set waits; got ${delay}${s.blueGreen?.scaleDownDelaySeconds === undefined ? ' (the default)' : ''}`,
        });
      }
    }

    const name = strategyName(s, spec.analysis);
    const seen = names.get(name);
    if (seen !== undefined)
      add({ path: `${p}/name`, message: `duplicate strategy name ${JSON.stringify(name)} (also strategies/${seen}); give each a distinct name` });
    names.set(name, i);
    if (s.type === 'RollingUpdate' || s.type === 'BlueGreen' || s.type === 'Canary') {
      for (const replicas of list(spec.fleet.replicas)) {
        try {
          resolveFor(s, i, replicas, fleet.strategy);
        } catch (err) {
          if (!(err instanceof ValidationError)) throw err;
          for (const issue of err.issues) add(issue);
        }
      }
    }
  });
  if (spec.analysis !== undefined && !specAnalysisUsed) {
    add({
      path: 'analysis',
      message:
        "no strategy uses it: it gates RollingUpdate (after the first wave), BlueGreen (after the switch) and a Canary's analysis steps, unless the strategy says analysis: false",
    });
  }
  return issues;
}

/**
 * badVersion must make the new version bad in every cell: no combination of
 * errorRate 0 and latencyMs 0 (that cell would run a good version, which is
 * what leaving badVersion out is for, and its expectStopped would mean
 * something else). A 0 in one list is fine when the other field is above 0
 * everywhere. A value listed twice ("20%" and 0.2) would make two cells with
 * one label, which the charts would merge.
 */
export function badVersionIssues(b: ExperimentSpec['badVersion']): FieldIssue[] {
  if (b === undefined) return [];
  const issues: FieldIssue[] = [];
  const field = (name: 'errorRate' | 'latencyMs', value: number | number[] | undefined, text: (v: number) => string) => ({
    name,
    value,
    zero: value === undefined ? 0 : list(value).indexOf(0),
    text,
  });
  const rate = field('errorRate', b.errorRate, percentText);
  const latency = field('latencyMs', b.latencyMs, (ms) => `${ms} ms`);
  for (const { name, value, text } of [rate, latency]) {
    if (!Array.isArray(value)) continue;
    value.forEach((v, k) => {
      const first = value.findIndex((w) => text(w) === text(v));
      if (first < k)
        issues.push({
          path: `badVersion/${name}/${k}`,
          message: `repeats ${text(v)} (badVersion/${name}/${first}): each value is a configuration of its own, list it once`,
        });
    });
  }
  if (rate.zero < 0 || latency.zero < 0) return issues;
  if (!Array.isArray(rate.value) && !Array.isArray(latency.value)) {
    issues.push({ path: 'badVersion', message: 'must make the new version bad: errorRate above 0 (e.g. "20%") and/or latencyMs above 0' });
    return issues;
  }
  // Named at the list that holds the 0 (errorRate when both do): there a value goes, or the other field changes.
  const [mine, other] = Array.isArray(rate.value) ? [rate, latency] : [latency, rate];
  const otherText =
    other.value === undefined
      ? `${other.name} unset (0)`
      : Array.isArray(other.value)
        ? `${other.name} 0 (badVersion/${other.name}/${other.zero})`
        : `${other.name} 0`;
  issues.push({
    path: `badVersion/${mine.name}/${mine.zero}`,
    message: `0 with ${otherText} would run a good version: every combination must make it bad (errorRate above 0 and/or latencyMs above 0), so ${mine.name} may list 0 only when every ${other.name} is above 0`,
  });
  return issues;
}

/**
 * zod reports a value that fits neither "one value" nor "a list" as a bare
 * "Invalid input"; say what is wrong with it instead: for a list, the first
 * bad element (with its index), otherwise the single value.
 */
export function issuesOf(error: zod.ZodError, raw: unknown): FieldIssue[] {
  const at = (path: readonly PropertyKey[]) =>
    path.reduce<unknown>((v, k) => (v !== null && typeof v === 'object' ? (v as Record<PropertyKey, unknown>)[k] : undefined), raw);
  const flat: zod.core.$ZodIssue[] = [];
  for (const issue of error.issues) {
    // Only fleet, load and badVersion settings are "one value or a list".
    if (
      issue.code === 'invalid_union' &&
      issue.errors.length === 2 &&
      (issue.path[0] === 'fleet' || issue.path[0] === 'load' || issue.path[0] === 'badVersion')
    ) {
      const [single, many] = issue.errors;
      const pick = Array.isArray(at(issue.path)) ? many : single;
      if (pick && pick.length > 0) {
        for (const sub of pick) flat.push({ ...sub, path: [...issue.path, ...sub.path] });
        continue;
      }
    }
    flat.push(issue);
  }
  return zodIssues(new z.ZodError(flat));
}
