import { ValidationError } from '../model/errors.ts';
import type { Store } from '../store/store.ts';
import type { Role } from '../store/users.ts';
import { conflict, notFound } from './errors.ts';
import type { JobEnvironment } from './prepare.ts';

// What operators do: users, projects and their members, tokens, and credits granted to owners.

const YEAR = 365 * 86_400_000;

export interface GrantInput {
  /** `user:<name>` or `project:<id>`. */
  owner: string;
  category: string;
  credits: number;
  start?: number;
  end?: number;
}

export type AdminOperations = ReturnType<typeof adminOperations>;

export function adminOperations(store: Store, env: JobEnvironment, now: () => number = Date.now) {
  const categories = new Set(env.products.map((p) => p.category));

  return {
    /** Credits for an owner in a product category, valid from `start` (now) for a year unless `end`. */
    async grant(g: GrantInput) {
      const [kind, id] = g.owner.split(':') as ['user' | 'project', string];
      const exists = kind === 'user' ? (await store.users.getUser(id)) !== undefined : await store.users.projectExists(id);
      if (!exists) throw notFound(`${kind} ${id}`);
      if (!categories.has(g.category)) {
        throw new ValidationError([
          { path: 'category', message: `names no product category (there is ${[...categories].join(', ')})` },
        ]);
      }
      const start = g.start ?? now();
      const end = g.end ?? start + YEAR;
      if (end <= start) throw new ValidationError([{ path: 'end', message: 'must be after start' }]);
      const allocation = await store.accounting.grant(g.owner, g.category, g.credits, start, end);
      return { id: allocation, owner: g.owner, category: g.category, credits: g.credits, start, end };
    },

    async createUser(name: string, admin = false) {
      if (!(await store.users.createUser(name, admin))) throw conflict(`user ${name} already exists`);
      return { name, admin };
    },

    async createProject(id: string, title: string) {
      if (!(await store.users.createProject(id, title))) throw conflict(`project ${id} already exists`);
      return { id, title };
    },

    /** Adds a member, or changes a member's role. */
    async setMember(projectId: string, username: string, role: Role) {
      if (!(await store.users.projectExists(projectId))) throw notFound(`project ${projectId}`);
      if (!(await store.users.getUser(username))) throw notFound(`user ${username}`);
      await store.users.setMember(projectId, username, role);
      return { projectId, username, role };
    },

    async createToken(username: string, description: string) {
      if (!(await store.users.getUser(username))) throw notFound(`user ${username}`);
      return { token: await store.users.createToken(username, description) };
    },
  };
}
