import { Type } from '@sinclair/typebox';
import { closed, StringEnum } from '../../model/schema.ts';
import { type ApiRoutes, errors, publicRoute } from '../api.ts';
import { callerForToken, clearedCookie, cookieSession, sessionCookie } from '../auth.ts';
import { errorBody } from '../errors.ts';
import type { UiSession } from '../sign-in.ts';

const SignInRequest = Type.Object({ token: Type.String({ minLength: 1, maxLength: 1024 }) }, closed);

const SignedIn = Type.Object({
  user: Type.Object({
    username: Type.String(),
    admin: Type.Boolean(),
    projects: Type.Array(Type.Object({ id: Type.String(), role: StringEnum(['PI', 'ADMIN', 'USER']) })),
  }),
  csrfToken: Type.String({ description: 'Send it as the header X-CSRF-Token on every state-changing call' }),
});

const SignInLink = Type.Object({
  url: Type.String({ description: 'Opens the web interface signed in, once' }),
  expiresAt: Type.Integer({ description: 'Epoch milliseconds' }),
});

/**
 * Signing in to the web interface: an API token or a one-time link traded for the session cookie,
 * the session read back and ended. The cookie then opens every call a token does.
 */
export const authRoutes: ApiRoutes = async (api) => {
  const { store, signIns } = api;
  const answer = async (session: UiSession) => ({
    user: await signIns.userOf(session.caller),
    csrfToken: session.csrfToken,
  });

  api.post(
    '/api/auth/session',
    {
      config: publicRoute,
      schema: {
        summary: 'Sign the browser in with an API token',
        description:
          'Sets the HttpOnly cookie `ucompute_session` (12 hours, extended by use). Calls signed in ' +
          "by it that change anything must carry the answer's `csrfToken` as `X-CSRF-Token`.",
        tags: ['auth'],
        security: [],
        body: SignInRequest,
        response: { 200: SignedIn, ...errors },
      },
    },
    async (request, reply) => {
      const caller = await callerForToken(store.users, request.body.token);
      if (!caller) return reply.code(401).send(errorBody(401, 'the API token is not valid'));
      const { secret, session } = await signIns.start(caller.username);
      reply.header('set-cookie', sessionCookie(request, secret)).header('cache-control', 'no-store');
      return answer(session);
    },
  );

  api.get(
    '/api/auth/session',
    {
      config: publicRoute,
      schema: {
        summary: 'Who the browser is signed in as',
        tags: ['auth'],
        security: [],
        response: { 200: SignedIn, ...errors },
      },
    },
    async (request, reply) => {
      const signedIn = await cookieSession(signIns, request, reply);
      if (!signedIn) return reply.code(401).send(errorBody(401, 'the browser is not signed in'));
      reply.header('cache-control', 'no-store');
      return answer(signedIn.session);
    },
  );

  api.delete(
    '/api/auth/session',
    {
      schema: {
        summary: 'Sign the browser out',
        description: "Ends the cookie's session and clears the cookie.",
        tags: ['auth'],
        response: { 204: Type.Null(), ...errors },
      },
    },
    async (request, reply) => {
      const signedIn = await cookieSession(signIns, request, reply);
      if (signedIn) await signIns.end(signedIn.secret);
      return reply.code(204).header('set-cookie', clearedCookie(request)).send(null);
    },
  );

  api.post(
    '/api/auth/links',
    {
      schema: {
        summary: 'A one-time sign-in link for the web interface',
        description: 'Signs a browser in as the caller once, within two minutes (`ucompute web`).',
        tags: ['auth'],
        response: { 200: SignInLink, ...errors },
      },
    },
    async (request, reply) => {
      const { secret, expiresAt } = await signIns.createLink(request.caller.username);
      reply.header('cache-control', 'no-store');
      return { url: `${request.server.publicUrl.origin()}/auth/link?ticket=${secret}`, expiresAt };
    },
  );
};
