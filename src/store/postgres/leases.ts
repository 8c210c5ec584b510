import type { LeaseStore } from '../leases.ts';
import { toLease } from '../rows.ts';
import type { Connection } from './database.ts';

/** The database's clock, in epoch milliseconds: replicas on machines whose clocks differ agree on it. */
const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

export function postgresLeases({ query }: Connection): LeaseStore {
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
      // Taking over raises the epoch, a key column: it commits after every fenced transaction
      // under way, and those that come after see the new epoch and are refused.
      const [taken] = await query(
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
