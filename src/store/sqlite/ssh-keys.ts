import { toKey } from '../rows.ts';
import type { SshKeyStore } from '../ssh-keys.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteSshKeys({ sql, transaction }: SqliteDatabase): Synchronous<SshKeyStore> {
  return {
    insert(keys) {
      transaction(() => {
        for (const k of keys) {
          sql(
            'insert into ssh_keys (id, owner, title, key, fingerprint, created_at) values (?, ?, ?, ?, ?, ?)',
          ).run(k.id, k.owner, k.title, k.key, k.fingerprint, k.createdAt);
        }
      });
    },
    page(owner, after, limit) {
      return (
        sql(
          `select * from ssh_keys where owner = ?
           and rowid > coalesce((select rowid from ssh_keys where owner = ? and id = ?), 0) order by rowid limit ?`,
        ).all(owner, owner, after, limit) as Row[]
      ).map(toKey);
    },
    of(owner) {
      return (sql('select * from ssh_keys where owner = ? order by rowid').all(owner) as Row[]).map(toKey);
    },
    remove(owner, ids) {
      transaction(() => {
        for (const id of ids) sql('delete from ssh_keys where owner = ? and id = ?').run(owner, id);
      });
    },
  };
}
