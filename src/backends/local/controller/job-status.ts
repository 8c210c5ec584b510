import type { BackendEvent } from '../../../jobs/backend.ts';
import { DEFAULT_MAX_RETRY } from '../../../volcano/api/phases.ts';
import { queueStatus, type Waiting } from '../scheduler.ts';
import { endStatus } from './end-messages.ts';
import type { JobRun } from './job-run.ts';

/**
 * What a job's phase and pods say to the service (SPEC §1), a pure function of the run: the
 * final phases' words are end-messages.ts's.
 * undefined while there is nothing to say (a job not admitted and not waiting, or one between phases).
 */
export function jobStatus(
  run: Pick<
    JobRun,
    'phase' | 'pods' | 'planned' | 'startedAt' | 'admitted' | 'retryCount' | 'job' | 'fault' | 'cause'
  >,
  waiting?: Waiting,
): Omit<BackendEvent, 'jobId' | 'at'> | undefined {
  switch (run.phase) {
    case 'Pending':
      if (run.startedAt !== null)
        return { state: 'RUNNING', status: 'The job is starting its replicas again' };
      if (waiting) return { state: 'IN_QUEUE', status: queueStatus(waiting) };
      return run.admitted ? { state: 'IN_QUEUE', status: 'The job is starting' } : undefined;
    case 'Running':
      return { state: 'RUNNING', status: 'The job is running' };
    case 'Restarting':
      return {
        state: 'RUNNING',
        status: `The job is restarting (retry ${run.retryCount} of ${run.job.spec.maxRetry ?? DEFAULT_MAX_RETRY})`,
      };
    case 'Aborting':
    case 'Completing':
    case 'Terminating':
      return undefined;
    default:
      return endStatus(run);
  }
}
