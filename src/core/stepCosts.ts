/**
 * What each kind of step really cost a fleet, kept in its state so that
 * `simulate` and `plan` can price a rollout with this fleet's own numbers
 * instead of nominal ones (a start costs only the warm-up, a reload is free).
 *
 * A deploy yields samples (engine/stepCosts.ts reads them off its events);
 * the state keeps the last COST_SAMPLES_KEEP of each kind at each place (a
 * host, a load balancer, or the fleet for the fixed costs), so it stays
 * bounded however many deploys there are, and follows a fleet that changes
 * (a new host, a slower registry) within a few deploys.
 *
 * PURE: no I/O, no clock.
 */

/**
 * - run: docker create + start of one instance, at its host;
 * - ready: from started to readiness seen by fleetroll (the app's warm-up and the probe's own time), at its host;
 * - stop: docker stop + remove after the drain, at its host;
 * - change: a load-balancer change, from writing its file to the reload in force, at that load balancer;
 * - prepare: preflight and image checks before the first step, for the fleet;
 * - verify: the final version check of every instance, for the fleet.
 */
export const COST_KINDS = ['run', 'ready', 'stop', 'change', 'prepare', 'verify'] as const;
export type CostKind = (typeof COST_KINDS)[number];

export interface CostSample {
  kind: CostKind;
  /** A host's or load balancer's name; FLEET for prepare and verify. */
  place: string;
  ms: number;
}

export const FLEET = 'fleet';

/** Per kind and place, the most recent samples, oldest first. */
export interface StepCosts {
  /** Deploys that contributed samples. */
  deploys: number;
  /** When the last of them ended (ISO time). */
  lastAt: string;
  samples: Partial<Record<CostKind, Record<string, number[]>>>;
}

export const COST_SAMPLES_KEEP = 64;

/**
 * `previous` (as read from the state: possibly written by another version,
 * so anything that is not a finite number is dropped) with one deploy's
 * samples added; undefined when neither has a sample.
 */
export function addCosts(previous: unknown, samples: readonly CostSample[], at: string, keep = COST_SAMPLES_KEEP): StepCosts | undefined {
  const before = readCosts(previous);
  if (samples.length === 0) return before;
  const out: StepCosts = { deploys: (before?.deploys ?? 0) + 1, lastAt: at, samples: {} };
  for (const kind of COST_KINDS) {
    const places = { ...(before?.samples[kind] ?? {}) };
    for (const s of samples) {
      if (s.kind !== kind || !Number.isFinite(s.ms) || s.ms < 0) continue;
      places[s.place] = [...(places[s.place] ?? []), Math.round(s.ms)];
    }
    for (const p of Object.keys(places)) places[p] = places[p]!.slice(-keep);
    if (Object.keys(places).length > 0) out.samples[kind] = places;
  }
  return out;
}

/** Costs as the state holds them, checked: undefined if there is nothing usable. */
export function readCosts(v: unknown): StepCosts | undefined {
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  const deploys = typeof o.deploys === 'number' && Number.isInteger(o.deploys) && o.deploys > 0 ? o.deploys : undefined;
  const lastAt = typeof o.lastAt === 'string' && !Number.isNaN(Date.parse(o.lastAt)) ? o.lastAt : undefined;
  if (deploys === undefined || lastAt === undefined || typeof o.samples !== 'object' || o.samples === null) return undefined;
  const samples: StepCosts['samples'] = {};
  for (const kind of COST_KINDS) {
    const places = (o.samples as Record<string, unknown>)[kind];
    if (typeof places !== 'object' || places === null) continue;
    const kept: Record<string, number[]> = {};
    for (const [place, xs] of Object.entries(places)) {
      if (!Array.isArray(xs)) continue;
      const ok = xs.filter((x): x is number => typeof x === 'number' && Number.isFinite(x) && x >= 0);
      if (ok.length) kept[place] = ok;
    }
    if (Object.keys(kept).length) samples[kind] = kept;
  }
  return { deploys, lastAt, samples };
}

/** The median of a non-empty list (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Every sample of a kind, over all its places. */
function all(c: StepCosts, kind: CostKind): number[] {
  return Object.values(c.samples[kind] ?? {}).flat();
}

/** Typical costs, as simulate takes them: the median of each kind over its places; undefined where a kind has no sample. */
export interface TypicalCosts {
  runMs?: number | undefined;
  readyMs?: number | undefined;
  stopMs?: number | undefined;
  changeMs?: number | undefined;
  prepareMs?: number | undefined;
  verifyMs?: number | undefined;
  /** Samples behind each figure. */
  counts: Partial<Record<CostKind, number>>;
}

export function typicalCosts(c: StepCosts): TypicalCosts {
  const out: TypicalCosts = { counts: {} };
  for (const kind of COST_KINDS) {
    const xs = all(c, kind);
    if (xs.length === 0) continue;
    out.counts[kind] = xs.length;
    out[`${kind}Ms`] = Math.round(median(xs));
  }
  return out;
}

/** One line for people: where the figures come from. */
export function costsText(c: StepCosts): string {
  return `costs from ${c.deploys} deploy${c.deploys === 1 ? '' : 's'}, last on ${c.lastAt.slice(0, 16).replace('T', ' ')} UTC`;
}
