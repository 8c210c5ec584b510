import type { Job } from '../model/job.ts';
import type { JobEventRow } from '../store/job-events.ts';
import type { JobRecord } from '../store/jobs.ts';
import type { Store, StoreParts } from '../store/store.ts';
import type { Caller, JobAccess } from './access.ts';
import type { Logger } from './log.ts';
import type { JobEnvironment } from './prepare.ts';
import { presentJob } from './presentation.ts';
import type { UpdateListener } from './update-listeners.ts';

// The changes of every job, for whoever may see each (one stream per caller instead of one follow
// per job), and each job's updates for its followers. The store records every change in the
// transaction that makes it, numbered in the order of commit across replicas (store/job-events.ts);
// this reads them on whichever replica the client is on. An event's id is its number: a client
// that reconnects with the last id it saw, here or on another replica, gets what it missed.

/** One job changed (created, moved on, renamed): the job as browse shows it when it was read. */
export interface JobEvent {
  id: string;
  job: Job;
}

export type JobEventListener = (event: JobEvent) => void;

/** Where a watch starts: the changes missed since the given id, or 'resync' when they are lost. */
export interface Watch {
  /** The id of the newest change so far, to start from when nothing was missed. */
  position: string;
  missed: JobEvent[] | 'resync';
  unsubscribe: () => void;
}

/** Events read from the store at once. */
const PAGE = 500;
/** A client further behind than this is told to read again rather than sent every change. */
export const MISSED_AT_MOST = 10_000;
/** Events the store keeps for clients that reconnect (the leader forgets older ones). */
export const EVENTS_KEPT = 100_000;
/** How often the leader forgets old events. */
const PRUNE_EVERY_MS = 60_000;

export type JobEvents = ReturnType<typeof jobEvents>;

