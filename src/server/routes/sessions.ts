import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { asset, PAGE_HEADERS, page } from '../../interactive/pages.ts';
import { serveShell } from '../../interactive/shell.ts';
import { MAX_WAIT_MS, sessionReadiness } from '../../interactive/starting.ts';
import { relayVnc } from '../../interactive/vnc.ts';
import { ServiceError } from '../../jobs/errors.ts';
import { JOB_ID_PATTERN } from '../../model/ids.ts';
import { JobState } from '../../model/job.ts';
import { closed, StringEnum } from '../../model/schema.ts';
import { type ApiRoutes, errors, publicRoute } from '../api.ts';

const SessionRequestBody = Type.Object(
  {
    items: Type.Array(
      Type.Object(
        {
          id: Type.String({ pattern: JOB_ID_PATTERN }),
          rank: Type.Integer({ minimum: 0 }),
          sessionType: StringEnum(['WEB', 'VNC', 'SHELL']),
        },
        closed,
      ),
      { minItems: 1, maxItems: 100 },
    ),
  },
  closed,
);

const Base = { jobId: Type.String(), rank: Type.Integer() };
const OpenSession = Type.Union([
  Type.Object({ type: Type.Literal('web'), ...Base, redirectClientTo: Type.String() }),
  Type.Object({
    type: Type.Literal('vnc'),
    ...Base,
    url: Type.String(),
    password: Type.Optional(Type.String()),
  }),
  Type.Object({ type: Type.Literal('shell'), ...Base, sessionIdentifier: Type.String() }),
]);

const SessionResponse = Type.Object({
  responses: Type.Array(
    Type.Object({ providerDomain: Type.String(), providerId: Type.String(), session: OpenSession }),
  ),
});

/** The provider's id in UCloud's OpenSessionWithProvider: this service answers for itself. */
const PROVIDER_ID = 'ucompute';

const VncQuery = Type.Object(
  { jobId: Type.String({ pattern: JOB_ID_PATTERN }), rank: Type.Integer({ minimum: 0 }) },
  closed,
);

/** The VNC session secret, offered by the page as the subprotocol `session.<secret>`. */
function vncSecret(request: FastifyRequest): string {
  const offered = request.headers['sec-websocket-protocol'] ?? '';
  const protocol = offered
    .split(',')
    .map((p) => p.trim())
    .find((p) => p.startsWith('session.'));
  return protocol?.slice('session.'.length) ?? '';
}

const notWebSocket = { message: 'this call needs a WebSocket' };

const ReadyQuery = Type.Object(
  {
    id: Type.String({ pattern: JOB_ID_PATTERN }),
    rank: Type.Optional(Type.Integer({ minimum: 0, description: 'default 0' })),
    waitMs: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: MAX_WAIT_MS,
        description: 'wait up to this long for it (default 0)',
      }),
    ),
  },
  closed,
);
const ReadyResponse = Type.Object({
  state: JobState,
  ready: Type.Boolean({
    description: 'the job runs and its app answers (HTTP for web apps, RFB for desktops)',
  }),
  sessionType: StringEnum(['WEB', 'VNC', 'SHELL']),
  status: Type.Optional(Type.String({ description: "the job's latest status" })),
});

