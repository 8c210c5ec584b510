import type { LeaseStore } from '../leases.ts';
import { toLease } from '../rows.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

/** One process holds an SQLite store: its leases count on the machine's clock. */
export function sqliteLeases({ sql }: SqliteDatabase): Synchronous<LeaseStore> {
  return {
    acquire(name, holder, ttlMs) {
      const now = Date.now();
      const r = sql(
        `insert into leases (name, holder, epoch, expires_at) values (?, ?, 1, ?)
         on conflict (name) do update set
           epoch = case when leases.holder = excluded.holder then leases.epoch else leases.epoch + 1 end,
           holder = excluded.holder,
           expires_at = excluded.expires_at
         where leases.holder = excluded.holder or leases.expires_at <= ?
         returning *`,
      ).get(name, holder, now + ttlMs, now) as Row | undefined;
      return r && toLease(r);
    },
    release(name, holder) {
      sql('update leases set expires_at = 0 where name = ? and holder = ?').run(name, holder);
    },
    current(name) {
      const r = sql('select * from leases where name = ?').get(name) as Row | undefined;
      return r && toLease(r);
    },
  };
}
