import type { Job } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';

/**
 * How a job ended, as Slurm users read it: the state stays SUCCESS when the application exits
 * non-zero (the platform ran it to its end), so the non-zero exit codes are what tells them apart.
 */

/** Non-zero exit codes grouped by code, in rank order: `exit 1 on rank 0`, `exit 2 on ranks 1, 3`. */
export function failedRanks(job: Job): string | undefined {
  const byCode = new Map<number, number[]>();
  const ranks = Object.entries(job.status.exitCode ?? {}).sort(([a], [b]) => Number(a) - Number(b));
  for (const [rank, code] of ranks) {
    if (code !== 0) byCode.set(code, [...(byCode.get(code) ?? []), Number(rank)]);
  }
  if (byCode.size === 0) return undefined;
  const shown = [...byCode].slice(0, MAX_CODES_SHOWN).map(([code, r]) => `exit ${code} on ${rankList(r)}`);
  return `${shown.join(', ')}${byCode.size > MAX_CODES_SHOWN ? ', ...' : ''}`;
}

const MAX_CODES_SHOWN = 3;
const MAX_RANKS_SHOWN = 4;

function rankList(ranks: number[]): string {
  if (ranks.length === 1) return `rank ${ranks[0]}`;
  const more = ranks.length > MAX_RANKS_SHOWN ? ` and ${ranks.length - MAX_RANKS_SHOWN} more` : '';
  return `ranks ${ranks.slice(0, MAX_RANKS_SHOWN).join(', ')}${more}`;
}

/** The state, with the failed ranks when a SUCCESS hides a non-zero exit: `SUCCESS (exit 1 on rank 0)`. */
export function outcomeOf(job: Job): string {
  const failed = job.status.state === 'SUCCESS' ? failedRanks(job) : undefined;
  return failed ? `${job.status.state} (${failed})` : job.status.state;
}

/**
 * The exit code of `run --wait/--follow` and `logs -f`, as `srun`'s: 0 for a clean SUCCESS, the
 * highest non-zero rank exit code when the application failed, 1 when the job did not succeed.
 * Codes a process cannot exit with (outside 1..255) become 1.
 */
export function commandExitCode(job: Job): number {
  if (job.status.state !== 'SUCCESS') return 1;
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
