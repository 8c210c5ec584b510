import { openSqliteStore } from './sqlite/store.ts';
import type { Store } from './store.ts';

/**
 * Where the store is: an SQLite file (the embedded default, one process), or a PostgreSQL
 * database (`postgres://…`) that several replicas share.
 */
export type StoreLocation = { sqlite: string } | { postgres: { url: string } };

export async function openStore(location: StoreLocation): Promise<Store> {
  if ('sqlite' in location) return openSqliteStore(location.sqlite);
  // Loaded only when used: the embedded default starts without node-postgres.
  const { openPostgresStore } = await import('./postgres/store.ts');
  return openPostgresStore(location.postgres.url);
}
