/** Helpers for the tests that drive the job service directly (no HTTP in between). */
import assert from 'node:assert/strict';
import { ServiceError } from '../../src/jobs/errors.ts';

/** Lets pending I/O callbacks and timers-of-zero run, a bounded number of times, until `check` holds. */
export async function until(what: string, check: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 2000; i++) {
    if (await check()) return;
    await new Promise((resolve) => setImmediate(resolve));
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
