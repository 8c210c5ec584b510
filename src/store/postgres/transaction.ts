import type pg from 'pg';
import type { Row } from '../rows.ts';
import {
  type Connection,
  JOB_EVENTS_CHANNEL,
  JOB_EVENTS_LOCK,
  type Query,
  type TransactionStart,
} from './connection.ts';
import { prepareAgain, preparedOn, queryOn, simpleOn, stalePlan, statement } from './statements.ts';

/**
 * A transaction's job events, sent with its commit in one round trip: the events are written as its
 * last statement, under a lock held until it has committed, so the numbers are taken in the
 * order of the commits: a reader that has seen event n has seen every event before it, whichever
 * replica wrote it (a sequence alone is taken in the order of the inserts, and a later number
 * could commit first). NOTIFY serializes notifying commits anyway; this lock only starts that
 * earlier, at the numbering. One statement: the rows come through the join with `locked`, so the
 * lock is taken before any row (and its number) is; a CTE with a volatile function is evaluated
 * once, never inlined. Values: the jobs' ids and their updates' numbers.
 */
const JOB_EVENTS = `with locked as (select pg_advisory_xact_lock(${JOB_EVENTS_LOCK})),
     written as (
       insert into job_events (job_id, update_seq)
       select e.* from locked, unnest(?::text[], ?::bigint[]) as e returning seq)
     select pg_notify('${JOB_EVENTS_CHANNEL}', max(seq)::text) from written`;

/**
 * What a durable transaction sends after its `commit`, in the same round trip: a transaction of
 * its own that writes a WAL record and commits synchronously, so that the answer comes once the
 * WAL is on disk up to there, and so up to the durable transaction's commit before it. That commit
 * itself (the session's `synchronous_commit = off`) released its locks as soon as it was written:
 * an owner's allocations and the job events lock were held across the disk's sync before, and
 * every other intake of that owner, every other writer of job events, waited for it. Another
 * transaction may read the rows meanwhile, before they are on disk; one that acts on them outside
 * the database first syncs its own commit (the leader's build save before it hands jobs to the
 * backend), which syncs theirs.
 */
const SYNCED: readonly (readonly [string, readonly unknown[]])[] = [
  ['begin', []],
  ['set local synchronous_commit = on', []],
  ["select pg_logical_emit_message(true, 'ucompute', 'synced')", []],
  ['commit', []],
];

/**
 * Transactions on connections of `on`, each on a connection of its own: see
 * PostgresDatabase.transaction. `directoryChanged` is told after a commit that changed users,
 * tokens or memberships.
 */
export function transactionOn(on: pg.Pool, directoryChanged: () => void) {
  return async <T>(
    fn: (c: Connection, opened: Row[]) => Promise<T>,
    { durable = false, opening, deferBegin = false }: TransactionStart = {},
  ): Promise<T> => {
    const client = await on.connect();
    let broken = false;
    // Ended by the server between two statements (idle too long: this process was paused): the
    // next statement fails and the connection is dropped; unheard, the error would end the process.
    const ended = () => {
      broken = true;
    };
    client.on('error', ended);
    // The start still to send, with the first statement (deferBegin), or '' once sent.
    let unsent = '';
    // A query with PREPAREs failed: which of them ran is not known.
    let uncertain = false;
    try {
      const start = ['begin', ...(opening ? [opening] : [])];
      unsent = deferBegin && !opening ? start.join('; ') : '';
      let opened: Row[] = [];
      if (!unsent) {
        const started = (await client.query<Row>(start.join('; '))) as
          | pg.QueryResult<Row>
          | pg.QueryResult<Row>[];
        opened = opening ? (Array.isArray(started) ? started.at(-1)!.rows : started.rows) : [];
      }
      let wroteDirectory = false;
      const prepared = queryOn(client, () => {
        wroteDirectory = true;
      });
      /**
       * Statements in one simple query, the start first if it is still to send, then the
       * PREPAREs of those not yet prepared on this connection: each statement's result. A query
       * with PREPAREs that fails leaves unknown which ran (PREPARE outlives a rollback): the
       * connection is then dropped (`uncertain`), not returned to the pool.
       */
      const together = async (statements: (readonly [string, readonly unknown[]])[]) => {
        const sent = statements.map(([text, values]) => simpleOn(client, text, values));
        const prepares = new Map<string, string>();
        for (const { prepare } of sent) if (prepare) prepares.set(prepare.name, prepare.text);
        const head = unsent ? [unsent] : [];
        unsent = '';
        if (prepares.size > 0) uncertain = true;
        const results = (await client
          .query<Row>([...head, ...prepares.values(), ...sent.map((x) => x.text)].join('; '))
          .catch((e: unknown) => {
            // Another replica's migration changed a table under a prepared `select *`: the
            // statements are prepared again under new names from the next transaction on.
            if (stalePlan(e)) prepareAgain();
            throw e;
          })) as pg.QueryResult<Row> | pg.QueryResult<Row>[];
        uncertain = false;
        if (prepares.size > 0) preparedOn(client, prepares.keys());
        if (statements.some(([text]) => statement(text).writesDirectory)) wroteDirectory = true;
        return (Array.isArray(results) ? results : [results]).slice(-statements.length);
      };
      const first = (text: string, values: unknown[]) => together([[text, values]]).then((r) => r[0]!);
      const query = (async (text: string, ...values: unknown[]) =>
        unsent ? (await first(text, values)).rows : prepared(text, ...values)) as Query;
      query.changed = async (text, ...values) =>
        unsent ? ((await first(text, values)).rowCount ?? 0) : prepared.changed(text, ...values);
      const events: [string, number | null][] = [];
      const atCommit: (readonly [string, readonly unknown[]])[] = [];
      const result = await fn(
        {
          query,
          atomic: (inner) => inner(query),
          locked: ' for update',
          recordEvent: async (jobId, updateSeq) => void events.push([jobId, updateSeq]),
          atCommit: (text, values) => void atCommit.push([text, values]),
          several: async (statements) =>
            statements.length === 0 ? [] : (await together([...statements])).map((r) => r.rows),
        },
        opened,
      );
      if (unsent && atCommit.length === 0 && events.length === 0) {
        // Nothing was sent, and there is nothing to write: no transaction to end.
        unsent = '';
        return result;
      }
      if (events.length > 0) atCommit.push([JOB_EVENTS, [events.map((e) => e[0]), events.map((e) => e[1])]]);
      atCommit.push(['commit', []]);
      await together(durable ? [...atCommit, ...SYNCED] : atCommit);
      if (wroteDirectory) directoryChanged();
      return result;
    } catch (e) {
      // Nothing to roll back while the begin is still to send.
      broken = unsent
        ? false
        : await client.query('rollback').then(
            () => uncertain,
            () => true,
          );
      throw e;
    } finally {
      client.off('error', ended);
      client.release(broken);
    }
  };
}
