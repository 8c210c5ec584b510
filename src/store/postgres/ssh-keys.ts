import { toKey } from '../rows.ts';
import type { SshKeyStore } from '../ssh-keys.ts';
import type { Connection } from './database.ts';

export function postgresSshKeys({ query, atomic }: Connection): SshKeyStore {
  return {
    insert(keys) {
      return atomic(async (q) => {
        for (const k of keys) {
          await q(
            'insert into ssh_keys (id, owner, title, key, fingerprint, created_at) values (?, ?, ?, ?, ?, ?)',
            k.id,
            k.owner,
            k.title,
            k.key,
            k.fingerprint,
            k.createdAt,
          );
        }
      });
    },
    async page(owner, after, limit) {
      const rows = await query(
        `select * from ssh_keys where owner = ?
         and seq > coalesce((select seq from ssh_keys where owner = ? and id = ?), 0) order by seq limit ?`,
        owner,
        owner,
        after,
        limit,
      );
      return rows.map(toKey);
    },
    async of(owner) {
      return (await query('select * from ssh_keys where owner = ? order by seq', owner)).map(toKey);
    },
    remove(owner, ids) {
      return atomic(async (q) => {
        for (const id of ids) await q('delete from ssh_keys where owner = ? and id = ?', owner, id);
      });
    },
  };
}
