/**
 * `fleetroll undo` during a blue-green rollout's scaleDownDelaySeconds: the
 * request to the running rollout to switch back: through its offer and an
 * ask (adapters/switchAsks.ts), or the fleet state where there are none.
 */
import { FleetrollError } from '../errors.js';
import type { FleetState, StateStore } from '../ports.js';
import type { SwitchBackAsks } from './types.js';
import { ENDED_STEPS } from './journal.js';

export type SwitchBackResult = { outcome: 'switched back'; ms: number } | { outcome: 'too late' };

/**
 * `fleetroll undo` while a blue-green rollout of the fleet waits out
 * scaleDownDelaySeconds (it offers, or its journal has a switch and no end
 * yet): asks that rollout to switch traffic back, and waits until
 * it says the old set serves again. The running deploy does the switch-back
 * (it holds the lock and knows both sets): one write and one reload per
 * nginx, then it drains and removes the new set. Returns undefined when no
 * such rollout is running, "too late" when it ended first (the old set was
 * already going), and otherwise the milliseconds from the request to the
 * reload in force, on this machine's clock.
 */
export async function requestSwitchBack(
  store: StateStore,
  o: { sleep: (ms: number) => Promise<void>; timeoutMs: number; asks?: SwitchBackAsks | undefined },
): Promise<SwitchBackResult | undefined> {
  const ofRollout = async (rollout: string | undefined) => (await store.journal()).filter((e) => e.rollout === rollout);
  // The offer is two inspects away, where the journal is an archive read: on
  // the path from the command to users back on the old set, it is looked at first.
  const offered = await o.asks?.offered().catch(() => undefined);
  let rollout = offered?.rollout;
  let state: FleetState | undefined;
  if (!rollout) {
    // No offer (an older rollout, or its offer failed): the journal says whether one waits.
    const [journal, read] = await Promise.all([store.journal(), o.asks ? undefined : store.read()]);
    const last = journal[journal.length - 1]?.rollout;
    const mine = journal.filter((e) => e.rollout === last);
    if (mine.some((e) => ENDED_STEPS.includes(e.step)) || !mine.some((e) => e.step === 'switch')) return undefined;
    rollout = last;
    state = read;
    if (!rollout || (!o.asks && !state)) return undefined;
  }
  // The deploy's journal entry for the switch-back is a write into the state: its watch wakes the wait.
  let poke: (() => void) | undefined;
  const stop = store.watch?.(() => poke?.());
  const t0 = Date.now();
  const clear = async () => {
    if (o.asks) return o.asks.unask();
    const s = await store.read();
    if (s?.switchBack) await store.write({ ...s, switchBack: undefined });
  };
  try {
    if (o.asks) await o.asks.ask(rollout, offered?.image);
    else await store.write({ ...state!, switchBack: true });
    for (;;) {
      const entries = await ofRollout(rollout);
      const back = entries.find((e) => e.step === 'switched-back');
      if (back) return { outcome: 'switched back', ms: Math.max(0, Date.parse(back.at) - t0) };
      if (entries.some((e) => ENDED_STEPS.includes(e.step))) {
        await clear();
        return { outcome: 'too late' };
      }
      if (Date.now() - t0 > o.timeoutMs) {
        await clear();
        throw new FleetrollError('E_SWITCH_BACK', `the running blue-green rollout did not switch back within ${o.timeoutMs / 1000} s`, {
          hint: 'see fleetroll status; the rollout may be stopping the old set already',
        });
      }
      await Promise.race([o.sleep(100), new Promise<void>((r) => (poke = r))]);
    }
  } finally {
    stop?.();
  }
}
