import { randomBytes } from 'node:crypto';
import type { Job } from '../model/job.ts';
import type { JobRecord } from '../store/jobs.ts';
import type { Caller, JobAccess } from './access.ts';
import type { JobEnvironment } from './prepare.ts';
import { presentJob } from './presentation.ts';

// The changes of every job, for whoever may see each: one stream per caller instead of one follow
// per job. Every change gets an id `<epoch>-<sequence>`; the most recent changes are kept so that a
// client that reconnects with the last id it saw gets what it missed, or is told to read again.

/** One job changed (created, moved on, renamed): the job as browse shows it now. */
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

/** Changes kept for reconnecting clients (a few seconds' worth when many jobs move at once). */
export const RECENT_CHANGES = 1000;

interface Kept {
  sequence: number;
  owner: Pick<JobRecord, 'createdBy' | 'project'>;
  event: JobEvent;
}

export type JobEvents = ReturnType<typeof jobEvents>;

export function jobEvents(o: { access: JobAccess; env: JobEnvironment; recent?: number }) {
  const { access, env } = o;
  const recentAtMost = o.recent ?? RECENT_CHANGES;
  // A new epoch per process: ids from before a restart cannot resume. Hex, so that it holds no '-'.
  const epoch = randomBytes(6).toString('hex');
  let sequence = 0;
  const recent: Kept[] = [];
  /** Every change from this sequence on is in `recent`. */
  let keptFrom = 1;
  const watchers = new Set<{ caller: Caller; listener: JobEventListener }>();
  /** Changes are numbered and told in the order they were made, one after the other. */
  let telling: Promise<void> = Promise.resolve();

  const idOf = (n: number) => `${epoch}-${n}`;

  /** The sequence number a client's Last-Event-ID names, if it is this process's and still resumable. */
  function resumableFrom(lastId: string): number | undefined {
    const dash = lastId.lastIndexOf('-');
    const from = lastId.slice(0, dash);
    const last = Number(lastId.slice(dash + 1));
    if (from !== epoch || !Number.isSafeInteger(last) || last > sequence || last < keptFrom - 1) {
      return undefined;
    }
    return last;
  }

  return {
    /** Records a change of the job and tells every watcher who may see it. */
    changed(record: JobRecord): Promise<void> {
      const told = telling.then(async () => {
        sequence++;
        // Nobody watches: no job is presented; a client that comes back later reads again.
        if (watchers.size === 0) {
          recent.length = 0;
          keptFrom = sequence + 1;
          return;
        }
        const event = { id: idOf(sequence), job: presentJob(await access.toJob(record), env) };
        recent.push({ sequence, owner: { createdBy: record.createdBy, project: record.project }, event });
        if (recent.length > recentAtMost) keptFrom = (recent.shift()?.sequence ?? 0) + 1;
        for (const w of watchers) if (await access.canSee(w.caller, record)) w.listener(event);
      });
      telling = told.catch(() => {});
      return told;
    },

    /**
     * Watches the changes of every job the caller may see (as browse shows them). With the id of
     * the last change a client saw, the visible changes since then come in `missed`.
     */
    async watch(caller: Caller, lastId: string | undefined, listener: JobEventListener): Promise<Watch> {
      // Between changes being told: what is missed and where the watch starts agree.
      return telling.then(async () => {
        let missed: JobEvent[] | 'resync' = [];
        const last = lastId === undefined ? undefined : resumableFrom(lastId);
        if (lastId !== undefined && last === undefined) missed = 'resync';
        else if (last !== undefined) {
          const since = recent.filter((k) => k.sequence > last);
          const visible = await Promise.all(since.map((k) => access.canSee(caller, k.owner)));
          missed = since.filter((_, i) => visible[i]).map((k) => k.event);
        }
        const watcher = { caller, listener };
        watchers.add(watcher);
        return { position: idOf(sequence), missed, unsubscribe: () => watchers.delete(watcher) };
      });
    },
  };
}
