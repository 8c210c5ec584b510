import type { JobUpdate } from '../model/job.ts';
import type { Store } from '../store/store.ts';
import type { Backend } from './backend.ts';
import type { Logger } from './log.ts';
import type { JobUpdates } from './updates.ts';

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

export interface RestartOptions {
  store: Store;
  backend: Backend;
  updates: JobUpdates;
  /** Queues a stored job for submission (with its stored build). */
  resubmit: (id: string) => void;
  now: () => number;
  log?: Logger;
}

export type JobRestarts = ReturnType<typeof jobRestarts>;

export function jobRestarts(o: RestartOptions) {
  const { store, backend, updates, now, log } = o;
  const timers = new Map<string, NodeJS.Timeout>();

  /** Runs the job again, unless it was cancelled or unsuspended meanwhile. */
  async function restart(id: string, exits: number): Promise<void> {
    timers.delete(id);
    const queued = await updates.update(id, {
      state: 'IN_QUEUE',
      status: `The job is restarting (restart ${exits} in a row)`,
      expectedState: 'SUSPENDED',
    });
    if (queued) o.resubmit(id);
  }

  /**
   * Frees what the ended run still holds in the backend, then restarts the job when its
   * back-off has passed (counted from its exit, so that a restart of ucompute keeps it).
   */
  function schedule(id: string): void {
    const history = store.updatesOf(id);
    const exit = history.at(-1);
    if (!exit || !isRestartExit(exit)) return;
    const exits = exitsInARow(history.slice(0, -1), exit.timestamp);
    const wait = Math.max(exit.timestamp + restartDelayMs(exits) - now(), 0);
    const freed = backend
      .suspend(id)
      .catch((err: unknown) => log?.error({ err, jobId: id }, 'could not free an exited job'));
    clearTimeout(timers.get(id));
    const timer = setTimeout(() => {
      freed
        .then(() => restart(id, exits))
        .catch((err: unknown) => log?.error({ err, jobId: id }, 'could not restart a job'));
    }, wait);
    timer.unref();
    timers.set(id, timer);
  }

  return {
    schedule,

    /** Schedules the restarts that were due when ucompute stopped. */
    recover(): void {
      for (const record of store.activeJobs()) {
        if (record.state === 'SUSPENDED') schedule(record.id);
      }
    },

    stop(): void {
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
    },
  };
}
