import assert from 'node:assert/strict';
import { describe, type TestContext, test } from 'node:test';
import pg from 'pg';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { createJobService } from '../src/jobs/service.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { HELD_CHANGES_KEPT } from '../src/store/rows.ts';
import { openSqliteStore } from '../src/store/sqlite/store.ts';
import type { Store, StoreParts } from '../src/store/store.ts';
import { env, products } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { newPostgresDatabase } from './support/postgres.ts';
import { PER_MINUTE } from './support/products.ts';
import { STORE_KINDS, type StoreKind } from './support/store.ts';
import { until } from './support/until.ts';

// The periodic charge (each running job, every minute) reads what it needs of its job — its state
// and what was charged so far — not the whole row with its JSON; and what its owner's active jobs
// hold back from a handful of rows that does not grow with their number: with 10,000 live jobs of
// one owner, a whole row and a sum over 10,000 index entries per charge made a minute's charges
// quadratic (4.5–16 ms a charge). And a pass's charges go in one batch, not one at a time.
// Counted, not timed.

const T0 = Date.UTC(2025, 0, 1);
const MINUTE = 60_000;
const alice = { username: 'alice', admin: false };
const JOBS = 3 * HELD_CHANGES_KEPT;

/** A store of `kind` and a way to count an owner's rows of held credits beside it. */
async function storeOf(
  t: TestContext,
  kind: StoreKind,
): Promise<{ store: Store; heldRows: () => Promise<number> }> {
  const COUNT = "select count(*) as n from held_credits where account = 'user:alice'";
  if (kind === 'sqlite') {
    const store = openSqliteStore(':memory:');
    t.after(() => store.close());
    return { store, heldRows: async () => Number((store.database.prepare(COUNT).get() as { n: number }).n) };
  }
  const url = await newPostgresDatabase();
  const store = await openPostgresStore(url);
  const raw = new pg.Client({ connectionString: url });
  await raw.connect();
  t.after(async () => {
    await raw.end();
    await store.close();
  });
  return { store, heldRows: async () => Number((await raw.query(COUNT)).rows[0].n) };
}

/** Counts the calls of `tx.jobs` methods made inside the store's transactions, by name. */
function countTransactionReads(store: Store): Map<string, number> {
  const calls = new Map<string, number>();
  const transaction = store.transaction.bind(store);
  store.transaction = (fn, options) =>
    transaction((tx) => {
      const jobs = Object.fromEntries(
        Object.entries(tx.jobs).map(([name, method]) => [
          name,
          (...args: unknown[]) => {
            calls.set(name, (calls.get(name) ?? 0) + 1);
            return (method as (...a: unknown[]) => unknown)(...args);
          },
        ]),
      ) as unknown as StoreParts['jobs'];
      return fn({ ...tx, jobs });
    }, options);
  return calls;
}

for (const kind of STORE_KINDS) {
  describe(`charges (${kind})`, () => {
    test(`${JOBS} running jobs of one owner charged each minute: no whole row read, and their held credits from at most ${HELD_CHANGES_KEPT + 1} rows`, async (t) => {
      const { store, heldRows } = await storeOf(t, kind);
      const clock = manualClock(T0);
      const service = createJobService({
        store,
        env: { ...env(), products: [...products, PER_MINUTE] },
        backend: dryBackend({ runForMs: null, clock }),
        clock,
        requireCredits: true,
        // Only the passes the test asks for.
        monitorIntervalMs: 3_600_000,
      });
      t.after(() => service.stop());
      await store.accounting.grant('user:alice', 'per-minute', 1_000_000, T0 - MINUTE, T0 + 100 * MINUTE, T0);
      const spec = {
        application: { name: 'mpi-hello', version: '1.0' },
        product: { id: 'per-minute', category: 'per-minute' },
        timeAllocation: null,
      };
      const ids = await service.create(
        alice,
        Array.from({ length: JOBS }, () => spec),
      );
      const admin = { username: 'admin', admin: true };
      await until(
        async () =>
          (await Promise.all(ids.map(async (id) => (await service.retrieve(admin, id)).status.state))).every(
            (s) => s === 'RUNNING',
          ),
        { describe: `all ${JOBS} running` },
      );
      // Each job holds back one monitoring interval's periods (60 credits): accepted, one change each.
      const held = await store.jobs.heldCredits({ createdBy: 'alice' }, 'per-minute');
      assert.equal(held, JOBS * 60);
      assert.ok((await heldRows()) >= JOBS, 'each accepted job is one change of the held credits');

      const calls = countTransactionReads(store);
      for (let minute = 1; minute <= 3; minute++) {
        await clock.advanceTo(T0 + minute * MINUTE + 1000);
        await service.monitor();
      }
      const charged = await store.accounting.charges('user:alice', 0, Number.MAX_SAFE_INTEGER);
      assert.equal(charged.length, 3 * JOBS, 'each job charged once a minute');
      // A pass's charges are written together: their jobs' states and charged periods read in one
      // call, the owner's held credits folded once (one at a time, it was JOBS of each a minute).
      assert.equal(calls.get('get') ?? 0, 0, 'no whole row read by a charge');
      assert.equal(calls.get('chargedSoFar'), 3, 'one read of the charged jobs a pass');
      assert.equal(calls.get('heldCredits') ?? 0, 0);
      assert.equal(calls.get('foldHeldCredits'), 3, 'the held credits folded once a pass');
      assert.ok((await heldRows()) <= HELD_CHANGES_KEPT + 1, `held credits in ${await heldRows()} rows`);
      assert.equal(await store.jobs.heldCredits({ createdBy: 'alice' }, 'per-minute'), held);

      // Ended, they hold nothing back.
      await service.terminate(alice, ids);
      await until(async () => (await store.jobs.heldCredits({ createdBy: 'alice' }, 'per-minute')) === 0, {
        describe: 'nothing held once all ended',
      });
    });
  });
}
