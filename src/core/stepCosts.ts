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
 * - verify: the final version check of every instance, for the fleet;
 * - report: reading the deploy's health numbers from the access logs at its end, for the fleet;
 * - drain: the dynamic nginx mode's drain that ended when its last request did, from its mark-down in force, for the fleet.
 */
export const COST_KINDS = ['run', 'ready', 'stop', 'change', 'prepare', 'verify', 'report', 'drain'] as const;
export type CostKind = (typeof COST_KINDS)[number];

export interface CostSample {
  kind: CostKind;
  /** A host's or load balancer's name; FLEET for prepare, verify and report. */
  place: string;
  ms: number;
  /** run: the most starts in flight on the host at once while this one ran, itself included (1: alone). */
  inFlight?: number | undefined;
}

export const FLEET = 'fleet';

/** Per kind and place, the most recent samples, oldest first. */
export interface StepCosts {
  /** Deploys that contributed samples. */
  deploys: number;
  /** When the last of them ended (ISO time). */
  lastAt: string;
  samples: Partial<Record<CostKind, Record<string, number[]>>>;
  /** Per host, each run sample's starts in flight beside it (CostSample.inFlight), in the same order as samples.run; 1 where unknown. */
  inFlight?: Record<string, number[]> | undefined;
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
  const inFlight: Record<string, number[]> = {};
  for (const kind of COST_KINDS) {
    const places = { ...(before?.samples[kind] ?? {}) };
    if (kind === 'run') for (const [p, xs] of Object.entries(places)) inFlight[p] = inFlightOf(before, p, xs.length);
    for (const s of samples) {
      if (s.kind !== kind || !Number.isFinite(s.ms) || s.ms < 0) continue;
      places[s.place] = [...(places[s.place] ?? []), Math.round(s.ms)];
      if (kind === 'run') inFlight[s.place] = [...(inFlight[s.place] ?? []), s.inFlight !== undefined && Number.isInteger(s.inFlight) && s.inFlight >= 1 ? s.inFlight : 1];
    }
    for (const p of Object.keys(places)) places[p] = places[p]!.slice(-keep);
    if (Object.keys(places).length > 0) out.samples[kind] = places;
  }
  for (const p of Object.keys(inFlight)) inFlight[p] = inFlight[p]!.slice(-keep);
  if (Object.keys(inFlight).length > 0) out.inFlight = inFlight;
  return out;
}

/** A host's in-flight counts, aligned with its `n` run samples: 1 where the state has none (or they do not line up). */
function inFlightOf(c: StepCosts | undefined, place: string, n: number): number[] {
  const xs = c?.inFlight?.[place];
  return xs && xs.length === n ? [...xs] : Array.from({ length: n }, () => 1);
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
  const inFlight: Record<string, number[]> = {};
  if (typeof o.inFlight === 'object' && o.inFlight !== null) {
    for (const [place, xs] of Object.entries(o.inFlight)) {
      // Only counts that line up with the run samples kept: a count is meaningless beside another sample.
      if (Array.isArray(xs) && xs.length === samples.run?.[place]?.length && xs.every((x) => Number.isInteger(x) && x >= 1)) inFlight[place] = xs as number[];
    }
  }
  return { deploys, lastAt, samples, ...(Object.keys(inFlight).length ? { inFlight } : {}) };
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
  reportMs?: number | undefined;
  drainMs?: number | undefined;
  /**
   * What each other start in flight beside it on its host adds to a start
   * (Docker shares itself among them): the slope of create + start against
   * the starts in flight; runMs is then a start alone.
   */
  runQueuedMs?: number | undefined;
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
  const line = runLine(c);
  if (line) {
    out.runMs = line.aloneMs;
    out.runQueuedMs = line.queuedMs;
  }
  return out;
}

/**
 * create + start = alone + queued × (in flight - 1), by least squares over
 * every host's samples; undefined unless the samples have starts alone and
 * starts beside others (then the median says it all), or have only starts
 * beside others and a start alone is assumed (`assumedAloneMs`). Neither part below 0.
 */
export function runLine(c: StepCosts, assumedAloneMs?: number): { aloneMs: number; queuedMs: number } | undefined {
  const pts: [number, number][] = [];
  for (const [place, ms] of Object.entries(c.samples.run ?? {})) {
    const k = inFlightOf(c, place, ms.length);
    ms.forEach((m, i) => pts.push([k[i]! - 1, m]));
  }
  if (!pts.some(([x]) => x === 0) && assumedAloneMs !== undefined && pts.length > 0) {
    // Only starts beside others (a first deploy starts them all at once): what each added beyond an assumed start alone.
    return { aloneMs: assumedAloneMs, queuedMs: Math.max(0, Math.round(median(pts.map(([x, y]) => (y - assumedAloneMs) / x)))) };
  }
  if (!pts.some(([x]) => x === 0) || !pts.some(([x]) => x > 0)) return undefined;
  const n = pts.length;
  const mx = pts.reduce((a, [x]) => a + x, 0) / n;
  const my = pts.reduce((a, [, y]) => a + y, 0) / n;
  const sxx = pts.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  const slope = Math.max(0, pts.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / sxx);
  // The median of starts alone, not the intercept: one slow start alone should not tilt the line.
  const alone = median(pts.filter(([x]) => x === 0).map(([, y]) => y));
  return { aloneMs: Math.round(alone), queuedMs: Math.round(slope) };
}

/** One line for people: where the figures come from. */
export function costsText(c: StepCosts): string {
  return `costs from ${c.deploys} deploy${c.deploys === 1 ? '' : 's'}, last on ${c.lastAt.slice(0, 16).replace('T', ' ')} UTC`;
}

/**
 * Work in progress per key (a host's creates + starts), each item with the
 * most that were in progress at once while it ran: four starts issued
 * together all slow down together (Docker shares itself among them), so a
 * start is priced by that count, not by its place in the queue.
 */
export class Overlaps {
  private readonly live = new Map<string, Set<{ max: number }>>();

  begin(key: string): { max: number } {
    let set = this.live.get(key);
    if (!set) this.live.set(key, (set = new Set()));
    const item = { max: 0 };
    set.add(item);
    for (const i of set) i.max = Math.max(i.max, set.size);
    return item;
  }

  end(key: string, item: { max: number }): void {
    const set = this.live.get(key);
    set?.delete(item);
    if (set?.size === 0) this.live.delete(key);
  }
}
