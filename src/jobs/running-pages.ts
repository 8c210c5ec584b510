/** Running jobs read at a time by a pass over them: what one page costs in memory. */
export const RUNNING_PAGE = 256;

/** A job's id, from its row or as it is (`runningIds`: no object per job). */
const idOf = (job: { id: string } | string) => (typeof job === 'string' ? job : job.id);

/**
 * Every running job, a page at a time by id (keyset), as `read` gives them (JobStore's `running`,
 * whole rows, `runningRows`, without their JSON, or `runningIds`, the ids alone): a pass over
 * thousands never holds every job at once. A job that starts running during the pass with an id
 * already passed waits for the next pass.
 */
export async function* runningPages<T extends { id: string } | string>(
  read: (after: string | undefined, limit: number) => Promise<T[]>,
  size: number = RUNNING_PAGE,
): AsyncGenerator<T[]> {
  let page = await read(undefined, size);
  while (page.length > 0) {
    yield page;
    if (page.length < size) return;
    page = await read(idOf(page[page.length - 1]!), size);
  }
}
