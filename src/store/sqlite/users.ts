import { toUser } from '../rows.ts';
import type { Role, UserStore } from '../users.ts';
import { hashToken, newToken } from '../users.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteUsers({ sql }: SqliteDatabase): Synchronous<UserStore> {
  return {
    createUser(name, admin, now = Date.now()) {
      return (
        sql('insert or ignore into users (name, admin, created_at) values (?, ?, ?)').run(
          name,
          admin ? 1 : 0,
          now,
        ).changes === 1
      );
    },
    getUser(name) {
      const r = sql('select * from users where name = ?').get(name) as Row | undefined;
      return r && toUser(r);
    },
    createProject(id, title, now = Date.now()) {
      return (
        sql('insert or ignore into projects (id, title, created_at) values (?, ?, ?)').run(id, title, now)
          .changes === 1
      );
    },
    projectExists(id) {
      return sql('select 1 from projects where id = ?').get(id) !== undefined;
    },
    setMember(projectId, username, role) {
      sql(
        'insert into memberships (project_id, username, role) values (?, ?, ?) on conflict (project_id, username) do update set role = excluded.role',
      ).run(projectId, username, role);
    },
    memberships(username) {
      return (sql('select project_id, role from memberships where username = ?').all(username) as Row[]).map(
        (r) => ({ projectId: r.project_id as string, role: r.role as Role }),
      );
    },
    createToken(username, description, now = Date.now()) {
      const token = newToken();
      sql('insert into tokens (hash, username, description, created_at) values (?, ?, ?, ?)').run(
        hashToken(token),
        username,
        description,
        now,
      );
      return token;
    },
    userForToken(token) {
      const r = sql(
        'select users.* from tokens join users on users.name = tokens.username where tokens.hash = ? and users.disabled_at is null',
      ).get(hashToken(token)) as Row | undefined;
      return r && toUser(r);
    },
  };
}
