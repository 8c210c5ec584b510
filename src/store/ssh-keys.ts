import type { SQLInputValue } from 'node:sqlite';
import type { Store } from './store.ts';

export interface SshKeyRecord {
  id: string;
  owner: string;
  title: string;
  /** One line of an authorized_keys file: type, key, and a comment when it had one. */
  key: string;
  fingerprint: string;
  createdAt: number;
}

type Row = Record<string, SQLInputValue>;

const toKey = (r: Row): SshKeyRecord => ({
  id: r.id as string,
  owner: r.owner as string,
  title: r.title as string,
  key: r.key as string,
  fingerprint: r.fingerprint as string,
  createdAt: Number(r.created_at),
});

export type SshKeyStore = ReturnType<typeof sshKeyStore>;

/** Users' SSH public keys, in the service's database, in the order they were added. */
export function sshKeyStore(store: Store) {
  const insert = store.db.prepare(
    'insert into ssh_keys (id, owner, title, key, fingerprint, created_at) values (?, ?, ?, ?, ?, ?)',
  );
  const page = store.db.prepare(
    `select * from ssh_keys where owner = ?
     and rowid > coalesce((select rowid from ssh_keys where owner = ? and id = ?), 0) order by rowid limit ?`,
  );
  const all = store.db.prepare('select * from ssh_keys where owner = ? order by rowid');
  const remove = store.db.prepare('delete from ssh_keys where owner = ? and id = ?');
  return {
    insert(keys: readonly SshKeyRecord[]): void {
      store.transaction(() => {
        for (const k of keys) insert.run(k.id, k.owner, k.title, k.key, k.fingerprint, k.createdAt);
      });
    },
    /** Up to `limit` keys of an owner in the order they were added, after the key `after`. */
    page(owner: string, after: string, limit: number): SshKeyRecord[] {
      return (page.all(owner, owner, after, limit) as Row[]).map(toKey);
    },
    of(owner: string): SshKeyRecord[] {
      return (all.all(owner) as Row[]).map(toKey);
    },
    /** Removes the owner's keys with these ids (another owner's are left alone). */
    remove(owner: string, ids: readonly string[]): void {
      store.transaction(() => {
        for (const id of ids) remove.run(owner, id);
      });
    },
  };
}
