/**
 * What an experiment calls its strategies: the default name from the
 * settings ("1/0", "Canary 25%→50% + analysis") and where the analysis gate
 * judges each one, which the checks, the cells and the report all print.
 */
import type { StrategySpec } from './specSchema.js';

export const isMapping = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The canary's steps as written, with their index; only well-formed ones (one key). */
export function stepsOf(s: StrategySpec): { k: number; kind: string; value: unknown }[] {
  return (s.canary?.steps ?? []).flatMap((raw, k) => {
    if (!isMapping(raw)) return [];
    const keys = Object.keys(raw);
    return keys.length === 1 ? [{ k, kind: keys[0]!, value: raw[keys[0]!] }] : [];
  });
}

/**
 * Where the analysis gate judges this strategy's new version, or undefined
 * when it has none: RollingUpdate after its first wave and BlueGreen after
 * the switch (when the spec or the strategy gives analysis settings and the
 * strategy does not say false), a Canary at its analysis steps.
 */
export function gateOf(s: StrategySpec, specAnalysis: Record<string, unknown> | undefined): string | undefined {
  if (s.analysis === false) return undefined;
  const settings = specAnalysis !== undefined || s.analysis !== undefined;
  if (s.type === 'RollingUpdate') return settings ? 'after the first wave' : undefined;
  if (s.type === 'BlueGreen') return settings ? 'after the switch' : undefined;
  if (s.type === 'Canary') {
    const at = stepsOf(s)
      .filter((x) => x.kind === 'analysis')
      .map((x) => x.k + 1);
    return at.length === 0 ? undefined : `at canary step${at.length > 1 ? 's' : ''} ${at.join(', ')}`;
  }
  return undefined;
}

export function strategyName(s: StrategySpec, specAnalysis?: Record<string, unknown>): string {
  if (s.name) return s.name;
  const gated = gateOf(s, specAnalysis) !== undefined ? ' + analysis' : '';
  if (s.type === 'naive') return 'naive';
  if (s.type === 'Recreate') return 'Recreate';
  if (s.type === 'script') return `script b=${s.batch ?? '?'}`;
  if (s.type === 'BlueGreen') return `BlueGreen${gated}`;
  if (s.type === 'Canary') {
    const weights = stepsOf(s)
      .filter((x) => x.kind === 'setWeight')
      .map((x) => `${String(x.value)}%`);
    return `Canary${weights.length > 0 ? ` ${weights.join('→')}` : ''}${gated}`;
  }
  return `${s.maxSurge ?? '25%'}/${s.maxUnavailable ?? '25%'}${s.replacementPolicy ? ` ${s.replacementPolicy}` : ''}${gated}`;
}

/** 0.2 → "20%": a share as labels and the report print it; the duplicate check compares these, so two listed values never share a label. */
export const percentText = (share: number) => `${+(share * 100).toFixed(4)}%`;
