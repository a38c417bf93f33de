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
  /**
   * run: the most starts in flight on the host at once while this one ran;
   * ready: the most instances warming up at once on the host while this one
   * warmed (they share its cores). Itself included (1: alone). change: the
   * creates + starts in flight during it, plus one (1: none beside it).
   */
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
  /** Per host, each ready sample's warm-ups at once beside it (CostSample.inFlight), in the same order as samples.ready; 1 where unknown. */
  warming?: Record<string, number[]> | undefined;
  /** Per load balancer, each change sample's creates + starts in flight during it, plus one (CostSample.inFlight), in the same order as samples.change; 1 where unknown. */
  busy?: Record<string, number[]> | undefined;
}

/** The kinds priced by how many ran at once on their host, with the field of StepCosts that keeps each sample's count. */
export const CONTENDED = { run: 'inFlight', ready: 'warming', change: 'busy' } as const;
export type ContendedKind = keyof typeof CONTENDED;
const isContended = (k: CostKind): k is ContendedKind => k in CONTENDED;
const isCount = (x: unknown): x is number => Number.isInteger(x) && (x as number) >= 1;

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
    const counts: Record<string, number[]> = {};
    if (isContended(kind)) for (const [p, xs] of Object.entries(places)) counts[p] = countsOf(before, kind, p, xs.length);
    for (const s of samples) {
      if (s.kind !== kind || !Number.isFinite(s.ms) || s.ms < 0) continue;
      places[s.place] = [...(places[s.place] ?? []), Math.round(s.ms)];
      if (isContended(kind)) counts[s.place] = [...(counts[s.place] ?? []), isCount(s.inFlight) ? s.inFlight : 1];
    }
    for (const p of Object.keys(places)) places[p] = places[p]!.slice(-keep);
    if (Object.keys(places).length > 0) out.samples[kind] = places;
    for (const p of Object.keys(counts)) counts[p] = counts[p]!.slice(-keep);
    if (isContended(kind) && Object.keys(counts).length > 0) out[CONTENDED[kind]] = counts;
  }
  return out;
}

/** A host's counts of a contended kind, aligned with its `n` samples: 1 where the state has none (or they do not line up). */
function countsOf(c: StepCosts | undefined, kind: ContendedKind, place: string, n: number): number[] {
  const xs = c?.[CONTENDED[kind]]?.[place];
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
  const out: StepCosts = { deploys, lastAt, samples };
  for (const [kind, field] of Object.entries(CONTENDED) as [ContendedKind, (typeof CONTENDED)[ContendedKind]][]) {
    const given = o[field];
    if (typeof given !== 'object' || given === null) continue;
    const kept: Record<string, number[]> = {};
    for (const [place, xs] of Object.entries(given)) {
      // Only counts that line up with the samples kept: a count is meaningless beside another sample.
      if (Array.isArray(xs) && xs.length === samples[kind]?.[place]?.length && xs.every(isCount)) kept[place] = xs;
    }
    if (Object.keys(kept).length) out[field] = kept;
  }
  return out;
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
  /** The same for a warm-up (start to ready): what each other instance warming up beside it on its host adds; readyMs is then a warm-up alone. */
  readyQueuedMs?: number | undefined;
  /**
   * What each create + start in flight during a load-balancer change adds to
   * it (on one machine they share dockerd and the cores with `nginx -t` and
   * the reload); changeMs is then a change with no start beside it.
   */
  changeQueuedMs?: number | undefined;
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
  const run = runLine(c);
  if (run) {
    out.runMs = run.aloneMs;
    out.runQueuedMs = run.queuedMs;
  }
  const ready = contentionLine(c, 'ready');
  if (ready) {
    out.readyMs = ready.aloneMs;
    out.readyQueuedMs = ready.queuedMs;
  }
  const change = contentionLine(c, 'change');
  if (change) {
    out.changeMs = change.aloneMs;
    out.changeQueuedMs = change.queuedMs;
  }
  return out;
}

/** A step's cost against how many ran at once on its host: alone + queued × (at once - 1). */
export interface ContentionLine {
  aloneMs: number;
  queuedMs: number;
}

/** A contended kind's samples as [others beside it, ms], at one place or at every place. */
export function contentionPoints(c: StepCosts, kind: ContendedKind, place?: string): [number, number][] {
  const pts: [number, number][] = [];
  for (const [p, ms] of Object.entries(c.samples[kind] ?? {})) {
    if (place !== undefined && p !== place) continue;
    const k = countsOf(c, kind, p, ms.length);
    ms.forEach((m, i) => pts.push([k[i]! - 1, m]));
  }
  return pts;
}

/** The line of a contended kind over every host's samples (or one place's): fitLine. */
export function contentionLine(c: StepCosts, kind: ContendedKind, assumedAloneMs?: number, place?: string): ContentionLine | undefined {
  return fitLine(contentionPoints(c, kind, place), assumedAloneMs);
}

