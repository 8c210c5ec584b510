import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { FencedError } from '../src/store/leases.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { until } from './support/until.ts';

// On PostgreSQL a fenced transaction is two round trips more than a statement: a leader's reads
// outside a transaction go without one (they change nothing); its single writes outside one are
// fenced in their own round trip (ucompute_fence, checked before them in the same query).

test("PostgreSQL: a deposed leader's reads answer, its writes are refused", {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async () => {
  const store = await openPostgresStore(await newPostgresDatabase());
  try {
    const a = (await store.leases.acquire('backend', 'a', 1))!;
    const asA = store.fenced({ lease: 'backend', epoch: a.epoch });
    // A fenced write is one round trip: its fence checked by the statement before it, sent with it.
    let sent = 0;
    const query = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      sent++;
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
    try {
      assert.equal(await asA.users.createUser('before', false), true);
    } finally {
      pg.Client.prototype.query = query;
    }
    assert.equal(sent, 1, 'round trips of one fenced write');
    await until(() => store.leases.acquire('backend', 'b', 60_000), { describe: 'b took the lease' });
    assert.equal((await asA.users.getUser('before'))?.name, 'before', 'a read outside a transaction');
    await assert.rejects(asA.users.createUser('after', false), FencedError);
    await assert.rejects(
      asA.transaction((tx) => tx.users.getUser('before')),
      FencedError,
      'a transaction, even one that only reads, is fenced',
    );
    assert.equal(await store.users.getUser('after'), undefined);
  } finally {
    await store.close();
  }
});
