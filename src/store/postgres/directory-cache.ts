import { hashToken, type Membership, type UserRecord, type UserStore } from '../users.ts';
import { listenOn } from './listen.ts';

/**
 * The channel on which every change of users, tokens and memberships is announced, by triggers
 * on those tables (the migration that adds them names it): whichever replica or tool made it.
 */
export const DIRECTORY_CHANNEL = 'ucompute_directory';

/** Entries kept at most of each kind; past that the cache starts again empty. */
const MAX_ENTRIES = 10_000;

export interface DirectoryCache {
  /** `users` with who a token names and a user's memberships answered from the cache. */
  users(users: UserStore): UserStore;
  /** Forgets everything: this process changed the directory (called once its change committed). */
  invalidate(): void;
  end(): Promise<void>;
}

/**
 * Who a token names and whose projects a user is in, kept by each replica between changes: every
 * API call asks both, and they change rarely. A change anywhere empties every replica's cache as
 * soon as its notification arrives (this process's own changes at their commit, before the call
 * answers), so a revoked token or a removed member is refused at once everywhere. The cache
 * serves only while its LISTEN connection is up (made at the first lookup): a change announced
 * while it was down would go unheard, so a lost connection empties it, and until it listens again
 * every lookup reads the database. A lookup that a change overtook is not kept (`generation`).
 * Unknown tokens are not kept: anyone can send those.
 */
export function directoryCache(url: string): DirectoryCache {
  const tokens = new Map<string, UserRecord>();
  const memberships = new Map<string, Membership[]>();
  let generation = 0;
  let listening = false;
  let channel: { end(): Promise<void> } | undefined;
  let ended = false;
  const invalidate = () => {
    generation++;
    tokens.clear();
    memberships.clear();
  };
  const startListening = () => {
    if (ended) return;
    channel ??= listenOn(url, DIRECTORY_CHANNEL, {
      listening: () => {
        invalidate();
        listening = true;
      },
      notified: invalidate,
      lost: () => {
        listening = false;
        invalidate();
      },
    });
  };
  /** `load`'s answer, kept in `entries` under `key` while nothing changes. */
  const kept = async <V>(
    entries: Map<string, V>,
    key: string,
    load: () => Promise<V | undefined>,
  ): Promise<V | undefined> => {
    startListening();
    const hit = listening ? entries.get(key) : undefined;
    if (hit !== undefined) return hit;
    const before = generation;
    const value = await load();
    if (value !== undefined && listening && generation === before) {
      if (entries.size >= MAX_ENTRIES) entries.clear();
      entries.set(key, value);
    }
    return value;
  };
  return {
    users: (users) => ({
      ...users,
      // Kept by the token's hash, as the database keeps it, not by the secret itself.
      userForToken: (token) => kept(tokens, hashToken(token), () => users.userForToken(token)),
      memberships: async (username) =>
        (await kept(memberships, username, () => users.memberships(username))) ?? [],
    }),
    invalidate,
    async end() {
      ended = true;
      listening = false;
      await channel?.end();
    },
  };
}
