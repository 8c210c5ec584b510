import type { FastifyRequest } from 'fastify';
import { computeSupport } from '../../jobs/presentation.ts';
import { Job } from '../../model/job.ts';
import { normalisedDuration, readJobSpecification } from '../../model/job-request.ts';
import { type ApiRoutes, errors, publicRoute } from '../api.ts';
import { callerForToken, credentialHolds } from '../auth.ts';
import { errorBody } from '../errors.ts';
import { followJob } from '../follow.ts';
import { streamJobEvents } from '../job-events.ts';
import {
  BrowseQuery,
  BrowseResponse,
  BulkEmptyResponse,
  CreateHeaders,
  CreateRequest,
  CreateResponse,
  ExtendRequest,
  FollowMessage,
  JobEventsHeaders,
  JobEventsStream,
  JobIdQuery,
  JobIdsRequest,
  ProductSupportResponse,
  RenameRequest,
  RetrieveQuery,
  SearchRequest,
  TerminateRequest,
  UtilizationQuery,
  UtilizationResponse,
} from '../schemas.ts';
import { serveUCloudSocket } from '../ucloud-socket.ts';

/** Each item read as UCloud's clients write it; what has no effect here is logged, not refused. */
function readCreateRequest(body: unknown, log: { debug(obj: object, msg: string): void }): unknown {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as { items?: unknown }).items)) {
    return body;
  }
  const b = body as { items: unknown[] };
  const items = b.items.map((item, i) => {
    const { specification, ignored } = readJobSpecification(item);
    if (ignored.length > 0) log.debug({ item: i, ignored }, 'job fields without effect here were ignored');
    return specification;
  });
  return { ...b, items };
}

/** Each requested time read as UCloud reads it: `{minutes: 90}` is an hour and a half. */
function readExtendRequest(body: unknown): unknown {
  const items = (body as { items?: unknown } | null)?.items;
  if (!Array.isArray(items)) return body;
  const read = items.map((item: unknown) => {
    const time = (item as { requestedTime?: unknown } | null)?.requestedTime;
    if (typeof time !== 'object' || time === null || Array.isArray(time)) return item;
    return { ...(item as object), requestedTime: normalisedDuration(time as Record<string, unknown>) };
  });
  return { ...(body as object), items: read };
}

/**
 * Jobs, as UCloud's jobs API has them: create, browse, search, retrieve, retrieveProducts,
 * retrieveUtilization, terminate, suspend, unsuspend, extend, rename, and follow over a WebSocket;
 * and (ucompute's own) one stream of the changes of every job the caller sees.
 */
