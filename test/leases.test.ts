import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { FencedError } from '../src/store/leases.ts';
import { JOB_EVENTS_LOCK } from '../src/store/postgres/database.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import type { Store } from '../src/store/store.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
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

/**
 * A PostgreSQL store whose lease `a` took for `ttlMs`, and a fenced transaction of a's held in a
 * statement (after writing job events, with `events`: it holds their lock): `statement` says how
 * that ended.
 */
async function heldByA(t: { after(fn: () => Promise<void>): void }, ttlMs: number, events = false) {
  const url = await newPostgresDatabase();
  const store = await openPostgresStore(url);
  t.after(() => store.close());
  assert.equal((await store.leases.acquire(LEASE, 'a', ttlMs))?.epoch, 1);
  const holder = new pg.Client({ connectionString: url });
  await holder.connect();
  holder.on('error', () => {});
  t.after(() => holder.end().catch(() => {}));
  await holder.query('begin');
  await holder.query('select epoch from leases where name = $1 for key share', [LEASE]);
  if (events) await holder.query('select pg_advisory_xact_lock($1::bigint)', [JOB_EVENTS_LOCK]);
  // pg_sleep stands for a statement whose client stopped (kill -STOP): to the server it is active,
  // so never idle in transaction.
  const statement = holder.query('select pg_sleep(600)').then(
    () => 'finished',
    (error: Error) => error.message,
  );
  return { store, statement, url };
}

const onPostgres = { skip: !POSTGRES_TESTED && 'PostgreSQL is not installed', timeout: 60_000 };

test(
  "a takeover ends the expired holder's transaction, which the server would keep while its statement runs",
  onPostgres,
  async (t) => {
    const { store, statement } = await heldByA(t, 1);
    const b = await until(() => store.leases.acquire(LEASE, 'b', LONG), {
      describe: 'b takes the lease',
      timeout: 30_000,
    });
    assert.deepEqual([b.holder, b.epoch], ['b', 2]);
    assert.match(await statement, /terminat/);
  },
);

test(
  "while the lease runs, another replica's takeover leaves the holder's transactions alone",
  onPostgres,
  async (t) => {
    const { store, statement } = await heldByA(t, LONG);
    let ended = false;
    void statement.then(() => {
      ended = true;
    });
    assert.equal(await store.leases.acquire(LEASE, 'b', LONG), undefined, 'held by a');
    assert.equal(ended, false, "a's transaction runs on");
    assert.equal((await store.leases.current(LEASE))?.holder, 'a');
  },
);

test(
  "a takeover waits for no pool connection: all of them may wait for the paused holder's events lock",
  onPostgres,
  async (t) => {
    const { store, statement, url } = await heldByA(t, 1, true);
    // Every connection of the pool in a transaction whose job events wait for a's lock (a replica
    // taking jobs while the paused leader holds it).
    const waiting = Array.from({ length: 10 }, (_, i) =>
      store.transaction(async (tx) => {
        await tx.jobs.rename(`job-${i}`, 'renamed');
      }),
    );
    const observer = new pg.Client({ connectionString: url });
    await observer.connect();
    t.after(() => observer.end());
    await until(
      async () => {
        const { rows } = await observer.query(
          `select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory'`,
        );
        return (rows[0] as { n: number }).n >= 10;
      },
      { describe: "the pool's 10 connections wait for the events lock" },
    );
    const b = await until(() => store.leases.acquire(LEASE, 'b', LONG), {
      describe: 'b takes the lease',
      timeout: 30_000,
    });
    assert.deepEqual([b.holder, b.epoch], ['b', 2]);
    assert.match(await statement, /terminat/);
    await Promise.all(waiting);
  },
);
