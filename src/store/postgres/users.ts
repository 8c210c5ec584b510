import { toUser } from '../rows.ts';
import { hashToken, newToken, type Role, type UserStore } from '../users.ts';
import type { Connection } from './database.ts';

export function postgresUsers({ query }: Connection): UserStore {
  return {
    async createUser(name, admin, now = Date.now()) {
      return (
        (await query.changed(
          'insert into users (name, admin, created_at) values (?, ?, ?) on conflict do nothing',
          name,
          admin ? 1 : 0,
          now,
        )) === 1
      );
    },
    async getUser(name) {
      const [r] = await query('select * from users where name = ?', name);
      return r && toUser(r);
    },
    async createProject(id, title, now = Date.now()) {
      return (
        (await query.changed(
          'insert into projects (id, title, created_at) values (?, ?, ?) on conflict do nothing',
          id,
          title,
          now,
        )) === 1
      );
    },
    async projectExists(id) {
      return (await query('select 1 from projects where id = ?', id)).length > 0;
    },
    async setMember(projectId, username, role) {
      await query(
        'insert into memberships (project_id, username, role) values (?, ?, ?) on conflict (project_id, username) do update set role = excluded.role',
        projectId,
        username,
        role,
      );
    },
    async memberships(username) {
      const rows = await query('select project_id, role from memberships where username = ?', username);
      return rows.map((r) => ({ projectId: r.project_id as string, role: r.role as Role }));
    },
    async createToken(username, description, now = Date.now()) {
      const token = newToken();
      await query(
        'insert into tokens (hash, username, description, created_at) values (?, ?, ?, ?)',
        hashToken(token),
        username,
        description,
        now,
      );
      return token;
    },
    async userForToken(token) {
      const [r] = await query(
        'select users.* from tokens join users on users.name = tokens.username where tokens.hash = ? and users.disabled_at is null',
        hashToken(token),
      );
      return r && toUser(r);
    },
  };
}
