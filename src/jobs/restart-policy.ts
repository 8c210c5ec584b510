import type { JobUpdate } from '../model/job.ts';

// restartOnExit, as UCloud's orchestrator does it: when a job's containers end, the job becomes
// SUSPENDED (with allowRestart) instead of ending, and is unsuspended: the same job, folder and
// build run again. Restarts back off as the kubelet's CrashLoopBackOff does, so a job that keeps
// exiting does not spin.

const FIRST_DELAY_MS = 10_000;
const MAX_DELAY_MS = 300_000;
/** A run this long resets the back-off (the kubelet's rule). */
const STEADY_RUN_MS = 600_000;

/** Whether an update is a restartOnExit job's end that waits for its restart. */
export const isRestartExit = (u: JobUpdate) => u.state === 'SUSPENDED' && u.allowRestart === true;

/**
 * How many times in a row the job has exited without a steady run, counting an exit at `exitAt`:
 * an exit after a run of 10 minutes or more starts the count again.
 */
export function exitsInARow(updates: readonly JobUpdate[], exitAt: number): number {
  let count = 0;
  let runningSince: number | undefined;
  const exit = (at: number) => {
    count = runningSince !== undefined && at - runningSince >= STEADY_RUN_MS ? 1 : count + 1;
  };
  for (const u of updates) {
    if (u.state === 'RUNNING') runningSince = u.timestamp;
    else if (isRestartExit(u)) exit(u.timestamp);
  }
  exit(exitAt);
  return count;
}

/** The wait before the n-th restart in a row: 10 s, doubling, at most 5 minutes. */
export function restartDelayMs(exits: number): number {
  return Math.min(FIRST_DELAY_MS * 2 ** Math.max(exits - 1, 0), MAX_DELAY_MS);
}

/** The update a restartOnExit job gets instead of its end: what ended it, and when it runs again. */
export function restartExit(
  ended: { status: string; timestamp: number },
  updates: readonly JobUpdate[],
): JobUpdate {
  const exits = exitsInARow(updates, ended.timestamp);
  const seconds = restartDelayMs(exits) / 1000;
  const inARow = exits > 1 ? ` (exit ${exits} in a row: backing off)` : '';
  return {
    state: 'SUSPENDED',
    status: `${ended.status}; restarting in ${seconds} s (restartOnExit)${inARow}`,
    timestamp: ended.timestamp,
    allowRestart: true,
    expectedDifferentState: true,
  };
}
