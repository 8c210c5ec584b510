import type { FastifyRequest } from 'fastify';
import type { JobService } from '../../jobs/service.ts';
import { Job } from '../../model/job.ts';
import { type Api, errors } from '../api.ts';
import { followJob } from '../follow.ts';
import {
  BrowseQuery,
  BrowseResponse,
  BulkEmptyResponse,
  CreateHeaders,
  CreateRequest,
  CreateResponse,
  ExtendRequest,
  FollowMessage,
  JobIdQuery,
  TerminateRequest,
} from '../schemas.ts';

/** Jobs: create, browse, retrieve, terminate, extend, and follow over a WebSocket. */
export function jobRoutes(api: Api, service: JobService): void {
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
        summary: 'Browse jobs, newest first',
        tags: ['jobs'],
        querystring: BrowseQuery,
        response: { 200: BrowseResponse, ...errors },
      },
    },
    async (request) => service.browse(request.caller, request.query),
  );

  api.get(
    '/api/jobs/retrieve',
    {
      schema: {
        summary: 'Retrieve one job',
        tags: ['jobs'],
        querystring: JobIdQuery,
        response: { 200: Job, ...errors },
      },
    },
    async (request) => service.retrieve(request.caller, request.query.id),
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
      service.retrieve(request.caller, request.query.id);
    },
    handler: async (_request, reply) =>
      reply.code(426).header('upgrade', 'websocket').send({ message: 'this call needs a WebSocket' }),
    wsHandler: (socket, request) => {
      const { id } = request.query as { id: string };
      followJob(service, socket, request.caller, id, request.log);
    },
  });
}
