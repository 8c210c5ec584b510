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