export function jobEvents(o: {
  store: Pick<Store, 'jobs' | 'jobEvents' | 'onJobEvents'>;
  access: JobAccess;
  env: JobEnvironment;
  log?: Logger;
}) {
  const { store, access, env } = o;
  /** The newest event told; undefined while nobody listens (nothing is read then). */
  let position: number | undefined;
  const watchers = new Set<{ caller: Caller; listener: JobEventListener }>();
  const followers = new Map<string, Set<UpdateListener>>();
  const listening = () => watchers.size > 0 || followers.size > 0;
  /** Whether the store tells this of events written (from the first listener on). */
  let hearing = false;
  /** Reads and watches, one after the other: a watch starts between two reads. */
  let turns: Promise<void> = Promise.resolve();
  const inTurn = <T>(fn: () => Promise<T>): Promise<T> => {
    const done = turns.then(fn);
    turns = done.then(
      () => {},
      () => {},
    );
    return done;
  };
  /** A read is queued and has not started: another notification needs none of its own. */
  let readQueued = false;

  function written(newest?: number): void {
    if (
      !listening() ||
      readQueued ||
      (newest !== undefined && position !== undefined && newest <= position)
    ) {
      return;
    }
    readQueued = true;
    inTurn(async () => {
      readQueued = false;
      await readOn();
    }).catch((err: unknown) => o.log?.error({ err }, 'reading job events failed'));
  }

  /** Starts from the newest event; call in turn, with a listener added. */
  async function startHere(): Promise<number> {
    if (!hearing) {
      store.onJobEvents(written);
      hearing = true;
    }
    position = (await store.jobEvents.bounds()).newest;
    return position;
  }

  /** The events' jobs, each read once. */
  async function jobsOf(rows: JobEventRow[]): Promise<Map<string, JobRecord>> {
    const ids = [...new Set(rows.map((r) => r.jobId))];
    const records = await store.jobs.browse({ visibility: 'all', ids, limit: ids.length });
    return new Map(records.map((r) => [r.id, r]));
  }

  /** Presents each job once per page. */
  function presenter(): (record: JobRecord) => Promise<Job> {
    const presented = new Map<string, Job>();
    return async (record) => {
      let job = presented.get(record.id);
      if (!job) {
        job = presentJob(await access.toJob(record), env);
        presented.set(record.id, job);
      }
      return job;
    };
  }

  /** Tells everyone listening the events after the position; call in turn. */
  async function readOn(): Promise<void> {
    while (position !== undefined) {
      if (!listening()) {
        position = undefined;
        return;
      }
      const rows = await store.jobEvents.after(position, PAGE);
      if (rows.length === 0) return;
      const records = await jobsOf(rows);
      // Followers get a page's updates at once, in order, before anything else is awaited.
      for (const row of rows) {
        const record = records.get(row.jobId);
        if (record && row.update) for (const l of followers.get(row.jobId) ?? []) l(row.update, record);
      }
      const present = presenter();
      for (const row of rows) {
        const record = records.get(row.jobId);
        if (!record || watchers.size === 0) continue;
        const event = { id: String(row.seq), job: await present(record) };
        for (const w of watchers) if (await access.canSee(w.caller, record)) w.listener(event);
      }
      position = rows.at(-1)!.seq;
      if (rows.length < PAGE) return;
    }
  }

  /** The events after `last` up to `upTo` that the caller may see. */
  async function missedSince(caller: Caller, last: number, upTo: number): Promise<JobEvent[]> {
    const missed: JobEvent[] = [];
    const present = presenter();
    for (let from = last; from < upTo; ) {
      const rows = (await store.jobEvents.after(from, PAGE)).filter((r) => r.seq <= upTo);
      if (rows.length === 0) break;
      const records = await jobsOf(rows);
      for (const row of rows) {
        const record = records.get(row.jobId);
        if (record && (await access.canSee(caller, record))) {
          missed.push({ id: String(row.seq), job: await present(record) });
        }
      }
      from = rows.at(-1)!.seq;
    }
    return missed;
  }

  /** The event a Last-Event-ID names, if the store still has every event after it. */
  async function resumableFrom(lastId: string, newest: number): Promise<number | undefined> {
    if (!/^\d{1,15}$/.test(lastId)) return undefined;
    const last = Number(lastId);
    if (last > newest || newest - last > MISSED_AT_MOST) return undefined;
    return last >= (await store.jobEvents.bounds()).oldest - 1 ? last : undefined;
  }

  return {
    /**
     * Watches the changes of every job the caller may see (as browse shows them). With the id of
     * the last change a client saw (on any replica), the visible changes since then come in `missed`.
     */
    watch(caller: Caller, lastId: string | undefined, listener: JobEventListener): Promise<Watch> {
      return inTurn(async () => {
        // Told up to now first: the new watcher's missed changes end where the others' stand.
        await readOn();
        const watcher = { caller, listener };
        watchers.add(watcher);
        try {
          const newest = position ?? (await startHere());
          let missed: JobEvent[] | 'resync' = [];
          if (lastId !== undefined) {
            const last = await resumableFrom(lastId, newest);
            missed = last === undefined ? 'resync' : await missedSince(caller, last, newest);
          }
          return { position: String(newest), missed, unsubscribe: () => watchers.delete(watcher) };
        } catch (e) {
          watchers.delete(watcher);
          throw e;
        }
      });
    },

    /** Follows one job's updates written from now on (by any replica); answers the unsubscribe. */
    follow(id: string, listener: UpdateListener): Promise<() => void> {
      return inTurn(async () => {
        await readOn();
        let set = followers.get(id);
        if (!set) {
          set = new Set();
          followers.set(id, set);
        }
        const own = set;
        own.add(listener);
        const unsubscribe = () => {
          own.delete(listener);
          if (own.size === 0 && followers.get(id) === own) followers.delete(id);
        };
        try {
          if (position === undefined) await startHere();
        } catch (e) {
          unsubscribe();
          throw e;
        }
        return unsubscribe;
      });
    },

    /** Forgets old events, at most once a minute: the leader's monitor pass calls it. */
    pruner(on: Pick<StoreParts, 'jobEvents'>, now: () => number): () => Promise<void> {
      let last: number | undefined;
      return async () => {
        if (last !== undefined && now() - last < PRUNE_EVERY_MS) return;
        last = now();
        await on.jobEvents.prune(EVENTS_KEPT);
      };
    },
  };
}
