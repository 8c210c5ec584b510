import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { FencedError } from '../src/store/leases.ts';
import type { Store } from '../src/store/store.ts';
import { openTestStore, STORE_KINDS } from './support/store.ts';
import { until } from './support/until.ts';

/** The leader lease and its fencing, on both stores: a deposed leader writes nothing. */

const LEASE = 'backend';
const LONG = 60_000;

for (const kind of STORE_KINDS) {
  describe(`leases on ${kind}`, () => {
    const stores: Store[] = [];
    after(async () => {
      for (const store of stores) await store.close();
    });
    const open = async () => {
      const store = await openTestStore(kind);
      stores.push(store);
      return store;
    };
    /** Waits out `holder`'s lease (taken with a ttl of 1 ms) and takes it for `next`. */
    const takeOver = (store: Store, next: string) =>
      until(() => store.leases.acquire(LEASE, next, LONG), {
        describe: `${next} takes the lease`,
        timeout: 30_000,
      });

    test('one holder at a time; renewing keeps the epoch, another holder raises it', async () => {
      const store = await open();
      const a = await store.leases.acquire(LEASE, 'a', LONG);
      assert.equal(a?.epoch, 1);
      assert.equal(await store.leases.acquire(LEASE, 'b', LONG), undefined, 'held by a');
      assert.equal((await store.leases.acquire(LEASE, 'a', LONG))?.epoch, 1, 'a renews');
      await store.leases.release(LEASE, 'a');
      const b = await store.leases.acquire(LEASE, 'b', LONG);
      assert.deepEqual([b?.holder, b?.epoch], ['b', 2]);
      assert.equal(await store.leases.acquire(LEASE, 'a', LONG), undefined, 'a was deposed');
      assert.equal((await store.leases.current(LEASE))?.holder, 'b');
    });

    test('an expired lease is taken by another holder', async () => {
      const store = await open();
      assert.equal((await store.leases.acquire(LEASE, 'a', 1))?.epoch, 1);
      const b = await takeOver(store, 'b');
      assert.equal(b.epoch, 2);
    });

    test("a deposed leader's writes are refused and write nothing; the new leader's pass", async () => {
      const store = await open();
      const a = (await store.leases.acquire(LEASE, 'a', 1))!;
      const asA = store.fenced({ lease: LEASE, epoch: a.epoch });
      assert.equal(await asA.users.createUser('before', false), true, 'a writes while it leads');
      const b = await takeOver(store, 'b');

      await assert.rejects(asA.users.createUser('after-call', false), FencedError);
      await assert.rejects(
        asA.transaction(async (tx) => {
          await tx.users.createUser('after-transaction', false);
        }),
        FencedError,
      );
      const asB = store.fenced({ lease: LEASE, epoch: b.epoch });
      await asB.transaction(async (tx) => {
        await tx.users.createUser('by-b', false);
      });
      const written = async (name: string) => (await store.users.getUser(name)) !== undefined;
      assert.deepEqual(
        await Promise.all(['before', 'after-call', 'after-transaction', 'by-b'].map(written)),
        [true, false, false, true],
      );
    });

    test('a fence on a lease nobody holds refuses', async () => {
      const store = await open();
      await assert.rejects(
        store.fenced({ lease: 'none', epoch: 1 }).users.createUser('x', false),
        FencedError,
      );
      assert.equal(await store.users.getUser('x'), undefined);
    });
  });
}
