import type { JobState, JobUpdate } from '../model/job.ts';
import type { JobRecord } from '../store/jobs.ts';

// Who is told of jobs' updates in this process: followers of one job, of every job, and of
// changes of state. One registry, shared by every writer of updates in the process (the API's
// own changes and, while this replica leads, the backend loop's).

export type UpdateListener = (update: JobUpdate, job: JobRecord) => void;
export type StateListener = (id: string, state: JobState) => void;

export type UpdateListeners = ReturnType<typeof updateListeners>;

export function updateListeners() {
  const byJob = new Map<string, Set<UpdateListener>>();
  const everyJob = new Set<UpdateListener>();
  const stateListeners = new Set<StateListener>();

  return {
    /** Whether anyone follows this job's updates (else the job need not be read to tell them). */
    followed: (id: string): boolean => byJob.has(id) || everyJob.size > 0,

    tell(update: JobUpdate, job: JobRecord): void {
      for (const l of byJob.get(job.id) ?? []) l(update, job);
      for (const l of everyJob) l(update, job);
    },

    stateChanged(id: string, state: JobState): void {
      for (const l of stateListeners) l(id, state);
    },

    /** Adds a follower of one job's updates; returns the unsubscribe function. */
    listen(id: string, listener: UpdateListener): () => void {
      let set = byJob.get(id);
      if (!set) {
        set = new Set();
        byJob.set(id, set);
      }
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) byJob.delete(id);
      };
    },

    /** Adds a follower of every job's updates; returns the unsubscribe function. */
    listenAll(listener: UpdateListener): () => void {
      everyJob.add(listener);
      return () => everyJob.delete(listener);
    },

    /** Adds a listener to every job's changes of state; returns the unsubscribe function. */
    onStateChange(listener: StateListener): () => void {
      stateListeners.add(listener);
      return () => stateListeners.delete(listener);
    },
  };
}
