import pg from 'pg';
import { MIGRATIONS, postgresSql } from '../migrations.ts';
import type { Row } from '../rows.ts';

/** One statement, with SQLite's `?` placeholders (numbered for PostgreSQL here); answers its rows. */
export interface Query {
  (text: string, ...params: unknown[]): Promise<Row[]>;
  /** How many rows the statement changed. */
  changed(text: string, ...params: unknown[]): Promise<number>;
}

/**
 * What a part of the PostgreSQL store runs on: statements on one connection inside a transaction
 * (`locked` then locks the rows it reads), or on the pool outside one.
 */
export interface Connection {
  query: Query;
  /** Runs `fn` in a transaction: this one, or a new one when there is none. */
  atomic<T>(fn: (q: Query) => Promise<T>): Promise<T>;
  /** ` for update` inside a transaction (rows read there stay the caller's until it ends), else ''. */
  readonly locked: string;
  /**
   * Records a change of a job (update null: a rename), written as the transaction commits
   * (writeJobEvents); outside one, in a transaction of its own.
   */
  recordEvent(jobId: string, updateSeq: number | null): Promise<void>;
  /**
   * Inside a transaction only: a write whose rows nobody reads before the commit, sent with the
   * commit in one simple query (its values as literals; as EXECUTE of a statement prepared on the
   * connection, simpleOn), not in a round trip of its own. Its error
   * fails the commit, and so the transaction.
   */
  atCommit?(text: string, values: readonly unknown[]): void;
  /**
   * Inside a transaction only: statements sent together in one simple query (values as literals,
   * each EXECUTE of a statement prepared on the connection, simpleOn; one round trip), each run as if sent alone (its own snapshot: one that waits for a lock sees
   * what committed meanwhile once it has it); answers each one's rows, in order.
   */
  several?(statements: readonly (readonly [string, readonly unknown[]])[]): Promise<Row[][]>;
}

/** The channel on which a commit's newest job event number is announced. */
export const JOB_EVENTS_CHANNEL = 'ucompute_job_events';

/** Any number that no other use of advisory locks in the database picks: "ucoevt" in ASCII. */
export const JOB_EVENTS_LOCK = 0x7563_6f65_7674;

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

/** A statement as sent: `?` placeholders numbered; its number among those prepared; whether it changes the directory. */
interface Statement {
  text: string;
  prepared: number | undefined;
  writesDirectory: boolean;
}

/** A statement that changes who a token names or who is in a project. */
const DIRECTORY_WRITE = /\b(?:insert\s+into|update|delete\s+from)\s+(?:users|tokens|memberships)\b/i;

/**
 * Statements prepared at most (each connection keeps them): a job listing's filters make
 * hundreds of texts, which are parsed and planned each time instead.
 */
const MAX_PREPARED = 200;
const statements = new Map<string, Statement>();
/** `?` placeholders as `$1`, `$2`, …: the statements are written once, in SQLite's style. */
function statement(text: string): Statement {
  let out = statements.get(text);
  if (out === undefined) {
    let n = 0;
    out = {
      text: text.replace(/\?/g, () => `$${++n}`),
      prepared: statements.size < MAX_PREPARED ? statements.size : undefined,
      writesDirectory: DIRECTORY_WRITE.test(text),
    };
    statements.set(text, out);
  }
  return out;
}

/**
 * Raised when another replica's migration changed a table under a prepared `select *`: the
 * statements are then prepared again under new names (`preparedRound`).
 */
const stalePlan = (e: unknown) => (e as Error).message === 'cached plan must not change result type';
let preparedRound = 0;

/**
 * Statements on `client`, each prepared once per connection (a named statement: PostgreSQL parses
 * and plans it once, not per call); `wroteDirectory` is told after one that changes the directory.
 */
function queryOn(client: pg.Pool | pg.PoolClient, wroteDirectory: () => void): Query {
  const run = async (text: string, values: unknown[]) => {
    const s = statement(text);
    const send = () =>
      client.query<Row>(
        s.prepared === undefined
          ? { text: s.text, values }
          : { name: `uc${preparedRound}_${s.prepared}`, text: s.text, values },
      );
    const result = await send().catch((e: unknown) => {
      if (!stalePlan(e)) throw e;
      preparedRound++;
      // On the pool the statement was a transaction of its own, and is sent again; in a
      // transaction, the transaction has failed.
      if (client instanceof pg.Pool) return send();
      throw e;
    });
    if (s.writesDirectory) wroteDirectory();
    return result;
  };
  const query = (async (text: string, ...params: unknown[]) => (await run(text, params)).rows) as Query;
  query.changed = async (text, ...params) => (await run(text, params)).rowCount ?? 0;
  return query;
}

export interface TransactionStart {
  durable?: boolean;
  opening?: string;
  /**
   * Without an `opening`: the `begin` is not a round trip of its own but sent with the
   * transaction's first statement (as a simple query, its values as literals), or with its commit.
   */
  deferBegin?: boolean;
}

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

/**
 * A value as a literal in a statement sent without parameters, as node-postgres would send it as
 * a parameter (its prepareValue): text, typed by its context in the statement. What it would send
 * otherwise than as its text (a Date in the process's time zone, a Buffer as bytea, an object's
 * toPostgres), or could not send at all (a NUL byte), is refused: the statements inlined here never
 * pass them, and a wrong rendering would be written silently.
 */
