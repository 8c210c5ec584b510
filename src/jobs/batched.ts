import type { LifecycleContext } from '../plugins/plugin.ts';

/**
 * An onCleanup hook that removes what jobs left in one call for many: the jobs cleaned up while a
 * call is under way go together in the next (a leader ends many jobs at once; on PostgreSQL each
 * call is a statement). Each job's cleanup settles with the call that removed its rows.
 */
export function batched(remove: (jobIds: string[]) => Promise<void>) {
  let asked: { id: string; done: () => void; failed: (e: unknown) => void }[] = [];
  let removing = false;
  function next(): void {
    if (removing || asked.length === 0) return;
    const batch = asked;
    asked = [];
    removing = true;
    remove(batch.map((a) => a.id))
      .then(
        () => {
          for (const a of batch) a.done();
        },
        (e: unknown) => {
          for (const a of batch) a.failed(e);
        },
      )
      .finally(() => {
        removing = false;
        next();
      });
  }
  return (_ctx: LifecycleContext, jobId: string): Promise<void> =>
    new Promise((done, failed) => {
      if (asked.length === 0 && !removing) setImmediate(next);
      asked.push({ id: jobId, done, failed });
    });
}
