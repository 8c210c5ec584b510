import type { UcloudApplicationStore } from '../ucloud-applications.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteUcloudApplications({ sql }: SqliteDatabase): Synchronous<UcloudApplicationStore> {
  return {
    put(name, version, body) {
      sql(
        'insert into ucloud_applications (name, version, body) values (?, ?, ?) on conflict do update set body = excluded.body',
      ).run(name, version, JSON.stringify(body));
    },
    get(name, version) {
      const row = sql('select body from ucloud_applications where name = ? and version = ?').get(
        name,
        version,
      ) as Row | undefined;
      return row === undefined ? undefined : JSON.parse(row.body as string);
    },
    all() {
      return (sql('select body from ucloud_applications order by name, version').all() as Row[]).map((r) =>
        JSON.parse(r.body as string),
      );
    },
  };
}
