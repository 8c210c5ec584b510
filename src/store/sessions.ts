// Interactive sessions (web, VNC, shell) and the web interface's sign-ins, by the hash of their secret.

export interface SessionRecord {
  hash: string;
  /** TICKET: the one-time secret of a web session URL, traded for a WEB session on its origin. */
  kind: 'TICKET' | 'WEB' | 'VNC' | 'SHELL';
  jobId: string;
  rank: number;
  username: string;
  createdAt: number;
  lastUsedAt: number;
  expiresAt: number;
}

/** A signed-in browser of the web interface (its cookie's secret is known by hash only). */
export interface UiSessionRecord {
  hash: string;
  username: string;
  createdAt: number;
  lastUsedAt: number;
  expiresAt: number;
}

export interface SessionStore {
  insert(s: SessionRecord): Promise<void>;
  get(hash: string): Promise<SessionRecord | undefined>;
  /** Removes the session and answers it, in one step: a one-time secret is used once. */
  take(hash: string): Promise<SessionRecord | undefined>;
  touch(hash: string, at: number, expiresAt: number): Promise<void>;
  /** Removes the sessions of these jobs (one statement on PostgreSQL). */
  deleteOf(jobIds: readonly string[]): Promise<void>;
  deleteExpired(at: number): Promise<void>;
}

export interface SignInStore {
  insertUiSession(s: UiSessionRecord): Promise<void>;
  uiSession(hash: string): Promise<UiSessionRecord | undefined>;
  touchUiSession(hash: string, at: number, expiresAt: number): Promise<void>;
  deleteUiSession(hash: string): Promise<void>;
  insertLink(hash: string, username: string, expiresAt: number): Promise<void>;
  /** Whose the link is, leaving it unused. */
  link(hash: string): Promise<{ username: string; expiresAt: number } | undefined>;
  /** Removes the link and answers whose it was, in one step: a link signs in once. */
  takeLink(hash: string): Promise<{ username: string; expiresAt: number } | undefined>;
  /** Forgets expired web sessions and sign-in links. */
  deleteExpired(at: number): Promise<void>;
}