/** Interactive sessions: web apps, remote desktops and terminals of running jobs. */
export const sessionRoutes: ApiRoutes = async (api) => {
  const { sessions, sessionBackend: backend } = api;
  const readiness = sessionReadiness({ service: api.jobService, sessions, backend });
  // A wait in flight must not hold the server's closing up.
  api.addHook('preClose', async () => readiness.close());

  api.get(
    '/api/jobs/interactiveSession/ready',
    {
      schema: {
        summary: "Whether a job's session would open onto an app that answers (a long poll)",
        description:
          'What a "starting…" page waits for before opening the session: the job RUNNING and its ' +
          'app answering in its own protocol. With waitMs, the answer comes once the app answers, ' +
          'the job ends, or waitMs passes.',
        tags: ['jobs'],
        querystring: ReadyQuery,
        response: { 200: ReadyResponse, ...errors },
      },
    },
    async (request) => {
      const { id, rank, waitMs } = request.query;
      return readiness.wait(request.caller, id, rank ?? 0, waitMs ?? 0);
    },
  );

  api.post(
    '/api/jobs/interactiveSession',
    {
      schema: {
        summary: 'Open interactive sessions',
        description:
          'WEB and VNC for jobs of such applications, SHELL for any running job. A web session is ' +
          "a one-time link to the app's own origin, which signs the browser in there with a " +
          'cookie; a shell session identifier opens one terminal within 5 minutes.',
        tags: ['jobs'],
        body: SessionRequestBody,
        response: { 200: SessionResponse, ...errors },
      },
    },
    async (request) => {
      const reached = request.server.publicUrl.reached();
      const opened = await sessions.open(request.caller, request.body.items, reached);
      return {
        responses: opened.map((session) => ({
          providerDomain: reached.origin,
          providerId: PROVIDER_ID,
          session,
        })),
      };
    },
  );

  api.route({
    method: 'GET',
    url: '/api/jobs/shell',
    config: publicRoute,
    schema: {
      summary: 'A terminal in a job (WebSocket)',
      description:
        'UCloud\'s shell protocol: send `{type: "initialize", sessionIdentifier, cols, rows}` with a ' +
        'SHELL session, then `input {data}` and `resize {cols, rows}`; receive `data {data}`, `ack` ' +
        'and `closed`. The session identifier is the credential and opens one terminal.',
      tags: ['jobs'],
      security: [],
    },
    handler: async (_request, reply) => reply.code(426).header('upgrade', 'websocket').send(notWebSocket),
    wsHandler: (socket, request) => serveShell(socket, { sessions, backend, log: request.log }),
  });

  api.route({
    method: 'GET',
    url: '/api/jobs/vnc',
    config: publicRoute,
    schema: {
      summary: 'The VNC relay of a job (WebSocket)',
      description:
        "Binary WebSocket messages to and from the job's VNC port (RFB). The VNC session's secret " +
        'is offered as the subprotocol `session.<secret>`, next to `binary`.',
      tags: ['jobs'],
      security: [],
      querystring: VncQuery,
    },
    // Refused before the upgrade, so the browser sees a 401 and nothing reaches the job.
    preHandler: async (request: FastifyRequest<{ Querystring: { jobId: string; rank: number } }>) => {
      const { jobId, rank } = request.query;
      if (!(await sessions.use(vncSecret(request), 'VNC', jobId, rank))) {
        throw new ServiceError(401, 'the VNC session is not valid: open a new one');
      }
    },
    handler: async (_request, reply) => reply.code(426).header('upgrade', 'websocket').send(notWebSocket),
    wsHandler: async (socket, request) => {
      const { jobId, rank } = request.query as { jobId: string; rank: number };
      const port = await sessions.portOf(jobId, 'VNC');
      if (port === undefined) socket.close(4404, 'the job has no VNC port');
      else relayVnc(socket, { jobId, rank, port }, backend, request.log);
    },
  });

  for (const name of ['shell', 'vnc'] as const) {
    api.get(`/sessions/${name}`, { config: publicRoute, schema: { hide: true } }, async (_request, reply) => {
      const { type, body } = await page(name);
      return reply.headers({ ...PAGE_HEADERS, 'content-type': type, 'cache-control': 'no-store' }).send(body);
    });
  }

  api.get('/sessions/assets/*', { config: publicRoute, schema: { hide: true } }, async (request, reply) => {
    const found = await asset((request.params as { '*': string })['*']);
    if (!found) return reply.code(404).send({ message: 'there is no such asset' });
    return reply
      .headers({ ...PAGE_HEADERS, 'content-type': found.type, 'cache-control': 'max-age=3600' })
      .send(found.body);
  });
};
