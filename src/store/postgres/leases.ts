import type { LeaseStore } from '../leases.ts';
import { toLease } from '../rows.ts';
import type { Connection } from './database.ts';

/** The database's clock, in epoch milliseconds: replicas on machines whose clocks differ agree on it. */
const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

/** How long a takeover waits for the expired holder's fenced transactions before ending them. */
const TAKEOVER_WAIT_MS = 3_000;
/** PostgreSQL's lock_not_available: lock_timeout passed. */
const LOCK_NOT_AVAILABLE = '55P03';

export function postgresLeases({ query, atomic }: Connection): LeaseStore {
  return {
    async acquire(name, holder, ttlMs) {
      // Renewing changes no key column (the epoch is one, see the migration): it does not wait for
      // the leader's fenced transactions, which hold the row `for key share` — under load they
      // overlap without end, and a renewal that waited for them all would let the lease lapse.
      const [renewed] = await query(
        `update leases set expires_at = ${NOW} + ? where name = ? and holder = ? returning *`,
        ttlMs,
        name,
        holder,
      );
      if (renewed) return toLease(renewed);
      // Followers ask every quarter second: while another holds the lease, one read says so (not a
      // transaction whose take-over waits for the leader's fenced transactions on the row).
      const [held] = await query(`select 1 from leases where name = ? and expires_at > ${NOW}`, name);
      if (held) return undefined;
      // Taking over raises the epoch, a key column: it commits after every fenced transaction
      // under way, and those that come after see the new epoch and are refused.
      const takeOver = () =>
        atomic(async (q) => {
          await q(`set local lock_timeout = ${TAKEOVER_WAIT_MS}`);
          const [taken] = await q(
            `insert into leases (name, holder, epoch, expires_at) values (?, ?, 1, ${NOW} + ?)
             on conflict (name) do update set
               epoch = leases.epoch + 1, holder = excluded.holder, expires_at = excluded.expires_at
             where leases.expires_at <= ${NOW}
             returning *`,
            name,
            holder,
            ttlMs,
          );
          return taken && toLease(taken);
        });
      try {
        return await takeOver();
      } catch (error) {
        if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
      }
      // The holder's fenced transactions hold the row. While its lease runs, that is the leader at
      // work, and this replica stays a follower.
      const [expired] = await query(`select 1 from leases where name = ? and expires_at <= ${NOW}`, name);
      if (!expired) return undefined;
      // The lease expired, yet a fenced transaction of its holder still holds the row: its process
      // is paused or cut off while the server runs its statement or sends it rows, states that the
      // server's idle-in-transaction timeout does not end, so it could hold the row for ever. Its
      // transactions are ended (they write nothing: their fence is being raised).
      await query(
        `select pg_terminate_backend(pid) from pg_locks
         where locktype = 'relation' and relation = 'leases'::regclass and mode = 'RowShareLock'
           and granted and pid <> pg_backend_pid()
           and database = (select oid from pg_database where datname = current_database())`,
      );
      return takeOver().catch((error: { code?: string }) => {
        if (error.code === LOCK_NOT_AVAILABLE) return undefined;
        throw error;
      });
    },
    async release(name, holder) {
      await query('update leases set expires_at = 0 where name = ? and holder = ?', name, holder);
    },
    async current(name) {
      const [r] = await query('select * from leases where name = ?', name);
      return r && toLease(r);
    },
  };
}
