import { type AuditLog, escapeLike } from '../audit-log.ts';
import type { Connection } from './database.ts';

export function postgresAuditLog({ query }: Connection): AuditLog {
  return {
    async record(entry) {
      await query(
        'insert into audit_log (at, actor, action, target, details) values (?, ?, ?, ?, ?)',
        entry.at,
        entry.actor,
        entry.action,
        entry.target,
        JSON.stringify(entry.details),
      );
    },
    async entries(q) {
      const action = escapeLike(q.action ?? '');
      const rows = await query(
        `select * from audit_log
         where (?::text = '' or actor = ?) and (?::text = '' or action like ? escape '\\') and (?::text = '' or target = ?)
           and id < ?
         order by id desc limit ?`,
        q.actor ?? '',
        q.actor ?? '',
        action,
        `${action}%`,
        q.target ?? '',
        q.target ?? '',
        q.before ?? Number.MAX_SAFE_INTEGER,
        q.limit,
      );
      return rows.map((r) => ({
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
