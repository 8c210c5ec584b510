/**
 * Waiting on facts: a test that needs something to have happened asks for it until it holds or
 * its time is up, and then fails saying what it waited for, what it saw last and the last error.
 */
import assert from 'node:assert/strict';
import { inspect } from 'node:util';

/** Questions asked right after pending I/O callbacks ran, before waiting `every` between them. */
const QUICK_ASKS = 50;

export interface UntilOptions {
  /** What is waited for, as the failure says it ("the job runs"). */
  describe: string;
  /** How long to ask, in milliseconds of real time. Default 10 s. */
  timeout?: number;
  /** How long between two questions, after the first few (asked as soon as pending I/O ran). Default 20 ms. */
  every?: number;
}

/**
 * Asks `observe` until it answers a truthy value, and returns that value. A thrown error counts
 * as "not yet". On timeout the failure names `describe`, the last value and the last error.
 */
export async function until<T>(
  observe: () => T | Promise<T>,
  options: UntilOptions,
): Promise<Exclude<T, false | null | undefined | 0 | ''>> {
  const timeout = options.timeout ?? 10_000;
  const every = options.every ?? 20;
  const deadline = Date.now() + timeout;
  let last: unknown;
  let error: unknown;
  for (let asked = 1; ; asked++) {
    try {
      last = await observe();
      error = undefined;
      if (last) return last as Exclude<T, false | null | undefined | 0 | ''>;
    } catch (e) {
      error = e;
    }
    if (Date.now() >= deadline) break;
    // What is in memory often holds once pending callbacks ran; files and processes take longer.
    if (asked <= QUICK_ASKS) await new Promise((resolve) => setImmediate(resolve));
    else
      await new Promise((resolve) =>
        setTimeout(resolve, Math.min(every, Math.max(deadline - Date.now(), 1))),
      );
  }
  const seen = `last value: ${inspect(last, { depth: 4, breakLength: Infinity })}`;
  const failed =
    error === undefined ? '' : `; last error: ${error instanceof Error ? error.stack : inspect(error)}`;
  assert.fail(`${options.describe}: not within ${timeout} ms (${seen}${failed})`);
}
