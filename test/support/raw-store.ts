import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import pg from 'pg';
import { type Migration, postgresSql, sqliteSql } from '../../src/store/migrations.ts';
import { openPostgresStore } from '../../src/store/postgres/store.ts';
import { openSqliteStore } from '../../src/store/sqlite/store.ts';
import type { Store } from '../../src/store/store.ts';
import { newPostgresDatabase } from './postgres.ts';
import type { StoreKind } from './store.ts';

/**
 * A database of this kind (a file in `dir`, or a new PostgreSQL database) and raw statements on it
 * beside the store: what a test of a migration needs to make a store as it was before it.
 */
export async function rawStore(kind: StoreKind, dir: string) {
  if (kind === 'sqlite') {
    const file = join(dir, 'store.db');
    return {
      open: (): Store => openSqliteStore(file),
      // The store holds its file exclusively: raw statements go between its openings.
      exec: async (text: string) => {
        const raw = new DatabaseSync(file);
        try {
          raw.exec(text);
        } finally {
          raw.close();
        }
      },
      close: async () => {},
      dialect: sqliteSql as (m: Migration) => string,
    };
  }
  const url = await newPostgresDatabase();
  const raw = new pg.Client({ connectionString: url });
  await raw.connect();
  return {
    open: (): Promise<Store> => openPostgresStore(url),
    exec: async (text: string) => void (await raw.query(text)),
    close: () => raw.end(),
    dialect: postgresSql as (m: Migration) => string,
  };
}
