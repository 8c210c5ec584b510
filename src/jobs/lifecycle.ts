import type { JobState, JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { JobChanges, JobRecord } from '../store/jobs.ts';

/**
 * The job state machine, in one place. Final states (SUCCESS, FAILURE, EXPIRED) accept nothing;
 * the clock of a time allocation starts at RUNNING; EXPIRED only ever follows RUNNING.
 */
export const TRANSITIONS: Readonly<Record<JobState, readonly JobState[]>> = {
  IN_QUEUE: ['RUNNING', 'CANCELING', 'SUCCESS', 'FAILURE', 'SUSPENDED'],
  RUNNING: ['CANCELING', 'SUCCESS', 'FAILURE', 'EXPIRED', 'SUSPENDED'],
  CANCELING: ['SUCCESS', 'FAILURE'],
  SUSPENDED: ['IN_QUEUE', 'RUNNING', 'CANCELING', 'SUCCESS', 'FAILURE'],
  SUCCESS: [],
  FAILURE: [],
  EXPIRED: [],
};

export type Decision =
  | { kind: 'apply'; changes: JobChanges }
  /** Dropped by its own conditions (expectedState, expectedDifferentState): not an error. */
  | { kind: 'drop'; reason: string }
  | { kind: 'reject'; reason: string };

/** Decides what an update does to a job, without doing it. */
export function decideUpdate(job: JobRecord, update: JobUpdate): Decision {
  if (isFinal(job.state)) return { kind: 'reject', reason: `the job is already ${job.state}` };
  if (update.expectedState !== undefined && update.expectedState !== job.state) {
    return { kind: 'drop', reason: `expected ${update.expectedState}, was ${job.state}` };
  }
  if (update.expectedDifferentState === true && update.state === job.state) {
    return { kind: 'drop', reason: `already ${job.state}` };
  }
  const changes: JobChanges = {};
  const next = update.state;
  if (next !== undefined && next !== job.state) {
    if (!TRANSITIONS[job.state].includes(next)) {
      return { kind: 'reject', reason: `a ${job.state} job cannot become ${next}` };
    }
    changes.state = next;
    if (next === 'RUNNING') {
      changes.startedAt = update.timestamp;
      changes.runStartedAt = update.timestamp;
      changes.expiresAt = job.timeAllocationMs === null ? null : update.timestamp + job.timeAllocationMs;
    }
    // A suspension ends the run: its time counts, the time suspended does not.
    if (next === 'SUSPENDED' && job.runStartedAt !== null) {
      changes.timeRunBeforeMs = job.timeRunBeforeMs + Math.max(0, update.timestamp - job.runStartedAt);
      changes.runStartedAt = null;
    }
  }
  if (update.newTimeAllocation !== undefined) {
    if (job.timeAllocationMs === null)
      return { kind: 'reject', reason: 'the job has no time limit to change' };
    changes.timeAllocationMs = update.newTimeAllocation;
    const startedAt = changes.startedAt ?? job.startedAt;
    if (startedAt !== null && (changes.state ?? job.state) === 'RUNNING') {
      changes.expiresAt = startedAt + update.newTimeAllocation;
    }
  }
  if (update.outputFolder !== undefined) changes.outputFolder = update.outputFolder;
  return { kind: 'apply', changes };
}
