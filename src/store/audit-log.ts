import type { SQLInputValue } from 'node:sqlite';
import type { Store } from './store.ts';

// Every administrative action, kept: who did what to what, when, with the details that matter
// (never a secret: a token made is named by its id, not the token).

type Row = Record<string, SQLInputValue>;

export interface AuditEntry {
  id: number;
  at: number;
  /** The administrator who acted. */
  actor: string;
  /** What was done, as `<area>.<verb>`: `user.create`, `token.revoke`, `member.remove`, ... */
  action: string;
  /** What it was done to: `user:alice`, `project:climate`, `token:<id>`, ... */
  target: string;
  details: Record<string, unknown>;
}

export type AuditLog = ReturnType<typeof auditLog>;

export function auditLog(store: Store) {
  const insert = store.db.prepare(
    'insert into audit_log (at, actor, action, target, details) values (?, ?, ?, ?, ?)',
  );
  const page = store.db.prepare(
    `select * from audit_log
     where (? = '' or actor = ?) and (? = '' or action like ? escape '\\') and (? = '' or target = ?) and id < ?
     order by id desc limit ?`,
  );
  return {
    record(entry: Omit<AuditEntry, 'id'>): void {
      insert.run(entry.at, entry.actor, entry.action, entry.target, JSON.stringify(entry.details));
    },

    /** Newest first: at most `limit` before the entry `before`, filtered by actor, action prefix and target. */
    entries(q: {
      actor?: string;
      action?: string;
      target?: string;
      before?: number;
      limit: number;
    }): AuditEntry[] {
      const action = (q.action ?? '').replace(/[\\%_]/g, (c) => `\\${c}`);
      return (
        page.all(
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
