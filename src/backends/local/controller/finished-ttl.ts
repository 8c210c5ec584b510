import type { LocalContext } from './context.ts';
import type { JobRun } from './job-run.ts';
import { forgetJob } from './persistence.ts';

/**
 * Volcano's `ttlSecondsAfterFinished`: a finished job is deleted that long after it finished (its
 * state and logs here; the service keeps its record and the output saved in the job's folder).
 */

/** How long from `now` until the finished job is forgotten; null when it is kept (no TTL, or no finish time saved). */
export function ttlDelayMs(run: Pick<JobRun, 'job' | 'finishedAt'>, now: number): number | null {
  const ttl = run.job.spec.ttlSecondsAfterFinished;
  if (ttl === undefined || run.finishedAt === undefined) return null;
  return Math.max(0, run.finishedAt + ttl * 1000 - now);
}

/** Arms the finished job's removal, when it has a TTL (at its end, and again after a restart of ucompute). */
export function forgetAfterTtl(ctx: LocalContext, run: JobRun): void {
  const delay = ttlDelayMs(run, ctx.clock.now());
  if (delay === null) return;
  ctx.clock.setTimeout(() => {
    if (!ctx.closed && ctx.runs.get(run.id) === run) void forgetJob(ctx, run.id);
  }, delay);
}
