import type { FastifyRequest } from 'fastify';
import { ServiceError } from '../jobs/errors.ts';
import type { Caller } from '../jobs/service.ts';
import type { Store } from '../store/store.ts';

// Who is calling: Bearer tokens in the Authorization header, or (WebSockets from browsers) offered
// as a subprotocol.

const BEARER = /^Bearer[ ]+([^\s]+)[ ]*$/i;
const PROTOCOL_PREFIX = 'bearer.';

export function authenticate(store: Store, request: FastifyRequest): Caller {
  const token = tokenOf(request);
  if (token === undefined) {
    throw new ServiceError(
      401,
      'this call needs an API token: send the header Authorization: Bearer <token>',
    );
  }
  const caller = callerForToken(store, token);
  if (!caller) throw new ServiceError(401, 'the API token is not valid');
  return caller;
}

/** Who holds this token, if anyone (UCloud's WebSocket calls carry it in each message). */
export function callerForToken(store: Store, token: string): Caller | undefined {
  const user = token !== '' ? store.userForToken(token) : undefined;
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