export function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  return pg.escapeLiteral(Array.isArray(value) ? arrayText(value) : scalarText(value));
}

/** A value other than null and arrays as its text. */
function scalarText(value: unknown): string {
  switch (typeof value) {
    case 'string':
      // PostgreSQL's text holds no NUL; in a simple query it would end the statement's text.
      if (value.includes('\0')) throw new Error('a NUL byte cannot be sent to PostgreSQL as text');
      return value;
    case 'number':
    case 'bigint':
    case 'boolean':
      return String(value);
    case 'object':
      if (
        value instanceof Date ||
        ArrayBuffer.isView(value) ||
        value instanceof ArrayBuffer ||
        typeof (value as { toPostgres?: unknown }).toPostgres === 'function'
      ) {
        throw new Error(`not sent as a literal here: ${Object.prototype.toString.call(value)}`);
      }
      // JSON escapes every control character: no NUL comes out.
      return JSON.stringify(value);
    default:
      throw new Error(`not sent as a literal here: a ${typeof value}`);
  }
}

/** An array as PostgreSQL's text form of arrays: `{"a","b",NULL}`, `{{"1","2"},{"3","4"}}`. */
function arrayText(xs: readonly unknown[]): string {
  const item = (x: unknown): string =>
    x === null || x === undefined
      ? 'NULL'
      : Array.isArray(x)
        ? arrayText(x)
        : `"${scalarText(x).replace(/["\\]/g, '\\$&')}"`;
  return `{${xs.map(item).join(',')}}`;
}

/**
 * `text` with its `?` placeholders replaced by `values` as literals: a statement that can go with
 * another in one simple query (one round trip). Typed as a parameter would be: from its context.
 * Every `?` of the text is a placeholder (as for statements sent with parameters): a `?` in a
 * comment, a string or an operator (jsonb's `?|`) would take a value meant for the next one, so a
 * text whose count of them is not the number of values is refused, never sent.
 */
export function inlined(text: string, values: readonly unknown[]): string {
  const parts = text.split('?');
  if (parts.length - 1 !== values.length) {
    throw new Error(
      `a statement with ${parts.length - 1} placeholders given ${values.length} values: ${text.slice(0, 80)}`,
    );
  }
  let out = parts[0]!;
  for (let i = 0; i < values.length; i++) out += literal(values[i]) + parts[i + 1]!;
  return out;
}

/** What PREPARE takes (not `commit`, `set` …). */
const PREPARABLE = /^\s*(?:select|insert|update|delete|with|values)\b/i;

/** The names of the statements prepared (SQL PREPARE) on each connection: kept for its life. */
const preparedOnConnection = new WeakMap<pg.PoolClient, Set<string>>();

/**
 * A statement to send in a simple query on `client`, values as literals: as EXECUTE of the
 * statement prepared on that connection (PostgreSQL parses and plans it once there, not at each
 * call; from its sixth call, a generic plan), after its PREPARE the first time (`prepare`, to send
 * before it in the same query); inlined as is when it is not among those prepared (`statement`).
 */
function simpleOn(
  client: pg.PoolClient,
  text: string,
  values: readonly unknown[],
): { prepare?: { name: string; text: string }; text: string } {
  const s = statement(text);
  if (s.prepared === undefined || !PREPARABLE.test(text)) return { text: inlined(text, values) };
  // The same check as inlined's: every `?` is a placeholder, each given its value.
  const placeholders = text.split('?').length - 1;
  if (placeholders !== values.length) {
    throw new Error(
      `a statement with ${placeholders} placeholders given ${values.length} values: ${text.slice(0, 80)}`,
    );
  }
  const name = `ucs${preparedRound}_${s.prepared}`;
  const run = values.length === 0 ? `execute ${name}` : `execute ${name}(${values.map(literal).join(', ')})`;
  return preparedOnConnection.get(client)?.has(name)
    ? { text: run }
    : { prepare: { name, text: `prepare ${name} as ${s.text}` }, text: run };
}

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
  const transactionOn =
    (on: pg.Pool) =>
    async <T>(
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
        const start = [
          'begin',
          ...(durable ? ['set local synchronous_commit = on'] : []),
          ...(opening ? [opening] : []),
        ];
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
              if (stalePlan(e)) preparedRound++;
              throw e;
            })) as pg.QueryResult<Row> | pg.QueryResult<Row>[];
          uncertain = false;
          if (prepares.size > 0) {
            const names = preparedOnConnection.get(client) ?? new Set<string>();
            preparedOnConnection.set(client, names);
            for (const name of prepares.keys()) names.add(name);
          }
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
        if (events.length > 0)
          atCommit.push([JOB_EVENTS, [events.map((e) => e[0]), events.map((e) => e[1])]]);
        atCommit.push(['commit', []]);
        await together(atCommit);
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
  const transaction = transactionOn(pool);
  try {
    await migrate(pool);
  } catch (e) {
    await Promise.all([pool.end(), own.end()]);
    throw e;
  }
  /** Statements on `on`, each its own transaction; atomic work and events in a new one there. */
  const outsideTransactions = (on: pg.Pool): Connection => {
    const inTransaction = transactionOn(on);
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
