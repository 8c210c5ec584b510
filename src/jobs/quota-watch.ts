import { ownerDrive } from '../model/owner.ts';
import { quotaProblem, type StorageQuotas } from '../storage/quota.ts';
import type { RunningJob } from '../store/jobs.ts';
import type { Transactional } from '../store/store.ts';
import { ownerOf } from './access.ts';
import type { Logger } from './log.ts';
import { periodic } from './periodic.ts';
import { heldForQuota } from './quota-hold.ts';

// Jobs write into their folders in their owner's drive, past the API that counts uploads: every
// minute the drives of the owners with active jobs are measured again (with any other drive whose
// measure has grown old), so that a quota spent by jobs shuts the door on new jobs and uploads
// within a minute. Each running job of an owner that went over is told so in its updates, once
// per crossing, as UCloud tells of a drive it locked; the job keeps running. The owner's queued
// jobs are held until it has room again (quota-hold.ts), and then go back to the queue.

/** How often the active jobs' drives are measured. */
export const QUOTA_CHECK_EVERY_MS = 60_000;

/** The update's opening words, by which a restarted service finds the job was told already. */
const OVER = 'Storage quota used up while this job runs';

export interface QuotaWatchOptions {
  store: Transactional;
  quotas: Pick<StorageQuotas, 'rescan' | 'usage'>;
  /** Adds the notice to the job's updates. */
  addStatus(jobId: string, status: string): Promise<unknown>;
  /** Holds a queued job of an owner over its quota (JobService.leader). */
  hold(jobId: string, problem: string): Promise<unknown>;
  /** Queues again a job held for its owner's quota (JobService.leader). */
  release(jobId: string): Promise<unknown>;
  log?: Pick<Logger, 'error'>;
}

export function quotaWatch(o: QuotaWatchOptions) {
  /** Running jobs told in this process that their owner is over its quota. */
  const told = new Set<string>();

  /** One pass: measures the active jobs' drives, tells running jobs, holds and releases queued ones. */
  async function check(): Promise<void> {
    const jobs = await o.store.jobs.activeRows();
    const drives = jobs.map((job) => ownerDrive(ownerOf(job)));
    const toldRunning = new Set<string>();
    for (const job of jobs) if (job.state === 'RUNNING' && told.has(job.id)) toldRunning.add(job.id);
    for (const id of told) if (!toldRunning.has(id)) told.delete(id);
    // Each drive measured and judged once, however many jobs its owner has live.
    const problems = new Map<string, string | undefined>();
    for (const drive of drives) problems.set(drive, undefined);
    await o.quotas.rescan(new Set(problems.keys()));
    for (const drive of problems.keys()) problems.set(drive, quotaProblem(await o.quotas.usage(drive), 0));
    for (let i = 0; i < jobs.length; i++) {
      const job = jobs[i]!;
      const problem = problems.get(drives[i]!);
      // A running job of an owner with room, not told otherwise: nothing to do.
      if (job.state === 'RUNNING' && problem === undefined && !told.has(job.id)) continue;
      await act(job, problem).catch((err: unknown) => {
        o.log?.error({ err, jobId: job.id }, 'could not act on a job for its owner’s storage quota');
      });
    }
  }

  /** What a job's state and its owner's quota call for. */
  async function act(job: RunningJob, problem: string | undefined): Promise<void> {
    if (job.state === 'IN_QUEUE' && problem !== undefined) await o.hold(job.id, problem);
    else if (job.state === 'SUSPENDED' && problem === undefined) {
      if (heldForQuota(await o.store.jobs.updatesOf(job.id))) await o.release(job.id);
    } else if (job.state === 'RUNNING') await tell(job.id, problem);
  }

  /** Tells a running job, once per crossing, that its owner went over. */
  async function tell(id: string, problem: string | undefined): Promise<void> {
    if (problem === undefined) {
      told.delete(id);
      return;
    }
    if (told.has(id)) return;
    told.add(id);
    // Said before this process started (a restart): not again.
    if ((await o.store.jobs.updatesOf(id)).some((u) => u.status?.startsWith(OVER))) return;
    await o.addStatus(
      id,
      `${OVER}: ${problem}. New jobs of this owner are refused, its queued jobs are held and uploads fail until space is freed; this job keeps running.`,
    );
  }

  return { check, ...periodic(check, QUOTA_CHECK_EVERY_MS, 'measuring drives against quotas', o.log) };
}
