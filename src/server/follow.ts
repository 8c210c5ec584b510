import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { statusOf } from '../jobs/access.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import { isFinal } from '../model/job.ts';
import type { FollowMessage } from './schemas.ts';

/** Log bytes queued for one follower before reading more: server memory stays bounded per reader. */
const FOLLOW_BUFFERED_BYTES = 256 * 1024;

interface Log {
  error(obj: object, msg?: string): void;
}

/**
 * Streams a job's updates and log chunks over a WebSocket until the job has ended and its logs
 * are complete, or the client goes away. Logs are read once the job has started: before that the
 * backend may not know the job and would end the stream at once.
 */
export function followJob(
  service: JobService,
  socket: WebSocket,
  caller: Caller,
  id: string,
  log: Log,
): void {
  const abort = new AbortController();
  let closed = false;
  let final = false;
  let logsStarted = false;
  let logsEnded = false;
  let unsubscribe = () => {};

  const send = (message: FollowMessage) => {
    if (!closed && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  };
  const finish = (code: number, reason: string) => {
    if (closed) return;
    closed = true;
    abort.abort();
    unsubscribe();
    socket.close(code, reason);
  };
  const maybeEnd = () => {
    if (final && logsEnded) finish(1000, 'the job has ended');
  };
  const startLogs = () => {
    if (logsStarted) return;
    logsStarted = true;
    (async () => {
      for await (const chunk of service.logs(caller, id, { follow: true, signal: abort.signal })) {
        if (closed) return;
        send({ updates: [], log: [chunk] });
        // Backpressure: the next chunk is read once the client took most of what is queued.
        while (!closed && socket.bufferedAmount > FOLLOW_BUFFERED_BYTES) await sleep(10);
      }
    })().then(
      () => {
        logsEnded = true;
        maybeEnd();
      },
      (err: unknown) => {
        log.error({ err, jobId: id }, 'following logs failed');
        finish(1011, 'reading the logs failed');
      },
    );
  };

  socket.on('close', () => {
    closed = true;
    abort.abort();
    unsubscribe();
  });

  let first: ReturnType<JobService['follow']>;
  try {
    first = service.follow(caller, id, (update, record) => {
      // Runs inside the service's update: it must never throw back into it.
      try {
        send({ updates: [update], log: [], newStatus: statusOf(record) });
        if (isFinal(record.state)) final = true;
        if (record.state === 'RUNNING' || final) startLogs();
        maybeEnd();
      } catch (err) {
        log.error({ err, jobId: id }, 'following a job failed');
      }
    });
  } catch (err) {
    const status = err instanceof ServiceError ? err.status : 500;
    if (status >= 500) log.error({ err, jobId: id }, 'following a job failed');
    finish(status === 404 ? 4404 : 1011, status === 404 ? 'the job was not found' : 'internal error');
    return;
  }
  unsubscribe = first.unsubscribe;
  if (closed) {
    unsubscribe();
    return;
  }
  const { job } = first;
  send({ updates: job.updates, log: [], newStatus: job.status });
  final = isFinal(job.status.state);
  if (final || job.status.startedAt !== undefined) startLogs();
}
