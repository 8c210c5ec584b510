import assert from 'node:assert/strict';
import { test } from 'node:test';
import { openPostgresDatabase } from '../src/store/postgres/database.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';

// As on SQLite, only durable transactions (accepting jobs) wait for the disk; the lease's
// connection always does (a takeover lost by a crash of the server would fence nothing).

test('PostgreSQL: durable transactions and the lease commit synchronously, the others do not wait for the disk', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async () => {
  const database = await openPostgresDatabase(await newPostgresDatabase());
  const setting = async (rows: Promise<Record<string, unknown>[]>) => (await rows)[0]?.synchronous_commit;
  try {
    assert.equal(
      await setting(database.transaction((c) => c.query('show synchronous_commit'), { durable: true })),
      'on',
    );
    assert.equal(await setting(database.transaction((c) => c.query('show synchronous_commit'))), 'off');
    assert.equal(await setting(database.outside.query('show synchronous_commit')), 'off');
    assert.equal(await setting(database.aside.query('show synchronous_commit')), 'on');
    // The setting is the transaction's own: the connection goes back to the pool as it was.
    await database.transaction((c) => c.query('select 1'), { durable: true });
    assert.equal(await setting(database.outside.query('show synchronous_commit')), 'off');
  } finally {
    await database.end();
  }
});
