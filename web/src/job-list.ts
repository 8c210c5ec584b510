import type { Job } from './types.ts';

// The jobs list kept up to date from the event stream: each job that changed replaces what is
// shown, joins the list when it is new, and leaves it when it no longer matches the filters.

export interface ListFilter {
  /** '' for every state. */
  state: string;
  /** '' for any outcome (active jobs included); else final jobs that ended this way. */
  outcome: string;
  /** '' for every application. */
  app: string;
  /** The workspace's project: only its jobs; '' for every job the user sees. */
  project: string;
}

const matches = (job: Job, f: ListFilter) =>
  (f.state === '' || job.status.state === f.state) &&
  (f.outcome === '' || job.status.outcome?.kind === f.outcome) &&
  (f.app === '' || job.specification.application.name === f.app) &&
  (f.project === '' || job.owner.project === f.project);

/**
 * The list (newest first) with one job's latest version in it. A version with fewer updates than
 * the one shown is older (it crossed a fresher read) and changes nothing. A new job older than the
 * last one shown belongs to a page not read yet (`more`), and is left for it.
 */
export function withJob(jobs: readonly Job[], job: Job, filter: ListFilter, more: boolean): readonly Job[] {
  const at = jobs.findIndex((j) => j.id === job.id);
  if (at >= 0) {
    if (job.updates.length < jobs[at]!.updates.length) return jobs;
    const kept = matches(job, filter) ? [job] : [];
    return [...jobs.slice(0, at), ...kept, ...jobs.slice(at + 1)];
  }
  if (!matches(job, filter)) return jobs;
  const before = jobs.findIndex((j) => j.createdAt < job.createdAt);
  if (before < 0) return more ? jobs : [...jobs, job];
  return [...jobs.slice(0, before), job, ...jobs.slice(before)];
}
