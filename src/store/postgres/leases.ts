import type { LeaseStore } from '../leases.ts';
import { toLease } from '../rows.ts';
import type { Connection } from './database.ts';

/** The database's clock, in epoch milliseconds: replicas on machines whose clocks differ agree on it. */
const NOW = '(extract(epoch from clock_timestamp()) * 1000)::bigint';

export function postgresLeases({ query }: Connection): LeaseStore {
  return {
    async acquire(name, holder, ttlMs) {
      const [r] = await query(
        `insert into leases (name, holder, epoch, expires_at) values (?, ?, 1, ${NOW} + ?)
         on conflict (name) do update set
           epoch = case when leases.holder = excluded.holder then leases.epoch else leases.epoch + 1 end,
           holder = excluded.holder,
           expires_at = excluded.expires_at
         where leases.holder = excluded.holder or leases.expires_at <= ${NOW}
         returning *`,
        name,
        holder,
        ttlMs,
      );
      return r && toLease(r);
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
