import { toSession } from '../rows.ts';
import type { SessionStore, SignInStore } from '../sessions.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteSessions({ sql }: SqliteDatabase): Synchronous<SessionStore> {
  return {
    insert(s) {
      sql(
        'insert into sessions (hash, kind, job_id, rank, username, created_at, last_used_at, expires_at) values (?, ?, ?, ?, ?, ?, ?, ?)',
      ).run(s.hash, s.kind, s.jobId, s.rank, s.username, s.createdAt, s.lastUsedAt, s.expiresAt);
    },
    get(hash) {
      const r = sql('select * from sessions where hash = ?').get(hash) as Row | undefined;
      return r && toSession(r);
    },
    take(hash) {
      const r = sql('delete from sessions where hash = ? returning *').get(hash) as Row | undefined;
      return r && toSession(r);
    },
    touch(hash, at, expiresAt) {
      sql('update sessions set last_used_at = ?, expires_at = ? where hash = ?').run(at, expiresAt, hash);
    },
    deleteOf(jobIds) {
      for (const id of jobIds) sql('delete from sessions where job_id = ?').run(id);
    },
    deleteExpired(at) {
      sql('delete from sessions where expires_at <= ?').run(at);
    },
  };
}

export function sqliteSignIns({ sql }: SqliteDatabase): Synchronous<SignInStore> {
  return {
    insertUiSession(s) {
      sql(
        'insert into ui_sessions (hash, username, created_at, last_used_at, expires_at) values (?, ?, ?, ?, ?)',
      ).run(s.hash, s.username, s.createdAt, s.lastUsedAt, s.expiresAt);
    },
    uiSession(hash) {
      const r = sql('select * from ui_sessions where hash = ?').get(hash) as Row | undefined;
      return (
        r && {
          hash: r.hash as string,
          username: r.username as string,
          createdAt: Number(r.created_at),
          lastUsedAt: Number(r.last_used_at),
          expiresAt: Number(r.expires_at),
        }
      );
    },
    touchUiSession(hash, at, expiresAt) {
      sql('update ui_sessions set last_used_at = ?, expires_at = ? where hash = ?').run(at, expiresAt, hash);
    },
    deleteUiSession(hash) {
      sql('delete from ui_sessions where hash = ?').run(hash);
    },
    insertLink(hash, username, expiresAt) {
      sql('insert into sign_in_links (hash, username, expires_at) values (?, ?, ?)').run(
        hash,
        username,
        expiresAt,
      );
    },
    link(hash) {
      const r = sql('select * from sign_in_links where hash = ?').get(hash) as Row | undefined;
      return r && { username: r.username as string, expiresAt: Number(r.expires_at) };
    },
    takeLink(hash) {
      const r = sql('delete from sign_in_links where hash = ? returning *').get(hash) as Row | undefined;
      return r && { username: r.username as string, expiresAt: Number(r.expires_at) };
    },
    deleteExpired(at) {
      sql('delete from ui_sessions where expires_at <= ?').run(at);
      sql('delete from sign_in_links where expires_at <= ?').run(at);
    },
  };
}
