/**
 * A first deploy: when the rollout begins, no instance of another revision
 * is running (instances of the target revision itself may be: a re-run, a
 * resume). There is then no stable side for a canary to share traffic with,
 * nor one for an analysis to compare the new revision with: a canary at
 * `setWeight 25` would take all the traffic there is, and a gate would find
 * no stable traffic to compare with (and a new service little traffic at
 * all), so it would hold, pause or fail for no fault of the new revision.
 * So a first deploy skips the canary steps and the analysis gates, as Argo
 * Rollouts does when a Rollout is first created (all replicas at once, no
 * steps, no analysis).
 *
 * PURE.
 */
import type { ResolvedStrategy } from './strategy.js';

/** Some instance of a revision other than `revision` is running: there is a stable side. */
export function stableRevisionRunning(found: Iterable<{ revision: string; running: boolean }>, revision: string): boolean {
  for (const i of found) if (i.running && i.revision !== revision) return true;
  return false;
}

/**
 * What a first deploy of this fleet skips, as the rollout says it; undefined
 * when it skips nothing (no steps, no gate, no replicas). `analysis`: the
 * fleet has an `analysis:` block; `postWave`: it has hooks.postWave, which
 * keeps a rolling update's waves.
 */
export function firstDeploySkips(s: ResolvedStrategy, o: { analysis: boolean; postWave: boolean }): string | undefined {
  const n = s.replicas;
  if (n === 0) return undefined;
  const full = `the fleet is created at full size (${n} instance${n === 1 ? '' : 's'})`;
  const argo = 'as Argo Rollouts does';
  if (s.type === 'Canary') {
    if (s.canary.steps.length === 0) return undefined;
    return `no stable revision is running (first deploy): the canary steps are skipped and ${full}, ${argo}`;
  }
  if (!o.analysis) return undefined;
  if (s.type === 'RollingUpdate') {
    const waves = o.postWave ? '; the waves stay, for hooks.postWave' : `, and ${full}`;
    return `no stable revision is running (first deploy): the analysis after the first wave is skipped (no stable revision to compare the new one with), ${argo}${waves}`;
  }
  if (s.type === 'BlueGreen') {
    return `no old set is running (first deploy): the new set takes all traffic at the switch and the analysis after the switch is skipped (no stable revision to compare it with, none to switch back to), ${argo}`;
  }
  return undefined;
}
