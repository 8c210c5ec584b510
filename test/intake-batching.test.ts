import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { reservationFor } from '../src/jobs/credit-check.ts';
import { createJobService } from '../src/jobs/service.ts';
import type { Product } from '../src/model/product.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import type { Store } from '../src/store/store.ts';
import { env, products } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { newPostgresDatabase } from './support/postgres.ts';
import { openTestStore, STORE_KINDS, type StoreKind } from './support/store.ts';
import { until } from './support/until.ts';

// Submissions that arrive while the intake commits wait for its next transaction, and a transaction
// reads each owner's credits once: concurrent transactions of one owner only queue for its locked
// allocations (PostgreSQL), and reading them again for every job of a batch is a round trip each.

const T0 = Date.UTC(2025, 0, 1);
const DAY = 24 * 3_600_000;
const alice = { username: 'alice', admin: false };
const PRICED: Product = { id: 'priced', category: 'priced', cpu: 1, memoryInGigs: 1, pricePerUnit: 1 };
const job = {
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: PRICED.id, category: PRICED.category },
  replicas: 1,
  timeAllocation: null,
};

/**
 * The store, with what the intake's (durable) transactions do counted: how many ran, the most at
 * once, and the wallet reads in them; the first waits for `release` before it runs.
 */
function counted(store: Store, release: Promise<void>) {
  const seen = { transactions: 0, atOnce: 0, mostAtOnce: 0, walletReads: 0 };
  const wrapped: Store = {
    ...store,
    async transaction(fn, options) {
      if (!options?.durable) return store.transaction(fn, options);
      seen.atOnce++;
      seen.mostAtOnce = Math.max(seen.mostAtOnce, seen.atOnce);
      try {
        if (seen.transactions++ === 0) await release;
        return await store.transaction(
          (tx) =>
            fn({
              ...tx,
              accounting: {
                ...tx.accounting,
                activeAllocations: (...args) => {
                  seen.walletReads++;
                  return tx.accounting.activeAllocations(...args);
                },
                creditReads: (pairs, at) => {
                  seen.walletReads += pairs.length;
                  return tx.accounting.creditReads(pairs, at);
                },
              },
            }),
          options,
        );
      } finally {
        seen.atOnce--;
      }
    },
  };
  return { store: wrapped, seen };
}

const MONITOR_MS = 1_000;
/** What each job of the test holds back until its first charge. */
const NEEDED = reservationFor(PRICED, 1, MONITOR_MS, null);

/**
 * A service on `kind` whose owner alice has `credits`, its first intake transaction held until
 * `submitDuring` has submitted `more` requests and each has joined the intake's batch.
 */
async function intakeOn(kind: StoreKind, credits: number) {
  const clock = manualClock(T0);
  const base = await openTestStore(kind);
  await base.accounting.grant('user:alice', PRICED.category, credits, T0 - DAY, T0 + DAY, T0);
  let release = () => {};
  const { store, seen } = counted(base, new Promise<void>((r) => (release = r)));
  let checked = 0;
  const service = createJobService({
    store,
    env: { ...env(), products: [...products, PRICED] },
    backend: dryBackend({ runForMs: null, clock }),
    clock,
    requireCredits: true,
    monitorIntervalMs: MONITOR_MS,
    // Asked by each request just before it joins the intake's batch: counts those that did.
    quotas: {
      check: async () => {
        checked++;
      },
    },
  });
  /** One request, then `more` while its commit waits; answers each one's ids or error. */
  async function submitDuring(more: number): Promise<(string[] | Error)[]> {
    const settled = (p: Promise<string[]>) => p.catch((e: Error) => e);
    const first = settled(service.create(alice, [job]));
    await until(() => seen.transactions === 1, { describe: 'the first commit started' });
    const others = Array.from({ length: more }, () => settled(service.create(alice, [job])));
    await until(() => checked === more + 1, { describe: 'every request checked and batched' });
    // The pushes into the batch follow their checks in the same turn of the event loop.
    await new Promise((r) => setImmediate(r));
    release();
    return Promise.all([first, ...others]);
  }
  return {
    seen,
    submitDuring,
    close: async () => {
      await service.stop();
      await base.close();
    },
  };
}

