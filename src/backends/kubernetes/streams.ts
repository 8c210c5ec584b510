import { once } from 'node:events';
import { connect as tcpConnect } from 'node:net';
import { Duplex, PassThrough, Writable } from 'node:stream';
import { Exec, Log, PortForward } from '@kubernetes/client-node';
import type { LogChunk, ShellOptions } from '../../jobs/backend.ts';
import { USER_CONTAINER_NAME } from '../../volcano/names.ts';
import type { Connection } from './connection.ts';
import type { PodSummary } from './states.ts';

/** The user's preferred shell where the image has one (UCloud's choice), with a terminal type. */
export const SHELL_COMMAND = [
  'sh',
  '-c',
  'TERM=xterm-256color; export TERM; for s in /bin/bash /usr/bin/bash /bin/zsh /usr/bin/zsh /bin/fish /usr/bin/fish; do [ -x "$s" ] && exec "$s"; done; exec /bin/sh',
];

type PodRef = Pick<PodSummary, 'namespace' | 'name' | 'rank' | 'ip'>;

/**
 * A stream for client-node's Log to pipe the response into. Aborting the request errors the
 * response stream it pipes from, which nobody else listens to: that error is expected here.
 */
function logSink(options?: { encoding: 'utf8' }): PassThrough {
  const sink = new PassThrough(options);
  sink.on('pipe', (source) => source.on('error', () => sink.end()));
  return sink;
}

