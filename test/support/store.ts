import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import type { StoreLocation } from '../../src/store/open.ts';
import { openPostgresStore } from '../../src/store/postgres/store.ts';
import { openSqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/store.ts';
import { newPostgresDatabase, POSTGRES_TESTED } from './postgres.ts';

export type StoreKind = 'sqlite' | 'postgres';

/**
 * The stores a suite parameterised over stores runs on: SQLite, and PostgreSQL where it is
 * installed (under CI=true always: there a missing PostgreSQL fails the suite).
 */
export const STORE_KINDS: readonly StoreKind[] = POSTGRES_TESTED ? ['sqlite', 'postgres'] : ['sqlite'];

/** An empty store for one test. */
export async function openTestStore(kind: StoreKind = 'sqlite'): Promise<Store> {
  return kind === 'sqlite' ? openSqliteStore(':memory:') : openPostgresStore(await newPostgresDatabase());
}

/** A year in milliseconds: how long the credits of `userWithCredits` last. */
const YEAR = 365 * 24 * 3600 * 1000;

/**
 * A user who can run jobs now: `name`, with 1,000,000 credits of u1-standard from a second ago for
 * a year; returns an API token of theirs (named "test").
 */
export async function userWithCredits(store: Store, name: string): Promise<string> {
  const now = Date.now();
  await store.users.createUser(name, false);
  await store.accounting.grant(`user:${name}`, 'u1-standard', 1_000_000, now - 1000, now + YEAR);
  return store.users.createToken(name, 'test');
}

/** How many jobs the store holds, in every state. */
export async function jobCount(store: Store): Promise<number> {
  return Object.values(await store.jobs.countByState()).reduce((sum, n) => sum + n, 0);
}

/** Where a store of this kind that a test opens again (a restart) lives: a file in `dir`, or a new database. */
export async function testStoreLocation(kind: StoreKind, dir: string): Promise<StoreLocation> {
  return kind === 'sqlite'
    ? { sqlite: join(dir, `${kind}-${randomUUID()}.db`) }
    : { postgres: { url: await newPostgresDatabase() } };
}
