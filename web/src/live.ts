import { socketTo } from './api.ts';
import type { FollowMessage, Job } from './types.ts';

/** Reconnections after a socket broke (not closed by the server), each after a short pause. */
const RECONNECTS = 5;
const PAUSE_MS = 1000;

/**
 * Follows one job over /api/jobs/follow: its updates and log chunks, pushed by the server, which
 * closes the socket (1000) once the job has ended and its logs are complete. A broken socket is
 * opened again; the server then starts over with `initialJob` and the logs from their beginning.
 * A job whose logs were removed is closed with 4410 and the reason, given to `onLogsGone`.
 * Returns `stop`.
 */
export function followJob(
  id: string,
  onMessage: (message: FollowMessage) => void,
  onLogsGone: (why: string) => void,
): () => void {
  let stopped = false;
  let socket: WebSocket;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const open = (attempt: number) => {
    socket = socketTo(`/api/jobs/follow?id=${encodeURIComponent(id)}`);
    socket.onmessage = (event) => onMessage(JSON.parse(String(event.data)) as FollowMessage);
    socket.onclose = (event) => {
      if (event.code === 4410) onLogsGone(event.reason);
      const broken = event.code !== 1000 && event.code !== 4404 && event.code !== 4410;
      if (!stopped && broken && attempt < RECONNECTS) timer = setTimeout(() => open(attempt + 1), PAUSE_MS);
    };
  };
  open(0);
  return () => {
    stopped = true;
    clearTimeout(timer);
    socket.close();
  };
}

/**
 * Watches every job the signed-in user sees over /api/jobs/events (one server-sent stream, signed
 * in by the cookie): `onJob` with each job created or changed, `onResync` when the list is to be
 * read again: changes were lost, or the stream has just begun (`ready`), since a list read before
 * the server took the stream misses what changed in between. EventSource reconnects by itself and
 * resumes from the last event it saw. Returns `stop`.
 */
export function watchJobs(onJob: (job: Job) => void, onResync: () => void): () => void {
  const source = new EventSource('/api/jobs/events');
  let begun = false;
  source.addEventListener('job', (event) => onJob(JSON.parse(event.data) as Job));
  source.addEventListener('resync', onResync);
  source.addEventListener('ready', () => {
    if (begun) return; // a reconnection that resumed: what it missed came before `ready`
    begun = true;
    onResync();
  });
  return () => source.close();
}
