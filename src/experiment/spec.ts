/**
 * The experiment spec: a matrix of rollouts to run on a local fleet under load.
 *
 *   strategies × every list-valued setting of `fleet`, `load` and `badVersion`,
 *   each run `repetitions` times.
 *
 * A setting given as a list (`replicas: [3, 6]`) is a dimension of the
 * matrix; a single value applies to every run. Each combination is a "cell"
 * (one configuration); its repetitions are aggregated (median, min, max).
 *
 * Validation reports every problem with its path (`strategies/1/maxSurge: ...`)
 * and nothing runs until the whole spec is valid.
 *
 * Strategies against a bad version: `BlueGreen` and `Canary`
 * beside RollingUpdate, an `analysis:` block (the gate of the fleet file)
 * for the whole spec and per strategy (merged field by field; `false` turns
 * the gate off), and `badVersion:` to make the new version subtly bad (a
 * share of 500s and/or added latency, readiness still passing; a list of
 * either is a dimension, to find how bad a version the gate catches). Nobody runs
 * `fleetroll promote`, `resume` or `abort` during a run, so whatever would
 * wait for them (a pause without a duration, autoPromote: false,
 * onInconclusive: pause) is refused.
 *
 * This module reads a spec (schema, then the rules between fields) and is
 * the spec's public face; the parts: specSchema.ts (the fields), specChecks.ts
 * (the rules), specFleet.ts (a strategy as its runs' fleet file), specNames.ts
 * (names and gates), matrix.ts (dimensions, size, cells, runs).
 */
import { readDocument } from '../config/document.js';
import { ValidationError } from '../errors.js';
import { issuesOf, badVersionIssues, strategyIssues } from './specChecks.js';
import { experimentSchema, type ExperimentSpec } from './specSchema.js';
import { matrixIssue } from './matrix.js';

// The spec's public face, for the runner, the report and the command: one import.
export {
  assertPlannable,
  badVersionEnv,
  expandCells,
  isBadVersion,
  matrixSize,
  MAX_PLANNED_RUNS,
  planRuns,
  type Cell,
  type CellParams,
  type Dimension,
  type PlannedRun,
} from './matrix.js';
export { percentText, strategyName } from './specNames.js';
export type { ExperimentSpec, ExperimentSpecInput, StrategySpec } from './specSchema.js';

/** Validates a parsed document; throws ValidationError listing every problem. */
export function parseExperimentSpec(raw: unknown, source: string): ExperimentSpec {
  const parsed = experimentSchema.safeParse(raw);
  if (!parsed.success) throw new ValidationError(issuesOf(parsed.error, raw), { source });
  // First, by arithmetic: the checks below are bounded by the list caps, but nothing may expand an oversized matrix.
  const matrix = matrixIssue(parsed.data);
  const issues = [...(matrix ? [matrix] : []), ...strategyIssues(parsed.data), ...badVersionIssues(parsed.data.badVersion)];
  if (issues.length > 0) throw new ValidationError(issues, { source });
  return parsed.data;
}

export async function loadExperimentSpec(file: string): Promise<ExperimentSpec> {
  return parseExperimentSpec(await readDocument(file, 'experiment spec'), file);
}
