import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { dryBackend } from '../src/backends/dry/dry-backend.ts';
import { reservationFor } from '../src/jobs/credit-check.ts';
import { ServiceError } from '../src/jobs/errors.ts';
import { createJobService } from '../src/jobs/service.ts';
import { NO_CREDITS_STATUS } from '../src/plugins/accounting.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { env, products } from './support/fixtures.ts';
import { manualClock } from './support/manual-clock.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { PER_MINUTE } from './support/products.ts';
import { rejectsWith } from './support/service.ts';
import { openTestStore, STORE_KINDS, type StoreKind } from './support/store.ts';
import { until } from './support/until.ts';

// The audit's overdraw: an owner with 2 credits started jobs at once and ended at −2. Each active
// job now holds back what it can spend before its next charge, so no way of starting jobs spends
// more than the owner has.

const T0 = Date.UTC(2025, 0, 1);
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const alice = { username: 'alice', admin: false };
const job = (replicas = 1) => ({
  application: { name: 'mpi-hello', version: '1.0' },
  product: { id: PER_MINUTE.id, category: PER_MINUTE.category },
  replicas,
  timeAllocation: null,
});

async function harnessOn(kind: StoreKind) {
  const clock = manualClock(T0);
  const store = await openTestStore(kind);
  const service = createJobService({
    store,
    env: { ...env(), products: [...products, PER_MINUTE] },
    backend: dryBackend({ runForMs: null, clock }),
    clock,
    requireCredits: true,
  });
  await store.accounting.grant('user:alice', 'per-minute', 2, T0 - DAY, T0 + 30 * DAY, T0);
  const balance = async () => (await service.wallets(alice))[0]!.balance;
  /** Monitoring passes once a minute (as the service's every second would), up to `minutes`. */
  const monitorUntil = async (minutes: number) => {
    for (let m = Math.floor((clock.now() - T0) / MINUTE) + 1; m <= minutes; m++) {
      await clock.advanceTo(T0 + m * MINUTE);
      await service.monitor();
    }
  };
  const runs = (id: string) =>
    until(async () => (await service.retrieve(alice, id)).status.state === 'RUNNING', {
      describe: `${id} runs`,
    });
  return { clock, store, service, balance, monitorUntil, runs };
}

/** Creates each spec in its own request, all at once; answers the ids of the accepted and the 402s. */
async function createAtOnce(h: Awaited<ReturnType<typeof harnessOn>>, specs: unknown[]) {
  const results = await Promise.allSettled(specs.map((spec) => h.service.create(alice, [spec])));
  const accepted = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
  const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason] : []));
  for (const e of refused) {
    assert.ok(e instanceof ServiceError && e.status === 402, String(e));
  }
  return { accepted, refused: refused as ServiceError[] };
}

