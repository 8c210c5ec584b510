import { EventEmitter } from 'node:events';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { CryptoKey } from 'jose';
import { WebSocket } from 'ws';
import type { Sessions } from '../interactive/sessions.ts';
import { serveShell } from '../interactive/shell.ts';
import { relayVnc } from '../interactive/vnc.ts';
import type { Backend } from '../jobs/backend.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { JobService } from '../jobs/service.ts';
import { CORE_CALLER, requireCore } from './routes.ts';

// UCloud's WebSockets on the provider (SDU-eScience/UCloud IM2 `provider-integration/im2/pkg/
// controller/jobs.go:1526-1568`): requests `{call, streamId, payload}`, stream messages
// `{type: "message", streamId, payload}`, a final `{type: "response", status, streamId, payload}`.
// - follow (`/ucloud/jobs.provider.<p>/websocket`, call `jobs.provider.<p>.follow`; Kotlin
//   `JobsProvider.kt:939-967`), called by Core with its token: `{type: "init", job}` starts a
//   stream of `{streamId, rank, stdout?, stderr?}`, `{type: "cancel", streamId}` ends it;
// - shell (`/ucloud/<p>/websocket?session=…`, call `jobs.compute.<p>.shell.open`; the browser,
//   `frontend-web/webclient/app/Applications/Jobs/Shell.tsx:199-240`), whose session identifier
//   is the credential: the terminal protocol of src/interactive/shell.ts inside the envelope;
// - VNC (`/ucloud/<p>/vnc?token=…`, IM2 `jobs.go:1924`): RFB relayed as binary messages.

export interface SocketParts {
  providerId: string;
  coreKey: CryptoKey;
  service: JobService;
  backend: Pick<Backend, 'connect' | 'shell'>;
  now: () => number;
}

const send = (socket: WebSocket, message: object) => {
  if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
};

function parse(raw: unknown): Record<string, unknown> | undefined {
  try {
    const v = JSON.parse(String(raw)) as unknown;
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** Streams of one follow socket: each reads one job's logs until it ends or is cancelled. */
function serveFollow(socket: WebSocket, service: JobService, log: FastifyRequest['log']): void {
  const streams = new Map<string, AbortController>();
  socket.on('message', (raw) => {
    const call = parse(raw);
    const streamId = typeof call?.streamId === 'string' ? call.streamId : 'unknown';
    const payload = (call?.payload ?? {}) as { type?: string; job?: { id?: unknown }; streamId?: string };
    if (payload.type === 'cancel') {
      streams.get(payload.streamId ?? streamId)?.abort();
      return;
    }
    const id = payload.job?.id;
    if (payload.type !== 'init' || typeof id !== 'string') {
      send(socket, {
        type: 'response',
        status: 400,
        streamId,
        payload: { why: 'payload must be {type: "init", job}' },
      });
      return;
    }
    const abort = new AbortController();
    streams.set(streamId, abort);
    (async () => {
      let status = 200;
      try {
        for await (const chunk of service.logs(CORE_CALLER, id, { follow: true, signal: abort.signal })) {
          send(socket, { type: 'message', streamId, payload: { streamId, ...chunk } });
        }
      } catch (err) {
        if (!abort.signal.aborted) {
          status = err instanceof ServiceError ? err.status : 500;
          log.warn({ err, jobId: id }, 'following a job for Core failed');
        }
      }
      streams.delete(streamId);
      send(socket, { type: 'response', status, streamId, payload: {} });
    })();
  });
  socket.on('close', () => {
    for (const abort of streams.values()) abort.abort();
  });
}

/**
 * The terminal protocol's socket inside UCloud's envelope: what serveShell sends goes out as the
 * payload of a stream message, and the payloads that come in reach it as its messages.
 */
class EnvelopedSocket extends EventEmitter {
  private streamId = 'shell';
  private readonly socket: WebSocket;
  constructor(socket: WebSocket) {
    super();
    this.socket = socket;
    socket.on('message', (raw) => {
      const call = parse(raw);
      if (typeof call?.streamId === 'string') this.streamId = call.streamId;
      this.emit('message', Buffer.from(JSON.stringify(call?.payload ?? null)), false);
    });
    socket.on('close', () => this.emit('close'));
  }
  get readyState(): number {
    return this.socket.readyState;
  }
  send(text: string): void {
    send(this.socket, { type: 'message', streamId: this.streamId, payload: JSON.parse(text) });
  }
  close(code: number, reason: string): void {
    this.socket.close(code, reason);
  }
}

const notWebSocket = { why: 'this call needs a WebSocket', errorCode: 'BAD_REQUEST' };

export function providerSockets(p: SocketParts) {
  return async (app: FastifyInstance, parts: { sessions: Sessions }) => {
    const { sessions } = parts;
    app.route({
      method: 'GET',
      url: `/ucloud/jobs.provider.${p.providerId}/websocket`,
      config: { public: true },
      schema: { hide: true },
      onRequest: async (request) => requireCore(request, p.coreKey, p.now()),
      handler: async (_request, reply) => reply.code(426).send(notWebSocket),
      wsHandler: (socket, request) => serveFollow(socket, p.service, request.log),
    });
    app.route({
      method: 'GET',
      url: `/ucloud/${p.providerId}/websocket`,
      config: { public: true },
      schema: { hide: true },
      handler: async (_request, reply) => reply.code(426).send(notWebSocket),
      wsHandler: (socket, request) =>
        serveShell(new EnvelopedSocket(socket) as unknown as WebSocket, {
          sessions,
          backend: p.backend,
          log: request.log,
        }),
    });
    app.route({
      method: 'GET',
      url: `/ucloud/${p.providerId}/vnc`,
      config: { public: true },
      schema: { hide: true },
      // Refused before the upgrade: nothing reaches the job without a session for it.
      preHandler: async (request: FastifyRequest) => {
        const q = request.query as { token?: string; jobId?: string; rank?: string };
        if (!(await sessions.use(q.token ?? '', 'VNC', q.jobId ?? '', Number(q.rank ?? 0)))) {
          throw new ServiceError(401, 'the VNC session is not valid: open a new one');
        }
      },
      handler: async (_request, reply) => reply.code(426).send(notWebSocket),
      wsHandler: async (socket, request) => {
        const q = request.query as { jobId: string; rank: string };
        const port = await sessions.portOf(q.jobId, 'VNC');
        if (port === undefined) socket.close(4404, 'the job has no VNC port');
        else relayVnc(socket, { jobId: q.jobId, rank: Number(q.rank), port }, p.backend, request.log);
      },
    });
  };
}
