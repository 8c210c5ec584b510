import { escapeLike } from './audit-log.ts';
import type { Role } from './users.ts';

// Users, projects, members and tokens as administrators see them: listed and searched, a page at a
// time in name order, and the changes that take access away. Tokens are known by their hash only;
// an id made of its first characters names one without being one.

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
export const TOKEN_ID = new RegExp(TOKEN_ID_PATTERN);

/** A page of a list in name order: at most `limit` after `after`, matching `query` (any case). */
export interface ListPage {
  query?: string | undefined;
  after?: string | undefined;
  limit: number;
}

export interface Directory {
  users(p: ListPage): Promise<DirectoryUser[]>;
  projects(p: ListPage): Promise<DirectoryProject[]>;
  /** Tokens in id order; `after` is an id. */
  tokens(p: ListPage): Promise<TokenMetadata[]>;
  /** The token with this id, if any. */
  token(id: string): Promise<TokenMetadata | undefined>;
  /** Deletes the token with this id; whether there was one. */
  revokeToken(id: string): Promise<boolean>;
  /** Disables a user (at `at`) or enables them again (null); disabling ends their sign-ins and sessions. */
  setDisabled(name: string, at: number | null): Promise<void>;
  /** Removes a member from a project; whether they were one. */
  removeMember(projectId: string, username: string): Promise<boolean>;
}

/** The LIKE pattern of a page's query: its text anywhere, in lower case. */
export function likePattern(query: string | undefined): string {
  return `%${escapeLike((query ?? '').toLowerCase())}%`;
}
