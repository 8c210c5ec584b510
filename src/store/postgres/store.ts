import pg from 'pg';
import { checkEpoch } from '../leases.ts';
import type { Store, StoreParts } from '../store.ts';
import { postgresAccounting } from './accounting.ts';
import { postgresAuditLog } from './audit-log.ts';
import { type Connection, FENCE_REFUSED, openPostgresDatabase, type Query } from './database.ts';
import { postgresDirectory } from './directory.ts';
import { directoryCache } from './directory-cache.ts';
import { jobEventNotifications, postgresJobEvents } from './job-events.ts';
import { postgresJobs } from './jobs.ts';
import { postgresLeases } from './leases.ts';
import { postgresResourceSeries } from './resource-series.ts';
import { postgresSessions, postgresSignIns } from './sessions.ts';
import { postgresSshKeys } from './ssh-keys.ts';
import { postgresUcloudApplications, postgresUcloudOutbox } from './ucloud.ts';
import { postgresUsers } from './users.ts';

function partsOn(c: Connection): StoreParts {
  return {
    jobs: postgresJobs(c),
    jobEvents: postgresJobEvents(c),
    accounting: postgresAccounting(c),
    users: postgresUsers(c),
    sessions: postgresSessions(c),
    signIns: postgresSignIns(c),
    sshKeys: postgresSshKeys(c),
    directory: postgresDirectory(c),
    audit: postgresAuditLog(c),
    resourceSeries: postgresResourceSeries(c),
    ucloudOutbox: postgresUcloudOutbox(c),
    ucloudApplications: postgresUcloudApplications(c),
    leases: postgresLeases(c),
  };
}

/** A statement that only reads: a `select` that locks nothing. */
const READ = /^\s*select\b(?![\s\S]*\bfor\s+(update|share|no\s+key\s+update|key\s+share)\b)/i;

/**
 * The store on PostgreSQL, which several replicas share. A transaction runs on a connection of
 * its own, so transactions of one process run side by side as those of several do; rows a
 * transaction reads through `jobs.get` stay locked until it ends, so two updates of one job
 * apply one after the other. Transactions marked durable are synced before they answer, the
 * others soon after (database.ts).
 */

export async function openPostgresStore(url: string): Promise<Store> {
  const directory = directoryCache(url);
  const d = await openPostgresDatabase(url, { directoryChanged: directory.invalidate });
  const notifications = jobEventNotifications(url);
  const outside = partsOn(d.outside);
  return {
    ...outside,
    users: directory.users(outside.users),
    leases: postgresLeases(d.aside),
    // Accepting jobs (durable): the begin goes with the first statement (the credits read).
    transaction: (fn, options) =>
      d.transaction(
        (c) => fn(partsOn(c)),
        options?.durable ? { durable: true, deferBegin: true } : { durable: options?.afterDurable === true },
      ),
    fenced(fence) {
      // Refuses the transaction unless the lease has the fence's epoch; its row stays locked `for
      // key share` until the end: a takeover (a new epoch) waits for it, a renewal does not. Sent
      // with the `begin`: a round trip less for each of a leader's transactions.
      const opening = `select epoch from leases where name = ${pg.escapeLiteral(fence.lease)} for key share`;
      const fenced = <T>(fn: (c: Connection) => Promise<T>, durable?: boolean) =>
        d.transaction(
          async (c, [r]) => {
            checkEpoch(fence, r === undefined ? undefined : Number(r.epoch));
            return fn(c);
          },
          { opening, ...(durable ? { durable } : {}) },
        );
      // A call of a part outside a transaction: a read runs as it is (a deposed leader's reads
      // change nothing); a write runs with its fence checked in the same round trip.
      const single = (text: string, params: unknown[]) =>
        d
          .fencedStatement(fence.lease, fence.epoch, text, params)
          .catch((e: { code?: string; detail?: string }) => {
            if (e.code !== FENCE_REFUSED) throw e;
            // A FencedError, told to the fence's holder.
            checkEpoch(fence, e.detail ? Number(e.detail) : undefined);
            throw e;
          });
      const query = (async (text: string, ...params: unknown[]) =>
        READ.test(text) ? d.outside.query(text, ...params) : (await single(text, params)).rows) as Query;
      query.changed = async (text, ...params) => (await single(text, params)).rowCount ?? 0;
      const parts = partsOn({
        query,
        atomic: (fn) => fenced((c) => fn(c.query)),
        locked: '',
        recordEvent: (jobId, updateSeq) => fenced((c) => c.recordEvent(jobId, updateSeq)),
      });
      return {
        ...parts,
        users: directory.users(parts.users),
        transaction: (fn, options) =>
          fenced((c) => fn(partsOn(c)), options?.durable === true || options?.afterDurable === true),
      };
    },
    onJobEvents: notifications.onJobEvents,
    async close() {
      await Promise.all([notifications.end(), directory.end()]);
      await d.end();
    },
  };
}