/** create + start against the starts in flight, over every host's samples (fitLine). */
export function runLine(c: StepCosts, assumedAloneMs?: number): ContentionLine | undefined {
  return contentionLine(c, 'run', assumedAloneMs);
}

/**
 * ms = alone + queued × others, by least squares over [others, ms] points;
 * undefined unless there are steps alone and steps beside others (else the
 * median says it all), or only steps beside others and a step alone is
 * assumed (`assumedAloneMs`). The slope is never below 0.
 */
export function fitLine(pts: readonly (readonly [number, number])[], assumedAloneMs?: number): ContentionLine | undefined {
  if (!pts.some(([x]) => x === 0) && assumedAloneMs !== undefined && pts.length > 0) {
    // Only steps beside others (a first deploy starts them all at once): what each added beyond an assumed step alone.
    return { aloneMs: assumedAloneMs, queuedMs: Math.max(0, Math.round(median(pts.map(([x, y]) => (y - assumedAloneMs) / x)))) };
  }
  if (!pts.some(([x]) => x === 0) || !pts.some(([x]) => x > 0)) return undefined;
  const n = pts.length;
  const mx = pts.reduce((a, [x]) => a + x, 0) / n;
  const my = pts.reduce((a, [, y]) => a + y, 0) / n;
  const sxx = pts.reduce((a, [x]) => a + (x - mx) ** 2, 0);
  const slope = Math.max(0, pts.reduce((a, [x, y]) => a + (x - mx) * (y - my), 0) / sxx);
  // The median of steps alone, not the intercept: one slow step alone should not tilt the line.
  const alone = median(pts.filter(([x]) => x === 0).map(([, y]) => y));
  return { aloneMs: Math.round(alone), queuedMs: Math.round(slope) };
}

/** One line for people: where the figures come from. */
export function costsText(c: StepCosts): string {
  return `costs from ${c.deploys} deploy${c.deploys === 1 ? '' : 's'}, last on ${c.lastAt.slice(0, 16).replace('T', ' ')} UTC`;
}

/**
 * Work in progress per key (a host's creates + starts, or its warm-ups),
 * each item with the most that were in progress at once while it ran: four
 * starts issued together all slow down together (Docker shares itself among
 * them, as warming apps share the host's cores), so a step is priced by that
 * count, not by its place in the queue.
 */
export class Overlaps {
  private readonly live = new Map<string, OverlapRun>();

  begin(key: string): Overlap {
    let run = this.live.get(key);
    if (!run) this.live.set(key, (run = new OverlapRun()));
    return new Overlap(run, run.begin());
  }

  /** Items in progress now, over every key. */
  inProgress(): number {
    let n = 0;
    for (const run of this.live.values()) n += run.size;
    return n;
  }

  end(key: string, item: Overlap): void {
    const run = this.live.get(key);
    if (!run || !item.end(run)) return;
    if (--run.size === 0) this.live.delete(key);
  }
}

/**
 * One key's begins while something of it is in progress, so that the most
 * at once since any begin is a binary search: raising every live item's
 * count at each begin was quadratic (2,500 warm-ups at once in a
 * 10,000-replica simulate, a tenth of its time). Only a begin raises the
 * count, so an item's most at once is the largest count a begin left from
 * its own on. The stack keeps the begins no later begin matched: their
 * counts fall from bottom to top, and the first at or after a begin is the
 * largest from there on.
 */
export class OverlapRun {
  size = 0;
  private begins = 0;
  private readonly seqs: number[] = [];
  private readonly counts: number[] = [];

  begin(): number {
    const n = ++this.size;
    while (this.counts.length > 0 && this.counts[this.counts.length - 1]! <= n) {
      this.counts.pop();
      this.seqs.pop();
    }
    const seq = this.begins++;
    this.seqs.push(seq);
    this.counts.push(n);
    return seq;
  }

  /** The most in progress at once from begin `seq` on. */
  peakSince(seq: number): number {
    let lo = 0;
    let hi = this.seqs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.seqs[mid]! < seq) lo = mid + 1;
      else hi = mid;
    }
    return this.counts[lo] ?? 0;
  }
}

/** An item of Overlaps: `max` grows while it is in progress and stays once it has ended. */
export class Overlap {
  private ended: number | undefined;

  constructor(
    private readonly run: OverlapRun,
    private readonly seq: number,
  ) {}

  get max(): number {
    return this.ended ?? this.run.peakSince(this.seq);
  }

  /** Ends it if `run` is its own and it has not ended yet (false otherwise). */
  end(run: OverlapRun): boolean {
    if (this.ended !== undefined || run !== this.run) return false;
    this.ended = this.run.peakSince(this.seq);
    return true;
  }
}
