import type { SQLInputValue } from 'node:sqlite';
import type { Role, Store } from './store.ts';

// Users, projects, members and tokens as administrators see them: listed and searched, a page at a
// time in name order, and the changes that take access away. Tokens are known by their hash only;
// an id made of its first characters names one without being one.

type Row = Record<string, SQLInputValue>;

export interface DirectoryUser {
  name: string;
  admin: boolean;
  createdAt: number;
  disabledAt: number | null;
  /** How many tokens the user has. */
  tokens: number;
  projects: { id: string; role: Role }[];
}

export interface DirectoryProject {
  id: string;
  title: string;
  createdAt: number;
  members: { username: string; role: Role }[];
}

/** A token's metadata: never the token, nor its whole hash. */
export interface TokenMetadata {
  id: string;
  username: string;
  description: string;
  createdAt: number;
}

/** Characters of a token's hash that name it: 64 bits, which no two tokens share by chance. */
export const TOKEN_ID_LENGTH = 16;
export const TOKEN_ID_PATTERN = `^[0-9a-f]{${TOKEN_ID_LENGTH}}$`;
const TOKEN_ID = new RegExp(TOKEN_ID_PATTERN);

/** A page of a list in name order: at most `limit` after `after`, matching `query` (any case). */
export interface ListPage {
  query?: string | undefined;
  after?: string | undefined;
  limit: number;
}

export type Directory = ReturnType<typeof directory>;

export function directory(store: Store) {
  const { db } = store;
  const like = (q: string | undefined) => `%${(q ?? '').toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  const usersPage = db.prepare(
    `select * from users where lower(name) like ? escape '\\' and name > ? order by name limit ?`,
  );
  const tokenCount = db.prepare('select count(*) as n from tokens where username = ?');
  const membershipsOf = db.prepare(
    'select project_id, role from memberships where username = ? order by project_id',
  );
  const projectsPage = db.prepare(
    `select * from projects where (lower(id) like ? escape '\\' or lower(title) like ? escape '\\') and id > ?
     order by id limit ?`,
  );
  const membersOf = db.prepare(
    'select username, role from memberships where project_id = ? order by username',
  );
  const tokensPage = db.prepare(
    `select hash, username, description, created_at from tokens
     where (lower(username) like ? escape '\\' or lower(description) like ? escape '\\') and hash > ?
     order by hash limit ?`,
  );
  const tokensById = db.prepare(
    'select hash, username, description, created_at from tokens where hash like ?',
  );
  const deleteToken = db.prepare('delete from tokens where hash = ?');
  const setDisabled = db.prepare('update users set disabled_at = ? where name = ?');
  const deleteUiSessions = db.prepare('delete from ui_sessions where username = ?');
  const deleteSessions = db.prepare('delete from sessions where username = ?');
  const deleteMember = db.prepare('delete from memberships where project_id = ? and username = ?');

  const toToken = (r: Row): TokenMetadata => ({
    id: (r.hash as string).slice(0, TOKEN_ID_LENGTH),
    username: r.username as string,
    description: r.description as string,
    createdAt: Number(r.created_at),
  });

  return {
    users(p: ListPage): DirectoryUser[] {
      return (usersPage.all(like(p.query), p.after ?? '', p.limit) as Row[]).map((r) => ({
        name: r.name as string,
        admin: r.admin === 1,
        createdAt: Number(r.created_at),
        disabledAt: r.disabled_at === null ? null : Number(r.disabled_at),
        tokens: Number((tokenCount.get(r.name as string) as Row).n),
        projects: (membershipsOf.all(r.name as string) as Row[]).map((m) => ({
          id: m.project_id as string,
          role: m.role as Role,
        })),
      }));
    },

    projects(p: ListPage): DirectoryProject[] {
      const q = like(p.query);
      return (projectsPage.all(q, q, p.after ?? '', p.limit) as Row[]).map((r) => ({
        id: r.id as string,
        title: r.title as string,
        createdAt: Number(r.created_at),
        members: (membersOf.all(r.id as string) as Row[]).map((m) => ({
          username: m.username as string,
          role: m.role as Role,
        })),
      }));
    },

    /** Tokens in id order; `after` is an id. */
    tokens(p: ListPage): TokenMetadata[] {
      const q = like(p.query);
      return (tokensPage.all(q, q, p.after ?? '', p.limit) as Row[]).map(toToken);
    },

    /** The token with this id, if any. */
    token(id: string): TokenMetadata | undefined {
      if (!TOKEN_ID.test(id)) return undefined;
      const [found] = tokensById.all(`${id}%`) as Row[];
      return found && toToken(found);
    },

    /** Deletes the token with this id; whether there was one. */
    revokeToken(id: string): boolean {
      if (!TOKEN_ID.test(id)) return false;
      const [found] = tokensById.all(`${id}%`) as Row[];
      return found !== undefined && deleteToken.run(found.hash as string).changes === 1;
    },

    /** Disables a user (at `at`) or enables them again (null); disabling ends their sign-ins and sessions. */
    setDisabled(name: string, at: number | null): void {
      store.transaction(() => {
        setDisabled.run(at, name);
        if (at !== null) {
          deleteUiSessions.run(name);
          deleteSessions.run(name);
        }
      });
    },

    /** Removes a member from a project; whether they were one. */
    removeMember(projectId: string, username: string): boolean {
      return deleteMember.run(projectId, username).changes === 1;
    },
  };
}
