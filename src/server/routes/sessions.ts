import { Type } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import type { Reached, Sessions } from '../../interactive/sessions.ts';
import { JOB_ID_PATTERN } from '../../model/ids.ts';
import { closed, StringEnum } from '../../model/schema.ts';
import { type Api, errors } from '../api.ts';

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

/** Where the caller reached the API; session URLs keep its scheme and port. */
export function reachedBy(request: FastifyRequest): Reached {
  const protocol = request.protocol === 'https' ? 'https' : 'http';
  const port = /:([0-9]+)$/.exec(request.host)?.[1];
  return {
    protocol,
    origin: `${protocol}://${request.host}`,
    portSuffix: port !== undefined ? `:${port}` : '',
  };
}

/** Interactive sessions: web apps, remote desktops and terminals of running jobs. */
export function sessionRoutes(api: Api, sessions: Sessions): void {
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
      const reached = reachedBy(request);
      const opened = sessions.open(request.caller, request.body.items, reached);
      return {
        responses: opened.map((session) => ({
          providerDomain: reached.origin,
          providerId: PROVIDER_ID,
          session,
        })),
      };
    },
  );
}
