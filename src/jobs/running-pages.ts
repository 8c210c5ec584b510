import type { JobRecord, JobStore } from '../store/jobs.ts';

/** Running jobs read at a time by a pass over them: what one page of builds costs in memory. */
export const RUNNING_PAGE = 256;

/**
 * Every running job, a page at a time by id (keyset): a pass over thousands never holds every
 * job's build at once. A job that starts running during the pass with an id already passed waits
 * for the next pass.
 */
export async function* runningPages(
  jobs: Pick<JobStore, 'running'>,
  size: number = RUNNING_PAGE,
): AsyncGenerator<JobRecord[]> {
  let page = await jobs.running(undefined, size);
  while (page.length > 0) {
    yield page;
    if (page.length < size) return;
    page = await jobs.running(page[page.length - 1]!.id, size);
  }
}
