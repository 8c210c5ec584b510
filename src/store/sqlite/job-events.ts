import type { JobEventLog } from '../job-events.ts';
import { CREATED, toJobEvent } from '../rows.ts';
import type { Row, SqliteDatabase, Synchronous } from './database.ts';

/** Records a change of a job in the transaction that makes it (update null: a rename). */
export function recordJobEvent(d: SqliteDatabase, jobId: string, updateSeq: number | null): void {
  d.sql('insert into job_events (job_id, update_seq) values (?, ?)').run(jobId, updateSeq);
  d.eventWritten();
}

/** One process writes an SQLite store: its events are numbered in the order of its commits. */
export function sqliteJobEvents({ sql }: SqliteDatabase): Synchronous<JobEventLog> {
  return {
    after(seq, limit) {
      const rows = sql(
        `select e.seq, e.job_id, u.body from job_events e
         left join job_updates u on u.job_id = e.job_id and u.seq = e.update_seq
         where e.seq > ? order by e.seq limit ?`,
      ).all(seq, limit) as Row[];
      return rows.map(toJobEvent);
    },
    created(after, upTo) {
      return (sql(CREATED).all(after, upTo) as Row[]).map((r) => r.job_id as string);
    },
    bounds() {
      const r = sql('select min(seq) as oldest, max(seq) as newest from job_events').get() as Row;
      return { oldest: Number(r.oldest ?? 0), newest: Number(r.newest ?? 0) };
    },
    prune(keep) {
      return Number(
        sql('delete from job_events where seq <= (select max(seq) from job_events) - ?').run(keep).changes,
      );
    },
  };
}
