import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { TOKEN_ID_LENGTH } from '../src/store/directory.ts';
import { openPostgresStore } from '../src/store/postgres/store.ts';
import { hashToken } from '../src/store/users.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';
import { until } from './support/until.ts';

// On PostgreSQL each replica keeps who a token names and a user's memberships (every API call asks
// both): a change made on one replica must be refused on the others at once, not after a lifetime.
// Two stores on one database are two replicas' stores.

test('PostgreSQL: a token revoked or a member removed on one replica is refused on another', {
  skip: !POSTGRES_TESTED && 'PostgreSQL is not installed',
}, async (t) => {
  const url = await newPostgresDatabase();
  const [a, b] = [await openPostgresStore(url), await openPostgresStore(url)];
  t.after(() => Promise.all([a.close(), b.close()]));
  // A tool of the test's own that changes rows without announcing it (triggers off for it).
  const quiet = new pg.Client({ connectionString: url });
  await quiet.connect();
  t.after(() => quiet.end());
  await quiet.query("set session_replication_role = 'replica'");

  await a.users.createUser('ann', false);
  await a.users.createProject('p1', 'P1');
  await a.users.setMember('p1', 'ann', 'USER');
  const token = await a.users.createToken('ann', 'laptop');

  // b answers from its cache once it keeps them: a change it is not told of goes unseen.
  await until(
    async () => {
      const before = (await b.users.userForToken(token))?.admin;
      await quiet.query('update users set admin = 1 - admin where name = $1', ['ann']);
      return (await b.users.userForToken(token))?.admin === before;
    },
    { describe: "b answers who the token names from its cache (the user's admin flag changed unannounced)" },
  );
  await until(
    async () => {
      const before = (await b.users.memberships('ann')).length;
      await quiet.query(
        before > 0
          ? 'delete from memberships where username = $1'
          : "insert into memberships values ('p1', $1, 'USER')",
        ['ann'],
      );
      return (await b.users.memberships('ann')).length === before;
    },
    { describe: "b answers ann's memberships from its cache" },
  );
  await a.users.setMember('p1', 'ann', 'USER');
  await until(async () => (await b.users.memberships('ann')).length === 1, {
    describe: 'b was told of the membership set on a',
  });

  // Revoked on a: refused on a at once (its own change), and on b as soon as it is told.
  assert.equal((await a.users.userForToken(token))?.name, 'ann');
  assert.equal((await a.users.userForToken(token))?.name, 'ann');
  assert.equal(await a.directory.revokeToken(hashToken(token).slice(0, TOKEN_ID_LENGTH)), true);
  assert.equal(await a.users.userForToken(token), undefined, 'refused on the replica that revoked it');
  await until(async () => (await b.users.userForToken(token)) === undefined, {
    describe: 'the revoked token refused on b',
  });

  // A member removed on a, in a transaction as the admin API does: gone on both.
  assert.equal((await a.users.memberships('ann')).length, 1);
  await a.transaction((tx) => tx.directory.removeMember('p1', 'ann'));
  assert.deepEqual(await a.users.memberships('ann'), [], 'gone on the replica that removed it');
  await until(async () => (await b.users.memberships('ann')).length === 0, {
    describe: 'the removed membership gone on b',
  });
});
