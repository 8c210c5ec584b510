import { WebSocket } from 'ws';
import type { Caller, JobService } from '../jobs/service.ts';
import { type FollowEnd, followStream } from './follow.ts';

// UCloud's WebSocket protocol at /api/jobs (its web client's app/Authentication/ws.ts): the client
// sends `{call, streamId, payload, bearer}`; each stream answers with `{type: "message", streamId,
// payload}` messages and one final `{type: "response", streamId, status}`. One socket carries
// many streams.

interface Log {
  error(obj: object, msg?: string): void;
  debug(obj: object, msg?: string): void;
}

interface Call {
  call: string;
  streamId: string;
  payload: unknown;
  bearer?: string | null;
}

const STATUS_OF: Record<FollowEnd, number> = { ended: 200, 'not-found': 404, 'logs-gone': 410, failed: 500 };
const WHY: Partial<Record<FollowEnd, (id: string) => string>> = {
  'not-found': (id) => `job ${id} was not found`,
  failed: (id) => `following job ${id} failed (the server log has the details)`,
};
/** Streams one socket may follow at once: each holds a log reader. */
const MAX_STREAMS = 64;

export function serveUCloudSocket(
  socket: WebSocket,
  service: JobService,
  callerFor: (token: string) => Promise<Caller | undefined>,
  /** Who signed the socket in with the web interface's cookie: calls without `bearer` are theirs. */
  signedIn: Caller | undefined,
  log: Log,
): void {
  const streams = new Map<string, () => void>();
  const send = (message: object) => {
    if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  };
  const respond = (streamId: string, status: number, why?: string) => {
    streams.delete(streamId);
    send({ type: 'response', streamId, status, ...(why !== undefined ? { payload: { why } } : {}) });
  };

  socket.on('message', (data) => {
    const call = parseCall(String(data));
    if (typeof call === 'string') return respond('unknown', 400, call);
    follow(call).catch((err: unknown) => {
      log.error({ err, streamId: call.streamId }, 'following a job failed');
      respond(call.streamId, 500, 'internal error');
    });
  });

  async function follow(call: Call): Promise<void> {
    const { streamId } = call;
    if (call.call !== 'jobs.follow') return respond(streamId, 404, `there is no call ${call.call} here`);
    const caller = typeof call.bearer === 'string' ? await callerFor(call.bearer) : signedIn;
    if (socket.readyState !== WebSocket.OPEN) return;
    if (!caller) return respond(streamId, 401, 'the call needs a valid API token in `bearer`');
    const id = (call.payload as { id?: unknown } | null)?.id;
    if (typeof id !== 'string') return respond(streamId, 400, 'payload.id: must be a job id');
    if (streams.has(streamId)) return respond(streamId, 400, `stream ${streamId} is already open`);
    if (streams.size >= MAX_STREAMS) return respond(streamId, 429, `at most ${MAX_STREAMS} streams at once`);
    log.debug({ streamId, jobId: id }, 'jobs.follow');
    // Registered before following: a job that cannot be followed ends the stream at once.
    streams.set(streamId, () => {});
    const stop = followStream(
      service,
      caller,
      id,
      {
        send: (payload) => send({ type: 'message', streamId, payload }),
        // One socket for every stream: a slow client slows all of its streams.
        buffered: () => socket.bufferedAmount,
        end: (outcome, why) => respond(streamId, STATUS_OF[outcome], why ?? WHY[outcome]?.(id)),
      },
      log,
    );
    if (streams.has(streamId)) streams.set(streamId, stop);
  }

  socket.on('close', () => {
    for (const stop of streams.values()) stop();
    streams.clear();
  });
}

/** The call, or why it is not one. */
function parseCall(text: string): Call | string {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return 'a message must be JSON';
  }
  const c = value as Partial<Call> | null;
  if (typeof c !== 'object' || c === null || typeof c.call !== 'string' || typeof c.streamId !== 'string') {
    return 'a message must be {call, streamId, payload, bearer}';
  }
  return { call: c.call, streamId: c.streamId, payload: c.payload ?? null, bearer: c.bearer ?? null };
}
