/**
 * The weight arithmetic of a canary split: which integer nginx weights give
 * the canary its percent of the traffic. Apart from the upstream file's
 * rendering (./upstream.ts) because it is a search over numbers that knows
 * nothing of nginx syntax, with its own worked examples below.
 *
 * PURE.
 */

/** The range of nginx's `weight=` on a server line. */
export const MIN_WEIGHT = 1;
export const MAX_WEIGHT = 1000;

/**
 * Integer nginx weights that give `canaryCount` canary servers `weightPercent`
 * of the traffic beside `stableCount` stable servers, every server of a side
 * getting its side's weight: the canary share
 * `canaryCount × canary / (canaryCount × canary + stableCount × stable)` is
 * within 1 point of the percent whenever weights from 1 to 1000 allow it (they
 * do unless one side has hundreds of times the other's instances; then the
 * closest share there is comes back, and `sharePercent` says what it is).
 *
 * A weight of 0 means "no traffic": render that side's servers `down` (nginx
 * weights start at 1). 0% gives { stable: 1, canary: 0 }, 100% { stable: 0, canary: 1 }.
 *
 * Choice: the closest share among weight pairs whose upstream totals at most
 * 1000 units of weight (ties: the smallest), if it is within half a point;
 * else the smallest pair within half a point; else the closest; then scaled up by a whole factor
 * while that total stays within 1000 and no weight passes 1000. nginx puts
 * 160 points per unit of weight on the consistent-hash ring, and a server's
 * real share strays from its nominal one by about one over the square root of
 * its points, so a few hundred units keep the real split within a fraction of
 * a point without a large ring (1000 units: 160,000 points).
 *
 *   stable 10, canary 1, 5%   → stable 95, canary 50   (50 / 1000 = 5%)
 *   stable 10, canary 5, 50%  → stable 50, canary 100  (500 / 1000 = 50%)
 *   stable 9,  canary 1, 10%  → stable 100, canary 100 (equal weights: 1 in 10)
 *
 * Throws RangeError for impossible input (a share for a side with no server,
 * a percent outside 0..100): a caller's bug, not a user's.
 */
/** The upstream's total weight canaryWeights aims at (see there). */
const RING_UNITS = 1000;
/** A share this close to the percent counts as hitting it; then smaller weights win. */
const TOLERANCE = 0.5;

export function canaryWeights(stableCount: number, canaryCount: number, weightPercent: number): { stable: number; canary: number; sharePercent: number } {
  for (const [n, what] of [
    [stableCount, 'stableCount'],
    [canaryCount, 'canaryCount'],
  ] as const) {
    if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`canaryWeights: ${what} must be a non-negative integer, got ${n}`);
  }
  if (!Number.isFinite(weightPercent) || weightPercent < 0 || weightPercent > 100) {
    throw new RangeError(`canaryWeights: weightPercent must be from 0 to 100, got ${weightPercent}`);
  }
  if (weightPercent < 100 && stableCount === 0) throw new RangeError(`canaryWeights: ${100 - weightPercent}% for stable needs a stable server`);
  if (weightPercent > 0 && canaryCount === 0) throw new RangeError(`canaryWeights: ${weightPercent}% for the canary needs a canary server`);
  if (weightPercent === 0) return { stable: 1, canary: 0, sharePercent: 0 };
  if (weightPercent === 100) return { stable: 0, canary: 1, sharePercent: 100 };

  const S = stableCount;
  const C = canaryCount;
  const share = (s: number, c: number) => (100 * C * c) / (C * c + S * s);
  // canary/stable weight ratio that hits the percent exactly
  const ratio = (weightPercent * S) / ((100 - weightPercent) * C);
  const EPS = 1e-9;
  type Pair = { s: number; c: number; err: number; total: number };
  let best: Pair | undefined;
  const rank = (p: Pair): [number, number, number] => {
    const within = p.err <= TOLERANCE + EPS;
    const inBudget = p.total <= RING_UNITS;
    // 0: close and small; 1: close but large; 2: the closest there is.
    return within && inBudget ? [0, p.err, p.total] : within ? [1, p.total, p.err] : [2, p.err, p.total];
  };
  const better = (a: Pair, b: Pair) => {
    const [ra, rb] = [rank(a), rank(b)];
    for (let i = 0; i < 3; i++) {
      if (Math.abs(ra[i]! - rb[i]!) > EPS) return ra[i]! < rb[i]!;
    }
    return false;
  };
  for (let s = MIN_WEIGHT; s <= MAX_WEIGHT; s++) {
    const ideal = s * ratio;
    for (const raw of [Math.floor(ideal), Math.ceil(ideal)]) {
      const c = Math.min(MAX_WEIGHT, Math.max(MIN_WEIGHT, raw));
      const p: Pair = { s, c, err: Math.abs(share(s, c) - weightPercent), total: S * s + C * c };
      if (!best || better(p, best)) best = p;
    }
  }
  const b = best!;
  const k = Math.max(1, Math.floor(Math.min(MAX_WEIGHT / Math.max(b.s, b.c), RING_UNITS / b.total)));
  return { stable: b.s * k, canary: b.c * k, sharePercent: share(b.s, b.c) };
}
