import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';

// The PostgreSQL store prepares its statements once per connection. A replica's prepared
// `select *` must survive another replica's migration adding a column (a rolling upgrade).

test("PostgreSQL: prepared statements survive a column added by another replica's migration", {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async (t) => {
  const url = await newPostgresDatabase();
  const store = await openPostgresStore(url);
  t.after(() => store.close());
  await store.users.createUser('ann', false);
  // Prepared on every pooled connection it ran on (the pool hands out its idle ones in turn).
  for (let i = 0; i < 20; i++) assert.equal((await store.users.getUser('ann'))?.name, 'ann');
  const other = new pg.Client({ connectionString: url });
  await other.connect();
  t.after(() => other.end());
  await other.query('alter table users add column nickname text');
  for (let i = 0; i < 20; i++) assert.equal((await store.users.getUser('ann'))?.name, 'ann');
});
