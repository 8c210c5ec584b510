import assert from 'node:assert/strict';
import { test } from 'node:test';
import { leadership } from '../src/jobs/leadership.ts';
import { manualClock } from './support/manual-clock.ts';
import { openTestStore } from './support/store.ts';
import { until } from './support/until.ts';

// A leader renews every few seconds, but a replica waiting for a crashed leader's lease to run out
// asks more often: the new leader comes within `retryMs` of the lease's end, not within `renewMs`.

test("a follower asks for the lease every retryMs: it leads at the first ask after a crashed leader's lease ran out", async () => {
  const store = await openTestStore('sqlite');
  const clock = manualClock();
  // A leader that crashed: it never renews its lease.
  const crashed = (await store.leases.acquire('backend', 'crashed', 60_000))!;
  let asked = 0;
  let leading = false;
  const follower = leadership({
    store: {
      ...store,
      leases: {
        ...store.leases,
        acquire: async (...args) => {
          const lease = await store.leases.acquire(...args);
          asked++;
          return lease;
        },
      },
    },
    lease: 'backend',
    holder: 'follower',
    ttlMs: 15_000,
    renewMs: 2_000,
    retryMs: 250,
    clock,
    async lead() {
      leading = true;
      return async () => {};
    },
  });
  try {
    follower.start();
    await until(() => asked === 1, { describe: 'the follower asked once, refused' });
    // The crashed leader's lease runs out (as at its end; 0 is long past).
    await store.leases.release('backend', 'crashed');
    assert.equal(leading, false);
    await clock.advance(250);
    await until(() => leading, { describe: 'the follower leads after one retry period' });
    assert.equal(follower.epoch, crashed.epoch + 1);
  } finally {
    await follower.stop();
    await store.close();
  }
});
