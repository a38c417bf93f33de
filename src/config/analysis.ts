/**
 * The fleet file's `analysis:` block: the thresholds of the analysis gate
 * (src/core/gate.ts) that canary steps, and RollingUpdate after its first
 * wave, check against nginx's access log.
 *
 *   analysis:
 *     interval: 10s            seconds per measurement: 10, "10s", "500ms", "1m"
 *     minRequests: 50          per compared side and interval, else inconclusive
 *     maxErrorRate: 1%         "1%" or a fraction 0.01
 *     maxErrorRateIncrease: 0.5%   canary − stable, in percentage points
 *     maxLatencyRatio: 1.5     canary p99 / stable p99
 *     latencyFloorMs: 10       stable p99 below this counts as this
 *     failureLimit: 2          failed measurements tolerated
 *     inconclusiveLimit: 0     inconclusive measurements tolerated
 *     successCount: 1          passing measurements needed
 *     onInconclusive: pause    or fail
 *
 * The schema parses into core's AnalysisSpec with every default filled in
 * (ANALYSIS_DEFAULTS), so the gate never sees a percentage string or a
 * duration. At least one of maxErrorRate, maxErrorRateIncrease and
 * maxLatencyRatio is required: a gate without a threshold would pass
 * anything. Messages name what is allowed, in the style of ./schema.ts, and
 * `zodIssues(error, 'analysis')` turns them into `analysis/maxErrorRate: ...`.
 *
 * Not yet part of fleetSchema: wire it in as `analysis: analysisSchema.optional()`.
 */
import type * as zod from 'zod';
import * as z from './zod.js';
import { ANALYSIS_DEFAULTS, type AnalysisSpec } from '../core/gate.js';

const got = (input: unknown) => `got ${JSON.stringify(input)}`;

const int = (min: number, max: number, what = 'an integer') => {
  const message = (i: { input: unknown }) => `must be ${what} from ${min} to ${max}, ${got(i.input)}`;
  return z.number({ error: message }).int({ error: message }).min(min, { error: message }).max(max, { error: message });
};

const number = (min: number, max: number, what: string) => {
  const message = (i: { input: unknown }) => `must be ${what} from ${min} to ${max}, ${got(i.input)}`;
  return z.number({ error: message }).min(min, { error: message }).max(max, { error: message });
};

const DURATION_RE = /^([0-9]+(?:\.[0-9]+)?)(ms|s|m)$/;
const UNIT_SECONDS: Record<string, number> = { ms: 0.001, s: 1, m: 60 };

/** Seconds from 10, "10s", "500ms" or "1m"; undefined when the value is none of those. */
export function parseDurationSeconds(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = DURATION_RE.exec(v.trim());
  return m ? Number(m[1]) * UNIT_SECONDS[m[2]!]! : undefined;
}

/** A fraction from 0.01 or "1%"; undefined when the value is neither. */
export function parsePercent(v: unknown): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v !== 'string') return undefined;
  const m = /^([0-9]+(?:\.[0-9]+)?)\s*%$/.exec(v.trim());
  return m ? Number(m[1]) / 100 : undefined;
}

const duration = (min: number, max: number) => {
  const message = (input: unknown) => `must be a duration from ${min} s to ${max} s: a number of seconds or a string like "10s", "500ms", "1m", ${got(input)}`;
  return z.union([z.number(), z.string()], { error: (i) => message(i.input) }).transform((v, ctx) => {
    const s = parseDurationSeconds(v);
    if (s === undefined || s < min || s > max) {
      ctx.addIssue({ code: 'custom', message: message(v), input: v });
      return z.NEVER;
    }
    return s;
  });
};

/**
 * A rate: "1%" (0% to 100%) or a fraction below 1. A bare 1 is refused rather
 * than read as 100%: `maxErrorRate: 1` almost certainly meant 1%.
 */
const fraction = (what: string) => {
  const message = (input: unknown) => `must be ${what}: a percentage like "1%" or a fraction below 1 like 0.01, ${got(input)}`;
  return z.union([z.number(), z.string()], { error: (i) => message(i.input) }).transform((v, ctx) => {
    const f = parsePercent(v);
    if (f === undefined || f < 0 || f > 1 || (typeof v === 'number' && f >= 1)) {
      ctx.addIssue({ code: 'custom', message: message(v), input: v });
      return z.NEVER;
    }
    return f;
  });
};

export const analysisSchema = z
  .object(
    {
      interval: duration(1, 3600).default(ANALYSIS_DEFAULTS.interval),
      minRequests: int(0, 1_000_000, 'a number of requests').default(ANALYSIS_DEFAULTS.minRequests),
      maxErrorRate: fraction('the highest error rate of the new revision').optional(),
      maxErrorRateIncrease: fraction("the highest rise of the new revision's error rate over stable's, in percentage points").optional(),
      maxLatencyRatio: number(1, 1000, "a ratio of the new revision's p99 latency to stable's").optional(),
      latencyFloorMs: int(0, 60_000, 'a number of milliseconds').default(ANALYSIS_DEFAULTS.latencyFloorMs),
      failureLimit: int(0, 1000, 'a number of measurements').default(ANALYSIS_DEFAULTS.failureLimit),
      inconclusiveLimit: int(0, 1000, 'a number of measurements').default(ANALYSIS_DEFAULTS.inconclusiveLimit),
      successCount: int(1, 1000, 'a number of measurements').default(ANALYSIS_DEFAULTS.successCount),
      onInconclusive: z.enum(['pause', 'fail'], { error: (i) => `must be "pause" or "fail", ${got(i.input)}` }).default(ANALYSIS_DEFAULTS.onInconclusive),
    },
    {
      error: (i) =>
        i.code === 'invalid_type' ? `must be a mapping of analysis settings (interval, minRequests, maxErrorRate, ...), ${got(i.input)}` : undefined,
    },
  )
  .strict()
  .superRefine((a, ctx) => {
    if (a.maxErrorRate === undefined && a.maxErrorRateIncrease === undefined && a.maxLatencyRatio === undefined) {
      ctx.addIssue({
        code: 'custom',
        message: 'must set at least one threshold: maxErrorRate (e.g. "1%"), maxErrorRateIncrease (e.g. "0.5%") or maxLatencyRatio (e.g. 1.5)',
        path: [],
      });
    }
  });

export type AnalysisInput = zod.input<typeof analysisSchema>;

// The parsed block is exactly what the gate takes.
export type AnalysisParsed = zod.output<typeof analysisSchema>;
const _isSpec: (a: AnalysisParsed) => AnalysisSpec = (a) => a;
void _isSpec;
