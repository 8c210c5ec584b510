import type { SQLInputValue } from 'node:sqlite';
import type { Store } from './store.ts';

type Row = Record<string, SQLInputValue>;

export type UcloudApplicationStore = ReturnType<typeof ucloudApplicationStore>;

/**
 * The applications UCloud Core resolved for the jobs it sent (provider mode), as JSON by name and
 * version: a job's application is needed again after a restart (to build it, to open its sessions),
 * and UCloud never changes an application once published under a name and version.
 */
export function ucloudApplicationStore(store: Store) {
  const upsert = store.db.prepare(
    'insert into ucloud_applications (name, version, body) values (?, ?, ?) on conflict do update set body = excluded.body',
  );
  const one = store.db.prepare('select body from ucloud_applications where name = ? and version = ?');
  const versions = store.db.prepare('select version from ucloud_applications where name = ?');
  const all = store.db.prepare('select body from ucloud_applications order by name, version');
  return {
    put(name: string, version: string, body: unknown): void {
      upsert.run(name, version, JSON.stringify(body));
    },
    get(name: string, version: string): unknown {
      const row = one.get(name, version) as Row | undefined;
      return row === undefined ? undefined : JSON.parse(row.body as string);
    },
    versions(name: string): string[] {
      return (versions.all(name) as Row[]).map((r) => r.version as string);
    },
    all(): unknown[] {
      return (all.all() as Row[]).map((r) => JSON.parse(r.body as string));
    },
  };
}
