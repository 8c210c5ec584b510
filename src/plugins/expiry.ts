import { MAX_TIME_ANNOTATION } from '../volcano/labels.ts';
import { annotateJob } from './builder.ts';
import type { JobPlugin } from './plugin.ts';

/**
 * Expiry: records the job's time allocation on the Volcano Job. The clock starts when the job
 * runs, not now; a job without an allocation never expires.
 */
export const expiryPlugin: JobPlugin = {
  name: 'Expiry',
  onCreate(_ctx, job, build) {
    if (job.timeAllocationMillis !== null)
      annotateJob(build, MAX_TIME_ANNOTATION, String(job.timeAllocationMillis));
  },
};
