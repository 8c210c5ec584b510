import { ownerDrive } from '../model/owner.ts';
import { quotaProblem, type StorageQuotas } from '../storage/quota.ts';
import type { Transactional } from '../store/store.ts';
import type { Logger } from './log.ts';
import { periodic } from './periodic.ts';

// Jobs write into their folders in their owner's drive, past the API that counts uploads: every
// minute the drives of the owners with running jobs are measured again (with any other drive whose
// measure has grown old), so that a quota spent by jobs shuts the door on new jobs and uploads
// within a minute. Each running job of an owner that went over is told so in its updates, once
// per crossing, as UCloud tells of a drive it locked; the job keeps running.

/** How often the running jobs' drives are measured. */
export const QUOTA_CHECK_EVERY_MS = 60_000;

/** The update's opening words, by which a restarted service finds the job was told already. */
const OVER = 'Storage quota used up while this job runs';

export interface QuotaWatchOptions {
  store: Transactional;
  quotas: Pick<StorageQuotas, 'rescan' | 'usage'>;
  /** Adds the notice to the job's updates. */
  addStatus(jobId: string, status: string): Promise<unknown>;
  log?: Pick<Logger, 'error'>;
}

export function quotaWatch(o: QuotaWatchOptions) {
  /** Running jobs told in this process that their owner is over its quota. */
  const told = new Set<string>();

  /** One pass: measures the running jobs' drives, tells each job whose owner went over. */
  async function check(): Promise<void> {
    const running = await o.store.jobs.running();
    const driveOf = new Map(
      running.map((job) => [
        job.id,
        ownerDrive({ createdBy: job.createdBy, ...(job.project !== null ? { project: job.project } : {}) }),
      ]),
    );
    for (const id of told) if (!driveOf.has(id)) told.delete(id);
    await o.quotas.rescan(new Set(driveOf.values()));
    for (const [id, drive] of driveOf) {
      const problem = quotaProblem(await o.quotas.usage(drive), 0);
      if (problem === undefined) {
        told.delete(id);
        continue;
      }
      if (told.has(id)) continue;
      told.add(id);
      // Said before this process started (a restart): not again.
      if ((await o.store.jobs.updatesOf(id)).some((u) => u.status?.startsWith(OVER))) continue;
      const text = `${OVER}: ${problem}. New jobs of this owner are refused and uploads fail until space is freed; this job keeps running.`;
      await o.addStatus(id, text).catch((err: unknown) => {
        o.log?.error({ err, jobId: id }, 'could not tell a job of its owner’s storage quota');
      });
    }
  }

  return { check, ...periodic(check, QUOTA_CHECK_EVERY_MS, 'measuring drives against quotas', o.log) };
}
