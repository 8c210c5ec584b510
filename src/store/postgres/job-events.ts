import type { JobEventLog, OnJobEvents } from '../job-events.ts';
import { CREATED, toJobEvent } from '../rows.ts';
import { type Connection, JOB_EVENTS_CHANNEL } from './database.ts';
import { listenOn } from './listen.ts';

// Job events on PostgreSQL: written by transaction.ts as each transaction commits, in the order of
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
    async created(after, upTo) {
      return (await query(CREATED, after, upTo)).map((r) => r.job_id as string);
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

/**
 * Every replica's job events as they commit: LISTEN on a connection of its own, made when the
 * first listener comes. A lost connection is made again; its listeners are then told without a
 * number (what was announced meanwhile is in the table).
 */
export function jobEventNotifications(url: string): { onJobEvents: OnJobEvents; end(): Promise<void> } {
  const listeners = new Set<(newest?: number) => void>();
  let channel: { end(): Promise<void> } | undefined;
  let ended = false;
  return {
    onJobEvents(listener) {
      listeners.add(listener);
      if (!ended) {
        channel ??= listenOn(url, JOB_EVENTS_CHANNEL, {
          // Listening from here on; what committed before is read from the table.
          listening: () => {
            for (const l of listeners) l();
          },
          notified: (payload) => {
            const newest = Number(payload);
            for (const l of listeners) l(Number.isSafeInteger(newest) ? newest : undefined);
          },
        });
      }
      return () => listeners.delete(listener);
    },
    async end() {
      ended = true;
      await channel?.end();
    },
  };
}
