import type { AppSummary, Job } from './types.ts';

// Which jobs are sessions (an app one connects to), and where Connect leads.

/** Whether a job's application is one people connect to: a web app, a desktop, or tagged interactive. */
export function isSessionApp(app: AppSummary | undefined): boolean {
  if (app === undefined) return false;
  return app.applicationType !== 'BATCH' || app.tags.includes('interactive');
}

/** The "starting…" page that waits for the job's app and then opens it. */
export const connectHref = (job: Pick<Job, 'id'>, rank = 0) =>
  `/jobs/${job.id}/connect${rank > 0 ? `?rank=${rank}` : ''}`;

/** Time left before the job's limit, or undefined when it has none (or has not started). */
export function timeLeft(job: Job, now: number): number | undefined {
  return job.status.expiresAt === undefined ? undefined : Math.max(0, job.status.expiresAt - now);
}
