import { ValidationError } from '../model/errors.ts';
import type { Role, Store } from '../store/store.ts';
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
    grant(g: GrantInput) {
      const [kind, id] = g.owner.split(':') as ['user' | 'project', string];
      if (kind === 'user' ? !store.getUser(id) : !store.projectExists(id)) throw notFound(`${kind} ${id}`);
      if (!categories.has(g.category)) {
        throw new ValidationError([
          { path: 'category', message: `names no product category (there is ${[...categories].join(', ')})` },
        ]);
      }
      const start = g.start ?? now();
      const end = g.end ?? start + YEAR;
      if (end <= start) throw new ValidationError([{ path: 'end', message: 'must be after start' }]);
      const allocation = store.grant(g.owner, g.category, g.credits, start, end);
      return { id: allocation, owner: g.owner, category: g.category, credits: g.credits, start, end };
    },

    createUser(name: string, admin = false) {
      if (!store.createUser(name, admin)) throw conflict(`user ${name} already exists`);
      return { name, admin };
    },

    createProject(id: string, title: string) {
      if (!store.createProject(id, title)) throw conflict(`project ${id} already exists`);
      return { id, title };
    },

    /** Adds a member, or changes a member's role. */
    setMember(projectId: string, username: string, role: Role) {
      if (!store.projectExists(projectId)) throw notFound(`project ${projectId}`);
      if (!store.getUser(username)) throw notFound(`user ${username}`);
      store.setMember(projectId, username, role);
      return { projectId, username, role };
    },

    createToken(username: string, description: string) {
      if (!store.getUser(username)) throw notFound(`user ${username}`);
      return { token: store.createToken(username, description) };
    },
  };
}
