/** Helpers for the tests that drive the job service directly (no HTTP in between). */
import assert from 'node:assert/strict';
import { ServiceError } from '../../src/jobs/errors.ts';

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
