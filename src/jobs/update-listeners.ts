import type { JobState, JobUpdate } from '../model/job.ts';
import type { JobRecord } from '../store/jobs.ts';

// Who is told in this process of the changes of state its writers make (the API's own changes
// and, while this replica leads, the backend loop's). A job's followers read its updates from the
// store's job events instead (job-events.ts), whichever replica wrote them.

export type UpdateListener = (update: JobUpdate, job: JobRecord) => void;
export type StateListener = (id: string, state: JobState) => void;

export type UpdateListeners = ReturnType<typeof updateListeners>;

export function updateListeners() {
  const stateListeners = new Set<StateListener>();

  return {
    stateChanged(id: string, state: JobState): void {
      for (const l of stateListeners) l(id, state);
    },

    /** Adds a listener to every job's changes of state; returns the unsubscribe function. */
    onStateChange(listener: StateListener): () => void {
      stateListeners.add(listener);
      return () => stateListeners.delete(listener);
    },
  };
}
