import { createHash, randomBytes } from 'node:crypto';
import type { Caller } from '../jobs/service.ts';
import type { Store } from '../store/store.ts';
import { hashToken, type Role } from '../store/users.ts';

// Signing in to the web interface: an API token, or a one-time link made by the CLI, is traded for
// a session whose secret lives in an HttpOnly cookie. Every secret is 256 random bits; the store
// keeps only its hash.

const HOUR = 3_600_000;
/** A session ends after this long without use (sliding). */
export const SESSION_LIFETIME_MS = 12 * HOUR;
/** A sign-in link is used once, within this long. */
export const LINK_LIFETIME_MS = 2 * 60_000;
/** A session's expiry is written at most this often, not on every request. */
const TOUCH_EVERY_MS = 60_000;

/** Who is signed in, as the interface shows it. */
export interface SignedInUser {
  username: string;
  admin: boolean;
  projects: { id: string; role: Role }[];
}

/** A valid session: who holds it, the token its state-changing requests carry, and its expiry. */
export interface UiSession {
  caller: Caller;
  csrfToken: string;
  expiresAt: number;
  /** The expiry moved on with this use: the cookie is to be sent again. */
  extended: boolean;
}

const newSecret = (): string => randomBytes(32).toString('base64url');

/**
 * The CSRF token of a session, derived from its secret: a page of the interface reads it from the
 * sign-in answer, another site's page can neither read it nor work the secret back from it.
 */
export const csrfTokenOf = (secret: string): string =>
  createHash('sha256').update(`ucompute-csrf:${secret}`).digest('base64url');

export type SignIns = ReturnType<typeof webSignIns>;

export function webSignIns(store: Store, now: () => number = Date.now) {
  /** Who a session is for: nobody once the user was disabled. */
  async function callerOf(username: string): Promise<Caller | undefined> {
    const user = await store.users.getUser(username);
    return user && user.disabledAt === null ? { username: user.name, admin: user.admin } : undefined;
  }

  /** Starts a session for a user; answers the cookie's secret. */
  async function start(username: string): Promise<{ secret: string; session: UiSession }> {
    const caller = await callerOf(username);
    if (!caller) throw new Error(`no user ${username}`);
    await store.signIns.deleteExpired(now());
    const secret = newSecret();
    const at = now();
    const expiresAt = at + SESSION_LIFETIME_MS;
    await store.signIns.insertUiSession({
      hash: hashToken(secret),
      username,
      createdAt: at,
      lastUsedAt: at,
      expiresAt,
    });
    return { secret, session: { caller, csrfToken: csrfTokenOf(secret), expiresAt, extended: false } };
  }

  const endListeners = new Set<() => void>();

  return {
    start,

    /** Whether a cookie's secret opens an unexpired session, without extending it. */
    async holds(secret: string): Promise<boolean> {
      const record = secret === '' ? undefined : await store.signIns.uiSession(hashToken(secret));
      return (
        record !== undefined && record.expiresAt > now() && (await callerOf(record.username)) !== undefined
      );
    },

    /** Called after any session was signed out; returns the unsubscribe function. */
    onEnd(listener: () => void): () => void {
      endListeners.add(listener);
      return () => endListeners.delete(listener);
    },

    /** The session behind a cookie's secret if it is unexpired; its use extends it. */
    async resume(secret: string): Promise<UiSession | undefined> {
      if (secret === '') return undefined;
      const hash = hashToken(secret);
      const record = await store.signIns.uiSession(hash);
      const at = now();
      if (!record || record.expiresAt <= at) return undefined;
      const caller = await callerOf(record.username);
      if (!caller) return undefined;
      const extended = at - record.lastUsedAt >= TOUCH_EVERY_MS;
      const expiresAt = extended ? at + SESSION_LIFETIME_MS : record.expiresAt;
      if (extended) await store.signIns.touchUiSession(hash, at, expiresAt);
      return { caller, csrfToken: csrfTokenOf(secret), expiresAt, extended };
    },

    /** Signs a session out: its secret opens nothing any more. */
    async end(secret: string): Promise<void> {
      await store.signIns.deleteUiSession(hashToken(secret));
      for (const l of endListeners) l();
    },

    /** A one-time sign-in link's secret for a user. */
    async createLink(username: string): Promise<{ secret: string; expiresAt: number }> {
      const secret = newSecret();
      const expiresAt = now() + LINK_LIFETIME_MS;
      await store.signIns.insertLink(hashToken(secret), username, expiresAt);
      return { secret, expiresAt };
    },

    /** Whose a link is while it is unused and unexpired, without using it (the page that asks first). */
    async linkHolder(secret: string): Promise<string | undefined> {
      const link = secret === '' ? undefined : await store.signIns.link(hashToken(secret));
      return link && link.expiresAt > now() && (await callerOf(link.username)) ? link.username : undefined;
    },

    /** Uses a link up (even when it has expired) and starts a session if it was still valid. */
    async redeemLink(secret: string): Promise<{ secret: string; session: UiSession } | undefined> {
      if (secret === '') return undefined;
      const link = await store.signIns.takeLink(hashToken(secret));
      if (!link || link.expiresAt <= now() || !(await callerOf(link.username))) return undefined;
      return start(link.username);
    },

    /** What the interface shows of a signed-in user. */
    async userOf(caller: Caller): Promise<SignedInUser> {
      const memberships = await store.users.memberships(caller.username);
      const projects = memberships.map((m) => ({ id: m.projectId, role: m.role }));
      return { username: caller.username, admin: caller.admin, projects };
    },
  };
}
