import { type Directory, likePattern, TOKEN_ID } from '../directory.ts';
import { toToken } from '../rows.ts';
import type { Role } from '../users.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteDirectory({ sql, transaction }: SqliteDatabase): Synchronous<Directory> {
  const tokenWithId = (id: string): Row | undefined =>
    TOKEN_ID.test(id)
      ? (sql('select hash, username, description, created_at from tokens where hash like ?').all(
          `${id}%`,
        )[0] as Row | undefined)
      : undefined;
  return {
    users(p) {
      return (
        sql(
          `select * from users where lower(name) like ? escape '\\' and name > ? order by name limit ?`,
        ).all(likePattern(p.query), p.after ?? '', p.limit) as Row[]
      ).map((r) => ({
        name: r.name as string,
        admin: r.admin === 1,
        createdAt: Number(r.created_at),
        disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
        tokens: Number(
          (sql('select count(*) as n from tokens where username = ?').get(r.name as string) as Row).n,
        ),
        projects: (
          sql('select project_id, role from memberships where username = ? order by project_id').all(
            r.name as string,
          ) as Row[]
        ).map((m) => ({ id: m.project_id as string, role: m.role as Role })),
      }));
    },
    projects(p) {
      const q = likePattern(p.query);
      return (
        sql(
          `select * from projects where (lower(id) like ? escape '\\' or lower(title) like ? escape '\\') and id > ?
           order by id limit ?`,
        ).all(q, q, p.after ?? '', p.limit) as Row[]
      ).map((r) => ({
        id: r.id as string,
        title: r.title as string,
        createdAt: Number(r.created_at),
        members: (
          sql('select username, role from memberships where project_id = ? order by username').all(
            r.id as string,
          ) as Row[]
        ).map((m) => ({ username: m.username as string, role: m.role as Role })),
      }));
    },
    tokens(p) {
      const q = likePattern(p.query);
      return (
        sql(
          `select hash, username, description, created_at from tokens
           where (lower(username) like ? escape '\\' or lower(description) like ? escape '\\') and hash > ?
           order by hash limit ?`,
        ).all(q, q, p.after ?? '', p.limit) as Row[]
      ).map(toToken);
    },
    token(id) {
      const found = tokenWithId(id);
      return found && toToken(found);
    },
    revokeToken(id) {
      const found = tokenWithId(id);
      return (
        found !== undefined &&
        sql('delete from tokens where hash = ?').run(found.hash as string).changes === 1
      );
    },
    setDisabled(name, at) {
      transaction(() => {
        sql('update users set disabled_at = ? where name = ?').run(at, name);
        if (at !== null) {
          sql('delete from ui_sessions where username = ?').run(name);
          sql('delete from sessions where username = ?').run(name);
        }
      });
    },
    removeMember(projectId, username) {
      return (
        sql('delete from memberships where project_id = ? and username = ?').run(projectId, username)
          .changes === 1
      );
    },
  };
}
