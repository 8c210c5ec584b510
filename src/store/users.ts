import { hash, randomBytes } from 'node:crypto';

// Users, projects, their memberships, and users' API tokens.

export type Role = 'PI' | 'ADMIN' | 'USER';

export interface UserRecord {
  name: string;
  admin: boolean;
  createdAt: number;
  /** When an administrator disabled the user; null while enabled. */
  disabledAt: number | null;
}

export interface Membership {
  projectId: string;
  role: Role;
}

export interface UserStore {
  /** False when the user exists already. */
  createUser(name: string, admin: boolean, now?: number): Promise<boolean>;
  getUser(name: string): Promise<UserRecord | undefined>;
  /** False when the project exists already. */
  createProject(id: string, title: string, now?: number): Promise<boolean>;
  projectExists(id: string): Promise<boolean>;
  setMember(projectId: string, username: string, role: Role): Promise<void>;
  memberships(username: string): Promise<Membership[]>;
  /** Makes a new API token for a user; only its hash is kept. */
  createToken(username: string, description: string, now?: number): Promise<string>;
  /** The user a token opens: none for an unknown token, or a disabled user's. */
  userForToken(token: string): Promise<UserRecord | undefined>;
}

/** Secrets (tokens, session secrets) are kept by this hash only. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

export function newToken(): string {
  return `uc_${randomBytes(24).toString('base64url')}`;
}
