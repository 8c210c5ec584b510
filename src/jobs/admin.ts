import { ValidationError } from '../model/errors.ts';
import type { AllocationRecord } from '../store/accounting.ts';
import type { AuditEntry } from '../store/audit-log.ts';
import type { DirectoryProject, DirectoryUser, ListPage, TokenMetadata } from '../store/directory.ts';
import type { Store, StoreParts } from '../store/store.ts';
import type { Role } from '../store/users.ts';
import type { Caller } from './access.ts';
import { conflict, notFound } from './errors.ts';
import type { JobEnvironment } from './prepare.ts';

// What operators do: users, projects and their members, tokens, and credits granted to owners;
// the lists they search; the changes that take access away. Every change is written to the audit
// log with the administrator who made it, in the same transaction.

const YEAR = 365 * 86_400_000;
const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

export interface GrantInput {
  /** `user:<name>` or `project:<id>`. */
  owner: string;
  category: string;
  credits: number;
  start?: number;
  end?: number;
}

/** A search over one of the lists: text in its names, a page at a time. */
export interface ListQuery {
  query?: string | undefined;
  /** The `next` of the page before. */
  next?: string | undefined;
  itemsPerPage?: number | undefined;
}

export interface Page<T> {
  items: T[];
  next: string | null;
}

export type AdminOperations = ReturnType<typeof adminOperations>;

