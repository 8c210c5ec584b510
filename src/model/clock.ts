/**
 * Time as the code reads it and waits on it, injected wherever a decision depends on it (as the
 * kubelet keeps a `clock.Clock` and never sleeps by itself): the machine's clock in production, a
 * manual one in tests, so that back-offs, deadlines and periods are tested without waiting.
 * Contract: a timer fires once `now()` has reached its due time, never before, and at most once.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Calls `fire` once `ms` have passed on this clock. It never keeps the process alive by itself. */
  setTimeout(fire: () => void, ms: number): Timer;
  /** Resolves once `ms` have passed on this clock (a waiter: it keeps the process alive meanwhile). */
  sleep(ms: number): Promise<void>;
}

export interface Timer {
  /** The timer does not fire, if it has not yet. */
  cancel(): void;
}

/**
 * Node's timers count from the event loop's cached time, which can be behind `Date.now()`: a timer
 * may fire a little before its due time, and then waits out the rest.
 */
function armUntil(due: number, fire: () => void, keepAlive: boolean): Timer {
  let timer: NodeJS.Timeout;
  const arm = () => {
    timer = setTimeout(() => (Date.now() < due ? arm() : fire()), Math.max(due - Date.now(), 0));
    if (!keepAlive) timer.unref();
  };
  arm();
  return { cancel: () => clearTimeout(timer) };
}

/** The machine's clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fire, ms) => armUntil(Date.now() + ms, fire, false),
  sleep: (ms) => new Promise((resolve) => armUntil(Date.now() + ms, resolve, true)),
};
