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

/** A page of the list as the server answers it. */
export interface ListPage {
  items: readonly Job[];
  next: string | null;
}

/** What the list shows: null until its first read has answered. */
export interface Shown {
  jobs: readonly Job[] | null;
  next: string | null;
}

/**
 * The list as reads and the stream's changes make it. A read answers what the server had when it
 * took the request, so every change seen since the read was asked for is applied on top of its
 * answer: a read that crosses changes (the first one, or one after a resync) never takes the list
 * back to older states. `show` is told each new version.
 */
export function listFollower(filter: ListFilter, show: (shown: Shown) => void) {
  let shown: Shown = { jobs: null, next: null };
  /** Changes seen since the oldest read under way was asked for. */
  let seen: Job[] = [];
  let reading = 0;
  const update = (next: Shown) => {
    shown = next;
    show(next);
  };
  return {
    shown: () => shown,
    /** A change from the stream. */
    changed(job: Job): void {
      if (reading > 0) seen.push(job);
      if (shown.jobs !== null)
        update({ jobs: withJob(shown.jobs, job, filter, shown.next !== null), next: shown.next });
    },
    /** A read of the first page is asked for now; call the answer with what it answered. */
    reading(): (page: ListPage | null) => void {
      reading++;
      let answered = false;
      return (page) => {
        if (answered) return;
        answered = true;
        if (page !== null) {
          const more = page.next !== null;
          update({
            jobs: seen.reduce((list, job) => withJob(list, job, filter, more), page.items),
            next: page.next,
          });
        }
        if (--reading === 0) seen = [];
      };
    },
    /** The next page, read by "Show more": older jobs below the ones shown. */
    more(page: ListPage): void {
      update({ jobs: [...(shown.jobs ?? []), ...page.items], next: page.next });
    },
  };
}
