import type { BackendEvent } from '../../../jobs/backend.ts';
import { DEFAULT_MAX_RETRY } from '../../../volcano/api/phases.ts';
import { queueStatus, type Waiting } from '../scheduler.ts';
import type { JobRun } from './job-run.ts';

/**
 * What a job's phase and pods say to the service (SPEC §1), a pure function of the run: the
 * application's exit codes per rank on SUCCESS; OOM-kills and platform faults are FAILURE.
 * undefined while there is nothing to say (a job not admitted and not waiting, or one between phases).
 */
export function jobStatus(
  run: Pick<JobRun, 'phase' | 'pods' | 'startedAt' | 'admitted' | 'retryCount' | 'job' | 'fault'>,
  waiting?: Waiting,
): Omit<BackendEvent, 'jobId' | 'at'> | undefined {
  const ranks = [...run.pods.values()];
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
    default: {
      const exitCodes = Object.fromEntries(
        ranks.flatMap((p) => (p.exit ? [[String(p.plan.rank), p.exit.exitCode]] : [])),
      );
      const oom = ranks.find((p) => p.exit?.oomKilled);
      const fault = run.fault ?? ranks.find((p) => p.fault)?.fault;
      if (oom) {
        return {
          state: 'FAILURE',
          status: `Rank ${oom.plan.rank} exceeded its memory limit (OOM-killed)`,
          exitCodes,
        };
      }
      if (fault) return { state: 'FAILURE', status: fault, exitCodes };
      if (ranks.length === 0 && run.phase !== 'Completed') {
        return { state: 'SUCCESS', status: `The job ended (${run.phase}) before any replica started` };
      }
      if (run.phase === 'Aborted') {
        return { state: 'FAILURE', status: 'The job was aborted: a replica was lost', exitCodes };
      }
      const failed = ranks.filter((p) => p.exit && p.exit.exitCode !== 0);
      const status =
        failed.length === 0
          ? `The job finished (exit code 0 on every rank)`
          : `The job ended (${run.phase}): ${failed
              .slice(0, 5)
              .map((p) => `rank ${p.plan.rank} exited with code ${p.exit!.exitCode}`)
              .join(', ')}${failed.length > 5 ? ', …' : ''}`;
      return { state: 'SUCCESS', status, exitCodes };
    }
  }
}
