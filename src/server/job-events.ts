import type { Caller, JobEvent, JobService } from '../jobs/service.ts';

// /api/jobs/events: the changes of every job a caller may see, as server-sent events. A client that
// does not keep up is not buffered for: its backlog is dropped and it is told to read again.

/** Bytes queued for one client before its events are dropped (and a `resync` sent once it drains). */
export const EVENTS_BUFFERED_BYTES = 256 * 1024;
/** A comment this often keeps proxies from closing a quiet stream, and re-checks the sign-in. */
export const HEARTBEAT_MS = 15_000;
/** How long EventSource waits before reconnecting. */
const RETRY_MS = 2000;

/** Where a stream's text goes (an HTTP response). */
export interface EventSink {
  write(text: string): void;
  /** Bytes written but not yet taken by the client. */
  buffered(): number;
  /** Ends the response; called once, unless the stream was stopped first. */
  end(): void;
}

export interface EventStreamOptions {
  /** The id of the last event the client saw (EventSource's Last-Event-ID). */
  lastEventId?: string;
  /** Whether the credential the stream was opened with still holds. */
  signedIn: () => Promise<boolean>;
  heartbeatMs?: number;
}

/** One server-sent event; `data` is one line of JSON. */
const eventText = (name: string, id: string, data: unknown) =>
  `id: ${id}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * Streams job changes to a sink: first `ready` (or what the client missed since `lastEventId`, or
 * `resync` when that is lost), then one `job` event per change. Returns `stop`, and `check`, which
 * ends the stream when the sign-in no longer holds and sends the `resync` owed once the backlog
 * drained (call it when the sink drains or the sign-in may have ended).
 */
export function streamJobEvents(
  service: JobService,
  caller: Caller,
  sink: EventSink,
  o: EventStreamOptions,
): { stop: () => void; check: () => void } {
  let closed = false;
  /** The id of the newest event dropped for this client, while it is behind. */
  let droppedSince: string | undefined;
  let unsubscribe = () => {};
  /** What the stream does, in order: each step checks the sign-in first. */
  let steps: Promise<void> = Promise.resolve();
  const inOrder = (step: () => void) => {
    steps = steps
      .then(async () => {
        if (closed) return;
        if (!(await o.signedIn())) return finish();
        step();
      })
      .catch(() => finish());
  };

  const write = (text: string): boolean => {
    if (closed) return false;
    if (droppedSince !== undefined || sink.buffered() > EVENTS_BUFFERED_BYTES) return false;
    sink.write(text);
    return true;
  };
  const sendNow = (event: JobEvent) => {
    if (!write(eventText('job', event.id, event.job))) droppedSince = event.id;
  };
  /** Changes told before the watch answered where it starts: they follow what it missed. */
  let early: JobEvent[] | undefined = [];
  const send = (event: JobEvent) => {
    if (early) early.push(event);
    else inOrder(() => sendNow(event));
  };
  const check = () =>
    inOrder(() => {
      if (droppedSince !== undefined && sink.buffered() <= EVENTS_BUFFERED_BYTES) {
        const id = droppedSince;
        droppedSince = undefined;
        write(eventText('resync', id, {}));
      }
    });

  const heartbeat = setInterval(() => {
    check();
    inOrder(() => write(': heartbeat\n\n'));
  }, o.heartbeatMs ?? HEARTBEAT_MS);
  heartbeat.unref();

  function stop(): boolean {
    if (closed) return false;
    closed = true;
    clearInterval(heartbeat);
    unsubscribe();
    return true;
  }
  function finish(): void {
    if (stop()) sink.end();
  }

  write(`retry: ${RETRY_MS}\n\n`);
  service.watchJobs(caller, o.lastEventId, send).then(
    (watch) => {
      if (closed) return watch.unsubscribe();
      unsubscribe = watch.unsubscribe;
      const told = early ?? [];
      early = undefined;
      const { missed, position } = watch;
      inOrder(() => {
        if (missed === 'resync') write(eventText('resync', position, {}));
        else {
          for (const event of missed) sendNow(event);
          write(eventText('ready', position, {}));
        }
        for (const event of told) sendNow(event);
      });
    },
    () => finish(),
  );
  return { stop: () => void stop(), check };
}
