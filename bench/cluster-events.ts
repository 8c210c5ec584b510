/**
 * What bench/cluster.bench.ts sees of ucompute's jobs through ucompute's own API: its job event
 * stream, followed as a client does (Last-Event-ID on reconnect, a new read of the list on
 * `resync`), and the list of RUNNING jobs read when the bench asks.
 */

/** Jobs per page when the bench reads ucompute's RUNNING jobs (browse's largest page). */
const BROWSE_PAGE = 1000;

/**
 * Every job ucompute lists as RUNNING, told to `running`. What a
 * client of the event stream does when told `resync`: its changes since were dropped (it fell
 * behind), so only a new read says which jobs run.
 */
async function readRunning(url: string, token: string, running: (id: string) => void): Promise<void> {
  let next: string | null = null;
  // Bounded: 100 pages of 1,000 jobs.
  for (let page = 1; page <= 100; page++) {
    const query = new URLSearchParams({ itemsPerPage: String(BROWSE_PAGE), filterState: 'RUNNING' });
    if (next) query.set('next', next);
    const answer = await fetch(`${url}/api/jobs/browse?${query}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    if (!answer.ok) throw new Error(`GET /api/jobs/browse: ${answer.status} ${await answer.text()}`);
    const list = (await answer.json()) as { items: { id: string }[]; next: string | null };
    for (const job of list.items) running(job.id);
    next = list.next;
    if (!next) return;
  }
  throw new Error('more than 100 pages of RUNNING jobs');
}

/** Logs a job the event stream did not show RUNNING: its state and updates, for the write-up. */
export async function tellMissed(url: string, token: string, id: string, how: Reread) {
  const answer = await fetch(`${url}/api/jobs/retrieve?id=${encodeURIComponent(id)}`, {
    headers: { authorization: `Bearer ${token}` },
  }).catch((e: unknown) => e as Error);
  const job = answer instanceof Error ? answer.message : answer.ok ? await answer.json() : answer.status;
  const { status, updates } = (job ?? {}) as { status?: unknown; updates?: unknown };
  console.error(
    `ucompute: job ${id} seen RUNNING by reading the list (${how}), not by an event:`,
    JSON.stringify(typeof job === 'object' ? { status, updates } : job),
  );
}

/** Why the bench read ucompute's RUNNING jobs rather than its events: told to, or the bench asked. */
export type Reread = 'resync' | 'asked';

/**
 * Follows ucompute's /api/jobs/events, telling `running` each job seen RUNNING; reconnects with
 * Last-Event-ID if the stream ends, and reads the RUNNING jobs again when told `resync`, until
 * `stopped` settles. `reread` reads them again at the caller's asking; `resyncs` counts the times.
 */
export function followUcompute(
  url: string,
  token: string,
  running: (id: string, how: 'event' | Reread) => void,
  stopped: Promise<unknown>,
) {
  const events = new AbortController();
  void stopped.then(() => events.abort());
  const rereads: Record<Reread, number> = { resync: 0, asked: 0 };
  const reread = async (why: Reread) => {
    rereads[why]++;
    await readRunning(url, token, (id) => running(id, why)).catch((e: unknown) =>
      console.error(`ucompute: reading the RUNNING jobs (${why}) failed:`, e),
    );
  };
  let lastEventId: string | undefined;
  const follow = async () => {
    const stream = await fetch(`${url}/api/jobs/events`, {
      headers: { authorization: `Bearer ${token}`, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) },
      signal: events.signal,
    });
    let buffer = '';
    for await (const chunk of stream.body!.pipeThrough(new TextDecoderStream())) {
      buffer += chunk;
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        lastEventId = /^id: (.*)$/m.exec(block)?.[1] ?? lastEventId;
        if (/^event: resync$/m.test(block)) {
          console.error(
            `ucompute: the event stream said resync (at ${lastEventId}): reading the RUNNING jobs`,
          );
          void reread('resync');
          continue;
        }
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (!/^event: job$/m.test(block) || !data) continue;
        const job = JSON.parse(data) as { id: string; status: { state: string } };
        if (job.status.state === 'RUNNING') running(job.id, 'event');
      }
    }
  };
  const again = async (): Promise<void> => {
    while (!events.signal.aborted) {
      await follow().catch((e: unknown) => {
        if (!events.signal.aborted) console.error('ucompute: following the events again:', e);
      });
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  };
  void again();
  return { abort: () => events.abort(), reread: () => reread('asked'), rereads };
}
