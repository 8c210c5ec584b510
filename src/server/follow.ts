import { setTimeout as sleep } from 'node:timers/promises';
import { WebSocket } from 'ws';
import { statusOf } from '../jobs/access.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { Caller, JobService } from '../jobs/service.ts';
import type { JobUpdate } from '../model/job.ts';
import { isFinal } from '../model/job-states.ts';
import type { JobRecord } from '../store/jobs.ts';
import type { FollowMessage } from './schemas.ts';

/** Log bytes queued for one follower before reading more: server memory stays bounded per reader. */
const FOLLOW_BUFFERED_BYTES = 256 * 1024;

interface Log {
  error(obj: object, msg?: string): void;
}

/**
 * How a follow ended: the job ended and its logs are complete, its logs are gone (removed by the
 * backend's retention: the end says so), or it could not go on.
 */
export type FollowEnd = 'ended' | 'not-found' | 'logs-gone' | 'failed';

/** Where a follow's messages go: one WebSocket per job, or one stream of UCloud's protocol. */
export interface FollowSink {
  send(message: FollowMessage): void;
  /** Bytes sent but not yet taken by the client. */
  buffered(): number;
  /** Called once, unless the follow was stopped first; `why` says what `logs-gone` means. */
  end(outcome: FollowEnd, why?: string): void;
}

/**
 * Streams a job's updates and log chunks until the job has ended and its logs are complete, or
 * `stop` is called. The first message carries the job as it stands (`initialJob`) and every update
 * so far. Logs are read once the job has started: before that the backend may not know the job
 * and would end the stream at once. Returns `stop`.
 */
export function followStream(
  service: JobService,
  caller: Caller,
  id: string,
  sink: FollowSink,
  log: Log,
): () => void {
  const abort = new AbortController();
  let closed = false;
  let final = false;
  let logsStarted = false;
  let logsEnded = false;
  let unsubscribe = () => {};

  const send = (message: FollowMessage) => {
    if (!closed) sink.send(message);
  };
  const stop = () => {
    if (closed) return false;
    closed = true;
    abort.abort();
    unsubscribe();
    return true;
  };
  const finish = (outcome: FollowEnd, why?: string) => {
    if (stop()) sink.end(outcome, why);
  };
  const maybeEnd = () => {
    if (final && logsEnded) finish('ended');
  };
  const startLogs = () => {
    if (logsStarted) return;
    logsStarted = true;
    (async () => {
      for await (const chunk of service.logs(caller, id, { follow: true, signal: abort.signal })) {
        if (closed) return;
        // No channel: the rank's own output, as UCloud's clients read it.
        send({ updates: [], log: [{ ...chunk, channel: null }] });
        // Backpressure: the next chunk is read once the client took most of what is queued.
        while (!closed && sink.buffered() > FOLLOW_BUFFERED_BYTES) await sleep(10);
      }
    })().then(
      () => {
        logsEnded = true;
        maybeEnd();
      },
      (err: unknown) => {
        if (err instanceof ServiceError && err.status === 410) return finish('logs-gone', err.message);
        log.error({ err, jobId: id }, 'following logs failed');
        finish('failed');
      },
    );
  };

  /** Updates told before the first message went out, while the job was read. */
  let early: [JobUpdate, JobRecord][] | undefined = [];
  const told = (update: JobUpdate, record: JobRecord) => {
    send({ updates: [update], log: [], newStatus: statusOf(record) });
    if (isFinal(record.state)) final = true;
    if (record.state === 'RUNNING' || final) startLogs();
    maybeEnd();
  };
  service
    .follow(caller, id, (update, record) => {
      // Runs inside the service's update: it must never throw back into it.
      try {
        if (early) early.push([update, record]);
        else told(update, record);
      } catch (err) {
        log.error({ err, jobId: id }, 'following a job failed');
      }
    })
    .then(
      ({ job, unsubscribe: stopFollowing }) => {
        unsubscribe = stopFollowing;
        if (closed) return stopFollowing();
        send({ initialJob: job, updates: job.updates, log: [], newStatus: job.status });
        final = isFinal(job.status.state);
        if (final || job.status.startedAt !== undefined) startLogs();
        // What the job as read holds already is not told twice.
        const known = new Set(job.updates.map((u) => JSON.stringify(u)));
        const held = early ?? [];
        early = undefined;
        for (const [update, record] of held) if (!known.has(JSON.stringify(update))) told(update, record);
        maybeEnd();
      },
      (err: unknown) => {
        const status = err instanceof ServiceError ? err.status : 500;
        if (status >= 500) log.error({ err, jobId: id }, 'following a job failed');
        finish(status === 404 ? 'not-found' : 'failed');
      },
    );
  return () => {
    stop();
  };
}

/** /api/jobs/follow: one job per WebSocket, closed by the server when the job has ended. */
export function followJob(
  service: JobService,
  socket: WebSocket,
  caller: Caller,
  id: string,
  log: Log,
): void {
  const closeFor: Record<FollowEnd, [number, string]> = {
    ended: [1000, 'the job has ended'],
    'not-found': [4404, 'the job was not found'],
    'logs-gone': [4410, 'the logs of the job are gone'],
    failed: [1011, 'internal error'],
  };
  const stop = followStream(
    service,
    caller,
    id,
    {
      send(message) {
        if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
      },
      buffered: () => socket.bufferedAmount,
      end(outcome, why) {
        const [code, reason] = closeFor[outcome];
        // A close reason holds at most 123 bytes.
        socket.close(code, why !== undefined && Buffer.byteLength(why) <= 123 ? why : reason);
      },
    },
    log,
  );
  socket.on('close', stop);
}