export function adminOperations(store: Store, env: JobEnvironment, now: () => number = Date.now) {
  const categories = new Set(env.products.map((p) => p.category));
  const people = store.directory;

  /** Runs a change and records it, together: a change is never made without its entry. */
  function audited<T>(
    actor: Caller,
    action: string,
    target: string,
    change: (tx: StoreParts) => Promise<T>,
    details = {},
  ): Promise<T> {
    return store.transaction(async (tx) => {
      const result = await change(tx);
      await tx.audit.record({ at: now(), actor: actor.username, action, target, details });
      return result;
    });
  }

  async function page<T>(
    q: ListQuery,
    list: (p: ListPage) => Promise<T[]>,
    key: (t: T) => string,
  ): Promise<Page<T>> {
    const limit = Math.min(Math.max(1, q.itemsPerPage ?? DEFAULT_PAGE), MAX_PAGE);
    const items = await list({
      ...(q.query ? { query: q.query } : {}),
      ...(q.next ? { after: q.next } : {}),
      limit: limit + 1,
    });
    const shown = items.slice(0, limit);
    return { items: shown, next: items.length > limit ? key(shown.at(-1)!) : null };
  }

  async function knownUser(name: string): Promise<void> {
    if (!(await store.users.getUser(name))) throw notFound(`user ${name}`);
  }

  return {
    /** Credits for an owner in a product category, valid from `start` (now) for a year unless `end`. */
    async grant(actor: Caller, g: GrantInput) {
      const [kind, id] = g.owner.split(':') as ['user' | 'project', string];
      const exists =
        kind === 'user' ? (await store.users.getUser(id)) !== undefined : await store.users.projectExists(id);
      if (!exists) throw notFound(`${kind} ${id}`);
      if (!categories.has(g.category)) {
        throw new ValidationError([
          { path: 'category', message: `names no product category (there is ${[...categories].join(', ')})` },
        ]);
      }
      const start = g.start ?? now();
      const end = g.end ?? start + YEAR;
      if (end <= start) throw new ValidationError([{ path: 'end', message: 'must be after start' }]);
      const details = { category: g.category, credits: g.credits, start, end };
      const allocation = await audited(
        actor,
        'grant.create',
        g.owner,
        (tx) => tx.accounting.grant(g.owner, g.category, g.credits, start, end),
        details,
      );
      return { id: allocation, owner: g.owner, category: g.category, credits: g.credits, start, end };
    },

    async createUser(actor: Caller, name: string, admin = false) {
      await audited(
        actor,
        'user.create',
        `user:${name}`,
        async (tx) => {
          if (!(await tx.users.createUser(name, admin))) throw conflict(`user ${name} already exists`);
        },
        { admin },
      );
      return { name, admin };
    },

    async createProject(actor: Caller, id: string, title: string) {
      await audited(
        actor,
        'project.create',
        `project:${id}`,
        async (tx) => {
          if (!(await tx.users.createProject(id, title))) throw conflict(`project ${id} already exists`);
        },
        { title },
      );
      return { id, title };
    },

    /** Adds a member, or changes a member's role. */
    async setMember(actor: Caller, projectId: string, username: string, role: Role) {
      if (!(await store.users.projectExists(projectId))) throw notFound(`project ${projectId}`);
      await knownUser(username);
      await audited(
        actor,
        'member.set',
        `project:${projectId}`,
        (tx) => tx.users.setMember(projectId, username, role),
        { username, role },
      );
      return { projectId, username, role };
    },

    async removeMember(actor: Caller, projectId: string, username: string) {
      await audited(
        actor,
        'member.remove',
        `project:${projectId}`,
        async (tx) => {
          if (!(await tx.directory.removeMember(projectId, username)))
            throw notFound(`member ${username} of project ${projectId}`);
        },
        { username },
      );
      return { projectId, username };
    },

    async createToken(actor: Caller, username: string, description: string) {
      await knownUser(username);
      const token = await audited(
        actor,
        'token.create',
        `user:${username}`,
        (tx) => tx.users.createToken(username, description),
        { description },
      );
      return { token };
    },

    /** Revokes a token by its id: it opens nothing from now on. */
    async revokeToken(actor: Caller, id: string): Promise<TokenMetadata> {
      const token = await people.token(id);
      if (!token) throw notFound(`token ${id}`);
      await audited(actor, 'token.revoke', `token:${id}`, (tx) => tx.directory.revokeToken(id), {
        username: token.username,
        description: token.description,
      });
      return token;
    },

    /** Disables a user (their tokens and sign-ins stop working), or enables them again. */
    async setDisabled(actor: Caller, name: string, disabled: boolean) {
      await knownUser(name);
      if (disabled && name === actor.username) throw conflict('administrators cannot disable themselves');
      await audited(actor, disabled ? 'user.disable' : 'user.enable', `user:${name}`, (tx) =>
        tx.directory.setDisabled(name, disabled ? now() : null),
      );
      return { name, disabled };
    },

    users: (q: ListQuery): Promise<Page<DirectoryUser>> => page(q, people.users, (u) => u.name),
    projects: (q: ListQuery): Promise<Page<DirectoryProject>> => page(q, people.projects, (p) => p.id),
    tokens: (q: ListQuery): Promise<Page<TokenMetadata>> => page(q, people.tokens, (t) => t.id),

    /** Grants (allocations), their owner or category containing the query, newest first. */
    async grants(q: ListQuery): Promise<Page<AllocationRecord>> {
      const text = (q.query ?? '').toLowerCase();
      const all = (await store.accounting.allocations())
        .filter((a) => `${a.owner} ${a.category}`.toLowerCase().includes(text))
        .reverse();
      const from = q.next === undefined ? 0 : all.findIndex((a) => String(a.id) === q.next) + 1;
      const limit = Math.min(Math.max(1, q.itemsPerPage ?? DEFAULT_PAGE), MAX_PAGE);
      const items = all.slice(from, from + limit);
      return { items, next: from + limit < all.length ? String(items.at(-1)!.id) : null };
    },

    /** The audit log, newest first. */
    async audit(q: {
      actor?: string;
      action?: string;
      target?: string;
      next?: string;
      itemsPerPage?: number;
    }): Promise<Page<AuditEntry>> {
      const limit = Math.min(Math.max(1, q.itemsPerPage ?? DEFAULT_PAGE), MAX_PAGE);
      const entries = await store.audit.entries({
        ...(q.actor ? { actor: q.actor } : {}),
        ...(q.action ? { action: q.action } : {}),
        ...(q.target ? { target: q.target } : {}),
        ...(q.next ? { before: Number(q.next) } : {}),
        limit: limit + 1,
      });
      const items = entries.slice(0, limit);
      return { items, next: entries.length > limit ? String(items.at(-1)!.id) : null };
    },
  };
}
