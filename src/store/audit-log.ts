// Every administrative action, kept: who did what to what, when, with the details that matter
// (never a secret: a token made is named by its id, not the token).

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

export interface AuditQuery {
  actor?: string;
  /** A prefix of the action. */
  action?: string;
  target?: string;
  before?: number;
  limit: number;
}

export interface AuditLog {
  record(entry: Omit<AuditEntry, 'id'>): Promise<void>;
  /** Newest first: at most `limit` before the entry `before`, filtered by actor, action prefix and target. */
  entries(q: AuditQuery): Promise<AuditEntry[]>;
}

/** A LIKE pattern's special characters escaped (with `\`). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