export const jobRoutes: ApiRoutes = async (api) => {
  const { jobService: service, jobEnvironment: env, store, signIns } = api;
  const callerFor = (token: string) => callerForToken(store.users, token);
  api.route({
    method: 'GET',
    url: '/api/jobs',
    config: publicRoute,
    schema: {
      summary: "Follow jobs with UCloud's WebSocket protocol (jobs.follow)",
      description:
        'A WebSocket. Send `{call: "jobs.follow", streamId, payload: {id}, bearer}`; each stream ' +
        'answers `{type: "message", streamId, payload}` (the first with `initialJob`, then ' +
        '`updates`, `log` and `newStatus`) and ends with `{type: "response", streamId, status}`. ' +
        'The token travels in each call, as UCloud does, so the upgrade itself needs none; a call ' +
        "without one counts as the web interface's signed-in user (the cookie, from its own pages).",
      tags: ['jobs'],
      security: [],
      response: { 101: FollowMessage, ...errors },
    },
    handler: async (_request, reply) =>
      reply.code(426).header('upgrade', 'websocket').send(errorBody(426, 'this call needs a WebSocket')),
    wsHandler: (socket, request) =>
      serveUCloudSocket(socket, service, callerFor, request.caller ?? undefined, request.log),
  });

  api.post(
    '/api/jobs',
    {
      schema: {
        summary: 'Create jobs',
        description:
          'Every item is checked before any is created: one bad item refuses the whole request (400).',
        tags: ['jobs'],
        headers: CreateHeaders,
        body: CreateRequest,
        response: { 200: CreateResponse, ...errors },
      },
      // UCloud's clients send more than a job needs here; read it before the strict checks.
      preValidation: async (request) => {
        request.body = readCreateRequest(request.body, request.log) as typeof request.body;
      },
    },
    async (request) => {
      const ids = await service.create(request.caller, request.body.items, {
        idempotencyKey: request.headers['idempotency-key'],
        project: request.headers.project,
      });
      return { responses: ids.map((id) => ({ id })) };
    },
  );

  api.get(
    '/api/jobs/browse',
    {
      schema: {
        summary: 'Browse jobs, newest first (UCloud PageV2)',
        tags: ['jobs'],
        querystring: BrowseQuery,
        response: { 200: BrowseResponse, ...errors },
      },
    },
    async (request) => service.browse(request.caller, request.query),
  );

  api.post(
    '/api/jobs/search',
    {
      schema: {
        summary: "Search jobs by text in their id, name or application (UCloud's search)",
        tags: ['jobs'],
        body: SearchRequest,
        response: { 200: BrowseResponse, ...errors },
      },
    },
    async (request) => {
      const { flags, ...page } = request.body;
      return service.browse(request.caller, { ...flags, ...page });
    },
  );

  // Open streams, ended when the server closes (it would otherwise wait for them).
  const streams = new Set<() => void>();
  api.addHook('preClose', async () => {
    for (const end of streams) end();
  });

  api.get(
    '/api/jobs/events',
    {
      schema: {
        summary: 'Follow the changes of every job the caller sees (server-sent events; ucompute)',
        description:
          'One stream for the jobs browse shows: each job as browse returns it whenever it is ' +
          'created, changes state or status, is extended or renamed. Event ids resume: a client ' +
          'that reconnects with Last-Event-ID gets what it missed, or `resync`. A client that does ' +
          'not keep up has its backlog dropped and gets `resync` once it catches up. The stream ' +
          'ends when its sign-in does (signed out or expired).',
        tags: ['jobs'],
        headers: JobEventsHeaders,
        response: { 200: { content: { 'text/event-stream': { schema: JobEventsStream } } }, ...errors },
      },
    },
    async (request, reply) => {
      const signedIn = await credentialHolds(store.users, signIns, request, request.caller);
      const res = reply.raw;
      reply.hijack();
      res.writeHead(200, {
        ...(reply.getHeaders() as Record<string, string>),
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        'x-accel-buffering': 'no',
      });
      const lastEventId = request.headers['last-event-id'];
      const stream = streamJobEvents(
        service,
        request.caller,
        {
          write: (text) => res.write(text),
          buffered: () => res.writableLength,
          end: () => res.end(),
        },
        {
          signedIn,
          ...(lastEventId !== undefined ? { lastEventId } : {}),
        },
      );
      const stopWatchingSignOut = signIns.onEnd(stream.check);
      const end = () => {
        stream.stop();
        stopWatchingSignOut();
        streams.delete(end);
        res.end();
      };
      streams.add(end);
      res.on('drain', stream.check);
      res.on('close', end);
    },
  );

  api.get(
    '/api/jobs/retrieve',
    {
      schema: {
        summary: 'Retrieve one job',
        tags: ['jobs'],
        querystring: RetrieveQuery,
        response: { 200: Job, ...errors },
      },
    },
    async (request) => service.retrieve(request.caller, request.query.id, request.query),
  );

  api.get(
    '/api/jobs/retrieveProducts',
    {
      schema: {
        summary: "The products and what each supports (UCloud's SupportByProvider)",
        tags: ['jobs'],
        response: { 200: ProductSupportResponse, ...errors },
      },
    },
    async () => {
      const provider = env.config.provider;
      const supported = env.products.map((p) => ({
        product: {
          type: 'compute' as const,
          name: p.id,
          category: { name: p.category, provider },
          description: p.description ?? '',
          cpu: p.cpu,
          memoryInGigs: p.memoryInGigs,
          gpu: p.gpu ?? 0,
          pricePerUnit: p.pricePerUnit,
        },
        support: computeSupport(p, provider),
      }));
      return { productsByProvider: { [provider]: supported } };
    },
  );

  api.get(
    '/api/jobs/retrieveUtilization',
    {
      schema: {
        summary: "Capacity, use and queue of the machines a job's product runs on",
        tags: ['jobs'],
        querystring: UtilizationQuery,
        response: { 200: UtilizationResponse, ...errors },
      },
    },
    async (request) => service.utilization(request.caller, request.query.jobId),
  );

  api.post(
    '/api/jobs/suspend',
    {
      schema: {
        summary: 'Suspend queued or running jobs: resources freed, job and folder kept',
        tags: ['jobs'],
        body: JobIdsRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
    },
    async (request) => {
      const ids = request.body.items.map((i) => i.id);
      await service.suspend(request.caller, ids);
      return { responses: ids.map(() => ({})) };
    },
  );

  api.post(
    '/api/jobs/unsuspend',
    {
      schema: {
        summary: 'Queue suspended jobs again: the same jobs, with their folders',
        tags: ['jobs'],
        body: JobIdsRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
    },
    async (request) => {
      const ids = request.body.items.map((i) => i.id);
      await service.unsuspend(request.caller, ids);
      return { responses: ids.map(() => ({})) };
    },
  );

  api.post(
    '/api/jobs/rename',
    {
      schema: {
        summary: 'Rename jobs',
        tags: ['jobs'],
        body: RenameRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
    },
    async (request) => {
      await service.rename(request.caller, request.body.items);
      return { responses: request.body.items.map(() => ({})) };
    },
  );

  api.post(
    '/api/jobs/terminate',
    {
      schema: {
        summary: 'Terminate jobs',
        tags: ['jobs'],
        body: TerminateRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
    },
    async (request) => {
      const ids = request.body.items.map((i) => i.id);
      await service.terminate(request.caller, ids);
      return { responses: ids.map(() => ({})) };
    },
  );

  api.post(
    '/api/jobs/extend',
    {
      schema: {
        summary: 'Extend the time allocation of running jobs',
        tags: ['jobs'],
        body: ExtendRequest,
        response: { 200: BulkEmptyResponse, ...errors },
      },
      preValidation: async (request) => {
        request.body = readExtendRequest(request.body) as typeof request.body;
      },
    },
    async (request) => {
      await service.extend(request.caller, request.body.items);
      return { responses: request.body.items.map(() => ({})) };
    },
  );

  api.route({
    method: 'GET',
    url: '/api/jobs/follow',
    schema: {
      summary: 'Follow a job (WebSocket)',
      description:
        'A WebSocket. The first message carries every update so far; then one message per update ' +
        '(with `newStatus`) and per log chunk. The server closes it once the job has ended and its ' +
        'logs are complete. Browsers, which cannot set headers, may offer the subprotocol ' +
        '`bearer.<token>` (with another, such as `ucompute`, for the server to select).',
      tags: ['jobs'],
      querystring: JobIdQuery,
      response: { 101: FollowMessage, ...errors },
    },
    // Refuse unknown and others' jobs before the upgrade, so the client sees a 404.
    preHandler: async (request: FastifyRequest<{ Querystring: { id: string } }>) => {
      await service.retrieve(request.caller, request.query.id);
    },
    handler: async (_request, reply) =>
      reply.code(426).header('upgrade', 'websocket').send(errorBody(426, 'this call needs a WebSocket')),
    wsHandler: (socket, request) => {
      const { id } = request.query as { id: string };
      followJob(service, socket, request.caller, id, request.log);
    },
  });
};
