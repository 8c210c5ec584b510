import type { BackendEvent } from '../../../jobs/backend.ts';
import type { PodEvent } from '../../../volcano/api/phases.ts';
import type { VolcanoAction } from '../../../volcano/api/types.ts';
import type { ContainerExit } from '../runtime.ts';
import { howItEnded } from './failure-reasons.ts';
import type { JobRun, PodRecord } from './job-run.ts';

/**
 * What a finished job says, a pure function of its run: which rank ended how, which ranks were
 * stopped rather than ending by themselves, and the policy (or minSuccess) that ended it. Nothing
 * is claimed of a rank that did not end by itself.
 */

/** The actions that end a job: the event that set them off is its end message's cause. */
export const endsJob = (action: VolcanoAction): boolean =>
  action === 'AbortJob' || action === 'CompleteJob' || action === 'TerminateJob';

/** The policy's trigger that ended the job, as its end message tells it ("rank 1 exited with code 3; its policy: AbortJob"). */
export function policyCause(
  rec: Pick<PodRecord, 'plan' | 'exit'>,
  event: PodEvent,
  action: VolcanoAction,
): string {
  const what =
    event === 'TaskCompleted'
      ? `task ${rec.plan.task.name} completed`
      : rec.exit
        ? `rank ${rec.plan.rank} ${howItEnded(rec.exit)}`
        : `rank ${rec.plan.rank}: ${event}`;
  return `${what}; its policy: ${action}`;
}

/** "rank 2", "ranks 2, 3" or "ranks 2, 3, 4, 5, 6, …". */
function ranksText(ranks: number[]): string {
  const shown = ranks.slice(0, 5).join(', ') + (ranks.length > 5 ? ', …' : '');
  return `${ranks.length === 1 ? 'rank' : 'ranks'} ${shown}`;
}

type Ended = Pick<JobRun, 'phase' | 'pods' | 'planned' | 'job' | 'fault' | 'cause'>;

/** A final phase's state and words (SPEC §1): the application's exit codes are SUCCESS; OOM kills and platform faults FAILURE. */
export function endStatus(run: Ended): Omit<BackendEvent, 'jobId' | 'at'> {
  const ranks = [...run.pods.values()];
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
    return {
      state: 'FAILURE',
      status: `The job was aborted: ${run.cause ?? 'a replica was lost'}`,
      exitCodes,
    };
  }
  const exits = new Map<number, ContainerExit>();
  for (const p of ranks) if (p.exit) exits.set(p.plan.rank, p.exit);
  const failed = [...exits].filter(([, exit]) => exit.exitCode !== 0);
  const stopped = run.planned.map((p) => p.rank).filter((rank) => !exits.has(rank));
  if (failed.length === 0 && stopped.length === 0 && run.phase === 'Completed') {
    return { state: 'SUCCESS', status: 'The job finished (exit code 0 on every rank)', exitCodes };
  }
  const parts = failed
    .slice(0, 5)
    .map(([rank, exit]) => `rank ${rank} ${howItEnded(exit)}`)
    .concat(failed.length > 5 ? ['…'] : []);
  if (run.phase === 'Completed') {
    const succeeded = exits.size - failed.length;
    parts.unshift(`${succeeded} of ${run.planned.length} ranks exited with code 0`);
  }
  if (stopped.length > 0) {
    parts.push(
      `${ranksText(stopped)} ${stopped.length === 1 ? 'was stopped before it ended by itself' : 'were stopped before they ended by themselves'}`,
    );
  }
  const minSuccess = run.job.spec.minSuccess;
  const why =
    run.cause ??
    (run.phase === 'Completed' && minSuccess !== undefined ? `minSuccess ${minSuccess} reached` : null);
  const phase = run.phase === 'Completed' ? 'The job completed' : `The job ended (${run.phase})`;
  return { state: 'SUCCESS', status: `${phase}${why ? ` (${why})` : ''}: ${parts.join('; ')}`, exitCodes };
}
