import type { Store } from '../store/store.ts';
import type { Logger } from './log.ts';

// A leader's adoption of the jobs other replicas accept, as they commit: their creations are job
// events, announced to every replica (LISTEN/NOTIFY on PostgreSQL), so the leader reads the new
// ones and queues them for submission at once. The monitor's pass adopts every unsubmitted job
// each second as well (monitor.ts): what this misses (a lost notification connection, a read
// that failed) waits for that pass, no longer. Without this, a follower's jobs waited for that
// pass, up to 1,000 a pass: fewer than followers accept at 2,000 jobs/s.

/**
 * The least time between two reads: notifications come at every commit of any replica, and the
 * jobs created meanwhile are read together.
 */
const READ_EVERY_MS = 10;

/**
 * Queues (through `enqueue`) each job created after now, once its creation is announced (this
 * replica's own among them: queued already, or left out by submission once submitted); answers
 * the function that stops it.
 */
export async function adoptCreated(
  store: Pick<Store, 'jobEvents' | 'onJobEvents'>,
  enqueue: (id: string) => void,
  log?: Logger,
): Promise<() => void> {
  /** The newest event read; what was created up to it is queued (or left to the monitor's pass). */
  let position = (await store.jobEvents.bounds()).newest;
  /** The newest event announced. */
  let announced = position;
  /** A read is under way or waits for its time. */
  let reading = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  async function read(): Promise<void> {
    timer = undefined;
    const upTo = announced;
    try {
      const ids = await store.jobEvents.created(position, upTo);
      // Stopped meanwhile (no longer leading): nothing more is queued here.
      if (!stopped) for (const id of ids) enqueue(id);
    } catch (err) {
      // Left to the monitor's pass; read on from there.
      log?.warn({ err }, 'could not read the jobs created; the next pass adopts them');
    }
    position = Math.max(position, upTo);
    reading = false;
    schedule();
  }

  function schedule(): void {
    if (reading || stopped || announced <= position) return;
    reading = true;
    timer = setTimeout(() => void read(), READ_EVERY_MS);
  }

  const heard = (newest: number) => {
    announced = Math.max(announced, newest);
    schedule();
  };
  const unsubscribe = store.onJobEvents((newest) => {
    // Without a number (heard again after a lost connection): the newest committed so far; every
    // event before it has committed too (they are numbered in the order of the commits).
    if (newest !== undefined) heard(newest);
    else
      store.jobEvents.bounds().then(
        ({ newest: now }) => heard(now),
        () => {},
      );
  });
  return () => {
    stopped = true;
    clearTimeout(timer);
    unsubscribe();
  };
}
