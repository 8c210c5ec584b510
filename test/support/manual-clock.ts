/**
 * A clock the test moves by hand (the kubelet's fake clock): time stands still until `advance`,
 * which fires the timers due meanwhile in the order they fall due, each at its own time.
 */
import type { Clock, Timer } from '../../src/model/clock.ts';

export interface ManualClock extends Clock {
  /**
   * Moves time forward by `ms`: each timer due by then fires at its due time, in due order, and
   * what it started runs until it waits for I/O or time before the next one fires.
   */
  advance(ms: number): Promise<void>;
  /** `advance` to the instant `at`, which must not be in the past. */
  advanceTo(at: number): Promise<void>;
  /** Timers armed and not yet fired or cancelled. */
  pending(): number;
  /** When the earliest pending timer is due; undefined when none is. */
  nextDue(): number | undefined;
}

interface Pending {
  due: number;
  order: number;
  fire: () => void;
}

export function manualClock(start = Date.UTC(2025, 0, 1)): ManualClock {
  let now = start;
  let armed = 0;
  const timers = new Set<Pending>();
  const earliest = () =>
    [...timers].reduce<Pending | undefined>(
      (first, t) =>
        !first || t.due < first.due || (t.due === first.due && t.order < first.order) ? t : first,
      undefined,
    );
  const setTimer = (fire: () => void, ms: number): Timer => {
    const timer = { due: now + Math.max(ms, 0), order: armed++, fire };
    timers.add(timer);
    return { cancel: () => timers.delete(timer) };
  };
  async function advance(ms: number): Promise<void> {
    const target = now + ms;
    for (let next = earliest(); next && next.due <= target; next = earliest()) {
      timers.delete(next);
      now = next.due;
      next.fire();
      await new Promise((resolve) => setImmediate(resolve));
    }
    now = target;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return {
    now: () => now,
    setTimeout: setTimer,
    sleep: (ms) => new Promise((resolve) => setTimer(resolve, ms)),
    advance,
    advanceTo(at) {
      if (at < now) throw new Error(`the clock does not go back (${at} is before ${now})`);
      return advance(at - now);
    },
    pending: () => timers.size,
    nextDue: () => earliest()?.due,
  };
}
