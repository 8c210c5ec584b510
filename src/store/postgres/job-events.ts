import pg from 'pg';
import type { JobEventLog, OnJobEvents } from '../job-events.ts';
import { toJobEvent } from '../rows.ts';
import { type Connection, JOB_EVENTS_CHANNEL } from './database.ts';

// Job events on PostgreSQL: written by database.ts as each transaction commits, in the order of
// the commits across replicas; each commit announces its newest number on JOB_EVENTS_CHANNEL.

export function postgresJobEvents({ query }: Connection): JobEventLog {
  return {
    async after(seq, limit) {
      const rows = await query(
        `select e.seq, e.job_id, u.body from job_events e
         left join job_updates u on u.job_id = e.job_id and u.seq = e.update_seq
         where e.seq > ? order by e.seq limit ?`,
        seq,
        limit,
      );
      return rows.map(toJobEvent);
    },
    async bounds() {
      const [r] = await query('select min(seq) as oldest, max(seq) as newest from job_events');
      return { oldest: Number(r?.oldest ?? 0), newest: Number(r?.newest ?? 0) };
    },
    async prune(keep) {
      return query.changed('delete from job_events where seq <= (select max(seq) from job_events) - ?', keep);
    },
  };
}

/** Wait before listening again after the connection was lost. */
const RECONNECT_MS = 1000;

/**
 * Every replica's job events as they commit: LISTEN on a connection of its own, made when the
 * first listener comes. A lost connection is made again; its listeners are then told without a
 * number (what was announced meanwhile is in the table).
 */
export function jobEventNotifications(url: string): { onJobEvents: OnJobEvents; end(): Promise<void> } {
  const listeners = new Set<(newest?: number) => void>();
  let client: pg.Client | undefined;
  let ended = false;
  let retry: NodeJS.Timeout | undefined;

  function connect(): void {
    retry = undefined;
    const c = new pg.Client({ connectionString: url });
    client = c;
    let lost = false;
    const reconnect = () => {
      if (lost) return;
      lost = true;
      c.end().catch(() => {});
      if (client === c) client = undefined;
      if (ended) return;
      retry = setTimeout(connect, RECONNECT_MS);
      retry.unref();
    };
    c.on('error', reconnect);
    c.on('end', reconnect);
    c.on('notification', (n) => {
      const newest = Number(n.payload);
      for (const l of listeners) l(Number.isSafeInteger(newest) ? newest : undefined);
    });
    c.connect()
      .then(() => c.query(`listen ${JOB_EVENTS_CHANNEL}`))
      .then(() => {
        // Listening from here on; what committed before is read from the table.
        for (const l of listeners) l();
      }, reconnect);
  }

  return {
    onJobEvents(listener) {
      listeners.add(listener);
      if (!client && !retry && !ended) connect();
      return () => listeners.delete(listener);
    },
    async end() {
      ended = true;
      clearTimeout(retry);
      await client?.end().catch(() => {});
    },
  };
}
