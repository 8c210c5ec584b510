import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openPostgresDatabase } from '../src/store/postgres/database.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';

// As on SQLite, only durable transactions (accepting jobs) wait for the disk; the lease's
// connection always does (a takeover lost by a crash of the server would fence nothing). A durable
// transaction commits without waiting, releasing its locks, and answers once a synchronous commit
// after it is on disk (postgres/transaction.ts): the WAL is synced past its commit by then.

test('PostgreSQL: durable transactions answer once their commit is on disk, the others do not wait for it', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async () => {
  const database = await openPostgresDatabase(await newPostgresDatabase());
  const setting = async (rows: Promise<Record<string, unknown>[]>) => (await rows)[0]?.synchronous_commit;
  /** A transaction that writes to the WAL: where its commit will be written, at least. */
  const written = (durable: boolean) =>
    database.transaction(
      async (c) => {
        const [r] = await c.query(
          "select pg_logical_emit_message(true, 'test', 'x'), pg_current_wal_insert_lsn()::text as lsn",
        );
        return r!.lsn as string;
      },
      { durable },
    );
  const synced = async (lsn: string) =>
    (await database.outside.query('select pg_current_wal_flush_lsn() >= ?::pg_lsn as synced', lsn))[0]!
      .synced;
  try {
    for (let i = 0; i < 5; i++)
      assert.equal(await synced(await written(true)), true, `durable transaction ${i}`);
    assert.equal(await setting(database.transaction((c) => c.query('show synchronous_commit'))), 'off');
    assert.equal(await setting(database.outside.query('show synchronous_commit')), 'off');
    assert.equal(await setting(database.aside.query('show synchronous_commit')), 'on');
    // The durable transaction's wait leaves the connection as it was when it goes back to the pool.
    await written(true);
    assert.equal(await setting(database.outside.query('show synchronous_commit')), 'off');
  } finally {
    await database.end();
  }
});
