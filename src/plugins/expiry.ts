import { MAX_TIME_ANNOTATION } from '../volcano/labels.ts';
import { annotateJob } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Expiry: records the job's time allocation on the Volcano Job. The clock starts when the job
 * runs, not now; a job without an allocation never expires. The monitor ends a running job whose
 * deadline passed as EXPIRED.
 */
export const expiryPlugin: JobPlugin = {
  name: 'Expiry',
  onCreate(_ctx, job, build) {
    if (job.timeAllocationMillis !== null)
      annotateJob(build, MAX_TIME_ANNOTATION, String(job.timeAllocationMillis));
  },
  async onJobMonitoring(ctx, batch) {
    const now = ctx.now();
    for (const job of batch) {
      // The batch may be stale (an extend can land meanwhile): `expire` checks the stored deadline.
      if (job.state === 'RUNNING' && job.expiresAt !== null && job.expiresAt <= now) await ctx.expire(job.id);
    }
  },
  monitoringDueAt: (_ctx, job) => (job.state === 'RUNNING' ? job.expiresAt : null),
};
