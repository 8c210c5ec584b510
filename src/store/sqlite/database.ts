import { closeSync, mkdirSync, openSync } from 'node:fs';
import { dirname } from 'node:path';
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite';
import { MIGRATIONS, sqliteSql } from '../migrations.ts';

export type Row = Record<string, SQLInputValue>;

/** A store part's methods as the SQLite driver runs them: synchronously. */
export type Synchronous<T> = {
  [K in keyof T]: T[K] extends (...args: infer A) => Promise<infer R> ? (...args: A) => R : never;
};

/** The SQLite database as the store's parts use it: cached statements, nested transactions. */
export interface SqliteDatabase {
  db: DatabaseSync;
  sql(text: string): StatementSync;
  /** Runs `fn` in a transaction, or in the one already open. */
  transaction<T>(fn: () => T): T;
  /** Starts a transaction, synced to disk at its commit when durable. */
  begin(durable: boolean): void;
  /** Ends the transaction `begin` started: committed when ok, else rolled back. */
  end(durable: boolean, ok: boolean): void;
  /** Transactions open: 0 or 1 (nested ones are part of the outer one). */
  readonly depth: number;
  /** Notes that a job event was written (recordJobEvent). */
  eventWritten(): void;
  /** Whether job events were written since the last call. */
  takeEventsWritten(): boolean;
}

/**
 * SQLite (Node's built-in driver) in WAL mode. Transactions marked durable (accepting jobs) are
 * synced to disk before they return, and so survive power loss; the others survive a crash of
 * ucompute and are synced by the next durable one. Lifecycle updates can be had again from the
 * backend; accepted jobs cannot.
 */
export function openSqliteDatabase(path: string): SqliteDatabase {
  if (path !== ':memory:') {
    // ucompute's alone: created 0700/0600 (SQLite gives its -wal and -shm files the database's mode).
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    closeSync(openSync(path, 'a', 0o600));
  }
  const db = new DatabaseSync(path);
  // ucompute is the database's only user: holding the lock spares lock calls on every
  // transaction (and lets WAL keep its index in memory). A second ucompute on the folder is refused.
  db.exec('pragma locking_mode = exclusive; pragma journal_mode = wal; pragma synchronous = normal');
  // An 8 MiB page cache holds what is hot (the newest jobs and their index pages); a larger one
  // (64 MiB before) only filled up with old jobs as they were stored, and the server's memory grew
  // with it, by 100 MiB over 100,000 jobs.
  db.exec('pragma foreign_keys = on; pragma busy_timeout = 5000; pragma cache_size = -8192');
  // Checkpoint every 64 MiB of log rather than 4: hot pages (the newest jobs, their indexes) are
  // rewritten by every transaction, and a longer log copies each back to the database once.
  db.exec('pragma wal_autocheckpoint = 16384');
  // A transaction larger than that (a burst of backend events) grows the log file past it, and a
  // log file never shrinks by itself: after each checkpoint it is cut back to 64 MiB.
  db.exec('pragma journal_size_limit = 67108864');
  migrate(db);

  const statements = new Map<string, StatementSync>();
  const sql = (text: string): StatementSync => {
    let s = statements.get(text);
    if (!s) {
      s = db.prepare(text);
      statements.set(text, s);
    }
    return s;
  };

  let depth = 0;
  let eventsWritten = false;
  const begin = (durable: boolean) => {
    if (durable) db.exec('pragma synchronous = full');
    db.exec('begin immediate');
    depth++;
  };
  const end = (durable: boolean, ok: boolean) => {
    try {
      if (ok) db.exec('commit');
    } finally {
      // SQLite rolls back by itself on some errors (SQLITE_FULL): a second rollback would throw
      // and hide the error that matters.
      if (db.isTransaction) db.exec('rollback');
      depth--;
      if (durable) db.exec('pragma synchronous = normal');
    }
  };

  return {
    db,
    sql,
    begin,
    end,
    get depth() {
      return depth;
    },
    eventWritten() {
      eventsWritten = true;
    },
    takeEventsWritten() {
      const written = eventsWritten;
      eventsWritten = false;
      return written;
    },
    transaction<T>(fn: () => T): T {
      if (depth > 0) return fn();
      begin(false);
      let ok = false;
      try {
        const result = fn();
        ok = true;
        return result;
      } finally {
        end(false, ok);
      }
    },
  };
}

function migrate(db: DatabaseSync): void {
  db.exec('create table if not exists schema_version (version integer not null)');
  const row = db.prepare('select max(version) as v from schema_version').get() as { v: number | null };
  const current = row.v ?? 0;
  for (let v = current; v < MIGRATIONS.length; v++) {
    db.exec('begin immediate');
    try {
      db.exec(sqliteSql(MIGRATIONS[v]!));
      db.prepare('insert into schema_version (version) values (?)').run(v + 1);
      db.exec('commit');
    } catch (e) {
      // SQLite rolls back by itself on some errors (SQLITE_FULL): a second rollback would throw and
      // hide the error that matters.
      if (db.isTransaction) db.exec('rollback');
      throw e;
    }
  }
}
