import pg from 'pg';
import { MIGRATIONS, postgresSql } from '../migrations.ts';
import type { Row } from '../rows.ts';
import type { Connection, TransactionStart } from './connection.ts';
import { inlined, literal } from './literals.ts';
import { queryOn, statement } from './statements.ts';
import { transactionOn } from './transaction.ts';

// The PostgreSQL store's database: its pools, transactions (transaction.ts), statements
// (statements.ts) and literals (literals.ts), and its migration at open.

export {
  type Connection,
  JOB_EVENTS_CHANNEL,
  JOB_EVENTS_LOCK,
  type Query,
  type TransactionStart,
} from './connection.ts';

// bigint (epoch milliseconds, counts) and numeric as JavaScript numbers: every value the store
// keeps fits in 53 bits.
const INT8 = 20;
const NUMERIC = 1700;
const types = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8 || oid === NUMERIC
      ? (value: string) => Number(value)
      : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
};

export interface PostgresDatabase {
  pool: pg.Pool;
  /** Statements on the pool, each its own transaction. */
  outside: Connection;
  /**
   * Statements and transactions on connections of their own, beside the pool: renewing or taking
   * the lease must not queue behind hundreds of transactions waiting for the pool (the lease would
   * lapse; a takeover would wait for whatever holds them, a paused leader's events lock included).
   */
  aside: Connection;
  /**
   * Runs `fn` in a new transaction on a connection of its own; committed when it returns, and
   * synced to disk before that when `durable`. `opening`, a statement without parameters, is sent
   * with the `begin` (one round trip, not two); `fn` is handed its rows.
   */
  transaction<T>(fn: (c: Connection, opened: Row[]) => Promise<T>, options?: TransactionStart): Promise<T>;
  /**
   * One statement on the pool, written only if the lease still has `epoch`: the fence checked by
   * the statement before it in the same implicit transaction (ucompute_fence, see the migration),
   * one round trip in all (a fenced transaction of one statement is three). Refused with the
   * error of SQLSTATE FENCE_REFUSED, its detail the lease's epoch ('' when there is no lease).
   */
  fencedStatement(
    lease: string,
    epoch: number,
    text: string,
    values: readonly unknown[],
  ): Promise<pg.QueryResult<Row>>;
  /** Closes its connections. */
  end(): Promise<void>;
}

/** The SQLSTATE of a fenced write refused (ucompute_fence). */
export const FENCE_REFUSED = 'UCF01';

export interface DatabaseOptions {
  /** Told when a change of users, tokens or memberships by this process has committed. */
  directoryChanged?: () => void;
}

/** How long a transaction may wait between its statements before the server ends it. */
const IDLE_TRANSACTION_MS = 10_000;

/**
 * PostgreSQL through node-postgres: a pool of connections, every write committed before it
 * answers. As on SQLite, only transactions marked durable (accepting jobs) wait for their commit
 * to reach the disk; the others survive a crash of ucompute (and of any replica) at once and the
 * server's within its WAL writer's delay (`synchronous_commit = off`): lifecycle updates can be
 * had again from the backend, accepted jobs cannot. The lease's connection commits synchronously
 * (a takeover lost by a crash of the server would fence nothing). The schema is migrated at open,
 * under an advisory lock so that replicas starting together migrate once.
 */
export async function openPostgresDatabase(
  url: string,
  { directoryChanged = () => {} }: DatabaseOptions = {},
): Promise<PostgresDatabase> {
  // Idle connections do not keep the process alive: it ends when its work does. A transaction
  // left open longer than ours ever are (its process paused, `kill -STOP`) is ended by the server:
  // a leader's transaction holds the lease row, and another replica must be able to take over.
  const pool = new pg.Pool({
    connectionString: url,
    types,
    max: 10,
    allowExitOnIdle: true,
    options: `-c idle_in_transaction_session_timeout=${IDLE_TRANSACTION_MS} -c synchronous_commit=off`,
  });
  // An idle connection that fails (the server restarted) is dropped by the pool; without a
  // listener its error would end the process.
  pool.on('error', () => {});
  // Two: a takeover waits up to its lock timeout for the lease row, and the readiness probe's
  // look at the lease must not wait behind it.
  const own = new pg.Pool({
    connectionString: url,
    types,
    max: 2,
    allowExitOnIdle: true,
    options: `-c idle_in_transaction_session_timeout=${IDLE_TRANSACTION_MS}`,
  });
  own.on('error', () => {});
  const transaction = transactionOn(pool, directoryChanged);
  try {
    await migrate(pool);
  } catch (e) {
    await Promise.all([pool.end(), own.end()]);
    throw e;
  }
  /** Statements on `on`, each its own transaction; atomic work and events in a new one there. */
  const outsideTransactions = (on: pg.Pool): Connection => {
    const inTransaction = transactionOn(on, directoryChanged);
    return {
      query: queryOn(on, directoryChanged),
      atomic: (fn) => inTransaction((c) => fn(c.query)),
      locked: '',
      recordEvent: (jobId, updateSeq) => inTransaction((c) => c.recordEvent(jobId, updateSeq)),
    };
  };
  return {
    pool,
    outside: outsideTransactions(pool),
    aside: outsideTransactions(own),
    transaction,
    async fencedStatement(lease, epoch, text, values) {
      // Two statements in one simple query: one implicit transaction, ended by the first error.
      const results = (await pool.query<Row>(
        `select ucompute_fence(${literal(lease)}, ${literal(epoch)}); ${inlined(text, values)}`,
      )) as unknown as pg.QueryResult<Row>[];
      if (statement(text).writesDirectory) directoryChanged();
      return results[1]!;
    },
    async end() {
      await Promise.all([pool.end(), own.end()]);
    },
  };
}

/** Any number that no other use of advisory locks in the database picks: "ucompute" in ASCII. */
const MIGRATION_LOCK = 0x7563_6f6d_7075;

async function migrate(pool: pg.Pool): Promise<void> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    await client.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query('create table if not exists schema_version (version integer not null)');
    const { rows } = await client.query<{ v: number | null }>('select max(version) as v from schema_version');
    for (let v = rows[0]?.v ?? 0; v < MIGRATIONS.length; v++) {
      await client.query(postgresSql(MIGRATIONS[v]!));
      await client.query('insert into schema_version (version) values ($1)', [v + 1]);
    }
    await client.query('commit');
  } catch (e) {
    await client.query('rollback').catch(() => {});
    throw e;
  } finally {
    client.release();
  }
}
