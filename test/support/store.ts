import { openSqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/store.ts';

/** An empty store for one test. */
export async function openTestStore(): Promise<Store> {
  return openSqliteStore(':memory:');
}