/** A rank's whole log so far (not following). */
export async function podLogText(conn: Connection, pod: PodRef): Promise<string> {
  await conn.limiter.take();
  const out = logSink();
  const chunks: Buffer[] = [];
  out.on('data', (c: Buffer) => chunks.push(c));
  const ended = once(out, 'end');
  const request = await new Log(conn.kubeConfig).log(pod.namespace, pod.name, USER_CONTAINER_NAME, out, {
    follow: false,
  });
  const timer = setTimeout(() => {
    request.abort();
    out.destroy(new Error(`the log of ${pod.name} did not arrive in time`));
  }, conn.requestTimeoutMs);
  try {
    await ended;
  } finally {
    clearTimeout(timer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** What log following needs to know of a job while it goes on. */
export interface FollowedPods {
  pods(): PodSummary[];
  /** The job reported its end (or was cancelled): no new rank will start. */
  ended(): boolean;
  /** Calls back on the next change of the job or its pods; answers the unsubscribe. */
  onChange(callback: () => void): () => void;
}

/**
 * Every rank's log, followed: each rank's stream starts once its container has started, and the
 * whole ends when the job ended and every stream ended, or when `signal` aborts.
 */
export async function* podLog(
  conn: Connection,
  job: FollowedPods,
  signal?: AbortSignal,
): AsyncIterable<LogChunk> {
  const queue: LogChunk[] = [];
  const requests = new Set<AbortController>();
  const streaming = new Set<number>();
  let open = 0;
  let wake: (() => void) | undefined;
  const poke = () => wake?.();

  const startRank = (pod: PodSummary) => {
    streaming.add(pod.rank);
    open++;
    const out = logSink({ encoding: 'utf8' });
    out.on('data', (text: string) => {
      queue.push({ rank: pod.rank, stdout: text });
      poke();
    });
    out.on('close', () => {
      open--;
      poke();
    });
    out.on('error', () => {});
    new Log(conn.kubeConfig).log(pod.namespace, pod.name, USER_CONTAINER_NAME, out, { follow: true }).then(
      (request) => {
        requests.add(request);
        if (signal?.aborted) request.abort();
      },
      () => out.destroy(),
    );
  };

  signal?.addEventListener('abort', poke, { once: true });
  try {
    while (!signal?.aborted) {
      for (const pod of job.pods()) if (pod.started && !streaming.has(pod.rank)) startRank(pod);
      while (queue.length > 0) yield queue.shift()!;
      if (job.ended() && open === 0) break;
      let unsubscribe: (() => void) | undefined;
      await new Promise<void>((resolve) => {
        wake = resolve;
        unsubscribe = job.onChange(resolve);
      });
      unsubscribe?.();
      wake = undefined;
    }
  } finally {
    signal?.removeEventListener('abort', poke);
    for (const r of requests) r.abort();
  }
}

/** An interactive shell in a pod's user container: `exec` with a terminal, resizable. */
export async function podShell(
  conn: Connection,
  pod: PodRef,
  size: ShellOptions,
): Promise<Duplex & { resize(o: ShellOptions): void }> {
  const input = new PassThrough();
  // Exec resizes the terminal when its output stream has columns and rows and emits 'resize'.
  const output = Object.assign(new PassThrough(), { columns: size.cols, rows: size.rows });
  const socket = await new Exec(conn.kubeConfig).exec(
    pod.namespace,
    pod.name,
    USER_CONTAINER_NAME,
    SHELL_COMMAND,
    output,
    null,
    input,
    true,
  );
  socket.on('close', () => output.end());
  const duplex = Duplex.from({ readable: output, writable: input });
  duplex.on('close', () => socket.close());
  return Object.assign(duplex, {
    resize(o: ShellOptions) {
      output.columns = o.cols;
      output.rows = o.rows;
      output.emit('resize');
    },
  });
}

/**
 * A byte stream to a pod's port: straight to the pod's address when ucompute runs in the
 * cluster, through the API server's port-forward otherwise.
 */
export async function connectToPod(conn: Connection, pod: PodRef, port: number): Promise<Duplex> {
  if (conn.inCluster) {
    const socket = tcpConnect({ host: pod.ip, port });
    await once(socket, 'connect');
    return socket;
  }
  const stream = portForwardStream(`${pod.name}:${port}`);
  const socket = (await new PortForward(conn.kubeConfig).portForward(
    pod.namespace,
    pod.name,
    [port],
    stream.fromPod,
    stream.errors,
    stream.toPod,
  )) as { on(event: 'close', f: () => void): void; close(): void };
  socket.on('close', () => stream.push(null));
  stream.on('close', () => socket.close());
  return stream;
}

/**
 * One port-forward as the socket a keep-alive pool expects: it ends both ways when the pod's
 * side closes (a pool must not hand out a stream whose far end is gone), fails with the API
 * server's message, and `setTimeout` emits 'timeout' after that long without traffic, which is
 * how an http.Agent releases an idle connection.
 */
function portForwardStream(target: string) {
  const toPod = new PassThrough();
  let idleMs = 0;
  let idleTimer: NodeJS.Timeout | undefined;
  const active = () => {
    if (idleTimer) idleTimer.refresh();
  };
  const stream = new Duplex({
    allowHalfOpen: false,
    read() {},
    write(chunk: Buffer, _encoding, done) {
      active();
      toPod.write(chunk, done);
    },
    final(done) {
      toPod.end();
      done();
    },
    destroy(error, done) {
      clearTimeout(idleTimer);
      toPod.destroy();
      done(error);
    },
  });
  const fromPod = new Writable({
    write(chunk: Buffer, _encoding, done) {
      active();
      stream.push(chunk);
      done();
    },
  });
  // The error channel's first frame carries only the port number: an empty write here.
  const errors = new Writable({
    write(chunk: Buffer, _encoding, done) {
      if (chunk.length > 0) {
        stream.destroy(new Error(`port-forward to ${target} failed: ${chunk.toString('utf8')}`));
      }
      done();
    },
  });
  const socketCalls = {
    get timeout() {
      return idleMs;
    },
    setTimeout(ms: number, callback?: () => void) {
      clearTimeout(idleTimer);
      idleTimer = undefined;
      idleMs = ms;
      // As net.Socket: a callback is added once, and taken off again with a zero timeout.
      if (callback && ms === 0) stream.removeListener('timeout', callback);
      else if (callback) stream.once('timeout', callback);
      if (ms > 0) idleTimer = setTimeout(() => stream.emit('timeout'), ms);
      return stream;
    },
    // TCP options and event-loop references belong to the API server's connection, not to this stream.
    setKeepAlive: () => stream,
    setNoDelay: () => stream,
    ref: () => stream,
    unref: () => stream,
  };
  Object.defineProperties(stream, Object.getOwnPropertyDescriptors(socketCalls));
  return Object.assign(stream, { fromPod, errors, toPod });
}
