import type { Row } from '../rows.ts';

// What the parts of the PostgreSQL store run their statements on (database.ts opens it).

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

export interface TransactionStart {
  durable?: boolean;
  opening?: string;
  /**
   * Without an `opening`: the `begin` is not a round trip of its own but sent with the
   * transaction's first statement (as a simple query, its values as literals), or with its commit.
   */
  deferBegin?: boolean;
}
