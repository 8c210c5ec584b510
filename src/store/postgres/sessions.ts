import { toSession } from '../rows.ts';
import type { SessionStore, SignInStore } from '../sessions.ts';
import type { Connection } from './database.ts';

export function postgresSessions({ query }: Connection): SessionStore {
  return {
    async insert(s) {
      await query(
        'insert into sessions (hash, kind, job_id, rank, username, created_at, last_used_at, expires_at) values (?, ?, ?, ?, ?, ?, ?, ?)',
        s.hash,
        s.kind,
        s.jobId,
        s.rank,
        s.username,
        s.createdAt,
        s.lastUsedAt,
        s.expiresAt,
      );
    },
    async get(hash) {
      const [r] = await query('select * from sessions where hash = ?', hash);
      return r && toSession(r);
    },
    async take(hash) {
      const [r] = await query('delete from sessions where hash = ? returning *', hash);
      return r && toSession(r);
    },
    async touch(hash, at, expiresAt) {
      await query('update sessions set last_used_at = ?, expires_at = ? where hash = ?', at, expiresAt, hash);
    },
    async deleteOf(jobIds) {
      if (jobIds.length > 0) await query('delete from sessions where job_id = any(?::text[])', jobIds);
    },
    async deleteExpired(at) {
      await query('delete from sessions where expires_at <= ?', at);
    },
  };
}

export function postgresSignIns({ query }: Connection): SignInStore {
  return {
    async insertUiSession(s) {
      await query(
        'insert into ui_sessions (hash, username, created_at, last_used_at, expires_at) values (?, ?, ?, ?, ?)',
        s.hash,
        s.username,
        s.createdAt,
        s.lastUsedAt,
        s.expiresAt,
      );
    },
    async uiSession(hash) {
      const [r] = await query('select * from ui_sessions where hash = ?', hash);
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
    async touchUiSession(hash, at, expiresAt) {
      await query(
        'update ui_sessions set last_used_at = ?, expires_at = ? where hash = ?',
        at,
        expiresAt,
        hash,
      );
    },
    async deleteUiSession(hash) {
      await query('delete from ui_sessions where hash = ?', hash);
    },
    async insertLink(hash, username, expiresAt) {
      await query(
        'insert into sign_in_links (hash, username, expires_at) values (?, ?, ?)',
        hash,
        username,
        expiresAt,
      );
    },
    async link(hash) {
      const [r] = await query('select * from sign_in_links where hash = ?', hash);
      return r && { username: r.username as string, expiresAt: Number(r.expires_at) };
    },
    async takeLink(hash) {
      const [r] = await query('delete from sign_in_links where hash = ? returning *', hash);
      return r && { username: r.username as string, expiresAt: Number(r.expires_at) };
    },
    async deleteExpired(at) {
      await query('delete from ui_sessions where expires_at <= ?', at);
      await query('delete from sign_in_links where expires_at <= ?', at);
    },
  };
}
