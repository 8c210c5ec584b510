import { openSqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/store.ts';

/** An empty store for one test. */
export async function openTestStore(): Promise<Store> {
  return openSqliteStore(':memory:');
}

/** How many jobs the store holds, in every state. */
export async function jobCount(store: Store): Promise<number> {
  return Object.values(await store.jobs.countByState()).reduce((sum, n) => sum + n, 0);
}
