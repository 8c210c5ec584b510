import type { SQLInputValue } from 'node:sqlite';
import type { Store } from './store.ts';

/** What Core is told: a job's update (`jobs/control/update`), its usage, or a legacy charge. */
export type OutboxKind = 'update' | 'usage' | 'charge';

export interface OutboxEntry {
  /** The order things happened in: Core is told them in this order. */
  seq: number;
  kind: OutboxKind;
  jobId: string;
  body: unknown;
  createdAt: number;
}

type Row = Record<string, SQLInputValue>;

const toEntry = (r: Row): OutboxEntry => ({
  seq: Number(r.seq),
  kind: r.kind as OutboxKind,
  jobId: r.job_id as string,
  body: JSON.parse(r.body as string),
  createdAt: Number(r.created_at),
});

export type UcloudOutboxStore = ReturnType<typeof ucloudOutboxStore>;

/**
 * The provider's outbox, in the service's database: what UCloud Core must be told, kept until Core
 * took it. An entry is added in the transaction that writes what it tells (so neither is ever
 * without the other) and removed only once Core answered it.
 */
export function ucloudOutboxStore(store: Store) {
  const insert = store.db.prepare(
    'insert into ucloud_outbox (kind, job_id, body, created_at) values (?, ?, ?, ?)',
  );
  const oldest = store.db.prepare('select * from ucloud_outbox order by seq limit ?');
  const remove = store.db.prepare('delete from ucloud_outbox where seq = ?');
  const count = store.db.prepare('select count(*) as n from ucloud_outbox');
  return {
    /** Adds an entry; inside the caller's transaction when there is one. */
    add(kind: OutboxKind, jobId: string, body: unknown, at: number): void {
      insert.run(kind, jobId, JSON.stringify(body), at);
    },
    /** The `limit` oldest entries, oldest first. */
    oldest(limit: number): OutboxEntry[] {
      return (oldest.all(limit) as Row[]).map(toEntry);
    },
    /** Removes entries Core has taken. */
    remove(seqs: readonly number[]): void {
      store.transaction(() => {
        for (const seq of seqs) remove.run(seq);
      });
    },
    size(): number {
      return Number((count.get() as Row).n);
    },
  };
}
