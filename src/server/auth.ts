import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { cookiePairs, uiCookieName } from '../interactive/cookies.ts';
import { ServiceError } from '../jobs/errors.ts';
import type { Caller } from '../jobs/service.ts';
import type { UserStore } from '../store/users.ts';
import { SESSION_LIFETIME_MS, type SignIns, type UiSession } from './sign-in.ts';

// Who is calling: Bearer tokens in the Authorization header, or (WebSockets from browsers) offered
// as a subprotocol; or the web interface's session cookie, which a browser sends by itself and so
// counts only with the session's CSRF token (state-changing calls) or from our own origin
// (WebSockets), and only when it comes alone.

/** The web interface's cookie name for this server (`__Host-` prefixed over TLS). */
const cookieName = (request: FastifyRequest) => uiCookieName(request.server.publicUrl.secure());

/** The request's session cookies: the values of every cookie with the interface's name. */
const sessionCookies = (request: FastifyRequest) =>
  cookiePairs(request.headers.cookie).filter((c) => c.name === cookieName(request));

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
      sessionCookies(request).length > 0
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
  // A request signed in by cookie carried exactly one.
  const secret = sessionCookies(request)[0]?.value;
  return async () => secret !== undefined && (await signIns.holds(secret));
}

const STATE_CHANGING = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The valid web session a request's cookie carries, if any, checked for how it is used: a
 * state-changing call must carry the session's token in `X-CSRF-Token`, a WebSocket must come from
 * this server's own origin (403 otherwise). Two session cookies are refused (401, and the cookie
 * is cleared): a page on another origin may have planted one to sign the browser in as someone
 * else, and which one the browser meant cannot be told. A use that extends the session sends the
 * cookie again.
 */
export async function cookieSession(
  signIns: SignIns,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<{ secret: string; session: UiSession } | undefined> {
  const cookies = sessionCookies(request);
  if (cookies.length > 1) {
    reply.header('set-cookie', clearedCookie(request));
    throw new ServiceError(
      401,
      `the browser sent ${cookies.length} session cookies (a page of another site may have set one): sign in again`,
    );
  }
  const secret = cookies[0]?.value;
  const session = secret === undefined ? undefined : await signIns.resume(secret);
  if (secret === undefined || session === undefined) return undefined;
  if (request.headers.upgrade !== undefined) {
    if (request.headers.origin !== request.server.publicUrl.origin()) {
      throw new ServiceError(
        403,
        `a WebSocket signed in by cookie must come from this server's own pages, ${request.server.publicUrl.origin()} (server.publicUrl)`,
      );
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

/** Whether `given` is the secret `expected`, compared in constant time. */
export function sameSecret(given: string | string[] | undefined, expected: string): boolean {
  if (typeof given !== 'string') return false;
  const [a, b] = [Buffer.from(given), Buffer.from(expected)];
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * The session cookie: host-only (no Domain, so job origins never receive it), HttpOnly, sent only
 * by our own site's pages; over TLS (the public URL's scheme) Secure and `__Host-` prefixed.
 */
export function sessionCookie(request: FastifyRequest, secret: string): string {
  return cookieText(request, cookieName(request), secret, SESSION_LIFETIME_MS / 1000);
}

/** The answer's instruction to forget the session cookie. */
export function clearedCookie(request: FastifyRequest): string {
  return cookieText(request, cookieName(request), '', 0);
}

/** A cookie of the web interface's: host-only, path /, HttpOnly, SameSite=Strict, Secure over TLS. */
export function cookieText(
  request: FastifyRequest,
  name: string,
  value: string,
  maxAgeSeconds: number,
): string {
  const secure = request.server.publicUrl.secure() ? '; Secure' : '';
  return `${name}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure}`;
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
