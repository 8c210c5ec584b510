import type { JobState, JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { Outcome } from '../model/outcome.ts';
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

/** The final state of each way ucompute ends a job (UCloud's: a cancelled job is SUCCESS). */
const STATE_OF_ENDING: Partial<Record<Outcome['kind'], JobState>> = {
  CANCELLED: 'SUCCESS',
  OUT_OF_CREDITS: 'SUCCESS',
  EXPIRED: 'EXPIRED',
};

/**
 * The update as the end ucompute decided: a job being ended (cancelled, out of credits, expired)
 * ends that way, whatever end the backend reports while it stops the job's replicas.
 */
export function asDecidedEnd(job: JobRecord, update: JobUpdate): JobUpdate {
  if (job.outcome === null || isFinal(job.state) || update.state === undefined || !isFinal(update.state))
    return update;
  const state = STATE_OF_ENDING[job.outcome.kind];
  if (state === undefined || state === update.state || !TRANSITIONS[job.state].includes(state)) return update;
  return { ...update, state };
}

/**
 * How a job that ends now ended: as ucompute was ending it (before it ever ran, it never
 * started), else by its final state, a FAILURE with the reason its final update gave.
 */
export function outcomeAtEnd(job: JobRecord, state: JobState, update: JobUpdate): Outcome {
  const ending = job.outcome;
  if (ending !== null) {
    const stopped = ending.kind === 'CANCELLED' || ending.kind === 'OUT_OF_CREDITS';
    if (!stopped || job.startedAt !== null) return ending;
    const reason = ending.kind === 'CANCELLED' ? 'cancelled' : 'stopped: out of credits';
    return { kind: 'NEVER_STARTED', reason, ...(ending.by !== undefined ? { by: ending.by } : {}) };
  }
  if (state === 'EXPIRED') return { kind: 'EXPIRED' };
  if (state === 'FAILURE') {
    return update.status !== undefined ? { kind: 'FAILED', reason: update.status } : { kind: 'FAILED' };
  }
  return { kind: 'COMPLETED' };
}

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
    if (isFinal(next)) changes.outcome = outcomeAtEnd(job, next, update);
    if (next === 'RUNNING') {
      changes.startedAt = update.timestamp;
      changes.runStartedAt = update.timestamp;
      changes.expiresAt = job.timeAllocationMs === null ? null : update.timestamp + job.timeAllocationMs;
    }
    // A suspension or an end ends the run: its time counts up to the update's time (for an end the
    // backend reports, when the job ended there, not when ucompute learnt of it); the time
    // suspended does not.
    if ((next === 'SUSPENDED' || isFinal(next)) && job.runStartedAt !== null) {
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
