import { type Directory, likePattern, TOKEN_ID } from '../directory.ts';
import { type Row, toToken } from '../rows.ts';
import type { Role } from '../users.ts';
import type { Connection, Query } from './database.ts';

export function postgresDirectory({ query, atomic }: Connection): Directory {
  const tokenWithId = async (id: string): Promise<Row | undefined> =>
    TOKEN_ID.test(id)
      ? (
          await query(
            'select hash, username, description, created_at from tokens where hash like ?',
            `${id}%`,
          )
        )[0]
      : undefined;
  const membersOf = (q: Query, column: 'username' | 'project_id', value: string) =>
    q(
      `select project_id, username, role from memberships where ${column} = ? order by project_id, username`,
      value,
    );
  return {
    async users(p) {
      const rows = await query(
        `select users.*, (select count(*) from tokens where tokens.username = users.name) as tokens
         from users where lower(name) like ? escape '\\' and name > ? order by name limit ?`,
        likePattern(p.query),
        p.after ?? '',
        p.limit,
      );
      const out = [];
      for (const r of rows) {
        out.push({
          name: r.name as string,
          admin: r.admin === 1,
          createdAt: Number(r.created_at),
          disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
          tokens: Number(r.tokens),
          projects: (await membersOf(query, 'username', r.name as string)).map((m) => ({
            id: m.project_id as string,
            role: m.role as Role,
          })),
        });
      }
      return out;
    },
    async projects(p) {
      const q = likePattern(p.query);
      const rows = await query(
        `select * from projects where (lower(id) like ? escape '\\' or lower(title) like ? escape '\\') and id > ?
         order by id limit ?`,
        q,
        q,
        p.after ?? '',
        p.limit,
      );
      const out = [];
      for (const r of rows) {
        out.push({
          id: r.id as string,
          title: r.title as string,
          createdAt: Number(r.created_at),
          members: (await membersOf(query, 'project_id', r.id as string)).map((m) => ({
            username: m.username as string,
            role: m.role as Role,
          })),
        });
      }
      return out;
    },
    async tokens(p) {
      const q = likePattern(p.query);
      const rows = await query(
        `select hash, username, description, created_at from tokens
         where (lower(username) like ? escape '\\' or lower(description) like ? escape '\\') and hash > ?
         order by hash limit ?`,
        q,
        q,
        p.after ?? '',
        p.limit,
      );
      return rows.map(toToken);
    },
    async token(id) {
      const found = await tokenWithId(id);
      return found && toToken(found);
    },
    async revokeToken(id) {
      const found = await tokenWithId(id);
      return (
        found !== undefined && (await query.changed('delete from tokens where hash = ?', found.hash)) === 1
      );
    },
    setDisabled(name, at) {
      return atomic(async (q) => {
        await q('update users set disabled_at = ? where name = ?', at, name);
        if (at !== null) {
          await q('delete from ui_sessions where username = ?', name);
          await q('delete from sessions where username = ?', name);
        }
      });
    },
    async removeMember(projectId, username) {
      return (
        (await query.changed(
          'delete from memberships where project_id = ? and username = ?',
          projectId,
          username,
        )) === 1
      );
    },
  };
}
