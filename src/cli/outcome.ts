import type { Job } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { OutcomeKind } from '../model/outcome.ts';

/**
 * How a job ended, as people and scripts read it: UCloud's state with the job's outcome
 * (`SUCCESS, cancelled by alice`), and one exit code per outcome for the commands that wait for a
 * job. A job that completed exits as `srun` does, with its application's code; one the platform
 * stopped exits with a code of its own, so that a script can tell "my program failed" from "the
 * platform stopped it".
 */

/** The exit codes of the outcomes in which the platform, not the application, ended the job. */
export const OUTCOME_EXIT_CODES: Readonly<Record<Exclude<OutcomeKind, 'COMPLETED'>, number>> = {
  OUT_OF_CREDITS: 122,
  NEVER_STARTED: 123,
  EXPIRED: 124,
  FAILED: 125,
  CANCELLED: 130,
};

/** The exit codes as --help shows them. */
export const EXIT_CODES_USAGE = `Exit codes once the job has ended: 0 when it completed and every rank exited 0; the
highest exit code of its ranks when it completed otherwise (as srun); ${OUTCOME_EXIT_CODES.EXPIRED} expired (as
timeout); ${OUTCOME_EXIT_CODES.FAILED} failed (the platform failed it); ${OUTCOME_EXIT_CODES.CANCELLED} cancelled; ${OUTCOME_EXIT_CODES.OUT_OF_CREDITS} stopped: out of credits;
${OUTCOME_EXIT_CODES.NEVER_STARTED} never started (cancelled or stopped in the queue).`;

/** The state with the outcome: `SUCCESS, cancelled by alice`; an active job's state alone. */
export function outcomeOf(job: Job): string {
  const { state, outcome } = job.status;
  return outcome !== undefined ? `${state}, ${outcome.text}` : state;
}

/** As `outcomeOf`, without a failure's reason (a list shows it in its own column). */
export function shortOutcomeOf(job: Job): string {
  const { state, outcome } = job.status;
  return outcome?.kind === 'FAILED' ? `${state}, failed` : outcomeOf(job);
}

/**
 * The exit code of `run --wait/--follow`, `logs -f` and `shell` for a final job: see
 * OUTCOME_EXIT_CODES. Codes a process cannot exit with (outside 1..255) become 1, and so does a
 * job without an outcome (one that has not ended).
 */
export function commandExitCode(job: Job): number {
  const kind = job.status.outcome?.kind;
  if (kind === undefined) return 1;
  if (kind !== 'COMPLETED') return OUTCOME_EXIT_CODES[kind];
  const failed = Object.values(job.status.exitCode ?? {}).filter((code) => code !== 0);
  if (failed.length === 0) return 0;
  const highest = Math.max(...failed);
  return highest >= 1 && highest <= 255 ? highest : 1;
}

/** When the job reached its final state, or undefined while it has not. */
export function endedAt(job: Job): number | undefined {
  const state = job.status.state;
  return isFinal(state) ? job.updates.findLast((u) => u.state === state)?.timestamp : undefined;
}
