import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { openPostgresDatabase, type PostgresDatabase } from '../src/store/postgres/database.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './support/postgres.ts';

// Statements sent with a transaction's begin or commit in one simple query (database.ts: several,
// atCommit) go as EXECUTE of a statement prepared on that connection (SQL PREPARE, sent in the
// same query the first time): PostgreSQL parses and plans them once per connection, not per call.

const skip = !POSTGRES_TESTED && 'PostgreSQL is not installed';
let db: PostgresDatabase;
/** Every simple query's text, by the connection that sent it. */
const sent = new Map<pg.Client, string[]>();
const query = pg.Client.prototype.query;

// One describe() around the file, so that its hooks stay its own when it shares a process with
// others (test/run-suite.ts batches it).
describe('prepared statements over the simple query protocol', () => {
  before(async () => {
    if (skip) return;
    db = await openPostgresDatabase(await newPostgresDatabase());
    await db.outside.query('create table t (id text primary key, n bigint not null)');
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      if (typeof args[0] === 'string') sent.set(this, [...(sent.get(this) ?? []), args[0]]);
      return (query as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof query;
  });
  after(async () => {
    pg.Client.prototype.query = query;
    await db?.end();
  });

  const READ = 'select id, n from t where id = ? and n >= ?';
  const COUNT = 'select count(*) as n from t where n > ?';
  const INSERT = 'insert into t (id, n) select * from unnest(?::text[], ?::bigint[])';

  /** One intake-shaped transaction: two reads with the begin, a write with the commit. */
  const flush = (id: string, n: number) =>
    db.transaction(
      async (c) => {
        const rows = await c.several!([
          [READ, [id, 0]],
          [COUNT, [-1]],
        ]);
        c.atCommit!(INSERT, [[id], [n]]);
        return rows;
      },
      { durable: true, deferBegin: true },
    );

  test('statements sent with the begin and the commit: prepared once per connection, then executed', {
    skip,
  }, async () => {
    sent.clear();
    const ids = ["o'neil\\?", 'b$$', 'c', 'd', 'e', 'f', 'g'];
    for (const [i, id] of ids.entries()) {
      const [read, count] = await flush(id, i);
      assert.deepEqual(read, []);
      assert.equal(count![0]!.n, i);
    }
    // What was written reads back exactly, through the same prepared read.
    for (const [i, id] of ids.entries()) {
      const [read] = await flush(`${id}-again`, 100 + i).then(() =>
        db.transaction(async (c) => c.several!([[READ, [id, 0]]]), { deferBegin: true }),
      );
      assert.deepEqual(read, [{ id, n: i }]);
    }
    const texts = [...sent.values()].flat();
    assert.ok(texts.length >= ids.length * 2);
    // Each connection prepared each statement at most once; later flushes only executed them.
    for (const theirs of sent.values()) {
      const prepared = theirs.flatMap((t) => [...t.matchAll(/prepare (ucs\d+_\d+) as/g)].map((m) => m[1]));
      assert.equal(new Set(prepared).size, prepared.length, `a statement prepared twice on one connection`);
    }
    const executedOnly = texts.filter((t) => t.includes('execute ucs') && !t.includes('prepare ucs'));
    assert.ok(executedOnly.length >= ids.length, `${executedOnly.length} queries executed without a PREPARE`);
    // No value is inlined into a prepared statement's text: the reads' and the write's texts are prepared.
    assert.ok(!texts.some((t) => /select id, n from t where id = '/.test(t)));
    assert.ok(!texts.some((t) => /insert into t \(id, n\) select \* from unnest\('/.test(t)));
  });

  test('a query whose PREPAREs ran before a statement failed: the statements still work after', {
    skip,
  }, async () => {
    // Two statements new to every connection, prepared in one query; the second fails after both
    // PREPAREs ran (PREPARE outlives the rollback). A connection kept with them unrecorded would
    // refuse their next PREPARE ("already exists") on every later use.
    const first = 'select ?::int as v';
    const second = 'select 10 / ?::int as w';
    const run = (d: number) =>
      db.transaction(
        async (c) =>
          c.several!([
            [first, [1]],
            [second, [d]],
          ]),
        { deferBegin: true },
      );
    await assert.rejects(run(0), /division by zero/);
    for (let i = 0; i < 5; i++) assert.deepEqual(await run(5), [[{ v: 1 }], [{ w: 2 }]]);
  });
});
