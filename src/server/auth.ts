import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { cookiePairs, UI_COOKIE } from '../interactive/cookies.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { Caller } from '../jobs/service.ts';
import type { UserStore } from '../store/users.ts';
import { reachedBy } from './routes/sessions.ts';
import { SESSION_LIFETIME_MS, type SignIns, type UiSession } from './sign-in.ts';

// Who is calling: Bearer tokens in the Authorization header, or (WebSockets from browsers) offered
// as a subprotocol; or the web interface's session cookie, which a browser sends by itself and so
// counts only with the session's CSRF token (state-changing calls) or from our own origin
// (WebSockets).

const BEARER = /^Bearer[ ]+([^\s]+)[ ]*$/i;
const PROTOCOL_PREFIX = 'bearer.';

export async function authenticate(
  users: UserStore,
  signIns: SignIns,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<Caller> {
  const token = tokenOf(request);
  if (token === undefined) {
    const signedIn = await cookieSession(signIns, request, reply);
    if (signedIn) return signedIn.session.caller;
    throw new ServiceError(
      401,
      cookiePairs(request.headers.cookie).some((c) => c.name === UI_COOKIE)
        ? 'the sign-in has ended: sign in again'
        : 'this call needs an API token: send the header Authorization: Bearer <token>',
    );
  }
  const caller = await callerForToken(users, token);
  if (!caller) throw new ServiceError(401, 'the API token is not valid');
  return caller;
}

/**
 * Whether the credential an authenticated request came with still holds: its token still names
 * the same user, or a cookie still opens an unexpired session (checked without extending it).
 */
export async function credentialHolds(
  users: UserStore,
  signIns: SignIns,
  request: FastifyRequest,
  caller: Caller,
): Promise<() => Promise<boolean>> {
  const token = tokenOf(request);
  if (token !== undefined) {
    return async () => (await callerForToken(users, token))?.username === caller.username;
  }
  // The cookie that signed the request in is the first one that opens a session.
  let secret: string | undefined;
  for (const c of cookiePairs(request.headers.cookie)) {
    if (c.name === UI_COOKIE && (await signIns.holds(c.value))) {
      secret = c.value;
      break;
    }
  }
  return async () => secret !== undefined && (await signIns.holds(secret));
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The valid web session a request's cookie carries, if any, checked for how it is used: a
 * state-changing call must carry the session's token in `X-CSRF-Token`, a WebSocket must come from
 * this server's own origin (403 otherwise). A use that extends the session sends the cookie again.
 */
export async function cookieSession(
  signIns: SignIns,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<{ secret: string; session: UiSession } | undefined> {
  const secrets = cookiePairs(request.headers.cookie).filter((c) => c.name === UI_COOKIE);
  for (const { value: secret } of secrets) {
    const session = await signIns.resume(secret);
    if (!session) continue;
    if (request.headers.upgrade !== undefined) {
      if (request.headers.origin !== reachedBy(request).origin) {
        throw new ServiceError(403, "a WebSocket signed in by cookie must come from this server's own pages");
      }
    } else if (
      STATE_CHANGING.has(request.method) &&
      !sameSecret(request.headers['x-csrf-token'], session.csrfToken)
    ) {
      throw new ServiceError(
        403,
        'a call signed in by cookie must carry the header X-CSRF-Token of its session',
      );
    }
    if (session.extended) reply.header('set-cookie', sessionCookie(request, secret));
    return { secret, session };
  }
  return undefined;
}

function sameSecret(given: string | string[] | undefined, expected: string): boolean {
  if (typeof given !== 'string' || given.length !== expected.length) return false;
  return timingSafeEqual(Buffer.from(given), Buffer.from(expected));
}

/**
 * The session cookie: host-only (no Domain, so job origins never receive it), HttpOnly, sent only
 * by our own site's pages, and Secure over TLS.
 */
export function sessionCookie(request: FastifyRequest, secret: string): string {
  const secure = request.protocol === 'https' ? '; Secure' : '';
  return `${UI_COOKIE}=${secret}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${SESSION_LIFETIME_MS / 1000}${secure}`;
}

/** The answer's instruction to forget the session cookie. */
export function clearedCookie(request: FastifyRequest): string {
  const secure = request.protocol === 'https' ? '; Secure' : '';
  return `${UI_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure}`;
}

/** Who holds this token, if anyone (UCloud's WebSocket calls carry it in each message). */
export async function callerForToken(users: UserStore, token: string): Promise<Caller | undefined> {
  const user = token !== '' ? await users.userForToken(token) : undefined;
  return user ? { username: user.name, admin: user.admin } : undefined;
}

/** The Bearer token, or '' when one is offered in a bad shape; undefined when none is offered. */
function tokenOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  if (header !== undefined) return BEARER.exec(header)?.[1] ?? '';
  // Browsers cannot set headers on a WebSocket; they offer the token as a subprotocol instead.
  if (request.headers.upgrade?.toLowerCase() === 'websocket') {
    const offered = request.headers['sec-websocket-protocol'];
    const protocol = offered
      ?.split(',')
      .map((p) => p.trim())
      .find((p) => p.startsWith(PROTOCOL_PREFIX));
    if (protocol !== undefined) return protocol.slice(PROTOCOL_PREFIX.length);
  }
  return undefined;
}

/**
 * A client that offers subprotocols needs one selected back. Prefer one that is not the token;
 * a client that offered only `bearer.<token>` gets that back (browsers refuse an empty answer).
 */
export function chooseProtocol(protocols: Set<string>): string | false {
  const all = [...protocols];
  return all.find((p) => !p.startsWith(PROTOCOL_PREFIX)) ?? all[0] ?? false;
}
