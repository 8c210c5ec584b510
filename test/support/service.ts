/** Helpers for the tests that drive the job service directly (no HTTP in between). */
import assert from 'node:assert/strict';
import { ServiceError } from '../../src/jobs/errors.ts';

/** Waits, a bounded time, until `check` holds. */
export async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  // Turns of the event loop first (an in-memory store answers in one), then up to 30 s of time (a
  // store over the network, a busy machine).
  const deadline = Date.now() + 30_000;
  for (let i = 0; i < 2000 || Date.now() < deadline; i++) {
    if (await check()) return;
    await new Promise((resolve) => (i < 2000 ? setImmediate(resolve) : setTimeout(resolve, 10)));
  }
  assert.fail(`never happened: ${what}`);
}

/** Asserts that `promise` rejects with a ServiceError of this HTTP status (and message, if given). */
export async function rejectsWith(
  promise: Promise<unknown>,
  status: number,
  message?: RegExp,
): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    assert.ok(e instanceof ServiceError, String(e));
    assert.equal(e.status, status, e.message);
    if (message) assert.match(e.message, message);
    return true;
  });
}
