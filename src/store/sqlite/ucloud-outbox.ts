import type { OutboxKind, UcloudOutboxStore } from '../ucloud-outbox.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

export function sqliteUcloudOutbox({ sql, transaction }: SqliteDatabase): Synchronous<UcloudOutboxStore> {
  return {
    add(kind, jobId, body, at) {
      sql('insert into ucloud_outbox (kind, job_id, body, created_at) values (?, ?, ?, ?)').run(
        kind,
        jobId,
        JSON.stringify(body),
        at,
      );
    },
    oldest(limit) {
      return (sql('select * from ucloud_outbox order by seq limit ?').all(limit) as Row[]).map((r) => ({
        seq: Number(r.seq),
        kind: r.kind as OutboxKind,
        jobId: r.job_id as string,
        body: JSON.parse(r.body as string),
        createdAt: Number(r.created_at),
      }));
    },
    remove(seqs) {
      transaction(() => {
        for (const seq of seqs) sql('delete from ucloud_outbox where seq = ?').run(seq);
      });
    },
    size() {
      return Number((sql('select count(*) as n from ucloud_outbox').get() as Row).n);
    },
  };
}
