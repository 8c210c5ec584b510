import type { JobUpdate } from '../model/job.ts';
import { ownerDrive } from '../model/owner.ts';
import { QuotaExceeded, type StorageQuotas } from '../storage/quota.ts';
import type { JobRecord } from '../store/jobs.ts';
import { ownerOf } from './access.ts';

// Jobs that have not started do not start while their owner is over its storage quota: as Slurm
// keeps a job pending while its account is at a limit, rather than cancelling it, a queued job is
// held (UCloud's SUSPENDED, which no backend runs) with the reason in its updates, and returns to
// the queue by itself once the drive is below its quota again. Nothing accepted is lost, and the
// owner's other jobs and other owners' jobs are not kept waiting behind it. Running jobs are
// told and keep running (jobs/quota-watch.ts).

/** The opening words of a hold's update, by which the quota watch knows a job it may release. */
const HELD = 'Held: ';

/** What is wrong, as `StorageQuotas.check` says it; undefined when the owner has room. */
export type QuotaProblemOf = (record: JobRecord) => Promise<string | undefined>;

/** The owner's problem with its quota (from `check`), or undefined when it has room. */
export function quotaProblemOf(quotas: Pick<StorageQuotas, 'check'>): QuotaProblemOf {
  return (record) =>
    quotas.check(ownerDrive(ownerOf(record))).then(
      () => undefined,
      (e: unknown) => {
        if (e instanceof QuotaExceeded) return e.message;
        throw e;
      },
    );
}

/** The update that holds a job that has not started. */
export function heldStatus(problem: string): string {
  return `${HELD}${problem}. The job has not started; it goes back to the queue by itself within a minute once the drive is below its quota (or cancel it).`;
}

/** The update of a held job going back to the queue. */
export const RELEASED_STATUS = 'The storage quota of its owner has room again: the job is back in the queue';

/** Whether a suspended job is suspended because it was held for its owner's quota (not by a person). */
export function heldForQuota(updates: readonly JobUpdate[]): boolean {
  const suspended = updates.findLast((u) => u.state === 'SUSPENDED');
  return suspended?.status?.startsWith(HELD) === true;
}
