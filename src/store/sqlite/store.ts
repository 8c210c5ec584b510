import type { DatabaseSync } from 'node:sqlite';
import { checkEpoch, type Fence } from '../leases.ts';
import type { Store, StoreParts, Transactional } from '../store.ts';
import { sqliteAccounting } from './accounting.ts';
import { sqliteAuditLog } from './audit-log.ts';
import { openSqliteDatabase, type Synchronous } from './database.ts';
import { sqliteDirectory } from './directory.ts';
import { sqliteJobEvents } from './job-events.ts';
import { sqliteJobs } from './jobs.ts';
import { sqliteLeases } from './leases.ts';
import { sqliteResourceSeries } from './resource-series.ts';
import { sqliteSessions, sqliteSignIns } from './sessions.ts';
import { sqliteSshKeys } from './ssh-keys.ts';
import { sqliteUcloudApplications } from './ucloud-applications.ts';
import { sqliteUcloudOutbox } from './ucloud-outbox.ts';
import { sqliteUsers } from './users.ts';

/** The SQLite store, and its database for what only SQLite has (its pages, its log). */
export interface SqliteStore extends Store {
  readonly database: DatabaseSync;
}

type Run = <R>(op: () => R) => Promise<R>;

/** A part's synchronous methods as the Promise-answering ones of its interface, each run by `run`. */
function asynchronous(part: object, run: Run): object {
  const methods = Object.entries(part as Record<string, (...args: unknown[]) => unknown>);
  return Object.fromEntries(
    methods.map(([name, method]) => [name, (...args: unknown[]) => run(() => method(...args))]),
  );
}

const now: Run = (op) => {
  try {
    return Promise.resolve(op());
  } catch (e) {
    return Promise.reject(e);
  }
};

const noop = () => {};

/**
 * The embedded store: one SQLite file, one process. SQLite runs a statement at once, but a
 * transaction spans the awaits of its callback, on the one connection: while one is open (or
 * waiting to be), the store's own calls wait their turn instead of landing inside it.
 */
export function openSqliteStore(path: string): SqliteStore {
  const d = openSqliteDatabase(path);
  const parts: { [K in keyof StoreParts]: Synchronous<StoreParts[K]> } = {
    jobs: sqliteJobs(d),
    jobEvents: sqliteJobEvents(d),
    accounting: sqliteAccounting(d),
    users: sqliteUsers(d),
    sessions: sqliteSessions(d),
    signIns: sqliteSignIns(d),
    sshKeys: sqliteSshKeys(d),
    directory: sqliteDirectory(d),
    audit: sqliteAuditLog(d),
    resourceSeries: sqliteResourceSeries(d),
    ucloudOutbox: sqliteUcloudOutbox(d),
    ucloudApplications: sqliteUcloudApplications(d),
    leases: sqliteLeases(d),
  };
  const each = (run: Run): StoreParts =>
    Object.fromEntries(
      Object.entries(parts).map(([name, part]) => [name, asynchronous(part, run)]),
    ) as unknown as StoreParts;
  /** Transactions waiting or under way. */
  let pending = 0;
  /** Settles when the last transaction queued has ended (never rejects). */
  let tail: Promise<void> = Promise.resolve();
  const eventListeners = new Set<(newest?: number) => void>();
  const tellEvents = (written: boolean) => {
    if (written) for (const l of eventListeners) l();
  };
  /** A part's call outside a transaction (each statement commits by itself), then its events told. */
  const committed = <R>(op: () => R): R => {
    try {
      return op();
    } finally {
      tellEvents(d.takeEventsWritten());
    }
  };
  const inTurn: Run = (op) => (pending === 0 ? now(() => committed(op)) : tail.then(() => committed(op)));
  const inTransaction = each(now);

  /** Transactions, each checking `fence` first when given. */
  const transactionsFenced = (fence?: Fence): Transactional['transaction'] =>
    function transaction(fn, options = {}) {
      const durable = options.durable === true;
      pending++;
      const result = tail.then(async () => {
        try {
          d.begin(durable);
          let ok = false;
          try {
            if (fence) checkFence(fence);
            const value = await fn(inTransaction);
            ok = true;
            return value;
          } finally {
            const written = d.takeEventsWritten();
            d.end(durable, ok);
            // Told once committed; rolled back, they were not written.
            tellEvents(ok && written);
          }
        } finally {
          pending--;
        }
      });
      tail = result.then(noop, noop);
      return result;
    };
  const checkFence = (fence: Fence) => {
    const r = d.sql('select epoch from leases where name = ?').get(fence.lease) as
      | { epoch: number }
      | undefined;
    const epoch = r === undefined ? undefined : Number(r.epoch);
    checkEpoch(fence, epoch);
  };

  return {
    ...each(inTurn),
    database: d.db,
    transaction: transactionsFenced(),
    onJobEvents(listener) {
      eventListeners.add(listener);
      return () => eventListeners.delete(listener);
    },
    fenced(fence) {
      const transaction = transactionsFenced(fence);
      // A call of a part: a fenced transaction of its own.
      return { ...each((op) => transaction(async () => op())), transaction };
    },
    async close() {
      await tail;
      d.db.close();
    },
  };
}
