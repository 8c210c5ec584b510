import type { Clock, Timer } from '../model/clock.ts';
import type { Transactional } from '../store/store.ts';
import type { Backend } from './backend.ts';
import type { Logger } from './log.ts';
import { exitsInARow, isRestartExit, restartDelayMs } from './restart-policy.ts';
import type { JobUpdates } from './updates.ts';

// restartOnExit's restarts: the back-off (restart-policy.ts) counted from each exit, kept across a
// restart of ucompute since it is read from the job's updates.

export interface RestartOptions {
  store: Transactional;
  backend: Backend;
  updates: JobUpdates;
  /** Queues a stored job for submission (with its stored build). */
  resubmit: (id: string) => void;
  /** What back-offs count on: a restart is due on this clock. */
  clock: Clock;
  log?: Logger;
}

export type JobRestarts = ReturnType<typeof jobRestarts>;

export function jobRestarts(o: RestartOptions) {
  const { store, backend, updates, clock, log } = o;
  const timers = new Map<string, Timer>();

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
  async function schedule(id: string): Promise<void> {
    const history = await store.jobs.updatesOf(id);
    const exit = history.at(-1);
    if (!exit || !isRestartExit(exit)) return;
    const exits = exitsInARow(history.slice(0, -1), exit.timestamp);
    const due = exit.timestamp + restartDelayMs(exits);
    const freed = backend
      .suspend(id)
      .catch((err: unknown) => log?.error({ err, jobId: id }, 'could not free an exited job'));
    timers.get(id)?.cancel();
    const timer = clock.setTimeout(
      () => {
        freed
          .then(() => restart(id, exits))
          .catch((err: unknown) => log?.error({ err, jobId: id }, 'could not restart a job'));
      },
      Math.max(due - clock.now(), 0),
    );
    timers.set(id, timer);
  }

  return {
    schedule,

    /** Schedules the restarts that were due when ucompute stopped. */
    async recover(): Promise<void> {
      for (const record of await store.jobs.active()) {
        if (record.state === 'SUSPENDED') await schedule(record.id);
      }
    },

    stop(): void {
      for (const timer of timers.values()) timer.cancel();
      timers.clear();
    },
  };
}