describe('intake batching', () => {
  for (const kind of STORE_KINDS) {
    test(`${kind}: jobs submitted during a commit share the next one, which reads the owner's credits once`, async () => {
      const intake = await intakeOn(kind, 1_000 * NEEDED);
      try {
        const answers = await intake.submitDuring(20);
        assert.equal(new Set(answers.flat()).size, 21, 'every request accepted, with a job of its own');
        assert.equal(intake.seen.mostAtOnce, 1, 'one intake transaction at a time');
        assert.equal(intake.seen.transactions, 2, 'the first request, then the 20 that came meanwhile');
        assert.equal(intake.seen.walletReads, 2, "alice's credits read once per transaction");
      } finally {
        await intake.close();
      }
    });

    test(`${kind}: a batch counts what its earlier jobs hold back: no overdraw within one commit`, async () => {
      // Credits for 3 jobs: the first takes one, the batch of 3 after it has room for 2.
      const intake = await intakeOn(kind, 3 * NEEDED);
      try {
        const answers = await intake.submitDuring(3);
        const refused = answers.filter((a) => a instanceof Error);
        assert.equal(answers.length - refused.length, 3);
        assert.equal(refused.length, 1);
        assert.match(refused[0]!.message, /credits/);
      } finally {
        await intake.close();
      }
    });
  }
});

test('PostgreSQL: an intake flush of priced jobs is 2 round trips (the credits with the begin, the jobs with the commit)', {
  skip: !STORE_KINDS.includes('postgres') && 'PostgreSQL is not installed',
}, async () => {
  const url = await newPostgresDatabase();
  const store = await openPostgresStore(url);
  const clock = manualClock(T0);
  // Two categories: both read in the one statement.
  await store.accounting.grant('user:alice', PRICED.category, 1_000 * NEEDED, T0 - DAY, T0 + DAY, T0);
  await store.accounting.grant('user:alice', 'u1-standard', 1e9, T0 - DAY, T0 + DAY, T0);
  // A fold due: more than HELD_CHANGES_KEPT rows of held credits (it goes with the commit).
  const setup = new pg.Client({ connectionString: url });
  await setup.connect();
  await setup.query(
    "insert into held_credits (account, category, credits) select 'user:alice', $1, 0 from generate_series(1, 20)",
    [PRICED.category],
  );
  await setup.end();
  const service = createJobService({
    store,
    env: { ...env(), products: [...products, PRICED] },
    backend: dryBackend({ runForMs: null, clock }),
    clock,
    requireCredits: true,
    monitorIntervalMs: MONITOR_MS,
  });
  // Every statement sent on the connection that runs the intake's transaction, begin to commit.
  const sent: { client: unknown; text: string }[] = [];
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text?: string })?.text;
    sent.push({ client: this, text: text ?? '' });
    return (query as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof query;
  try {
    const ids = await service.create(alice, [
      job,
      job,
      job,
      { ...job, product: { id: 'u1-standard-1', category: 'u1-standard' } },
    ]);
    assert.equal(ids.length, 4);
    const begin = sent.findIndex((s) => /^begin\b/.test(s.text));
    assert.ok(begin >= 0, 'a transaction began');
    const ours = sent.slice(begin).filter((s) => s.client === sent[begin]!.client);
    const end = ours.findIndex((s) => /\bcommit$/.test(s.text));
    assert.ok(end >= 0, 'it committed');
    assert.deepEqual(
      ours.slice(0, end + 1).map((s) => s.text.slice(0, 60).replace(/\s+/g, ' ')),
      [ours[0]!.text.slice(0, 60).replace(/\s+/g, ' '), ours[end]!.text.slice(0, 60).replace(/\s+/g, ' ')],
      'begin with the credits read, then the jobs with the commit',
    );
    assert.match(ours[0]!.text, /from allocations[\s\S]*for update;[\s\S]*from held_credits/);
    assert.match(
      ours[end]!.text,
      /insert into jobs[\s\S]*delete from held_credits|delete from held_credits[\s\S]*insert into jobs/,
    );
  } finally {
    pg.Client.prototype.query = query;
    await service.stop();
    await store.close();
  }
});
