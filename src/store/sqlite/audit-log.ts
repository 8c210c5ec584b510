import { type AuditLog, escapeLike } from '../audit-log.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteAuditLog({ sql }: SqliteDatabase): Synchronous<AuditLog> {
  return {
    record(entry) {
      sql('insert into audit_log (at, actor, action, target, details) values (?, ?, ?, ?, ?)').run(
        entry.at,
        entry.actor,
        entry.action,
        entry.target,
        JSON.stringify(entry.details),
      );
    },
    entries(q) {
      const action = escapeLike(q.action ?? '');
      return (
        sql(
          `select * from audit_log
           where (? = '' or actor = ?) and (? = '' or action like ? escape '\\') and (? = '' or target = ?) and id < ?
           order by id desc limit ?`,
        ).all(
          q.actor ?? '',
          q.actor ?? '',
          action,
          `${action}%`,
          q.target ?? '',
          q.target ?? '',
          q.before ?? Number.MAX_SAFE_INTEGER,
          q.limit,
        ) as Row[]
      ).map((r) => ({
        id: Number(r.id),
        at: Number(r.at),
        actor: r.actor as string,
        action: r.action as string,
        target: r.target as string,
        details: JSON.parse(r.details as string) as Record<string, unknown>,
      }));
    },
  };
}
