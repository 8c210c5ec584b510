import type { ActiveJob } from '../plugins/plugin.ts';
import type { RunningJob } from '../store/jobs.ts';
import type { Transactional } from '../store/store.ts';
import { RUNNING_PAGE, runningPages } from './running-pages.ts';
import { asActiveJob } from './updates.ts';

// The monitor's copy of the running jobs, kept as an informer keeps a cache: listed once, then
// brought up to date from the job events (every change of a job is one, written with it), and
// listed again now and then. A pass used to read every running job's row each second: 10,000 rows
// a second whose garbage V8 promoted, so a server holding 10,000 live jobs kept ~300 MB more than
// they need while nothing happened to them.

/**
 * Listed again at least this often: the rows change without an event where only the monitor
 * itself changes them (charges, which it reads back) and where ucompute marks a job it is ending.
 */
const RELIST_MS = 60_000;
/** Events read a page at a time; a monitor further behind than this many pages lists again. */
const EVENT_PAGE = 1000;
const EVENT_PAGES = 10;

interface Tracked {
  job: ActiveJob;
  /** When a pass next has something to do for it (NaN counts as now). */
  dueAt: number;
  /** The listing that last saw it. */
  listing: number;
}

interface RunningSetOptions {
  store: Transactional;
  now: () => number;
  /** When a monitoring pass next has something to do for a running job. */
  dueAt: (job: ActiveJob) => number;
}

export function runningSet({ store, now, dueAt }: RunningSetOptions) {
  const tracked = new Map<string, Tracked>();
  let listings = 0;
  /** The job events applied up to; undefined until the first listing. */
  let seq: number | undefined;
  let listedAt = Number.NEGATIVE_INFINITY;

  /**
   * Keeps these running jobs. A job's build (with its annotations) is written once, before its
   * first submission, and removed at its end: its annotations are read once, not at every change.
   */
  async function keep(rows: readonly RunningJob[], listing?: number): Promise<void> {
    for (const row of rows) {
      const known = tracked.get(row.id);
      let annotations = known?.job.annotations;
      if (!annotations) {
        annotations = (await store.jobs.get(row.id))?.annotations ?? undefined;
        if (!annotations) continue;
      }
      const job = asActiveJob(row, annotations);
      tracked.set(row.id, { job, dueAt: dueAt(job), listing: listing ?? known?.listing ?? listings });
    }
  }

  /** Every running job, a page at a time; the events from before the listing need not be read. */
  async function list(): Promise<void> {
    const newest = (await store.jobEvents.bounds()).newest;
    const listing = ++listings;
    for await (const page of runningPages((after, limit) => store.jobs.runningRows(after, limit))) {
      await keep(page, listing);
    }
    for (const [id, known] of tracked) if (known.listing < listing) tracked.delete(id);
    seq = newest;
    listedAt = now();
  }

  /** Reads these jobs again: kept if running, forgotten otherwise. */
  async function reread(ids: readonly string[]): Promise<void> {
    for (let i = 0; i < ids.length; i += RUNNING_PAGE) {
      const some = ids.slice(i, i + RUNNING_PAGE);
      const rows = await store.jobs.runningRowsOf(some);
      const running = new Set(rows.map((r) => r.id));
      for (const id of some) if (!running.has(id)) tracked.delete(id);
      await keep(rows);
    }
  }

  /** Applies the events since the last; false when too far behind (or events were forgotten). */
  async function follow(from: number): Promise<boolean> {
    if ((await store.jobEvents.bounds()).oldest > from + 1) return false;
    const changed = new Set<string>();
    let at = from;
    for (let pages = 0; pages < EVENT_PAGES; pages++) {
      const events = await store.jobEvents.after(at, EVENT_PAGE);
      for (const e of events) changed.add(e.jobId);
      if (events.length > 0) at = events[events.length - 1]!.seq;
      if (events.length < EVENT_PAGE) {
        await reread([...changed]);
        seq = at;
        return true;
      }
    }
    return false;
  }

  return {
    /** Brings the copy up to date: the changes since the last call, or a new listing. */
    async sync(): Promise<void> {
      if (seq === undefined || now() - listedAt >= RELIST_MS || !(await follow(seq))) await list();
    },

    /** The running jobs a pass has something to do for now. */
    due(): ActiveJob[] {
      const at = now();
      const jobs: ActiveJob[] = [];
      for (const { job, dueAt: due } of tracked.values()) if (!(due > at)) jobs.push(job);
      return jobs;
    },

    /** Reads these jobs again after a pass acted on them (a charge changes a job without an event). */
    reread,
  };
}