for (const kind of STORE_KINDS) {
  describe(`credit reservations on ${kind}`, () => {
    const harness = () => harnessOn(kind);
    test('2 credits and 20 jobs started at once: 2 run, 18 are refused, and the balance ends at 0', async () => {
      const h = await harness();
      const { accepted, refused } = await createAtOnce(
        h,
        Array.from({ length: 20 }, () => job()),
      );
      assert.equal(accepted.length, 2);
      assert.equal(refused.length, 18);
      assert.match(
        refused[0]!.message,
        /user alice has 2 credits left for per-minute, of which its active jobs hold 2 until their next charge, and this job needs 1/,
      );
      const state = async (id: string) => (await h.service.retrieve(alice, id)).status.state;
      await until(async () => (await Promise.all(accepted.map(state))).every((s) => s === 'RUNNING'), {
        describe: 'both run',
      });

      await h.monitorUntil(5);
      for (const id of accepted) {
        assert.equal(await state(id), 'SUCCESS');
        assert.equal((await h.service.retrieve(alice, id)).updates.at(-1)!.status, NO_CREDITS_STATUS);
      }
      assert.equal(await h.balance(), 0);
    });

    test('requests started one tick apart, and many jobs in one request, cannot overdraw either', async () => {
      const h = await harness();
      const staggered = Array.from({ length: 10 }, async (_, i) => {
        for (let t = 0; t < i; t++) await new Promise((resolve) => setImmediate(resolve));
        return h.service.create(alice, [job()]);
      });
      const settled = await Promise.allSettled(staggered);
      const accepted = settled.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
      assert.equal(accepted.length, 2);
      // A request whose jobs do not all fit is refused whole, naming the first that does not.
      await rejectsWith(h.service.create(alice, [job(), job()]), 402, /^items\[0\]/);
      // Charged from when they run: the clock moves on once both do (not before, under load).
      for (const id of accepted) await h.runs(id);
      await h.monitorUntil(5);
      assert.equal(await h.balance(), 0);
    });

    test('a job needing more than is left is refused; one that fits holds back its own share', async () => {
      const h = await harness();
      await rejectsWith(h.service.create(alice, [job(3)]), 402, /this job needs 3|no credits left/);
      const [two] = await h.service.create(alice, [job(2)]);
      assert.ok(two);
      await rejectsWith(h.service.create(alice, [job()]), 402, /hold 2 until their next charge/);
    });

    test('a lone job stopped for lack of credits pays whole periods only: it never overdraws', async () => {
      const h = await harness();
      const [id] = await h.service.create(alice, [job()]);
      await h.runs(id!);
      await h.monitorUntil(1);
      assert.equal((await h.service.retrieve(alice, id!)).status.state, 'RUNNING');
      assert.equal(await h.balance(), 1);
      await h.monitorUntil(2);
      assert.equal((await h.service.retrieve(alice, id!)).status.outcome?.kind, 'OUT_OF_CREDITS');
      assert.equal(await h.balance(), 0);
    });

    test('a job ended by its owner pays its started period, out of what it held back', async () => {
      const h = await harness();
      const [id] = await h.service.create(alice, [job()]);
      await h.runs(id!);
      await h.clock.advanceTo(T0 + MINUTE / 2);
      await h.service.terminate(alice, [id!]);
      assert.equal(await h.balance(), 1);
      // Its reservation ended with it: the next job may hold the credit that is left.
      const [next] = await h.service.create(alice, [job()]);
      assert.ok(next);
    });

    test('a reservation covers the periods one monitoring interval can cross', () => {
      assert.equal(reservationFor(PER_MINUTE, 2, 1000, null), 2);
      assert.equal(reservationFor(PER_MINUTE, 2, MINUTE, null), 2);
      assert.equal(reservationFor(PER_MINUTE, 2, 90_000, null), 4);
      assert.equal(reservationFor({ ...PER_MINUTE, unitOfPrice: 'CREDITS_PER_HOUR' }, 1, 90_000, null), 1);
    });
  });
}

test('postgres: two replicas accepting jobs at once for one owner cannot overdraw together', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async () => {
  const url = await newPostgresDatabase();
  const clock = manualClock(T0);
  const replicas = await Promise.all(
    [0, 1].map(async () => {
      const store = await openPostgresStore(url);
      const service = createJobService({
        store,
        env: { ...env(), products: [...products, PER_MINUTE] },
        backend: dryBackend({ runForMs: null, clock }),
        clock,
        requireCredits: true,
      });
      return { store, service };
    }),
  );
  try {
    await replicas[0]!.store.accounting.grant('user:alice', 'per-minute', 2, T0 - DAY, T0 + 30 * DAY, T0);
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) => replicas[i % 2]!.service.create(alice, [job()])),
    );
    assert.equal(results.filter((r) => r.status === 'fulfilled').length, 2);
    assert.equal(await replicas[0]!.store.jobs.heldCredits({ createdBy: 'alice' }, 'per-minute'), 2);
  } finally {
    for (const { store, service } of replicas) {
      await service.stop();
      await store.close();
    }
  }
});
